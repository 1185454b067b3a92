"""Run kubesim: in the current event loop (``async with KubeSim()``) or in a thread for sync callers.

A ``KubeSim`` owns one store, its HTTP server on 127.0.0.1 and the simulated controllers, and
writes a kubeconfig that real clients (kubectl, the official client, lightkube) use unchanged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import orjson
from aiohttp import web

from .controllers import ControllerConfig, ControllerManager
from .faults import Faults
from .server import KubeSimServer
from .store import DEFAULT_HISTORY, Obj, Store

T = TypeVar("T")


def kubeconfig_for(url: str, *, name: str = "kubesim", namespace: str = "default") -> dict[str, Any]:
    """A kubeconfig for ``url``; the token is accepted but not checked (kubesim has no authn)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": {"token": "kubesim"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}],
        "current-context": name,
        "preferences": {},
    }


class KubeSim:
    """One simulated cluster: store + HTTP API + controllers."""

    def __init__(
        self,
        *,
        objects: Iterable[Obj] | None = None,
        nodes: int = 0,
        pods_per_node: int = 0,
        seed: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        controllers: ControllerConfig | None = None,
        faults: Faults | None = None,
        clock: Callable[[], float] = time.time,
        bookmark_interval: float = 5.0,
        history: int = DEFAULT_HISTORY,
        kubeconfig_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.store = Store(clock=clock, history=history)
        self.faults = faults or Faults(seed=seed)
        self.controllers = ControllerManager(self.store, controllers or ControllerConfig())
        self.server = KubeSimServer(
            self.store, faults=self.faults, bookmark_interval=bookmark_interval, controllers=self.controllers
        )
        self._objects = objects
        self._synthetic = (nodes, pods_per_node, seed)
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self._kubeconfig_path = Path(kubeconfig_path) if kubeconfig_path else None
        self.url = ""
        self.loaded = 0

    @property
    def kubeconfig_path(self) -> Path:
        assert self._kubeconfig_path is not None, "start() first"
        return self._kubeconfig_path

    def kubeconfig(self) -> dict[str, Any]:
        return kubeconfig_for(self.url)

    def _seed_objects(self) -> Iterable[Obj]:
        if self._objects is not None:
            return self._objects
        nodes, pods_per_node, seed = self._synthetic
        if nodes <= 0:
            return []
        from datetime import UTC, datetime

        from .generator import ClusterSpec, generate_cluster

        spec = ClusterSpec(nodes=nodes, pods_per_node=pods_per_node, seed=seed)
        return generate_cluster(spec, now=datetime.fromtimestamp(self.store.clock(), tz=UTC))

    async def start(self) -> KubeSim:
        # The loaded cluster lives as long as the simulator. Collections during the load only walk
        # the growing heap, and freezing it afterwards keeps later full collections from walking a
        # million long-lived dicts each time.
        gc.disable()
        try:
            self.loaded = self.store.load(self._seed_objects())
        finally:
            gc.enable()
        gc.freeze()
        self._objects = None
        runner = web.AppRunner(self.server.app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port, backlog=1024)
        await site.start()
        self._runner = runner
        port = int(runner.addresses[0][1]) if runner.addresses else self._port
        self.url = f"http://{self._host}:{port}"
        if self._kubeconfig_path is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="kubesim-")
            self._kubeconfig_path = Path(self._tmpdir.name) / "kubeconfig"
        self._kubeconfig_path.parent.mkdir(parents=True, exist_ok=True)
        self._kubeconfig_path.write_bytes(orjson.dumps(self.kubeconfig(), option=orjson.OPT_INDENT_2))
        self.controllers.start()
        return self

    async def stop(self) -> None:
        await self.controllers.stop()
        self.store.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    async def __aenter__(self) -> KubeSim:
        return await self.start()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


class ThreadedKubeSim:
    """A ``KubeSim`` on its own event loop in a background thread, for synchronous clients.

    ``call(fn)`` runs ``fn(sim)`` on the simulator's loop: the store is not thread-safe.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kubesim", daemon=True)
        self.sim: KubeSim | None = None

    def __enter__(self) -> KubeSim:
        self._thread.start()
        self.sim = KubeSim(**self._kwargs)
        asyncio.run_coroutine_threadsafe(self.sim.start(), self._loop).result(timeout=300)
        return self.sim

    def call(self, fn: Callable[[KubeSim], T]) -> T:
        assert self.sim is not None
        sim = self.sim

        async def run() -> T:
            return fn(sim)

        fut: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(run(), self._loop)
        return fut.result(timeout=60)

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.sim is not None:
            asyncio.run_coroutine_threadsafe(self.sim.stop(), self._loop).result(timeout=60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
