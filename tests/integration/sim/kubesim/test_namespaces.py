"""Namespace deletion over real HTTP.

Upstream behaviour relied on (https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/
and the namespace lifecycle admission plugin): deleting a namespace sets its phase Terminating and
forbids new objects in it (403 Forbidden); the namespace controller deletes its content, pods
gracefully through their kubelet, and removes the namespace once it is empty. Pods that no kubelet
can confirm keep the namespace Terminating.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubespot.sim.kubesim import conventions
from kubespot.sim.kubesim.testing import namespace


async def test_deleting_a_namespace_empties_and_removes_it(cluster: Any) -> None:
    await cluster.create_node("n1")
    await cluster.call("POST", "/api/v1/namespaces", namespace("team"))
    await cluster.call(
        "POST", "/api/v1/namespaces/team/configmaps", {"metadata": {"name": "cfg"}, "data": {"a": "1"}}
    )
    await cluster.create_pod(
        "graceful", ns="team", node_name="n1", annotations={conventions.SHUTDOWN_SECONDS: "0.3"}
    )
    await cluster.create_pod("unbound", ns="team", nodeSelector={"no": "such-node"})
    await cluster.create_pod("bystander", node_name="n1")
    await cluster.until(lambda: cluster.phase("graceful", "team") == "Running")

    ns = await cluster.call("DELETE", "/api/v1/namespaces/team")
    assert ns["status"]["phase"] == "Terminating"
    refused = await cluster.call(
        "POST", "/api/v1/namespaces/team/configmaps", {"metadata": {"name": "x"}}, expect=403
    )
    assert refused["reason"] == "Forbidden"

    await cluster.until(
        lambda: (
            cluster.sim.store.find(cluster.sim.store.registry.lookup("", "v1", "namespaces"), None, "team")
            is None
        )
    )
    assert await cluster.get_or_none("/api/v1/namespaces/team") is None
    assert await cluster.get_or_none("/api/v1/namespaces/team/configmaps/cfg") is None
    assert cluster.pod("graceful", "team") is None and cluster.pod("unbound", "team") is None
    # The running pod went through graceful termination, not a force delete.
    finals = [
        ev.obj
        for _t, ev in cluster.events
        if ev.type == "MODIFIED" and ev.obj["metadata"]["name"] == "graceful"
    ]
    assert finals[-1]["status"]["phase"] == "Succeeded"
    assert cluster.phase("bystander") == "Running"


async def test_namespace_waits_for_pods_without_a_kubelet(cluster: Any) -> None:
    await cluster.create_node("gone")
    await cluster.call("POST", "/api/v1/namespaces", namespace("stuck"))
    await cluster.create_pod("p", ns="stuck", node_name="gone")
    await cluster.until(lambda: cluster.phase("p", "stuck") == "Running")
    cluster.kubelet.stop_node("gone")
    await cluster.call("DELETE", "/api/v1/namespaces/stuck")
    await asyncio.sleep(0.5)
    ns = await cluster.get_or_none("/api/v1/namespaces/stuck")
    assert ns is not None and ns["status"]["phase"] == "Terminating"
    assert cluster.pod("p", "stuck")["metadata"].get("deletionTimestamp")
    await cluster.call("DELETE", "/api/v1/nodes/gone")  # PodGC force-deletes the pod...
    await cluster.until(lambda: cluster.pod("p", "stuck") is None, within=3.0)
    for _ in range(100):  # ...and then the namespace can go
        if await cluster.get_or_none("/api/v1/namespaces/stuck") is None:
            break
        await asyncio.sleep(0.05)
    assert await cluster.get_or_none("/api/v1/namespaces/stuck") is None
