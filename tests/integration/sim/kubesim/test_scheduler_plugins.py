"""The scheduler's NodeResourcesFit (extended resources), NodePorts and SchedulingGates over HTTP.

Each test cites the upstream source it follows; messages are upstream's exact strings.
"""

from __future__ import annotations

from typing import Any

from kubespot.sim.kubesim.testing import node


def _node_of(cluster: Any, name: str) -> str | None:
    pod = cluster.pod(name)
    return None if pod is None else pod["spec"].get("nodeName")


def _message(cluster: Any, name: str) -> str | None:
    return cluster.condition(cluster.pod(name), "PodScheduled", "message")  # type: ignore[no-any-return]


async def _node_with(cluster: Any, name: str, extra: dict[str, str]) -> None:
    """A Ready node whose allocatable carries ``extra`` resources besides cpu, memory and pods."""
    body = node(name, memory="8Gi")
    for part in ("capacity", "allocatable"):
        body["status"][part].update(extra)
    await cluster.call("POST", "/api/v1/nodes", body)
    await cluster.patch(
        f"/api/v1/nodes/{name}/status", {"status": {"allocatable": body["status"]["allocatable"]}}
    )
    await cluster.until(lambda: cluster.node_ready(name) == "True")


def _container(**requests: str) -> dict[str, Any]:
    return {"name": "c", "image": "nginx:1.27", "resources": {"requests": requests}}


async def test_extended_resources_and_ephemeral_storage_are_counted(cluster: Any) -> None:
    """pkg/scheduler/framework/plugins/noderesources/fit.go fitsRequest: "Insufficient nvidia.com/gpu",
    "Insufficient ephemeral-storage", one per resource; NodeResourcesFit is Unschedulable (preemption
    might help), so the preemption part says no victims were found."""
    await _node_with(cluster, "gpu", {"nvidia.com/gpu": "1", "ephemeral-storage": "10Gi"})
    await _node_with(cluster, "plain", {"ephemeral-storage": "10Gi"})
    await cluster.create_pod(
        "greedy", containers=[_container(**{"nvidia.com/gpu": "2", "ephemeral-storage": "20Gi"})]
    )
    await cluster.until(lambda: _message(cluster, "greedy"))
    assert _message(cluster, "greedy") == (
        "0/2 nodes are available: 2 Insufficient ephemeral-storage, 2 Insufficient nvidia.com/gpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    await cluster.create_pod("one", containers=[_container(**{"nvidia.com/gpu": "1"})])
    await cluster.until(lambda: _node_of(cluster, "one") == "gpu")
    await cluster.create_pod("two", containers=[_container(**{"nvidia.com/gpu": "1"})])
    await cluster.until(lambda: _message(cluster, "two"))
    assert _message(cluster, "two") == (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    await cluster.delete_pod("one", grace=0)
    await cluster.until(lambda: _node_of(cluster, "two") == "gpu")


async def test_sidecar_requests_count_on_the_node(cluster: Any) -> None:
    """k8s.io/component-helpers resource/helpers.go PodRequests: a restartable init container (sidecar)
    adds to the pod's requests for its whole life, an ordinary one only while it runs."""
    await cluster.create_node("n1", cpu="1")
    sidecar = {**_container(cpu="600m"), "name": "proxy", "restartPolicy": "Always"}
    await cluster.create_pod("with-sidecar", containers=[_container(cpu="300m")], initContainers=[sidecar])
    await cluster.until(lambda: _node_of(cluster, "with-sidecar") == "n1")
    # 900m used of 1 cpu: a 200m pod no longer fits, though the app container alone asked for 300m.
    await cluster.create_pod("next", cpu="200m")
    await cluster.until(lambda: _message(cluster, "next"))
    assert _message(cluster, "next").startswith("0/1 nodes are available: 1 Insufficient cpu.")


async def test_host_port_conflicts_keep_a_pod_pending_until_the_port_is_free(cluster: Any) -> None:
    """pkg/scheduler/framework/plugins/nodeports/node_ports.go Filter: ErrReason "node(s) didn't have
    free ports for the requested pod ports"; the same port on another protocol does not conflict."""
    await cluster.create_node("n1")

    def ports(protocol: str) -> list[dict[str, Any]]:
        c = _container(cpu="10m")
        c["ports"] = [{"containerPort": 80, "hostPort": 8080, "protocol": protocol}]
        return [c]

    await cluster.create_pod("first", containers=ports("TCP"))
    await cluster.until(lambda: _node_of(cluster, "first") == "n1")
    await cluster.create_pod("second", containers=ports("TCP"))
    await cluster.create_pod("udp", containers=ports("UDP"))
    await cluster.until(lambda: _node_of(cluster, "udp") == "n1")
    await cluster.until(lambda: _message(cluster, "second"))
    assert _message(cluster, "second") == (
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    await cluster.delete_pod("first", grace=0)
    await cluster.until(lambda: _node_of(cluster, "second") == "n1")


async def test_gated_pod_waits_until_its_gates_are_removed(cluster: Any) -> None:
    """pkg/scheduler/framework/plugins/schedulinggates (PreEnqueue) keeps a gated pod out of the queue;
    pkg/registry/core/pod/strategy.go applySchedulingGatedCondition gives it PodScheduled=False,
    reason SchedulingGated. Removing the gates queues it."""
    await cluster.create_node("n1")
    await cluster.create_pod("gated", schedulingGates=[{"name": "example.com/quota"}])
    await cluster.until(
        lambda: cluster.condition(cluster.pod("gated"), "PodScheduled", "reason") == "SchedulingGated"
    )
    assert _message(cluster, "gated") == "Scheduling is blocked due to non-empty scheduling gates"
    await cluster.create_pod("free")
    await cluster.until(lambda: _node_of(cluster, "free") == "n1")
    assert _node_of(cluster, "gated") is None  # a later pod was scheduled meanwhile
    await cluster.patch("/api/v1/namespaces/default/pods/gated", {"spec": {"schedulingGates": None}})
    await cluster.until(lambda: _node_of(cluster, "gated") == "n1")
    assert cluster.condition(cluster.pod("gated"), "PodScheduled") == "True"


async def test_a_pod_pinned_by_node_name_fields_reports_the_other_nodes_as_pre_filtered(cluster: Any) -> None:
    """pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go PreFilter returns the nodes that
    matchFields metadata.name names (a DaemonSet pod's pin); schedule_one.go findNodesThatFitPod gives
    the others "node(s) didn't satisfy plugin(s) [NodeAffinity]" (UnschedulableAndUnresolvable)."""
    for name in ("n1", "n2", "n3"):
        await cluster.create_node(name, cpu="1")
    pin = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [pin]}}
    }
    await cluster.create_pod("ds-pod", cpu="2", affinity=affinity)
    await cluster.until(lambda: _message(cluster, "ds-pod"))
    assert _message(cluster, "ds-pod") == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )
