"""Draining a node of Deployments behind PodDisruptionBudgets, over HTTP against kubesim."""

from __future__ import annotations

from kubespot.actions.drain import Outcome
from kubespot.kube import EventRecorder
from kubespot.sim.kubesim import conventions
from kubespot.sim.kubesim.testing import daemonset, deployment, namespace, pdb, pod, until

from .conftest import NODE, drain_env, template


def _by_name(result_pods: list, prefix: str) -> list:
    return [p for p in result_pods if p.name.startswith(prefix)]


async def test_deployments_behind_pdbs_are_evicted_one_by_one_and_replaced() -> None:
    objects = [
        namespace("shop"),
        # web's replacements are Ready only after 0.8 s: an eviction that conflicted on the budget
        # with another one (kubesim retries it after upstream's 0.5 s) still finds it exhausted.
        template(
            deployment("web", 3, namespace="shop", grace=5),
            shutdown=0.2,
            annotations={conventions.START_SECONDS: "0.8"},
        ),
        template(deployment("api", 3, namespace="shop", grace=0)),
        pdb("web", namespace="shop", selector={"matchLabels": {"app": "web"}}, max_unavailable=1),
        pdb("api", namespace="shop", selector={"matchLabels": {"app": "api"}}, max_unavailable=1),
    ]
    async with drain_env(*objects, expect_pods=6) as env:
        recorder = EventRecorder(kube=env.kube)
        result = await env.drain(20, recorder=recorder)
        assert result.emptied, result.to_dict()
        assert {p.outcome for p in result.pods} == {Outcome.EVICTED}
        assert len(result.pods) == 6
        # Budgets allow one disruption at a time, so some evictions were refused and retried.
        assert sum(p.blocked for p in result.pods) > 0
        assert all(p.evicted_at and p.gone_at and p.gone_at >= p.evicted_at for p in result.pods)
        assert env.pods(NODE) == []

        async def replaced() -> bool:
            # The drain ends when the node is empty; the last replacements may still be scheduling.
            on_spares = [p for p in env.pods(None) if p["spec"].get("nodeName", "").startswith("spare-")]
            return len(on_spares) == 6

        assert await until(replaced)
        reasons = {e["reason"] for e in env.events()}
        assert {"DrainStarted", "DrainCompleted", "Evicted", "EvictionBlocked"} <= reasons
        blocked = env.events("EvictionBlocked")
        assert any(e["count"] > 1 for e in blocked) or len(blocked) >= 1


async def test_daemonset_mirror_finished_and_own_pods_stay_bare_pod_is_deleted() -> None:
    mirror = pod("kube-proxy-node-a", namespace="kube-system", node=NODE)
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    objects = [
        daemonset("logs"),
        mirror,
        pod("done", node=NODE, phase="Succeeded"),
        pod("kubespot-agent", namespace="kube-system", node=NODE),
        pod("bare", node=NODE, grace=1),
        deployment("web", 1),
    ]
    async with drain_env(*objects) as env:
        recorder = EventRecorder(kube=env.kube)
        result = await env.drain(10, own_pod=("kube-system", "kubespot-agent"), recorder=recorder)
        outcome = {p.name: (p.outcome, p.reason) for p in result.pods}
        assert outcome["kube-proxy-node-a"] == (Outcome.SKIPPED, "mirror-pod")
        assert outcome["done"] == (Outcome.SKIPPED, "finished")
        assert outcome["kubespot-agent"] == (Outcome.SKIPPED, "own-pod")
        assert outcome["bare"][0] is Outcome.DELETED_BARE
        logs = [p for p in result.pods if p.name.startswith("logs-")]
        assert [(p.outcome, p.reason) for p in logs] == [(Outcome.SKIPPED, "daemonset")]
        assert _by_name(result.pods, "web-")[0].outcome is Outcome.EVICTED
        assert result.emptied
        left = {p["metadata"]["name"] for p in env.pods(NODE)}
        assert left == {"kube-proxy-node-a", "done", "kubespot-agent", logs[0].name}
        assert env.events("BarePodDeleted")
