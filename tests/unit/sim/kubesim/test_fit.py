"""The scheduler's node-local fit question (controllers/scheduler/fit.py), pure."""

from __future__ import annotations

from typing import Any

from kubespot.sim.kubesim.controllers.scheduler import node_reasons, unresolvable
from kubespot.sim.kubesim.testing import node, pod


def _pod(name: str, cpu: str) -> dict[str, Any]:
    return pod(name, labels={"app": name}, requests={"cpu": cpu}, image="nginx:1.27")


def test_node_reasons_is_pure_over_the_pods_given() -> None:
    """The node-local filters in the default profile's order: NodePorts before NodeResourcesFit; the
    first failing plugin gives all its reasons; cordon and taints are unresolvable, resources not."""
    n = node("n1", cpu="1", memory="1Gi", ready=True)
    running = _pod("a", "900m")
    running["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    candidate = _pod("b", "200m")
    candidate["spec"]["containers"][0]["resources"]["requests"]["memory"] = "2Gi"
    assert node_reasons(candidate, n, [running]) == ["Insufficient cpu", "Insufficient memory"]
    candidate["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    assert node_reasons(candidate, n, [running]) == [
        "node(s) didn't have free ports for the requested pod ports"
    ]
    assert node_reasons(candidate, node("n1", cpu="1", memory="4Gi", ready=True), []) == []
    cordoned = node("n1", unschedulable=True, ready=True)
    assert node_reasons(candidate, cordoned, []) == ["node(s) were unschedulable"]
    assert unresolvable("node(s) were unschedulable") and not unresolvable("Insufficient cpu")
