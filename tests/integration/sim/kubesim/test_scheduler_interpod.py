"""The scheduler's InterPodAffinity filter over HTTP.

Follows pkg/scheduler/framework/plugins/interpodaffinity/filtering.go (PreFilter's three counts,
Filter's order and its ErrReason* strings) and pkg/scheduler/framework/types.go FitError.Error.
"""

from __future__ import annotations

from typing import Any


def _node_of(cluster: Any, name: str, ns: str = "default") -> str | None:
    pod = cluster.pod(name, ns)
    return None if pod is None else pod["spec"].get("nodeName")


def _message(cluster: Any, name: str, ns: str = "default") -> str | None:
    return cluster.condition(cluster.pod(name, ns), "PodScheduled", "message")  # type: ignore[no-any-return]


def _term(labels: dict[str, str], topology: str, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": topology, **extra}


def _affinity(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


async def _labelled_pod(
    cluster: Any, name: str, labels: dict[str, str], ns: str = "default", **spec: Any
) -> None:
    from kubespot.sim.kubesim.testing import pod

    body = pod(name, namespace=ns, labels=labels, requests={"cpu": "10m"}, image="nginx:1.27")
    body["spec"].update(spec)
    await cluster.call("POST", f"/api/v1/namespaces/{ns}/pods", body)


HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


async def test_anti_affinity_spreads_a_group_one_per_node_then_reports_it(cluster: Any) -> None:
    """filtering.go Filter: a group anti-affine to itself takes one node each; the next one meets the
    placed pods' terms first (satisfyExistingPodsAntiAffinity: "node(s) didn't satisfy existing pods
    anti-affinity rules"); a pod anti-affine to the group, not in it, fails satisfyPodAntiAffinity:
    "node(s) didn't match pod anti-affinity rules". Both Unschedulable: preemption may help."""
    for i in range(3):
        await cluster.create_node(f"n{i}")
    anti = _affinity("podAntiAffinity", _term({"app": "web"}, HOST))
    for i in range(4):
        await _labelled_pod(cluster, f"web-{i}", {"app": "web"}, affinity=anti)
    await cluster.until(lambda: sum(_node_of(cluster, f"web-{i}") is not None for i in range(4)) == 3)
    await cluster.until(lambda: any(_message(cluster, f"web-{i}") for i in range(4)))
    assert len({_node_of(cluster, f"web-{i}") for i in range(4)} - {None}) == 3
    (pending,) = [f"web-{i}" for i in range(4) if _node_of(cluster, f"web-{i}") is None]
    assert _message(cluster, pending) == (
        "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity rules. "
        "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    )
    await _labelled_pod(cluster, "lonely", {"app": "lonely"}, affinity=anti)
    await cluster.until(lambda: _message(cluster, "lonely"))
    assert _message(cluster, "lonely") == (
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. "
        "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    )


async def test_existing_pods_anti_affinity_is_symmetric_and_namespace_selected(cluster: Any) -> None:
    """filtering.go satisfyExistingPodsAntiAffinity: an existing pod's anti-affinity term that matches
    the incoming pod (here through its namespaceSelector) keeps that pod off the topology domain --
    "node(s) didn't satisfy existing pods anti-affinity rules"; a namespace the selector does not
    pick is not affected (framework.AffinityTerm.Matches)."""
    await cluster.call(
        "POST", "/api/v1/namespaces", {"metadata": {"name": "team-x", "labels": {"team": "x"}}}
    )
    await cluster.call(
        "POST", "/api/v1/namespaces", {"metadata": {"name": "team-y", "labels": {"team": "y"}}}
    )
    await cluster.create_node("n1")
    await cluster.create_node("n2", taints=[{"key": "a", "value": "b", "effect": "NoSchedule"}])
    term = _term({"app": "noisy"}, HOST, namespaceSelector={"matchLabels": {"team": "x"}})
    await _labelled_pod(cluster, "guard", {"app": "guard"}, affinity=_affinity("podAntiAffinity", term))
    await cluster.until(lambda: _node_of(cluster, "guard") == "n1")
    await _labelled_pod(cluster, "noisy", {"app": "noisy"}, ns="team-x")
    await _labelled_pod(cluster, "noisy", {"app": "noisy"}, ns="team-y")
    await cluster.until(lambda: _node_of(cluster, "noisy", "team-y") == "n1")
    await cluster.until(lambda: _message(cluster, "noisy", "team-x"))
    assert _message(cluster, "noisy", "team-x") == (
        "0/2 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules, "
        "1 node(s) had untolerated taint {a: b}. preemption: 0/2 nodes are available: "
        "1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
    )
    await cluster.delete_pod("guard", grace=0)
    await cluster.until(lambda: _node_of(cluster, "noisy", "team-x") == "n1")


async def test_affinity_waits_for_a_matching_pod_and_follows_its_zone(cluster: Any) -> None:
    """filtering.go satisfyPodAffinity: with no matching pod anywhere and a pod that does not match its
    own terms, every node fails "node(s) didn't match pod affinity rules" (UnschedulableAndUnresolvable:
    preemption is not helpful); once a matching pod runs, only its zone qualifies."""
    await cluster.create_node("a1", labels={ZONE: "a"})
    await cluster.create_node("b1", labels={ZONE: "b"})
    await cluster.create_node("b2", labels={ZONE: "b"})
    await _labelled_pod(
        cluster, "web", {"app": "web"}, affinity=_affinity("podAffinity", _term({"app": "cache"}, ZONE))
    )
    await cluster.until(lambda: _message(cluster, "web"))
    assert _message(cluster, "web") == (
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    await _labelled_pod(cluster, "cache", {"app": "cache"}, nodeSelector={"kubernetes.io/hostname": "b2"})
    await cluster.until(lambda: _node_of(cluster, "web") in ("b1", "b2"))


async def test_first_pod_of_a_self_affine_group_lands_anywhere_with_the_key(cluster: Any) -> None:
    """filtering.go satisfyPodAffinity: when no pod matches yet and the pod matches its own affinity
    terms it may go to any node that has the topology key; the next pods then follow it."""
    await cluster.create_node("nolabel")
    await cluster.create_node("a1", labels={ZONE: "a"})
    await cluster.create_node("b1", labels={ZONE: "b"})
    aff = _affinity("podAffinity", _term({"app": "grp"}, ZONE))
    await _labelled_pod(cluster, "grp-0", {"app": "grp"}, affinity=aff)
    await cluster.until(lambda: _node_of(cluster, "grp-0") is not None)
    first = _node_of(cluster, "grp-0")
    assert first in ("a1", "b1")  # the node without the zone label never qualifies
    for i in range(1, 4):
        await _labelled_pod(cluster, f"grp-{i}", {"app": "grp"}, affinity=aff)
    await cluster.until(lambda: all(_node_of(cluster, f"grp-{i}") for i in range(1, 4)))
    assert {_node_of(cluster, f"grp-{i}") for i in range(4)} == {first}


async def test_a_namespace_labelled_later_satisfies_a_namespace_selector(cluster: Any) -> None:
    """framework.AffinityTerm.Matches reads the namespace's labels at each attempt (upstream's
    InterPodAffinity re-queues pods on namespace label changes, plugin.go EventsToRegister)."""
    await cluster.call("POST", "/api/v1/namespaces", {"metadata": {"name": "c"}})
    await cluster.create_node("a1", labels={ZONE: "a"})
    await _labelled_pod(cluster, "cache", {"app": "cache"}, ns="c")
    await cluster.until(lambda: _node_of(cluster, "cache", "c") == "a1")
    term = _term({"app": "cache"}, ZONE, namespaceSelector={"matchLabels": {"tier": "cache"}})
    await _labelled_pod(cluster, "web", {"app": "web"}, affinity=_affinity("podAffinity", term))
    await cluster.until(lambda: _message(cluster, "web"))
    assert _message(cluster, "web").startswith(  # type: ignore[union-attr]
        "0/1 nodes are available: 1 node(s) didn't match pod affinity rules."
    )
    await cluster.patch("/api/v1/namespaces/c", {"metadata": {"labels": {"tier": "cache"}}})
    await cluster.until(lambda: _node_of(cluster, "web") == "a1")
