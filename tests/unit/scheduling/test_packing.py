"""New capacity packed by the configuration LP (kubespot.scheduling.packing, the hook in simulate).

kubespot's own decision (docs/designs/provisioning.md, decision 3 and "The lower bound, and where
the packing stands"): Karpenter packs a NodeClaim first-fit (kubernetes-sigs/karpenter
``pkg/controllers/provisioning/scheduling/scheduler.go`` ``Solve``/``add``) and the rules it keeps
(limits counted pessimistically: ``pkg/controllers/provisioning/scheduling/scheduler.go``
``addToNewNodeClaim`` with ``pkg/utils/resources`` ``Fits`` on the pool's remaining resources) are
Karpenter's; the packing itself is the Gilmore-Gomory configuration LP solved by column generation.
The hand-solved instances below name their optimum in the docstring.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubespot.model.quantity import GIB
from kubespot.scheduling import lp_solver
from kubespot.scheduling.labels import ON_DEMAND, SPOT
from kubespot.scheduling.lp_solver import SolverUnavailable
from kubespot.scheduling.nodepool import NodePool
from kubespot.scheduling.packing import NodeType, lp_eligible, pack
from kubespot.scheduling.pods import PodView
from kubespot.scheduling.simulate import PoolCapacity, simulate
from support.catalog import itype

GI = GIB


def pod(name: str, cpu: str = "1", memory: str = "256Mi", **spec: Any) -> PodView:
    return PodView.of(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
                **spec,
            },
        }
    )


def pool(**spec: Any) -> NodePool:
    limits = spec.pop("limits", None)
    return NodePool.of(
        {
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": spec}, **({"limits": limits} if limits else {})},
        }
    )


#: Four cores for 0.30 hold more per dollar than three for 0.24, so the greedy opens a "big"
#: node first; six one-core pods then leave two for a second node. Two "small" nodes hold all six
#: for 0.48 (the optimum: one node holds at most four; a big and a small cost 0.54, two bigs 0.60).
TWO_TYPES = [itype("big", 4, 16, od=0.75, spot=0.30), itype("small", 3, 16, od=0.60, spot=0.24)]


def unavailable() -> Any:
    raise SolverUnavailable("the LP solver is not installed (monkeypatched)")


def test_the_lp_finds_the_optimum_the_greedy_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Six one-core pods, types of four cores for 0.30 and three for 0.24: the configuration LP
    (relaxation 0.45: one and a half bigs) rounds to two smalls, 0.48, the integer optimum; the
    price-per-request greedy takes a big first and pays 0.54 (docs/designs/provisioning.md)."""
    pods = [pod(f"p{i}") for i in range(6)]
    plan = simulate(pods, [], [PoolCapacity(pool(), TWO_TYPES)])
    assert sorted((c.instance_types[0], len(c.pods)) for c in plan.claims) == [("small", 3), ("small", 3)]
    assert plan.cost_per_hour == pytest.approx(0.48)
    assert all(c.capacity_type == SPOT and "configuration LP" in c.why for c in plan.claims)

    monkeypatch.setattr(lp_solver, "new_solver", unavailable)
    greedy = simulate(pods, [], [PoolCapacity(pool(), TWO_TYPES)])
    assert greedy.cost_per_hour == pytest.approx(0.54)


def test_pack_mixes_shapes_on_one_node_when_that_is_cheaper() -> None:
    """Two shapes, four CPU-heavy pods (3 cores, 1 GiB) and four memory-heavy ones (1 core,
    7 GiB), types "cpu" (8 cores, 8 GiB, 0.15), "mem" (2 cores, 32 GiB, 0.15) and "even"
    (4 cores, 8 GiB, 0.10): one pod of each shape fills an "even" node exactly (0.05 a pod), while
    "cpu" holds two CPU-heavy pods and "mem" two memory-heavy ones (0.075 a pod), so four "even"
    nodes (0.40) is the only optimum; the LP's value is 0.40 and its rounding buys exactly that."""
    needs = [{"cpu": 3000, "memory": 1 * GI, "pods": 1}, {"cpu": 1000, "memory": 7 * GI, "pods": 1}]
    types = [
        NodeType("cpu", {"cpu": 8000, "memory": 8 * GI, "pods": 110}, 0.15),
        NodeType("mem", {"cpu": 2000, "memory": 32 * GI, "pods": 110}, 0.15),
        NodeType("even", {"cpu": 4000, "memory": 8 * GI, "pods": 110}, 0.10),
    ]
    result = pack(needs, [4, 4], types)
    assert result.bound == pytest.approx(0.40)
    bought = sorted((types[n.type].name, n.pattern, n.count) for n in result.nodes)
    assert sum(n.count for n in result.nodes) == 4
    assert {name for name, _, _ in bought} == {"even"}
    assert sum(dict(n.pattern).get(0, 0) * n.count for n in result.nodes) == 4
    assert sum(dict(n.pattern).get(1, 0) * n.count for n in result.nodes) == 4


def test_rounding_places_every_pod_of_a_larger_mixed_cohort() -> None:
    """Six shapes drawn from Karpenter's generic benchmark mix (kubernetes-sigs/karpenter
    ``pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go``: CPU 100-1500 m, memory
    100 Mi-4 Gi), 120 pods on five types: the LP's whole nodes and the greedy's residue together
    place every pod, each NodeClaim's pods fit its type, and the plan costs no more than the
    greedy's alone."""
    catalog = [
        itype("c-large", 2, 4, od=0.085, spot=0.03),
        itype("m-large", 2, 8, od=0.096, spot=0.035),
        itype("r-large", 2, 16, od=0.126, spot=0.045),
        itype("m-xlarge", 4, 16, od=0.192, spot=0.068),
        itype("c-2xlarge", 8, 16, od=0.34, spot=0.125),
    ]
    cpus, mems = ("250m", "1000m", "1500m"), ("500Mi", "4000Mi")
    pods = [pod(f"p{i:03d}", cpus[i % 3], mems[(i // 3) % 2]) for i in range(120)]
    plan = simulate(pods, [], [PoolCapacity(pool(), catalog)])
    assert not plan.unschedulable
    assert sorted(p for c in plan.claims for p in c.pods) == sorted(p.key for p in pods)
    alloc = {it.name: it.allocatable for it in catalog}
    for claim in plan.claims:
        assert all(claim.requests[k] <= alloc[claim.instance_types[0]].get(k, 0) for k in claim.requests)
    assert any("configuration LP" in c.why for c in plan.claims)


def test_limits_cut_the_lp_plan_and_the_greedy_reports_the_rest() -> None:
    """Limits are counted pessimistically by each new node's capacity (Karpenter
    ``pkg/controllers/provisioning/scheduling/scheduler.go`` ``addToNewNodeClaim`` /
    ``nodepool.go`` limits): with 8 cores allowed, the LP's two smalls (3 cores each) fit but a
    third node would not; pods beyond them are unschedulable with the limits as the reason."""
    limited = pool(limits={"cpu": "8"})
    plan = simulate([pod(f"p{i}") for i in range(9)], [], [PoolCapacity(limited, TWO_TYPES)])
    cores = {"big": 4, "small": 3}
    # Each claim counts its largest offered type (subtractMax), not the one packed.
    assert sum(max(cores[t] for t in c.instance_types) for c in plan.claims) <= 8
    placed = sum(len(c.pods) for c in plan.claims)
    assert placed + len(plan.unschedulable) == 9 and plan.unschedulable
    assert all("would exceed the NodePool's limits" in r[0] for r in plan.unschedulable.values())


def test_the_greedy_packs_alone_when_the_solver_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    """No HiGHS (not installed, failed, or past its time limit): the plan is the greedy's, and each
    NodeClaim's explanation says why (decision 4: every decision says why)."""
    monkeypatch.setattr(lp_solver, "new_solver", unavailable)
    plan = simulate([pod(f"p{i}") for i in range(6)], [], [PoolCapacity(pool(), TWO_TYPES)])
    assert sum(len(c.pods) for c in plan.claims) == 6
    assert all("greedy packing: the LP solver is not installed" in c.why for c in plan.claims)


def test_same_input_same_plan() -> None:
    """The plan is a function of its input (pods in any order): the same NodeClaims, types and
    pods every time, as the provisioner and `kubespot plan` must agree."""
    catalog = [*TWO_TYPES, itype("odd", 6, 8, od=0.9, spot=0.41)]
    pods = [pod(f"p{i:02d}", cpu=("500m", "1", "2")[i % 3], memory=("1Gi", "3Gi")[i % 2]) for i in range(40)]

    def run(order: list[PodView]) -> list[tuple[str, str, tuple[str, ...]]]:
        plan = simulate(order, [], [PoolCapacity(pool(), catalog)])
        return [(c.instance_types[0], c.capacity_type, tuple(c.pods)) for c in plan.claims]

    first = run(pods)
    assert first == run(list(reversed(pods))) == run(pods)


def test_on_demand_when_its_plan_costs_less() -> None:
    """Spot unless the on-demand plan holds the pods for less (decision 3, compared per plan): here
    the spot offerings cost more than on-demand, so the whole plan is on-demand."""
    catalog = [itype("big", 4, 16, od=0.20, spot=0.30), itype("small", 3, 16, od=0.18, spot=0.24)]
    plan = simulate([pod(f"p{i}") for i in range(8)], [], [PoolCapacity(pool(), catalog)])
    assert {c.capacity_type for c in plan.claims} == {ON_DEMAND}
    assert plan.cost_per_hour == pytest.approx(0.40)


def test_pods_with_host_ports_or_topology_terms_are_not_lp_eligible() -> None:
    """Host ports (one pod per node per port: kube-scheduler ``pkg/scheduler/framework/plugins/
    nodeports`` ``Filter``), topology spread and pod (anti-)affinity (counted per domain) stay with
    the greedy; plain pods go to the LP."""
    port = [
        {
            "name": "c",
            "resources": {"requests": {"cpu": "1"}},
            "ports": [{"containerPort": 80, "hostPort": 80}],
        }
    ]
    spread = [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
    ]
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}
    assert lp_eligible(pod("plain"))
    assert not lp_eligible(PodView.of({"metadata": {"name": "p"}, "spec": {"containers": port}}))
    assert not lp_eligible(pod("s", topologySpreadConstraints=spread))
    assert not lp_eligible(pod("a", affinity=anti))
    plan = simulate(
        [PodView.of({"metadata": {"name": f"h{i}"}, "spec": {"containers": port}}) for i in range(3)],
        [],
        [PoolCapacity(pool(), TWO_TYPES)],
    )
    assert [len(c.pods) for c in plan.claims] == [1, 1, 1]
    assert not any("configuration LP" in c.why for c in plan.claims)


def test_capacity_types_are_compared_on_the_same_pods() -> None:
    """Spot unless the on-demand plan holds the same pods for less (decision 3; Karpenter's
    pkg/controllers/provisioning/scheduling/nodeclaim.go prefers spot when any candidate has a spot
    offering). A twelve-core pod only an on-demand-only type holds is left to the greedy, so both
    plans are priced for the six one-core pods: two smalls on-demand (0.40) beat two on spot
    (0.48), and the spot plan may not look cheaper just because it leaves the big pod out."""
    catalog = [
        itype("big", 4, 16, od=0.25, spot=0.30),
        itype("small", 3, 16, od=0.20, spot=0.24),
        itype("huge", 16, 64, od=0.80),
    ]
    pods = [pod("big", cpu="12"), *(pod(f"p{i}") for i in range(6))]
    plan = simulate(pods, [], [PoolCapacity(pool(), catalog)])
    assert not plan.unschedulable
    by_pod = {p: (c.instance_types[0], c.capacity_type) for c in plan.claims for p in c.pods}
    assert by_pod["default/big"] == ("huge", ON_DEMAND)
    assert {by_pod[f"default/p{i}"] for i in range(6)} == {("small", ON_DEMAND)}


def test_lp_claims_carry_the_explanation_of_their_types() -> None:
    """Decision 4 (every decision says why), as the greedy's claims do: the pool's types considered
    are the types offered plus those dropped, counted by reason (``PlannedClaim.considered``)."""
    plan = simulate([pod(f"p{i}") for i in range(6)], [], [PoolCapacity(pool(), TWO_TYPES)])
    assert plan.claims and all("configuration LP" in c.why for c in plan.claims)
    for claim in plan.claims:
        assert claim.considered == len(claim.instance_types) + sum(claim.dropped.values()) == 2
        assert claim.dropped == {"outside the flexibility band": 1}


def test_a_pool_with_min_values_keeps_the_greedy() -> None:
    """minValues is checked pod by pod as a NodeClaim fills (Karpenter's
    pkg/controllers/provisioning/scheduling/nodeclaim.go ``CanAdd`` with
    ``pkg/scheduling/requirements.go`` minValues): a configuration column cannot see it, so such a
    pool's capacity is packed by the greedy."""
    requirement = {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 2}
    plan = simulate(
        [pod(f"p{i}") for i in range(6)], [], [PoolCapacity(pool(requirements=[requirement]), TWO_TYPES)]
    )
    assert plan.claims and not any("configuration LP" in c.why for c in plan.claims)
    assert sum(len(c.pods) for c in plan.claims) == 6
    # Every NodeClaim keeps the choice asked for (it used to be filled past what two types hold).
    assert all(c.min_values == {"node.kubernetes.io/instance-type": 2} for c in plan.claims), [
        (c.instance_types, c.why) for c in plan.claims
    ]


@pytest.mark.parametrize("solver", [True, False])
def test_every_group_packed_into_new_claims_tells_of_the_claims_holding_its_pods(
    solver: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Design decision 4 (docs/designs/provisioning.md): each group's story names the NodePool
    that took it and how many NodeClaims hold its pods, as Karpenter's scheduler.go Solve records
    a pod's NodeClaim whichever pod opened it (review finding 8: only the opening group had a
    NodePool line, counting claims holding none of its pods)."""
    if not solver:
        monkeypatch.setattr(lp_solver, "new_solver", unavailable)
    types = [
        itype("small", 2, 8, od=0.10, spot=0.04),
        itype("medium", 4, 16, od=0.20, spot=0.07),
        itype("large", 8, 32, od=0.40, spot=0.12),
    ]
    pods = [pod(f"big{i}", "3", "4Gi") for i in range(3)] + [
        pod(f"tiny{i}", "100m", "128Mi") for i in range(40)
    ]
    plan = simulate(pods, [], [PoolCapacity(pool(), types)])
    assert not plan.unschedulable
    for name in ("big", "tiny"):
        holding = sum(any(p.startswith(f"default/{name}") for p in c.pods) for c in plan.claims)
        assert holding
        story = plan.stories[f"default/{name}0"]
        assert story.outcomes() == [("default", f"opened {holding} NodeClaim(s)")], name


#: The clocks a starved machine shows: the wall clock (another process holds the core) and the
#: CPU clock (contention and cache misses fit less work in a CPU second) of the ``time`` module.
CLOCKS = {
    "wall": ("monotonic", "perf_counter", "time"),
    "cpu": ("thread_time", "process_time"),
}


def _jumping(monkeypatch: pytest.MonkeyPatch, clocks: str) -> None:
    """Makes ``clocks`` race 100 s ahead at every look, in every module that reads them."""
    import itertools
    import time

    for name in CLOCKS[clocks]:
        real, jumps = getattr(time, name), itertools.count(1)
        monkeypatch.setattr(time, name, lambda real=real, jumps=jumps: real() + 100.0 * next(jumps))


def _mixed_cohort(n: int) -> tuple[list[dict[str, int]], list[int], list[NodeType]]:
    """``n`` shapes of a seeded mix on 24 types with irregular prices: a search of several rounds.
    The types are sized as EC2's c, m and r families are (2, 4 and 8 GiB per vCPU), so every shape
    (128 MiB to 6 GiB) fits some type and takes part in the search."""
    import random

    rng = random.Random(7)
    types = [
        NodeType(
            f"{fam}.{size}",
            {"cpu": size * 1000 - 200, "memory": size * mem * GI, "pods": 110},
            round(size * price * rng.uniform(0.25, 0.45), 5),
        )
        for fam, mem, price in (("c", 2, 0.0425), ("m", 4, 0.048), ("r", 8, 0.063))
        for size in (2, 4, 8, 16, 32, 48, 64, 96)
    ]
    needs = [
        {
            "cpu": rng.choice([100, 250, 500, 1000, 2000, 3500]) + rng.randint(0, 99),
            "memory": (rng.choice([128, 512, 1024, 3000, 6000]) + rng.randint(0, 99)) * GI // 1024,
            "pods": 1,
        }
        for _ in range(n)
    ]
    return needs, [rng.randint(5, 60) for _ in range(n)], types


@pytest.mark.parametrize("clocks", sorted(CLOCKS))
def test_a_busy_machine_does_not_change_the_plan(monkeypatch: pytest.MonkeyPatch, clocks: str) -> None:
    """Issue 13's loose end and review 15b (docs/designs/provisioning.md, "Determinism"): the
    search's budget is work (``WORK_BUDGET``, knapsack cells per pricing round) and every HiGHS run
    is bounded by work (iterations, branch-and-bound nodes), so the same pods and types give the
    same plan however slowly the wall clock or the CPU clock says it went (the column generation
    used to stop at a wall-clock deadline, then at a CPU-time one: 847 vs 839 nodes for one cohort
    under load). kubespot's own rule: Karpenter's packing is first-fit (kubernetes-sigs/karpenter
    ``pkg/controllers/provisioning/scheduling/scheduler.go`` ``Solve``) and has no time budget to
    depend on."""
    import random

    from support.sched_problems import catalog

    rng = random.Random(7)
    types = catalog(rng)
    shapes = [("250m", "512Mi"), ("1", "1Gi"), ("500m", "3Gi"), ("1500m", "256Mi"), ("2", "6Gi")]
    pods = [pod(f"p{i}", *shapes[rng.randrange(len(shapes))]) for i in range(240)]

    def plan() -> list[tuple[str, str, tuple[str, ...], bool]]:
        out = simulate(pods, [], [PoolCapacity(pool(), types)])
        assert not out.unschedulable
        return sorted(
            (c.instance_types[0], c.capacity_type, tuple(sorted(c.pods)), "configuration LP" in c.why)
            for c in out.claims
        )

    quiet = plan()
    assert any(lp for *_, lp in quiet)  # the LP packed (else there is no budget to speak of)
    _jumping(monkeypatch, clocks)
    assert plan() == quiet


def test_a_search_cut_by_its_work_budget_is_the_same_under_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/designs/provisioning.md "Determinism" (kubespot's own guard; Karpenter's scheduler.go
    ``Solve`` has no solver): a search the budget cuts ends at the same pricing round whatever the
    clocks say, so even a pathological input's plan does not depend on load. A budget of two
    rounds' cells (a round costs one per type and shape) stops the search early with fewer columns
    than the full one finds, and the same nodes with the CPU and wall clocks jumping. Every one
    of the 12 shapes takes part (none is too big for every type and left out), and the cut
    search's nodes still hold every pod."""
    needs, counts, types = _mixed_cohort(12)
    # The full search's columns (its LP alone: the rounding's extra columns only add to them).
    full = pack(needs, counts, types, whole=False)
    cut = pack(needs, counts, types, budget=2 * len(types) * len(needs) * 4 // 3)
    assert full.proven and full.columns > cut.columns and not cut.proven and "stopped early" in cut.note
    assert {s for n in cut.nodes for s, _ in n.pattern} == set(range(len(needs)))
    assert sum(n.count * sum(k for _, k in n.pattern) for n in cut.nodes) == sum(counts)
    _jumping(monkeypatch, "cpu")
    _jumping(monkeypatch, "wall")
    again = pack(needs, counts, types, budget=2 * len(types) * len(needs) * 4 // 3)
    assert (again.nodes, again.bound, again.columns) == (cut.nodes, cut.bound, cut.columns)


def test_the_remainders_integer_program_is_bounded_by_work_not_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/designs/provisioning.md "Determinism" (kubespot's own guard; Karpenter's scheduler.go
    ``Solve`` has no solver): the remainder's integer program is bounded by a few branch-and-bound
    nodes and without RINS's sub-MIPs, whose root work took 6-7 CPU s at 200 nodes on review 15b's
    120-shape cohort; its wall-clock limit stays a hang guard only. Checked on the HiGHS instance
    ``Master.integer`` runs, and its answer still covers every pod."""
    made: list[Any] = []
    real = lp_solver.new_solver

    def spy() -> Any:
        h = real()
        made.append(h)
        return h

    monkeypatch.setattr(lp_solver, "new_solver", spy)
    master = lp_solver.Master([3, 2])
    master.add(0, {0: 2}, 1.0)
    master.add(0, {1: 1}, 0.6)
    master.add(1, {0: 1, 1: 1}, 0.9)
    x = master.integer([3, 2])
    assert x is not None and 2 * x[0] + x[2] >= 3 and x[1] + x[2] >= 2
    h = made[-1]
    assert h.getOptionValue("mip_max_nodes")[1] <= 10
    assert h.getOptionValue("mip_heuristic_run_rins")[1] is False
    assert h.getOptionValue("time_limit")[1] == lp_solver.HANG_GUARD_S
    assert h.getInfo().mip_node_count <= lp_solver.MIP_NODES
