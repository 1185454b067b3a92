"""A relaunch after insufficient capacity (docs/designs/launching.md §2b, "Widened relaunch"):
which pods came back from a refused NodeClaim, and the type list their replacement carries.

Sources: kubernetes-sigs/karpenter ``pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go``
``ToNodeClaim`` (every compatible type, cheapest first, cut to 60); aws/karpenter-provider-aws
``pkg/providers/instance/instance.go`` ``filterInstanceTypes`` and ``filter/filter.go``
(``CompatibleAvailableFilter``: compatible, fits the requests, an available offering;
``ExoticInstanceTypeFilter``: exotic types only when nothing else is left).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubespot.cloud import fake_type
from kubespot.controllers.provisioning.nodeclaim_template import to_nodeclaim
from kubespot.controllers.provisioning.relaunch import RelaunchMemory, widen
from kubespot.scheduling.api.nodepool import parse_nodepool
from kubespot.scheduling.cluster import provisionable_pods
from kubespot.scheduling.labels import CAPACITY_TYPE, INSTANCE_TYPE, ZONE
from kubespot.scheduling.nodepool import NodePool
from kubespot.scheduling.pods import PodView
from kubespot.scheduling.requirements import Requirement, Requirements
from kubespot.scheduling.simulate import PlannedClaim, PoolCapacity, simulate
from kubespot.scheduling.volumes import Volumes

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


# -- the widened claim keeps the plan's zones --------------------------------------------------
#
# The plan's zone requirement on a claim comes from what the pods need (a bound volume's zone:
# core ``volumetopology.go`` ``getPersistentVolumeRequirements``; a zone spread's domain:
# ``topology.go`` / ``topologygroup.go`` ``nextDomainTopologySpread``; node affinity) narrowed to the
# zones the band is offered in. Widening adds types, never zones: a type offered only elsewhere
# would launch the node where the volume cannot attach or the spread is skewed.

BAND = fake_type("m", 2, 8, od=0.10, spot=0.04, zones=("z1", "z2", "z3"))
ELSEWHERE = fake_type("c-elsewhere", 2, 8, od=0.05, spot=0.01, zones=("z1", "z3"))  # cheaper, not z2
IN_Z2 = fake_type("d-z2", 4, 16, od=0.20, spot=0.06, zones=("z2",))
OPEN = Requirement.of(CAPACITY_TYPE, "In", ["spot", "on-demand"])


def _widened_nodeclaim_zones(planned: PlannedClaim, types: list[Any]) -> tuple[PlannedClaim, list[str]]:
    """``widen`` then ``to_nodeclaim`` as the provisioner builds a relaunch; the NodeClaim's zones."""
    wide = widen(planned, types, OPEN)
    spec = parse_nodepool({"metadata": {"name": "general"}, "spec": {"template": {"spec": {}}}}).spec
    body = to_nodeclaim(wide, spec, "uid", {t.name: t for t in types}, allowed_capacity=OPEN)
    (zone,) = [r for r in body["spec"]["requirements"] if r["key"] == ZONE]
    assert zone["operator"] == "In"
    return wide, sorted(zone["values"])


def _offered_in(types: list[Any], names: list[str], zone: str) -> bool:
    by = {t.name: t for t in types}
    return all(any(o.zone == zone and o.available for o in by[n].offerings) for n in names)


@pytest.mark.parametrize("pin", ["bound volume", "node affinity"])
def test_a_widened_relaunch_stays_in_the_zone_its_pods_need(pin: str) -> None:
    """A pod whose bound PersistentVolume lives in z2 (core volumetopology.go
    ``getPersistentVolumeRequirements``), or whose node affinity asks z2 (core
    ``scheduling/requirements.go`` ``NewPodRequirements``): the widened replacement lists only
    types offered in z2 and its NodeClaim stays ``In [z2]``; the cheaper type offered only in z1
    and z3 is left out (aws ``instance.go`` ``filterInstanceTypes``: compatible with the claim's
    requirements)."""
    if pin == "bound volume":
        volumes = Volumes.of([_pvc("data-web-0", "pv-a")], [_pv("pv-a", "z2")], [])
        spec: dict[str, Any] = {
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data-web-0"}}]
        }
    else:
        volumes = Volumes.of([], [], [])
        term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z2"]}]}
        spec = {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
                }
            }
        }
    pods, left_out = provisionable_pods([_pod("web-0", **spec)], volumes)
    assert not left_out
    types = [BAND, ELSEWHERE, IN_Z2]
    plan = simulate(pods, [], [PoolCapacity(_pool(), types)])
    (planned,) = plan.claims
    assert planned.zones == ["z2"]
    wide, zones = _widened_nodeclaim_zones(planned, types)
    assert zones == ["z2"]
    assert "c-elsewhere" not in wide.instance_types and "d-z2" in wide.instance_types
    assert _offered_in(types, wide.instance_types, "z2")


def test_widened_relaunches_of_a_zone_spread_keep_one_zone_each() -> None:
    """Three pods spread over zones (maxSkew 1, DoNotSchedule: core ``topologygroup.go``
    ``nextDomainTopologySpread``) get one claim per zone; each widened replacement keeps its own
    zone, so a type offered only in z1 and z3 joins those two claims and not z2's."""
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    }
    big = {"resources": {"requests": {"cpu": "1500m"}}}  # one pod per node of the band's size
    pods = [PodView.of(_pod(f"web-{i}", labels={"app": "web"}, container=big, **spread)) for i in range(3)]
    types = [BAND, ELSEWHERE, IN_Z2]
    plan = simulate(pods, [], [PoolCapacity(_pool(), types)])
    assert not plan.unschedulable
    assert sorted(z for c in plan.claims for z in c.zones) == ["z1", "z2", "z3"]
    for planned in plan.claims:
        (zone,) = planned.zones
        wide, zones = _widened_nodeclaim_zones(planned, types)
        assert zones == [zone]
        assert _offered_in(types, wide.instance_types, zone)
        assert ("c-elsewhere" in wide.instance_types) == (zone != "z2")


def _pool() -> Any:
    return NodePool.of({"metadata": {"name": "general"}, "spec": {"template": {"spec": {}}}})


def _pod(
    name: str, *, labels: dict[str, str] | None = None, container: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    c = {"name": "c", "resources": {"requests": {"cpu": "500m"}}, **(container or {})}
    return {
        "metadata": {"name": name, "namespace": "db", "uid": f"uid-{name}", "labels": labels or {}},
        "spec": {"containers": [c], **spec},
    }


def _pvc(name: str, volume: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "db",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        },
        "spec": {"volumeName": volume, "storageClassName": "gp3"},
    }


def _pv(name: str, zone: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [term]}}},
    }
