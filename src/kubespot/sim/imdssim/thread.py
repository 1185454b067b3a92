"""Running an ImdsSim on a background thread with its own event loop, for synchronous callers.

``with ImdsSimThread(ImdsSim(...)) as sim:`` starts the server and returns once it listens. The
simulation state belongs to the server's loop, so changes go through ``call``, which runs a function
on that loop and hands back its result (or raises its exception).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

from kubespot.sim.imdssim.fleet import Fleet
from kubespot.sim.imdssim.server import ImdsSim

T = TypeVar("T")

START_TIMEOUT_SECONDS = 10.0


class ImdsSimThread:
    """Context manager owning a thread, its event loop, and a started ImdsSim."""

    def __init__(self, sim: ImdsSim) -> None:
        self.sim = sim
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ImdsSimThread:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("already started")
        loop = asyncio.new_event_loop()
        started: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.sim.start())
            except BaseException as exc:
                started.set_exception(exc)
                loop.close()
                return
            started.set_result(None)
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.sim.stop())
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="imdssim", daemon=True)
        self._thread.start()
        try:
            started.result(timeout=START_TIMEOUT_SECONDS)
        except BaseException:
            self._thread.join(timeout=START_TIMEOUT_SECONDS)
            self._thread = None
            self._loop = None
            raise

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=START_TIMEOUT_SECONDS)

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the server's loop (where the fleet lives) and return its result."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("not started")

        async def invoke() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(invoke(), loop).result(timeout=START_TIMEOUT_SECONDS)

    @property
    def fleet(self) -> Fleet:
        """For reading; change it through ``call`` (e.g. ``t.call(lambda: t.fleet.fire_rebalance(i))``)."""
        return self.sim.fleet

    @property
    def url(self) -> str:
        return self.sim.url

    def instance_url(self, instance_id: str) -> str:
        return self.sim.instance_url(instance_id)
