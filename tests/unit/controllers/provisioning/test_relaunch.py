"""A relaunch after insufficient capacity (docs/designs/launching.md §2b, "Widened relaunch"):
which pods came back from a refused NodeClaim, and the type list their replacement carries.

Sources: kubernetes-sigs/karpenter ``pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go``
``ToNodeClaim`` (every compatible type, cheapest first, cut to 60); aws/karpenter-provider-aws
``pkg/providers/instance/instance.go`` ``filterInstanceTypes`` and ``filter/filter.go``
(``CompatibleAvailableFilter``: compatible, fits the requests, an available offering;
``ExoticInstanceTypeFilter``: exotic types only when nothing else is left).
"""

from __future__ import annotations

from kubespot.cloud import fake_type
from kubespot.controllers.provisioning.relaunch import RelaunchMemory, widen
from kubespot.scheduling.labels import CAPACITY_TYPE, INSTANCE_TYPE, ZONE
from kubespot.scheduling.requirements import Requirement, Requirements
from kubespot.scheduling.simulate import PlannedClaim

GIB = 1 << 30


def _planned(types: list[str], zones: list[str], cpu: int = 1500) -> PlannedClaim:
    reqs = Requirements(
        [
            Requirement.of(CAPACITY_TYPE, "In", ["spot"]),
            Requirement.of(INSTANCE_TYPE, "In", types),
            Requirement.of(ZONE, "In", zones),
        ]
    )
    return PlannedClaim(
        pool="general",
        capacity_type="spot",
        instance_types=types,
        price_per_hour=0.03,
        zones=zones,
        pods=["default/web"],
        requests={"cpu": cpu, "memory": 2 * GIB, "pods": 1},
        requirements=reqs,
    )


def test_widen_lists_every_type_that_fits_cheapest_spot_first() -> None:
    """filterInstanceTypes: compatible types whose allocatable holds the requests and that have an
    available offering in the claim's zones; ToNodeClaim orders them by price. A type with only an
    on-demand offering comes after the spot ones (the claim is spot, opened to on-demand)."""
    types = [
        fake_type("c", 4, 16, od=0.30, spot=0.07, zones=("z1",)),
        fake_type("a", 2, 8, od=0.10, spot=0.03, zones=("z1",)),
        fake_type("od-only", 4, 16, od=0.05, zones=("z1",)),
        fake_type("b", 4, 16, od=0.20, spot=0.05, zones=("z1",)),
        fake_type("tiny", 1, 1, od=0.01, spot=0.005, zones=("z1",)),  # too small for 1.5 CPU
        fake_type("elsewhere", 4, 16, od=0.02, spot=0.01, zones=("z2",)),  # not in the claim's zone
    ]
    allowed = Requirement.of(CAPACITY_TYPE, "In", ["spot", "on-demand"])
    wide = widen(_planned(["a"], ["z1"]), types, allowed)
    assert wide.instance_types == ["a", "b", "c", "od-only"]
    assert sorted(wide.requirements.get_or_any(INSTANCE_TYPE).values) == ["a", "b", "c", "od-only"]
    # The zones stay the plan's; the capacity type requirement is to_nodeclaim's to open.
    assert wide.requirements.get_or_any(ZONE).values == frozenset({"z1"})
    assert "widened to 4 types" in wide.why


def test_widen_cuts_at_sixty_and_keeps_exotic_types_out() -> None:
    """ToNodeClaim / Truncate: at most 60 types, the cheapest; ExoticInstanceTypeFilter: a type
    with a GPU only when nothing else is left."""
    types = [fake_type(f"t{i:02d}", 4, 16, od=1.0, spot=0.01 * (i + 1), zones=("z1",)) for i in range(70)]
    gpu = fake_type("g", 8, 32, od=0.5, spot=0.001, zones=("z1",))
    gpu.resources.capacity["nvidia.com/gpu"] = 1
    allowed = Requirement.of(CAPACITY_TYPE, "In", ["spot"])
    wide = widen(_planned(["t00"], ["z1"]), [gpu, *types], allowed)
    assert wide.instance_types == [f"t{i:02d}" for i in range(60)]


def test_widen_leaves_the_claim_alone_when_nothing_fits() -> None:
    """Nothing in the catalog holds the pods (it changed under the plan): the plan's claim stands."""
    planned = _planned(["a"], ["z1"], cpu=64_000)
    allowed = Requirement.of(CAPACITY_TYPE, "In", ["spot"])
    assert widen(planned, [fake_type("a", 2, 8, od=0.1, spot=0.03, zones=("z1",))], allowed) is planned


def test_only_pods_of_a_refused_claim_go_wide_and_only_for_a_while() -> None:
    """kubespot's memory (launching.md §2b): a claim told refused before its deletion makes its
    released pods wide for ``ttl``; a claim deleted for another reason does not."""
    now = [100.0]
    memory = RelaunchMemory(ttl=10.0, monotonic=lambda: now[0])
    memory.refused("general-a")
    assert memory.released("general-a", ["uid-1", "uid-2"])
    assert not memory.released("general-b", ["uid-3"])  # deleted, not refused
    assert memory.wide(["uid-9", "uid-2"]) and not memory.wide(["uid-3"])
    now[0] += 10.5
    assert not memory.wide(["uid-1"])


def test_widen_stays_within_the_instance_types_the_pool_and_pods_allow() -> None:
    """The catalog is the EC2NodeClass's, and the plan's instance-type requirement was narrowed to
    the band: the pool's (and pods') own requirement on ``node.kubernetes.io/instance-type`` bounds
    the widened list, as it bounds Karpenter's (ToNodeClaim: the template's requirements)."""
    types = [
        fake_type("a", 2, 8, od=0.10, spot=0.03, zones=("z1",)),
        fake_type("b", 4, 16, od=0.20, spot=0.05, zones=("z1",)),
        fake_type("outside", 4, 16, od=0.02, spot=0.01, zones=("z1",)),
    ]
    allowed = Requirement.of(CAPACITY_TYPE, "In", ["spot"])
    wide = widen(_planned(["a"], ["z1"]), types, allowed, Requirement.of(INSTANCE_TYPE, "In", ["a", "b"]))
    assert wide.instance_types == ["a", "b"]


def test_widen_drops_types_beyond_what_the_limits_leave_and_charges_the_largest_kept() -> None:
    """Review 15a #1. Core scheduling/scheduler.go filterByRemainingResources: a type whose
    capacity exceeds what the NodePool's limits leave is never listed; subtractMax charges the
    claim its largest type's capacity."""
    types = [
        fake_type("small", 2, 8, od=0.10, spot=0.03, zones=("z1",)),
        fake_type("mid", 4, 16, od=0.20, spot=0.05, zones=("z1",)),
        fake_type("big", 16, 64, od=0.80, spot=0.20, zones=("z1",)),
    ]
    planned = _planned(["small"], ["z1"], cpu=1000)
    planned.limits_charged = {"cpu": 2000, "nodes": 1}
    allowed = Requirement.of(CAPACITY_TYPE, "In", ["spot", "on-demand"])
    wide = widen(planned, types, allowed, limits_left={"cpu": 4000, "nodes": 1})
    assert wide.instance_types == ["small", "mid"]
    assert wide.limits_charged == {"cpu": 4000, "nodes": 1}
    # Without limits every type that fits is listed.
    assert widen(planned, types, allowed).instance_types == ["small", "mid", "big"]
