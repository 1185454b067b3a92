"""Preemption by the simulated scheduler over real HTTP (``controllers/preemption.py``).

Upstream: kube-scheduler 1.32 DefaultPreemption, pkg/scheduler/framework/preemption/preemption.go
(``Preempt``, ``findCandidates``, ``pickOneNodeForPreemption``, ``prepareCandidate``) and
pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go
(``PodEligibleToPreemptOthers``, ``SelectVictimsOnNode``, ``filterPodsWithPDBViolation``).
"""

from __future__ import annotations

from typing import Any

from kubespot.sim.kubesim import conventions
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.controllers.scheduler import pending_reason
from kubespot.sim.kubesim.testing import namespace, node, pdb, pod, until

FAST_EXIT = {conventions.SHUTDOWN_SECONDS: "0.05"}


async def _priority_class(cluster: Any, prio: int, policy: str = "PreemptLowerPriority") -> str:
    """A PriorityClass of value ``prio`` and preemption ``policy`` (the API server's Priority
    admission refuses a pod that sets ``spec.priority`` or ``spec.preemptionPolicy`` itself:
    plugin/pkg/admission/priority ``admitPod``)."""
    name = f"prio-{prio}-{policy.lower()}"
    body = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": prio,
        "preemptionPolicy": policy,
    }
    async with cluster.http.post("/apis/scheduling.k8s.io/v1/priorityclasses", json=body) as r:
        assert r.status in (201, 409), await r.text()
    return name


async def _pod(
    cluster: Any, name: str, cpu: str, prio: int, *, labels: dict[str, str] | None = None, **spec: Any
) -> None:
    body = pod(name, labels=labels, annotations=FAST_EXIT, requests={"cpu": cpu}, grace=5)
    policy = spec.pop("preemptionPolicy", "PreemptLowerPriority")
    if prio or policy != "PreemptLowerPriority":
        body["spec"]["priorityClassName"] = await _priority_class(cluster, prio, policy)
    body["spec"].update(**spec)
    await cluster.call("POST", "/api/v1/namespaces/default/pods", body)


def _node_of(cluster: Any, name: str) -> str | None:
    found = cluster.pod(name)
    return None if found is None else (found.get("spec") or {}).get("nodeName")


async def _running(cluster: Any, *names: str) -> None:
    await cluster.until(lambda: all(cluster.phase(n) == "Running" for n in names))


async def test_higher_priority_pod_preempts_nominates_and_binds_once_the_victim_is_gone(cluster: Any) -> None:
    """``prepareCandidate``: the victim gets DisruptionTarget/PreemptionByScheduler ("<scheduler>:
    preempting to accommodate a higher priority pod") and a delete with its own grace period; the
    preemptor's status.nominatedNodeName names the node and it is bound there after the victim left."""
    await cluster.create_node("n1", cpu="1")
    await _pod(cluster, "low", "800m", 0)
    await _running(cluster, "low")
    await _pod(cluster, "high", "800m", 1000)
    await cluster.until(lambda: (cluster.pod("high").get("status") or {}).get("nominatedNodeName") == "n1")
    victim = cluster.pod("low")
    assert victim is not None and victim["metadata"]["deletionTimestamp"]
    assert victim["metadata"]["deletionGracePeriodSeconds"] == 5
    cond = (
        cluster.condition(victim, "DisruptionTarget", "reason"),
        cluster.condition(victim, "DisruptionTarget", "message"),
    )
    assert cond == (
        "PreemptionByScheduler",
        "default-scheduler: preempting to accommodate a higher priority pod",
    )
    # Nominated, not bound, until the victim is gone; the FitError then carries no preemption part.
    assert _node_of(cluster, "high") is None
    assert pending_reason(cluster.pod("high")) == "0/1 nodes are available: 1 Insufficient cpu."
    await cluster.until(lambda: _node_of(cluster, "high") == "n1")
    assert cluster.pod("low") is None


async def test_preemption_policy_never_and_equal_priority_preempt_nothing(cluster: Any) -> None:
    """``PodEligibleToPreemptOthers``: preemptionPolicy Never is "not eligible"; pods of equal
    priority are no victims (``SelectVictimsOnNode``: "No preemption victims found for incoming pod")."""
    await cluster.create_node("n1", cpu="1")
    await _pod(cluster, "low", "800m", 0)
    await _running(cluster, "low")
    await _pod(cluster, "polite", "800m", 1000, preemptionPolicy="Never")
    await _pod(cluster, "peer", "800m", 0)
    await cluster.until(lambda: pending_reason(cluster.pod("polite")) and pending_reason(cluster.pod("peer")))
    assert pending_reason(cluster.pod("polite")) == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    )
    assert pending_reason(cluster.pod("peer")) == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod."
    )
    assert not cluster.pod("low")["metadata"].get("deletionTimestamp")


async def test_nodes_preemption_cannot_help_are_reported_as_upstream(cluster: Any) -> None:
    """A node that fails a filter preemption cannot resolve (a taint) is "Preemption is not helpful
    for scheduling"; one where even removing every lower-priority pod leaves too little reports that
    filter's reason (``SelectVictimsOnNode`` runs the filters without the victims)."""
    await cluster.create_node("n1", cpu="1")
    await cluster.create_node(
        "tainted", cpu="8", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    )
    await _pod(cluster, "low", "200m", 0)
    await _running(cluster, "low")
    await _pod(cluster, "huge", "2", 1000)
    await cluster.until(lambda: pending_reason(cluster.pod("huge")))
    assert pending_reason(cluster.pod("huge")) == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: x}. "
        "preemption: 0/2 nodes are available: 1 Insufficient cpu, 1 Preemption is not helpful for scheduling."
    )
    assert not cluster.pod("low")["metadata"].get("deletionTimestamp")


async def test_fewest_victims_the_more_important_pod_is_reprieved(cluster: Any) -> None:
    """``SelectVictimsOnNode`` reprieves victims most important first (higher priority): of two
    lower-priority pods only one must go, and it is the less important one."""
    await cluster.create_node("n1", cpu="1")
    await _pod(cluster, "mid", "400m", 50)
    await _pod(cluster, "least", "400m", 10)
    await _running(cluster, "mid", "least")
    await _pod(cluster, "high", "500m", 1000)
    await cluster.until(lambda: _node_of(cluster, "high") == "n1")
    assert cluster.pod("least") is None
    assert not cluster.pod("mid")["metadata"].get("deletionTimestamp")


async def test_node_choice_prefers_no_budget_violation_over_lower_victim_priority(cluster: Any) -> None:
    """``pickOneNodeForPreemption``: fewest PDB violations first, only then the lowest priority of the
    most important victim. n1's victim has the lower priority but its budget allows no disruption."""
    await cluster.create_node("n1", cpu="1")
    await cluster.create_node("n2", cpu="1")
    await _pod(cluster, "guarded", "800m", 10, labels={"app": "guarded"}, nodeName="n1")
    await _pod(cluster, "free", "800m", 100, nodeName="n2")
    await _running(cluster, "guarded", "free")
    await cluster.call(
        "POST",
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        pdb("guarded", selector={"matchLabels": {"app": "guarded"}}, min_available=1),
    )
    await cluster.until(
        lambda: (
            (
                cluster.sim.store.find(
                    cluster.sim.store.registry.lookup("policy", "v1", "poddisruptionbudgets"),
                    "default",
                    "guarded",
                )
                or {}
            )
            .get("status", {})
            .get("currentHealthy")
            == 1
        )
    )
    await _pod(cluster, "high", "800m", 1000)
    await cluster.until(lambda: (cluster.pod("high").get("status") or {}).get("nominatedNodeName"))
    assert cluster.pod("high")["status"]["nominatedNodeName"] == "n2"
    assert cluster.pod("free")["metadata"].get("deletionTimestamp")
    assert not cluster.pod("guarded")["metadata"].get("deletionTimestamp")
    await cluster.until(lambda: _node_of(cluster, "high") == "n2")


async def test_a_nominated_pod_waits_for_its_terminating_victims_instead_of_preempting_again(
    cluster: Any,
) -> None:
    """``PodEligibleToPreemptOthers``: while a lower-priority pod preempted for it is still terminating
    on its nominated node (``podTerminatingByPreemption``), a retried preemptor is "not eligible due to
    a terminating pod on the nominated node." and no further pod is preempted."""
    await cluster.create_node("n1", cpu="1")
    slow = pod("slow", annotations={conventions.SHUTDOWN_SECONDS: "0.8"}, requests={"cpu": "500m"}, grace=5)
    await cluster.call("POST", "/api/v1/namespaces/default/pods", slow)
    await _pod(cluster, "other", "400m", 5)  # more important than "slow": reprieved
    await _running(cluster, "slow", "other")
    await _pod(cluster, "high", "500m", 1000)
    await cluster.until(lambda: (cluster.pod("high").get("status") or {}).get("nominatedNodeName") == "n1")
    assert cluster.pod("slow")["metadata"].get("deletionTimestamp")
    # A node change makes the scheduler retry the pod while its victim is still shutting down.
    await cluster.patch("/api/v1/nodes/n1", {"metadata": {"labels": {"retry": "now"}}})
    await cluster.until(lambda: "preemption: not eligible" in (pending_reason(cluster.pod("high")) or ""))
    assert pending_reason(cluster.pod("high")) == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to a terminating pod on the nominated node."
    )
    assert not cluster.pod("other")["metadata"].get("deletionTimestamp")
    await cluster.until(lambda: _node_of(cluster, "high") == "n1")
    assert cluster.pod("other") is not None


async def test_a_higher_priority_preemptor_takes_over_a_lower_priority_nomination(cluster: Any) -> None:
    """``prepareCandidate``: pods of lower priority nominated to the chosen node lose their
    nomination (``getLowerPriorityNominatedPods``, ``ClearNominatedNodeName``); once the victim is
    gone the higher-priority pod is bound there."""
    await cluster.create_node("n1", cpu="1")
    slow = pod("victim", annotations={conventions.SHUTDOWN_SECONDS: "0.6"}, requests={"cpu": "800m"}, grace=5)
    await cluster.call("POST", "/api/v1/namespaces/default/pods", slow)
    await _running(cluster, "victim")
    await _pod(cluster, "mid", "800m", 100)
    await cluster.until(lambda: (cluster.pod("mid").get("status") or {}).get("nominatedNodeName") == "n1")
    await _pod(cluster, "top", "800m", 1000)
    await cluster.until(lambda: (cluster.pod("top").get("status") or {}).get("nominatedNodeName") == "n1")
    assert "nominatedNodeName" not in (cluster.pod("mid").get("status") or {})
    await cluster.until(lambda: _node_of(cluster, "top") == "n1")
    assert _node_of(cluster, "mid") is None


async def test_a_nomination_is_cleared_when_preemption_cannot_help_anywhere(cluster: Any) -> None:
    """``findCandidates``: no node failed on a filter preemption can resolve, so the pod's
    nominatedNodeName is cleared (``ClearNominatedNodeName``)."""
    await cluster.create_node("n1", cpu="1")
    await _pod(cluster, "lost", "100m", 1000, nodeSelector={"zone": "nowhere"})
    await cluster.until(lambda: pending_reason(cluster.pod("lost")))
    await cluster.patch(
        "/api/v1/namespaces/default/pods/lost/status", {"status": {"nominatedNodeName": "n1"}}
    )
    await cluster.patch("/api/v1/nodes/n1", {"metadata": {"labels": {"retry": "now"}}})
    await cluster.until(lambda: "nominatedNodeName" not in (cluster.pod("lost").get("status") or {}))
    assert pending_reason(cluster.pod("lost")).endswith(
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


async def test_the_nominated_node_is_tried_first_once_it_has_room() -> None:
    """schedule_one.go ``evaluateNominatedNode``: the scheduler tries a pod with
    status.nominatedNodeName on that node first and binds it there when it fits, before the nodes a
    full search would prefer (LeastAllocated puts the same pod without a nomination on "big")."""
    nominee = pod("high", requests={"cpu": "800m"})
    nominee["spec"]["priority"] = 1000
    nominee["status"] = {"nominatedNodeName": "n1"}
    plain = pod("plain", requests={"cpu": "800m"})
    plain["spec"]["priority"] = 1000
    objs = [namespace("default"), node("n1", cpu="1", ready=True), node("big", cpu="16", ready=True)]
    config = ControllerConfig(kubelet=False, workloads=False)
    async with KubeSim(objects=[*objs, nominee, plain], controllers=config) as sim:
        pods_rt = sim.store.registry.lookup("", "v1", "pods")
        assert pods_rt is not None

        def node_of(name: str) -> str | None:
            return (sim.store.get(pods_rt, "default", name).get("spec") or {}).get("nodeName")

        async def both_bound() -> tuple[str | None, str | None] | None:
            found = node_of("high"), node_of("plain")
            return found if None not in found else None

        assert await until(both_bound, within=5, interval=0.02) == ("n1", "big")


async def test_a_second_preemptor_of_equal_priority_does_not_reuse_the_node_a_nominee_holds(
    cluster: Any,
) -> None:
    """default_preemption.go ``SelectVictimsOnNode`` filters with framework.go
    ``RunFilterPluginsWithNominatedPods`` (``addGENominatedPods``): a pod nominated to a node with no
    lower priority counts as there, so a second preemptor of equal priority cannot use the room the
    first one's victim leaves and preempts on the other node instead."""
    slow = {conventions.SHUTDOWN_SECONDS: "0.5"}
    await cluster.create_node("n1", cpu="1")
    await cluster.create_node("n2", cpu="1")
    low1 = pod("low1", node="n1", annotations=slow, requests={"cpu": "800m"}, grace=5)
    await cluster.call("POST", "/api/v1/namespaces/default/pods", low1)
    low2 = pod("low2", node="n2", annotations=slow, requests={"cpu": "800m"}, grace=5)
    low2["spec"]["priorityClassName"] = await _priority_class(cluster, 10)
    await cluster.call("POST", "/api/v1/namespaces/default/pods", low2)
    await _running(cluster, "low1", "low2")
    await _pod(cluster, "high1", "800m", 1000)
    await cluster.until(lambda: (cluster.pod("high1").get("status") or {}).get("nominatedNodeName") == "n1")
    await _pod(cluster, "high2", "800m", 1000)
    await cluster.until(lambda: (cluster.pod("high2").get("status") or {}).get("nominatedNodeName"))
    assert cluster.pod("high2")["status"]["nominatedNodeName"] == "n2"
    assert cluster.pod("low2")["metadata"].get("deletionTimestamp")
    await cluster.until(lambda: _node_of(cluster, "high1") == "n1" and _node_of(cluster, "high2") == "n2")


async def test_a_lower_priority_pod_does_not_take_the_room_a_nominee_waits_for(cluster: Any) -> None:
    """schedule_one.go ``findNodesThatPassFilters`` runs framework.go
    ``RunFilterPluginsWithNominatedPods``: a preemptor nominated to the node counts there for a pod
    of lower priority, which the node's free room (beside the still-terminating victim) would fit
    otherwise; once the victim is gone both are bound."""
    await cluster.create_node("n1", cpu="1")
    victim = pod(
        "victim", annotations={conventions.SHUTDOWN_SECONDS: "0.5"}, requests={"cpu": "800m"}, grace=5
    )
    await cluster.call("POST", "/api/v1/namespaces/default/pods", victim)
    await _running(cluster, "victim")
    await _pod(cluster, "high", "800m", 1000)
    await cluster.until(lambda: (cluster.pod("high").get("status") or {}).get("nominatedNodeName") == "n1")
    await _pod(cluster, "small", "100m", 10)  # fits the 200m left beside the victim, not beside "high"
    await cluster.until(lambda: pending_reason(cluster.pod("small")))
    assert _node_of(cluster, "small") is None
    assert pending_reason(cluster.pod("small")).startswith("0/1 nodes are available: 1 Insufficient cpu.")
    await cluster.until(lambda: _node_of(cluster, "high") == "n1" and _node_of(cluster, "small") == "n1")


async def test_a_nominee_whose_node_turned_unresolvable_preempts_again_elsewhere(cluster: Any) -> None:
    """default_preemption.go ``PodEligibleToPreemptOthers``: a pod whose nominated node now fails on
    an UnschedulableAndUnresolvable filter (here NodeUnschedulable: cordoned) may preempt again,
    though a pod preempted for it still terminates there."""
    await cluster.create_node("n1", cpu="1")
    await cluster.create_node("n2", cpu="1")
    slow = {conventions.SHUTDOWN_SECONDS: "1.5"}
    for name, where in (("victim", "n1"), ("other", "n2")):
        body = pod(name, node=where, annotations=slow, requests={"cpu": "800m"}, grace=5)
        await cluster.call("POST", "/api/v1/namespaces/default/pods", body)
    await _running(cluster, "victim", "other")
    await cluster.patch("/api/v1/nodes/n2", {"spec": {"unschedulable": True}})
    await _pod(cluster, "high", "800m", 1000)
    await cluster.until(lambda: (cluster.pod("high").get("status") or {}).get("nominatedNodeName") == "n1")
    await cluster.patch("/api/v1/nodes/n1", {"spec": {"unschedulable": True}})
    await cluster.patch("/api/v1/nodes/n2", {"spec": {"unschedulable": False}})
    await cluster.until(lambda: (cluster.pod("high").get("status") or {}).get("nominatedNodeName") == "n2")
    assert cluster.pod("other")["metadata"].get("deletionTimestamp")
    assert cluster.pod("victim") is not None  # still terminating on n1: the case eligibility looked at


async def test_a_victim_already_terminating_still_gets_the_preemption_condition(cluster: Any) -> None:
    """preemption.go ``prepareCandidate``: every victim gets DisruptionTarget/PreemptionByScheduler
    (patched whenever ``UpdatePodCondition`` changes the status), including one whose deletion an
    earlier, unrelated delete already started."""
    await cluster.create_node("n1", cpu="1")
    body = pod("leaving", annotations={conventions.SHUTDOWN_SECONDS: "1"}, requests={"cpu": "800m"}, grace=5)
    await cluster.call("POST", "/api/v1/namespaces/default/pods", body)
    await _running(cluster, "leaving")
    await cluster.delete_pod("leaving")
    assert cluster.condition(cluster.pod("leaving"), "DisruptionTarget") is None
    await _pod(cluster, "high", "800m", 1000)
    await cluster.until(lambda: cluster.condition(cluster.pod("leaving"), "DisruptionTarget", "reason"))
    assert cluster.condition(cluster.pod("leaving"), "DisruptionTarget", "reason") == "PreemptionByScheduler"
    assert (cluster.pod("high").get("status") or {}).get("nominatedNodeName") == "n1"
