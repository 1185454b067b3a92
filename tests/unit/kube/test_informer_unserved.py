"""A re-list the API server answers 404 (its CRD handler not ready yet) leaves the informer's store as
it was, as client-go's reflector (k8s.io/client-go/tools/cache/reflector.go ``ListAndWatch`` and
``list``: a failed LIST returns its error before ``syncWith``; only a successful LIST replaces the
store, ``DeltaFIFO.Replace``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from kubespot.kube.informer import Informer

PATH = "apis/karpenter.sh/v1/nodeclaims"


def _claim(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version}}


async def until(check: Callable[[], bool], *, within: float, interval: float) -> None:
    async with asyncio.timeout(within):
        for _ in range(int(within / interval) + 1):
            if check():
                return
            await asyncio.sleep(interval)


class _Kube:
    """Answers the LISTs in turn (None: a 404, as ``KubeClient.list_versioned``); the watch breaks
    once ``go`` is set, so every LIST after the first is a re-list; the last answer waits for
    ``serve``."""

    def __init__(self, *answers: tuple[list[dict[str, Any]], str] | None) -> None:
        self.answers = list(answers)
        self.go = asyncio.Event()
        self.serve = asyncio.Event()

    async def list_versioned(self, path: str, **kw: Any) -> tuple[list[dict[str, Any]], str] | None:
        if len(self.answers) == 1:
            await self.serve.wait()
            return self.answers[0]
        return self.answers.pop(0)

    async def _watch(
        self, path: str, what: str, params: Any, decode: Any, relist: Any, rv: str
    ) -> AsyncIterator[Any]:
        await self.go.wait()
        yield "", None, await relist()
        await asyncio.Event().wait()


async def test_a_re_list_answered_404_keeps_the_store_and_tells_no_handler() -> None:
    claims = [_claim(f"general-{i}", str(i)) for i in range(3)]
    kube = _Kube((claims, "10"), None, None, (claims[:2], "12"))
    informer = Informer(kube, PATH, unserved_retry=0.01)  # type: ignore[arg-type]
    told: list[tuple[str, str]] = []
    informer.subscribe(lambda op, obj: told.append((op, obj["metadata"]["name"])))
    await informer.wait_synced()
    try:
        assert len(informer.items()) == 3 and informer.served
        told.clear()
        kube.go.set()
        await until(lambda: informer.lists >= 3, within=1.0, interval=0.001)
        # The 404: every claim still there, nobody told of a deletion; ``served`` says it (the
        # server answered: not "behind", see the health test below).
        assert {o["metadata"]["name"] for o in informer.items()} == {"general-0", "general-1", "general-2"}
        assert told == [] and informer.served is False and informer.synced.is_set()
        assert informer.behind_since is None
        # Served again: that LIST is the truth, and only then is a missing claim a deleted one.
        kube.serve.set()
        await until(lambda: informer.served, within=1.0, interval=0.001)
        assert len(informer.items()) == 2 and ("DELETED", "general-2") in told
        assert informer.behind_since is None
    finally:
        await informer.stop()


async def test_a_first_list_answered_404_reads_empty_synced_and_not_served() -> None:
    """What a CRD not installed reads as (nothing was ever listed): empty, synced, ``served`` False;
    listed again, with backoff, until it is served."""
    kube = _Kube(None, None, ([_claim("general-0", "1")], "1"))
    informer = Informer(kube, PATH, unserved_retry=0.01)  # type: ignore[arg-type]
    await informer.wait_synced()
    try:
        assert informer.items() == () and informer.served is False
        kube.serve.set()
        await until(lambda: informer.served, within=1.0, interval=0.001)
        assert len(informer.items()) == 1
    finally:
        await informer.stop()


async def test_a_crd_not_served_is_not_reported_behind_and_served_is_awaited() -> None:
    """controller-runtime keeps a manager running while a CRD removed at runtime has its reflector's
    LISTs fail (client-go ``reflector.go`` ``ListAndWatch`` retries with backoff, the process is not
    restarted): a LIST answered 404 does not fail /healthz (a restart cannot install a CRD), and
    ``wait_served`` (what the status loop and the counter wait on) returns only once it is served."""
    kube = _Kube(None, None, None, ([_claim("general-0", "1")], "1"))
    informer = Informer(kube, PATH, unserved_retry=0.01)  # type: ignore[arg-type]
    served = asyncio.create_task(informer.wait_served())
    try:
        await until(lambda: informer.lists >= 2, within=1.0, interval=0.001)
        assert informer.synced.is_set() and not informer.served
        assert informer.behind_since is None and not served.done()
        kube.serve.set()
        await asyncio.wait_for(served, 1.0)
        assert len(informer.items()) == 1
    finally:
        served.cancel()
        await informer.stop()
