"""The scheduler's PodTopologySpread over HTTP.

Follows pkg/scheduler/framework/plugins/podtopologyspread (filtering.go PreFilter/Filter,
scoring.go PreScore/Score/NormalizeScore, plugin.go systemDefaultConstraints, common.go
filterTopologySpreadConstraints) and pkg/scheduler/framework/types.go FitError.Error.
"""

from __future__ import annotations

from typing import Any

from kubespot.sim.kubesim.testing import pod

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _node_of(cluster: Any, name: str) -> str | None:
    p = cluster.pod(name)
    return None if p is None else p["spec"].get("nodeName")


def _message(cluster: Any, name: str) -> str | None:
    return cluster.condition(cluster.pod(name), "PodScheduled", "message")  # type: ignore[no-any-return]


def _spread(key: str, *, when: str = "DoNotSchedule", app: str = "s", **extra: Any) -> dict[str, Any]:
    return {
        "maxSkew": 1,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"app": app}},
        **extra,
    }


async def _pod(cluster: Any, name: str, app: str, cpu: str = "10m", **spec: Any) -> None:
    body = pod(name, labels={"app": app}, requests={"cpu": cpu}, image="nginx:1.27")
    body["spec"].update(spec)
    await cluster.call("POST", "/api/v1/namespaces/default/pods", body)


async def _bound(cluster: Any, name: str, app: str, cpu: str = "10m", **spec: Any) -> str:
    await _pod(cluster, name, app, cpu, **spec)
    return str(await cluster.until(lambda: _node_of(cluster, name)))


async def test_do_not_schedule_keeps_zones_within_max_skew_and_names_every_reason(cluster: Any) -> None:
    """filtering.go Filter: a node without the key fails "(missing required label)"
    (UnschedulableAndUnresolvable), a domain whose count + self - min exceeds maxSkew fails "node(s)
    didn't match pod topology spread constraints"; a pod removed lets the waiting one in."""
    await cluster.create_node("a1", labels={ZONE: "a"}, cpu="4")
    await cluster.create_node("b1", labels={ZONE: "b"}, cpu="1")
    await cluster.create_node("nolabel", cpu="8")
    c = [_spread(ZONE)]
    assert await _bound(cluster, "s0", "s", "600m", topologySpreadConstraints=c) == "a1"  # least allocated
    assert await _bound(cluster, "s1", "s", "600m", topologySpreadConstraints=c) == "b1"  # a1 would skew 2
    assert await _bound(cluster, "s2", "s", "600m", topologySpreadConstraints=c) == "a1"  # b1 is full
    await _pod(cluster, "s3", "s", "600m", topologySpreadConstraints=c)
    await cluster.until(lambda: _message(cluster, "s3"))
    assert _message(cluster, "s3") == (
        "0/3 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match pod topology spread constraints, "
        "1 node(s) didn't match pod topology spread constraints (missing required label). "
        "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )
    await cluster.delete_pod("s0", grace=0)
    await cluster.until(lambda: _node_of(cluster, "s3") == "a1")


async def test_min_domains_counts_missing_domains_as_empty(cluster: Any) -> None:
    """filtering.go PreFilter: with fewer domains than minDomains the global minimum is 0, so two
    zones take one matching pod each at maxSkew 1 and a third pod waits."""
    await cluster.create_node("a1", labels={ZONE: "a"})
    await cluster.create_node("b1", labels={ZONE: "b"})
    c = [_spread(ZONE, minDomains=3)]
    placed = {await _bound(cluster, f"m{i}", "s", topologySpreadConstraints=c) for i in range(2)}
    assert placed == {"a1", "b1"}
    await _pod(cluster, "m2", "s", topologySpreadConstraints=c)
    await cluster.until(lambda: _message(cluster, "m2"))
    assert _message(cluster, "m2").startswith(  # type: ignore[union-attr]
        "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints."
    )


async def test_node_affinity_policy_decides_which_domains_count(cluster: Any) -> None:
    """common.go matchNodeInclusionPolicies: with nodeAffinityPolicy Honor (the default) nodes outside
    the pod's nodeSelector are no domains, so zone a with two pods is the minimum; with Ignore the
    empty zone b counts and zone a is over maxSkew."""
    await cluster.create_node("a1", labels={ZONE: "a", "pool": "x"})
    await cluster.create_node("b1", labels={ZONE: "b", "pool": "y"})
    for i in range(2):
        await _bound(cluster, f"old{i}", "s", nodeName="a1")
    honor = [_spread(ZONE)]
    assert await _bound(
        cluster, "honor", "other", nodeSelector={"pool": "x"}, topologySpreadConstraints=honor
    )
    ignore = [_spread(ZONE, nodeAffinityPolicy="Ignore")]
    await _pod(cluster, "ignore", "s", nodeSelector={"pool": "x"}, topologySpreadConstraints=ignore)
    await cluster.until(lambda: _message(cluster, "ignore"))
    assert _message(cluster, "ignore").startswith(  # type: ignore[union-attr]
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) didn't match pod topology spread constraints."
    )


async def test_schedule_anyway_outweighs_least_allocated(cluster: Any) -> None:
    """scoring.go: a hostname ScheduleAnyway constraint scores the node with fewer matching pods 100
    and the fuller one 0, at weight 2, over NodeResourcesFit's LeastAllocated at weight 1: the pod
    goes to the busier node that has none of its group; a pod without constraints does not."""
    await cluster.create_node("n1")
    await cluster.create_node("n2")
    await _bound(cluster, "busy", "other", cpu="2", nodeName="n2")
    for i in range(2):
        await _bound(cluster, f"w{i}", "w", nodeName="n1")
    assert await _bound(cluster, "plain", "x") == "n1"
    soft = [_spread(HOST, when="ScheduleAnyway", app="w")]
    assert await _bound(cluster, "w2", "w", topologySpreadConstraints=soft) == "n2"


async def test_system_default_constraints_spread_a_replicaset(cluster: Any) -> None:
    """plugin.go systemDefaultConstraints (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway) with
    helper.DefaultSelector: a pod of a ReplicaSet without constraints of its own is spread by the
    ReplicaSet's selector."""
    await cluster.create_node("n1")
    await cluster.create_node("n2")
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "rs"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "rs"}},
            "template": {
                "metadata": {"labels": {"app": "rs"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    created = await cluster.call("POST", "/apis/apps/v1/namespaces/default/replicasets", rs)
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": created["metadata"]}
    await _bound(cluster, "busy", "other", cpu="2", nodeName="n2")
    for i in range(2):
        await _bound(cluster, f"rs-{i}", "rs", nodeName="n1")
    body = pod("rs-2", labels={"app": "rs"}, requests={"cpu": "10m"}, image="nginx:1.27", owner=owner)
    await cluster.call("POST", "/api/v1/namespaces/default/pods", body)
    await cluster.until(lambda: _node_of(cluster, "rs-2") == "n2")
