"""Drains following their pods through one shared cluster-wide watch (the controller's mode)."""

from __future__ import annotations

from kubespot.actions.drain import Outcome
from kubespot.sim.kubesim.testing import deployment, namespace, pdb

from .conftest import drain_env, template


async def test_a_drain_over_the_shared_pod_watch_sees_every_pod_leave() -> None:
    objects = [
        namespace("shop"),
        template(deployment("web", 4, namespace="shop", grace=5), shutdown=0.3),
        pdb("web", namespace="shop", selector={"matchLabels": {"app": "web"}}, max_unavailable=1),
    ]
    async with drain_env(*objects, expect_pods=4) as env:
        env.kube.share_pod_watch()
        result = await env.drain(20)
        assert result.emptied, result.to_dict()
        assert {p.outcome for p in result.pods} == {Outcome.EVICTED}
        assert all(p.gone_at is not None for p in result.pods)
        watch = env.kube.pod_watch
        assert watch is not None and watch.subscribers == 0, "the drain unsubscribed when it ended"
