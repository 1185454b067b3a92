"""API trouble during a drain: node patch conflicts, 500/503 bursts, a concurrent taint writer."""

from __future__ import annotations

from kubespot.actions.drain import Outcome
from kubespot.kube import NodeView, Taint
from kubespot.sim.kubesim.testing import deployment, pdb

from .conftest import NODE, drain_env

SPOT = Taint("kubespot.io/spot-itn", "NoSchedule", "evt-1")


async def test_taint_survives_injected_conflicts() -> None:
    async with drain_env(deployment("web", 1)) as env:
        rule = env.sim.faults.add(verb="patch", resource="nodes", error_rate=1.0, error_code=409, remaining=2)
        node = await env.kube.add_taint(NODE, SPOT)
        assert node.has_taint(SPOT.key)
        assert rule.remaining == 0
        stored = env.node()
        assert stored is not None
        assert {"key": SPOT.key, "effect": "NoSchedule", "value": "evt-1"} in stored["spec"]["taints"]


async def test_a_concurrent_writers_taint_is_never_lost() -> None:
    async with drain_env(deployment("web", 1)) as env:
        other = Taint("other.example/maintenance", "NoSchedule")
        calls = 0

        def change(node: NodeView) -> dict | None:
            nonlocal calls
            calls += 1
            if calls == 1:
                # Between our read and our write another client adds its taint (through the store,
                # which bumps the resourceVersion as any API write would).
                rt = env.sim.store.registry.lookup("", "v1", "nodes")
                obj = env.sim.store.find(rt, None, NODE)
                assert rt is not None and obj is not None
                current = dict(obj)
                current["spec"] = {**obj["spec"], "taints": [*obj["spec"].get("taints", []), other.to_dict()]}
                env.sim.store.replace(rt, None, NODE, current)
            taints = [t.to_dict() for t in node.taints if t.key != SPOT.key]
            return {"spec": {"taints": [*taints, SPOT.to_dict()]}}

        node = await env.kube.update_node(NODE, change)
        assert calls == 2, "the stale write must have been refused and recomputed"
        assert node.has_taint(SPOT.key) and node.has_taint(other.key)


async def test_drain_rides_out_500_and_503_bursts() -> None:
    objects = [deployment("web", 3), pdb("web", selector={"matchLabels": {"app": "web"}}, max_unavailable=1)]
    async with drain_env(*objects, expect_pods=3) as env:
        env.sim.faults.add(verb="list", resource="pods", error_rate=1.0, error_code=500, remaining=2)
        env.sim.faults.add(resource="pods/eviction", error_rate=1.0, error_code=503, remaining=4)
        env.sim.faults.add(verb="watch", resource="pods", error_rate=1.0, error_code=500, remaining=1)
        result = await env.drain(15)
        assert result.emptied, result.to_dict()
        assert {p.outcome for p in result.pods} == {Outcome.EVICTED}
        assert env.pods(NODE) == []


async def test_drain_rides_out_eviction_504s_under_one_hot_budget() -> None:
    """Evictions answered 504 (apimachinery ``NewTimeoutError``, what eviction.go would send after
    ``EvictionsRetry`` ran out) are retried, and the drain of pods sharing one budget, whose status
    writes conflict and are retried server-side (kubesim's default contention), completes."""
    objects = [deployment("web", 3), pdb("web", selector={"matchLabels": {"app": "web"}}, max_unavailable=3)]
    async with drain_env(*objects, expect_pods=3) as env:
        rule = env.sim.faults.add(resource="pods/eviction", error_rate=1.0, error_code=504, remaining=2)
        result = await env.drain(15)
        assert rule.remaining == 0  # the 504s were served
        assert result.emptied, result.to_dict()
        assert {p.outcome for p in result.pods} == {Outcome.EVICTED}
        assert env.pods(NODE) == []
