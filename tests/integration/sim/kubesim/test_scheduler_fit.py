"""The scheduler's "would this pod fit that node without these pods" question, for preemption.

Follows pkg/scheduler/framework/preemption/preemption.go SelectVictimsOnNode (the filters run
against the node with the victims removed, the PreFilter state updated through RemovePod) and the
filter plugins' reasons.
"""

from __future__ import annotations

from typing import Any

from kubespot.sim.kubesim.controllers.scheduler import scheduler_of
from kubespot.sim.kubesim.testing import pod

HOST = "kubernetes.io/hostname"


def _pod(name: str, app: str, cpu: str, **spec: Any) -> dict[str, Any]:
    body = pod(name, labels={"app": app}, requests={"cpu": cpu}, image="nginx:1.27")
    body["spec"].update(spec)
    return body


async def test_fit_reasons_without_victims_leaves_the_scheduler_as_it_was(cluster: Any) -> None:
    """SelectVictimsOnNode: removing lower-priority pods frees their requests (NodeResourcesFit) and
    their anti-affinity terms (InterPodAffinity's RemovePod); asking changes nothing."""
    await cluster.create_node("n1", cpu="1")
    await cluster.call("POST", "/api/v1/namespaces/default/pods", _pod("low", "low", "800m"))
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "high"}}, "topologyKey": HOST}
            ]
        }
    }
    await cluster.call(
        "POST", "/api/v1/namespaces/default/pods", _pod("guard", "guard", "10m", affinity=anti)
    )
    await cluster.until(
        lambda: all((cluster.pod(n) or {}).get("spec", {}).get("nodeName") for n in ("low", "guard"))
    )
    scheduler = scheduler_of(cluster.sim.controllers)
    high = _pod("high", "high", "500m")
    assert scheduler.fit_reasons(high, "n1") == ["Insufficient cpu"]
    low, guard = ("default", "low"), ("default", "guard")
    assert scheduler.fit_reasons(high, "n1", [low]) == [
        "node(s) didn't satisfy existing pods anti-affinity rules"
    ]
    assert scheduler.fit_reasons(high, "n1", [low, guard]) == []
    assert scheduler.fit_reasons(high, "n1", [low]) == [
        "node(s) didn't satisfy existing pods anti-affinity rules"
    ]
