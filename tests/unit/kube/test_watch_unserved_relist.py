"""A watch whose re-list is answered 404 lists again instead of watching without a version.

Source: client-go ``tools/cache/reflector.go`` ``ListAndWatch`` (a watch starts only from a
successful LIST's resourceVersion; a failed LIST is retried with backoff, ``wait.BackoffUntil``).
"""

from __future__ import annotations

import asyncio

import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.config.kubeconfig import Cluster, User

from kubespot.kube import KubeClient, TokenBucket
from kubespot.kube.custom import CustomObjects


class _Stop(BaseException):
    """Ends the test at the watch it looks for (no ``except Exception`` in the client takes it)."""


async def test_a_re_list_answered_404_is_listed_again_never_watched_from_now() -> None:
    """A re-list answered 404 (a CRD handler not ready) has no resourceVersion; a watch without one
    would start "now" and miss the deletions meanwhile (a NodeClaim gone while the list was
    refused), so the client lists again, backed off, until a LIST is served, and watches from that
    LIST's version."""
    seen: list[tuple[str, str | None]] = []
    lists = [0]

    def handler(req: httpx2.Request) -> httpx2.Response:
        if req.url.params.get("watch"):
            seen.append(("WATCH", req.url.params.get("resourceVersion")))
            if len(seen) > 1:
                raise _Stop
            return httpx2.Response(500, json={"kind": "Status", "code": 500, "reason": "InternalError"})
        lists[0] += 1
        seen.append(("LIST", None))
        if lists[0] < 3:
            return httpx2.Response(404, json={"kind": "Status", "code": 404, "reason": "NotFound"})
        return httpx2.Response(
            200, json={"kind": "NodeClaimList", "metadata": {"resourceVersion": "9"}, "items": []}
        )

    config = KubeConfig.from_one(cluster=Cluster(server="http://kube.test"), user=User(token="t"))
    api = AsyncClient(config=config, transport=httpx2.MockTransport(handler))
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    kube = KubeClient(api, raw=None, limiter=TokenBucket(qps=0, burst=1), attempts=1, sleep=sleep)
    stream = CustomObjects(kube, "apis/karpenter.sh/v1/nodeclaims").watch("5")
    served: list[bool] = []
    try:
        async with asyncio.timeout(5):
            async for _, _, listing in stream:
                if listing is not None:
                    served.append(listing.served)
    except _Stop:
        pass
    finally:
        await stream.aclose()
        await kube.close()
    assert served == [False, False, True]
    assert seen == [("WATCH", "5"), ("LIST", None), ("LIST", None), ("LIST", None), ("WATCH", "9")]
    assert len(slept) >= 3  # each LIST after a 404 waited its backoff


async def test_re_lists_answered_404_are_heard_not_a_silent_watch() -> None:
    """review 16f #4: while a CRD is not installed every re-list is answered (404), so the watch
    is not stuck: its silence stays under /healthz's limit however long the CRD is missing (a
    restart installs no CRD), as the informers decide."""
    from kubespot.kube.watchhealth import Watches

    now = [0.0]

    def handler(req: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(404, json={"kind": "Status", "code": 404, "reason": "NotFound"})

    async def sleep(seconds: float) -> None:
        now[0] += 30.0  # each backoff: 30 s of the watches' clock

    config = KubeConfig.from_one(cluster=Cluster(server="http://kube.test"), user=User(token="t"))
    api = AsyncClient(config=config, transport=httpx2.MockTransport(handler))
    kube = KubeClient(api, raw=None, limiter=TokenBucket(qps=0, burst=1), attempts=1, sleep=sleep)
    kube.watches = Watches(75.0, clock=lambda: now[0])
    stream = CustomObjects(kube, "apis/karpenter.sh/v1/nodeclaims").watch("5")
    relists = 0
    try:
        async with asyncio.timeout(5):
            async for _, _, listing in stream:
                if listing is not None:
                    relists += 1
                    if relists == 8:
                        break
        silences = kube.watches.silences()
    finally:
        await stream.aclose()
        await kube.close()
    assert now[0] >= 200.0  # well past the limit below
    assert silences and all(silent <= 30.0 for _, silent in silences), silences
    assert kube.watches.health_limit == 150.0
