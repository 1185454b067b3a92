"""Preemption's pure parts: victims per node, budget violations and the choice of a node.

Upstream: pkg/scheduler/framework/preemption/preemption.go ``pickOneNodeForPreemption``;
pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go ``SelectVictimsOnNode``,
``filterPodsWithPDBViolation``, ``calculateNumCandidates``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubespot.sim.kubesim.controllers.preemption import (
    NO_VICTIMS,
    Candidate,
    Preemption,
    num_candidates,
    pick_one,
    select_victims,
    split_by_pdb_violation,
)
from kubespot.sim.kubesim.store import Store
from kubespot.sim.kubesim.testing import namespace, pdb

Obj = dict[str, Any]


def _pod(name: str, prio: int, cpu: int = 0, start: str = "2026-01-01T00:00:00Z") -> Obj:
    return {
        "metadata": {"name": name, "namespace": "d", "labels": {"app": name}},
        "spec": {"priority": prio, "cpu": cpu},
        "status": {"startTime": start},
    }


def _cpu_fit(capacity: int) -> Any:
    def fits(pod: Obj, _node: str, pods: Sequence[Obj]) -> str | None:
        used = sum(p["spec"]["cpu"] for p in pods)
        return None if used + pod["spec"]["cpu"] <= capacity else "Insufficient cpu"

    return fits


def _budget(allowed: int, disrupted: Sequence[str] = ()) -> Obj:
    return {
        "metadata": {"name": "b", "namespace": "d"},
        "status": {"disruptionsAllowed": allowed, "disruptedPods": dict.fromkeys(disrupted, "t")},
    }


def test_num_candidates_is_ten_percent_at_least_one_hundred_at_most_all() -> None:
    assert (num_candidates(50), num_candidates(500), num_candidates(5000)) == (50, 100, 500)


def test_pdb_violation_counts_disruptions_in_order_and_skips_already_disrupted_pods() -> None:
    """filterPodsWithPDBViolation: each pod takes one allowed disruption; below zero violates; a pod
    in ``disruptedPods`` is already counted."""
    pods = [_pod("a", 0), _pod("b", 0), _pod("c", 0)]
    budget = _budget(1, disrupted=["b"])
    violating, fine = split_by_pdb_violation(pods, lambda _p: [budget])
    assert [p["metadata"]["name"] for p in violating] == ["c"]
    assert [p["metadata"]["name"] for p in fine] == ["a", "b"]


def test_victims_are_the_fewest_and_most_important_are_reprieved_first() -> None:
    pods = [_pod("p50", 50, 400), _pod("p10", 10, 400), _pod("p99", 99, 100), _pod("same", 100, 100)]
    cand, why = select_victims(_pod("new", 100, 400), "n", pods, _cpu_fit(1000), lambda _p: [])
    assert why == "" and cand is not None
    assert [v["metadata"]["name"] for v in cand.victims] == ["p10"]
    none, why = select_victims(_pod("new", 10, 500), "n", pods, _cpu_fit(1000), lambda _p: [])
    assert none is None and why == NO_VICTIMS
    never, why = select_victims(_pod("new", 100, 5000), "n", pods, _cpu_fit(1000), lambda _p: [])
    assert never is None and why == "Insufficient cpu"


def test_violating_victims_are_reprieved_before_the_others() -> None:
    """SelectVictimsOnNode reprieves the PDB-violating pods first, so a budget is spared if it can be."""
    guarded, free = _pod("guarded", 10, 500), _pod("free", 10, 500, start="2026-01-02T00:00:00Z")
    budget = _budget(0)
    cand, _ = select_victims(
        _pod("new", 100, 500),
        "n",
        [guarded, free],
        _cpu_fit(1000),
        lambda p: [budget] if p is guarded else [],
    )
    assert cand is not None and [v["metadata"]["name"] for v in cand.victims] == ["free"]
    assert cand.violations == 0


def test_pick_one_follows_upstream_criteria_in_order() -> None:
    low, high = _pod("low", 1), _pod("high", 50)
    assert pick_one([Candidate("a", [low], 1), Candidate("b", [high], 0)]).node == "b"  # violations
    assert pick_one([Candidate("a", [high], 0), Candidate("b", [low], 0)]).node == "b"  # top priority
    top = _pod("top", 3)
    # The sum of priorities (each shifted by 2^31, so more victims always weigh more).
    assert (
        pick_one([Candidate("a", [top, _pod("x", 1)], 0), Candidate("b", [top, _pod("y", 0)], 0)]).node == "b"
    )
    assert (
        pick_one([Candidate("a", [top, _pod("x", 0), _pod("y", 0)], 0), Candidate("b", [top, low], 0)]).node
        == "b"
    )
    older, newer = _pod("o", 5, start="2026-01-01T00:00:00Z"), _pod("n", 5, start="2026-02-01T00:00:00Z")
    assert pick_one([Candidate("a", [older], 0), Candidate("b", [newer], 0)]).node == "b"  # latest start
    assert pick_one([Candidate("a", [newer], 0), Candidate("b", [], 0)]).node == "b"  # nothing to preempt


def test_budgets_match_victims_as_the_scheduler_does_not_as_eviction_does() -> None:
    """default_preemption.go ``filterPodsWithPDBViolation``: "A PDB with a nil or empty selector
    matches nothing", and a pod without labels is covered by no budget (the eviction API's
    ``GetPodPodDisruptionBudgets`` would read ``{}`` as every pod of the namespace)."""
    store = Store()
    pdb_rt = store.registry.lookup("policy", "v1", "poddisruptionbudgets")
    ns_rt = store.registry.lookup("", "v1", "namespaces")
    assert pdb_rt is not None and ns_rt is not None
    store.create(ns_rt, namespace("d"))
    store.create(pdb_rt, pdb("empty", namespace="d", selector={}, max_unavailable=0))
    store.create(pdb_rt, pdb("nil", namespace="d", max_unavailable=0))
    store.create(pdb_rt, pdb("app", namespace="d", selector={"matchLabels": {"app": "x"}}, max_unavailable=0))
    store.create(
        pdb_rt,
        pdb(
            "expr",
            namespace="d",
            selector={"matchExpressions": [{"key": "app", "operator": "Exists"}]},
            max_unavailable=0,
        ),
    )
    preemption = Preemption(store)
    labelled = _pod("x", 0)
    unlabelled = {**labelled, "metadata": {"name": "u", "namespace": "d"}}
    assert sorted(b["metadata"]["name"] for b in preemption.pdbs_for(labelled)) == ["app", "expr"]
    assert preemption.pdbs_for(unlabelled) == []


def test_a_pod_not_started_yet_counts_as_starting_now() -> None:
    """pkg/scheduler/util/utils.go ``GetPodStartTime``: without status.startTime a pod starts "now",
    so of two victims of equal priority the started one is the more important (reprieved first,
    ``MoreImportantPod``) however old the other's creationTimestamp, and ``pickOneNodeForPreemption``
    prefers the node whose highest-priority victims started latest."""
    started = _pod("started", 10, 500, start="2026-01-02T00:00:00Z")
    waiting = _pod("waiting", 10, 500)
    del waiting["status"]["startTime"]
    waiting["metadata"]["creationTimestamp"] = "2025-01-01T00:00:00Z"
    cand, _ = select_victims(_pod("new", 100, 500), "n", [waiting, started], _cpu_fit(1000), lambda _p: [])
    assert cand is not None and [v["metadata"]["name"] for v in cand.victims] == ["waiting"]
    assert pick_one([Candidate("a", [started], 0), Candidate("b", [waiting], 0)]).node == "b"
