"""Seeded scheduling problems for the plan oracle (``support.plan_oracle``): one seed, one problem.

A problem is what a cluster and its catalog would give the provisioner, as Kubernetes objects: a
small catalog of real EC2 instance types (vCPUs, memory, ENIs as AWS documents them; allocatable
from the product's one allocatable function; us-east-1 on-demand prices from
``shared/data/aws-ondemand-prices.json``, spot at a discount, some offerings missing or
unavailable), one to three NodePools (weights, requirements on zone, capacity type, arch, family,
size and custom keys, labels, taints and startup taints, limits), existing nodes with their pods,
DaemonSets, and pending pods in Deployment-like groups (requests, node selectors, required and
preferred node affinity, tolerations, host ports; now and then instance-type lists of more than five
values). Topology spread and pod (anti-)affinity are only
drawn when ``PodView`` carries them (``TOPOLOGY``), so the oracle test runs against today's
simulation and covers them once they exist.

``random.Random(seed)`` draws everything (the project's tests use seeded generators, not
hypothesis), so a failing seed reproduces exactly.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubespot.model.capacity import InstanceTypeInfo, KubeletConfig
from kubespot.scheduling.allocatable import node_resources
from kubespot.scheduling.cluster import (
    daemon_overhead,
    daemon_ports,
    existing_nodes,
    pending_pods,
    pool_in_use,
)
from kubespot.scheduling.instance_types import InstanceType, Offering, instance_type
from kubespot.scheduling.labels import ARCH, CAPACITY_TYPE, INSTANCE_TYPE, ON_DEMAND, SPOT, ZONE
from kubespot.scheduling.nodepool import usable_pools
from kubespot.scheduling.pods import PodView
from kubespot.scheduling.simulate import ExistingNode, PoolCapacity
from kubespot.sim.kubesim.controllers.scheduler import node_reasons
from support.plan_objects import FAMILY, Obj, bound, daemon_pod, node_object, runs_daemon

#: Real instance types: (name, vCPUs, MiB, arch, ENIs, IPv4 per ENI, extended resources).
REAL_TYPES: tuple[InstanceTypeInfo, ...] = (
    InstanceTypeInfo("t3.micro", 2, 1024, max_enis=2, ipv4_per_eni=2),
    InstanceTypeInfo("t3.medium", 2, 4096, max_enis=3, ipv4_per_eni=6),
    InstanceTypeInfo("c5.large", 2, 4096, max_enis=3, ipv4_per_eni=10),
    InstanceTypeInfo("c5.xlarge", 4, 8192, max_enis=4, ipv4_per_eni=15),
    InstanceTypeInfo("c5.2xlarge", 8, 16384, max_enis=4, ipv4_per_eni=15),
    InstanceTypeInfo("m5.large", 2, 8192, max_enis=3, ipv4_per_eni=10),
    InstanceTypeInfo("m5.xlarge", 4, 16384, max_enis=4, ipv4_per_eni=15),
    InstanceTypeInfo("m5.2xlarge", 8, 32768, max_enis=4, ipv4_per_eni=15),
    InstanceTypeInfo("r5.large", 2, 16384, max_enis=3, ipv4_per_eni=10),
    InstanceTypeInfo("r5.xlarge", 4, 32768, max_enis=4, ipv4_per_eni=15),
    InstanceTypeInfo("c6g.large", 2, 4096, "arm64", max_enis=3, ipv4_per_eni=10),
    InstanceTypeInfo("m6g.large", 2, 8192, "arm64", max_enis=3, ipv4_per_eni=10),
    InstanceTypeInfo("m6g.xlarge", 4, 16384, "arm64", max_enis=4, ipv4_per_eni=15),
    InstanceTypeInfo("g4dn.xlarge", 4, 16384, max_enis=3, ipv4_per_eni=10, extended={"nvidia.com/gpu": 1}),
)
#: us-east-1 Linux on-demand, US dollars per hour (shared/data/aws-ondemand-prices.json).
ON_DEMAND_USD = {
    "t3.micro": 0.0104,
    "t3.medium": 0.0416,
    "c5.large": 0.085,
    "c5.xlarge": 0.17,
    "c5.2xlarge": 0.34,
    "m5.large": 0.096,
    "m5.xlarge": 0.192,
    "m5.2xlarge": 0.384,
    "r5.large": 0.126,
    "r5.xlarge": 0.252,
    "c6g.large": 0.068,
    "m6g.large": 0.077,
    "m6g.xlarge": 0.154,
    "g4dn.xlarge": 0.526,
}
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
FAMILIES = sorted({t.name.partition(".")[0] for t in REAL_TYPES})
TEAMS = ("red", "blue")
TIERS = ("gold", "silver", "bronze")
NAMESPACES = ("default", "team")
GPU = "nvidia.com/gpu"
CPU_LABEL = "karpenter.k8s.aws/instance-cpu"


def _pod_field_names() -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(PodView))


def topology_fields() -> frozenset[str]:
    """What of pod topology the simulation reads today: ``spread`` (topologySpreadConstraints) when
    ``PodView`` has a field about spread, ``pod-affinity`` when it has one about pod affinity."""
    names = _pod_field_names()
    out = set()
    if any("spread" in n or "topology" in n for n in names):
        out.add("spread")
    # ``PodView.topology`` (scheduling/topology.py PodTopology) holds pod (anti-)affinity terms too.
    if any("affinity" in n for n in names) or "topology" in names:
        out.add("pod-affinity")
    return frozenset(out)


#: Drawn only when the simulation reads them (see the module docstring).
TOPOLOGY = topology_fields()


@dataclass
class Problem:
    """One generated problem, as objects (``inputs()`` gives the simulation's view of them)."""

    seed: int
    catalog: list[InstanceType]
    infos: dict[str, InstanceTypeInfo]
    nodepools: list[Obj]
    daemonsets: list[Obj]
    nodes: list[Obj]
    #: Pods bound to ``nodes`` (their DaemonSet pods included).
    bound: list[Obj]
    pending: list[Obj]
    namespaces: tuple[str, ...] = NAMESPACES
    topology: frozenset[str] = field(default_factory=frozenset)

    def types(self) -> dict[str, InstanceType]:
        return {t.name: t for t in self.catalog}

    def inputs(self) -> tuple[list[PodView], list[ExistingNode], list[PoolCapacity]]:
        """The simulation's inputs, through the product's own readers of cluster objects."""
        pools, conditions = usable_pools(self.nodepools)
        bad = {n: c.message for n, c in conditions.items() if not c.is_true}
        assert not bad, f"seed {self.seed}: the generator made invalid NodePools: {bad}"
        capacity = [
            PoolCapacity(
                p,
                self.catalog,
                daemon_overhead(self.daemonsets, p),
                pool_in_use(self.nodes, p.name),
                daemon_ports(self.daemonsets, p),
            )
            for p in pools
        ]
        nodes = existing_nodes(self.nodes, self.bound, daemonsets=self.daemonsets)
        return pending_pods(self.pending), nodes, capacity

    def describe(self) -> str:
        """Enough to read a failure without re-running: the pools, nodes and pod shapes."""
        lines = [f"seed {self.seed}"]
        for p in self.nodepools:
            lines.append(f"  nodepool {p['metadata']['name']}: {p['spec']}")
        for ds in self.daemonsets:
            lines.append(f"  daemonset {ds['metadata']['name']}: {ds['spec']['template']['spec']}")
        for n in self.nodes:
            lines.append(f"  node {n['metadata']['name']}: {n['metadata']['labels']} {n['spec']}")
        for p in self.pending:
            lines.append(f"  pending {p['metadata']['namespace']}/{p['metadata']['name']}: {p['spec']}")
        return "\n".join(lines)


# -- the catalog


def catalog(rng: random.Random, kubelet: KubeletConfig | None = None) -> list[InstanceType]:
    out = []
    for info in REAL_TYPES:
        od = ON_DEMAND_USD[info.name]
        offerings = []
        for zone in ZONES:
            if rng.random() < 0.85:
                offerings.append(Offering(zone, ON_DEMAND, od, available=rng.random() > 0.1))
            if rng.random() < 0.8:
                # A spot price is usually 25-70 % of on-demand; now and then dearer than it.
                spot = od * (1.15 if rng.random() < 0.05 else rng.uniform(0.25, 0.7))
                offerings.append(Offering(zone, SPOT, round(spot, 5), available=rng.random() > 0.1))
        out.append(instance_type(info, node_resources(info, kubelet=kubelet), offerings))
    return out


# -- NodePools


def _req(key: str, op: str, values: Sequence[str] = ()) -> Obj:
    out: Obj = {"key": key, "operator": op}
    if op not in ("Exists", "DoesNotExist"):
        out["values"] = list(values)
    return out


def nodepool(rng: random.Random, name: str, min_values: random.Random | None = None) -> Obj:
    reqs: list[Obj] = []
    if rng.random() < 0.7:
        reqs.append(_req(CAPACITY_TYPE, "In", rng.choice([[SPOT, ON_DEMAND], [ON_DEMAND], [SPOT]])))
    if rng.random() < 0.5:
        reqs.append(_req(ARCH, "In", rng.choice([["amd64"], ["amd64", "arm64"], ["arm64"]])))
    if rng.random() < 0.4:
        reqs.append(_req(FAMILY, "In", rng.sample(FAMILIES, rng.randint(2, 5))))
    elif rng.random() < 0.3:
        reqs.append(_req(FAMILY, "NotIn", ["g4dn", "t3"]))
    if rng.random() < 0.3:
        reqs.append(_req(ZONE, "In", sorted(rng.sample(ZONES, rng.randint(1, 2)))))
    if rng.random() < 0.25:
        reqs.append(_req(CPU_LABEL, rng.choice(["Lt", "Gt"]), [rng.choice(["2", "4"])]))
    if rng.random() < 0.3:
        reqs.append(_req("tier", "In", rng.sample(TIERS, rng.randint(1, 2))))
    labels = {"team": rng.choice(TEAMS)} if rng.random() < 0.4 else {}
    spec: Obj = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": reqs,
    }
    if rng.random() < 0.3:
        spec["taints"] = [{"key": "dedicated", "value": name, "effect": "NoSchedule"}]
    if rng.random() < 0.2:
        spec["startupTaints"] = [{"key": "node.cilium.io/agent-not-ready", "effect": "NoExecute"}]
    pool: Obj = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"metadata": {"labels": labels}, "spec": spec}},
    }
    if min_values is not None and min_values.random() < 0.2:
        # Karpenter's minValues (core pkg/apis/v1 NodeSelectorRequirementWithMinValues): on the
        # instance type or family, one of the pool's own requirements or one of its own.
        key = min_values.choice([INSTANCE_TYPE, FAMILY])
        own = [r for r in reqs if r["key"] == key and r["operator"] == "In"]
        target = own[0] if own else _req(key, "Exists")
        if not own:
            reqs.append(target)
        # The CRD refuses an In requirement with fewer values than its minValues.
        target["minValues"] = min(min_values.randint(2, 4), len(target.get("values") or "xxxx"))
    if rng.random() < 0.5:
        pool["spec"]["weight"] = rng.randint(1, 50)
    limit = rng.random()
    if limit < 0.2:
        pool["spec"]["limits"] = {"cpu": str(rng.choice([4, 8, 16, 24]))}
    elif limit < 0.3:
        pool["spec"]["limits"] = {"nodes": str(rng.randint(1, 4))}
    elif limit < 0.4:
        pool["spec"]["limits"] = {"memory": f"{rng.choice([16, 32, 64])}Gi"}
    return pool


# -- pods


def _container(requests: Mapping[str, str], host_port: int | None = None) -> Obj:
    c: Obj = {"name": "app", "image": "nginx:1.27", "resources": {"requests": dict(requests)}}
    if host_port is not None:
        c["ports"] = [{"containerPort": host_port, "hostPort": host_port, "protocol": "TCP"}]
    return c


def _requests(rng: random.Random, *, small: bool = False) -> dict[str, str]:
    if small:
        return {"cpu": f"{rng.choice([25, 50, 100, 200])}m", "memory": f"{rng.choice([32, 64, 128, 256])}Mi"}
    out = {
        "cpu": f"{rng.choice([100, 250, 500, 750, 1000, 1500, 2000, 3500])}m",
        "memory": f"{rng.choice([100, 256, 512, 1024, 2048, 4096, 7000])}Mi",
    }
    if rng.random() < 0.1:
        out["ephemeral-storage"] = f"{rng.choice([1, 4, 12])}Gi"
    if rng.random() < 0.05:
        out[GPU] = "1"
    return out


def _selector(rng: random.Random, pools: Sequence[Obj]) -> dict[str, str]:
    choice = rng.random()
    if choice < 0.15:
        return {ZONE: rng.choice(ZONES)}
    if choice < 0.25:
        return {CAPACITY_TYPE: rng.choice([SPOT, ON_DEMAND])}
    if choice < 0.35:
        return {ARCH: rng.choice(["amd64", "arm64"])}
    if choice < 0.42:
        return {FAMILY: rng.choice(FAMILIES)}
    # Custom labels: mostly one a pool has (so the pod has somewhere to go), now and then any.
    teams = [t for p in pools if (t := p["spec"]["template"]["metadata"]["labels"].get("team"))]
    tiers = [
        v
        for p in pools
        for r in p["spec"]["template"]["spec"]["requirements"]
        if r["key"] == "tier"
        for v in r["values"]
    ]
    if choice < 0.5:
        return {"team": rng.choice(teams if teams and rng.random() < 0.8 else TEAMS)}
    if choice < 0.55:
        return {"tier": rng.choice(tiers if tiers and rng.random() < 0.8 else TIERS)}
    if choice < 0.58:
        return {"kubernetes.io/os": "linux", "karpenter.sh/nodepool": rng.choice(pools)["metadata"]["name"]}
    return {}


def _expression(rng: random.Random) -> Obj:
    return rng.choice(
        [
            _req(CPU_LABEL, "Gt", [rng.choice(["1", "2", "4"])]),
            _req(CPU_LABEL, "Lt", [rng.choice(["3", "5", "9"])]),
            _req(FAMILY, "NotIn", rng.sample(FAMILIES, 2)),
            _req(ZONE, "In", sorted(rng.sample(ZONES, 2))),
            _req(ZONE, "NotIn", [rng.choice(ZONES)]),
            _req("team", "Exists"),
            _req("team", "DoesNotExist"),
            _req("tier", "In", rng.sample(TIERS, 2)),
            _req("tier", "NotIn", [rng.choice(TIERS)]),
            _req(CAPACITY_TYPE, "In", [rng.choice([SPOT, ON_DEMAND])]),
            _req(INSTANCE_TYPE, "In", sorted(rng.sample([t.name for t in REAL_TYPES], 5))),
            _req("karpenter.k8s.aws/instance-size", "In", ["large", "xlarge"]),
        ]
    )


def _node_affinity(rng: random.Random) -> Obj:
    affinity: Obj = {}
    if rng.random() < 0.3:
        terms = [
            {"matchExpressions": [_expression(rng) for _ in range(rng.randint(1, 2))]}
            for _ in range(1 if rng.random() < 0.8 else 2)
        ]
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    if rng.random() < 0.2:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.randint(1, 100), "preference": {"matchExpressions": [_expression(rng)]}}
            for _ in range(rng.randint(1, 2))
        ]
    return affinity


def _tolerations(rng: random.Random, pools: Sequence[Obj]) -> list[Obj]:
    tainted = [p["metadata"]["name"] for p in pools if p["spec"]["template"]["spec"].get("taints")]
    if tainted and rng.random() < 0.6:
        return [
            {"key": "dedicated", "operator": "Equal", "value": rng.choice(tainted), "effect": "NoSchedule"}
        ]
    if rng.random() < 0.05:
        return [{"operator": "Exists"}]
    return []


def _topology(rng: random.Random, app: str, topology: frozenset[str]) -> Obj:
    """Spread and pod (anti-)affinity terms over the group's own label, when the simulation reads them."""
    spec: Obj = {}
    selector = {"matchLabels": {"app": app}}
    key = rng.choice([ZONE, "kubernetes.io/hostname", CAPACITY_TYPE])
    if "spread" in topology and rng.random() < 0.3:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": rng.randint(1, 2),
                "topologyKey": key,
                "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
                "labelSelector": selector,
            }
        ]
    if "pod-affinity" in topology and rng.random() < 0.25:
        kind = rng.choice(["podAffinity", "podAntiAffinity"])
        term = {"labelSelector": selector, "topologyKey": key}
        spec["affinity"] = {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return spec


def _reshape(more: random.Random, spec: Obj) -> None:
    """What changes how a pod's requests and ports are counted: an init container larger than the
    app, a sidecar (a restartable init container), pod overhead, limits without requests, a UDP or
    IP-bound host port (k8s.io/component-helpers resource.PodRequests; the NodePorts plugin)."""
    app = spec["containers"][0]
    requests = app["resources"]["requests"]
    if more.random() < 0.15:
        init = {"cpu": f"{more.choice([1000, 2000, 3000])}m", "memory": requests["memory"]}
        spec["initContainers"] = [{"name": "init", "image": "busybox:1", "resources": {"requests": init}}]
    if more.random() < 0.1:
        sidecar = {
            "name": "proxy",
            "image": "envoy:1",
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "200m", "memory": "128Mi"}},
        }
        spec.setdefault("initContainers", []).insert(0, sidecar)
    if more.random() < 0.05:
        spec["overhead"] = {"cpu": "250m", "memory": "120Mi"}
    if more.random() < 0.1:
        app["resources"] = {"limits": dict(requests)}
    if more.random() < 0.05:
        app["ports"] = [{"containerPort": 8125, "hostPort": 8125, "protocol": "UDP"}]
    elif more.random() < 0.05:
        app["ports"] = [{"containerPort": 8080, "hostPort": 8080, "hostIP": "10.0.0.1"}]


def long_type_lists(wide: random.Random, types: Sequence[InstanceType]) -> list[list[str]]:
    """Instance-type lists of six to eight values that share their five lowest: lists a display that
    shortens long lists reads alike, so a memo keyed on that text would mix the groups up (review
    speed13, finding 1). Empty for most problems."""
    names = sorted(t.name for t in types)
    if wide.random() >= 0.3 or len(names) < 8:
        return []
    # Often the five lowest names (c5, c6g, g4dn: dear ones), so the pods go to their own tails.
    cut = 5 if wide.random() < 0.5 else wide.randint(5, len(names) - 3)
    shared = wide.sample(names[:cut], 5)
    return [shared + wide.sample(names[cut:], wide.randint(1, 2)) for _ in range(3)]


REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _require_one_of(wide: random.Random, spec: Obj, lists: Sequence[list[str]]) -> None:
    """Add ``instance-type In`` one of ``lists`` to every required term of the pod (or as its one term)."""
    if not lists or wide.random() >= 0.6:
        return
    expression = _req(INSTANCE_TYPE, "In", sorted(wide.choice(lists)))
    if wide.random() < 0.5:
        # Only the list: groups that differ in nothing else are where equal texts collide.
        spec.pop("nodeSelector", None)
        spec.get("affinity", {}).get("nodeAffinity", {}).pop(REQUIRED, None)
    affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.setdefault(REQUIRED, {"nodeSelectorTerms": [{}]})
    for term in required["nodeSelectorTerms"]:
        term.setdefault("matchExpressions", []).append(expression)


def pending_group(
    rng: random.Random,
    index: int,
    pools: Sequence[Obj],
    topology: frozenset[str],
    more: random.Random | None = None,
    wide: tuple[random.Random, Sequence[list[str]]] | None = None,
) -> list[Obj]:
    """One Deployment's worth of pending pods (1-8 replicas of one template)."""
    app = f"g{index}"
    namespace = rng.choice(NAMESPACES)
    spec: Obj = {
        "containers": [_container(_requests(rng), rng.choice([8080, 9100]) if rng.random() < 0.1 else None)]
    }
    selector = _selector(rng, pools)
    if selector:
        spec["nodeSelector"] = selector
    affinity = _node_affinity(rng)
    if affinity:
        spec["affinity"] = {"nodeAffinity": affinity}
    tolerations = _tolerations(rng, pools)
    if tolerations:
        spec["tolerations"] = tolerations
    if more is not None:
        _reshape(more, spec)
    if wide is not None:
        _require_one_of(wide[0], spec, wide[1])
    extra = _topology(rng, app, topology)
    if "affinity" in extra:
        spec.setdefault("affinity", {}).update(extra.pop("affinity"))
    spec.update(extra)
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{app}-{i}",
                "namespace": namespace,
                "uid": f"{app}-{i}",
                "labels": {"app": app},
            },
            "spec": copy.deepcopy(spec),
        }
        for i in range(rng.randint(1, 8))
    ]


# -- DaemonSets and existing nodes


def daemonset(rng: random.Random, index: int) -> Obj:
    # Distinct ports per DaemonSet: two DaemonSets on one port could never both run anywhere.
    port = 9100 + index if rng.random() < 0.2 else None
    spec: Obj = {"containers": [_container(_requests(rng, small=True), port)]}
    if rng.random() < 0.3:
        spec["nodeSelector"] = {ARCH: "amd64"}
    if rng.random() < 0.4:
        spec["tolerations"] = [{"operator": "Exists"}]
    name = f"ds{index}"
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"ds": name}},
            "template": {"metadata": {"labels": {"ds": name}}, "spec": spec},
        },
    }


def existing_cluster(
    rng: random.Random, types: Sequence[InstanceType], pools: Sequence[Obj], daemonsets: Sequence[Obj]
) -> tuple[list[Obj], list[Obj]]:
    """0-3 Ready nodes (some a NodePool's) and the pods bound to them, each node within allocatable."""
    nodes: list[Obj] = []
    pods: list[Obj] = []
    infos = {i.name: i for i in REAL_TYPES}
    for i in range(rng.choice([0, 0, 1, 2, 3])):
        it = rng.choice(types)
        offerings = it.offerings or (Offering(ZONES[0], ON_DEMAND, 0.0),)
        offering = rng.choice(offerings)
        pool = rng.choice([*pools, None])
        taints: list[Obj] = []
        labels: dict[str, str] = {}
        if pool is not None:
            template = pool["spec"]["template"]
            labels = dict(template["metadata"]["labels"])
            taints = list(template["spec"].get("taints") or [])
        name = f"existing-{i}"
        node = node_object(
            name,
            infos[it.name],
            it.resources,
            offering.zone,
            offering.capacity_type,
            nodepool=None if pool is None else pool["metadata"]["name"],
            labels=labels,
            taints=taints,
        )
        if pool is not None:
            # A running node Karpenter launched carries these (core pkg/apis/v1 labels.go).
            node["metadata"]["labels"].update(
                {"karpenter.sh/registered": "true", "karpenter.sh/initialized": "true"}
            )
        nodes.append(node)
        on_node: list[Obj] = []
        for ds in daemonsets:
            dp = bound(daemon_pod(ds, name), name)
            if runs_daemon(dp, node) and not node_reasons(dp, node, on_node):
                on_node.append(dp)
        for j in range(rng.randint(0, 6)):
            p = bound(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"run-{i}-{j}", "namespace": "default", "labels": {"app": f"g{j}"}},
                    "spec": {
                        "containers": [_container(_requests(rng))],
                        "tolerations": [{"operator": "Exists"}],
                    },
                },
                name,
            )
            if not node_reasons(p, node, on_node):
                on_node.append(p)
        pods += on_node
    return nodes, pods


def generate(seed: int) -> Problem:
    rng = random.Random(seed)
    # A second stream for what was added later, so the first stream's problems (and the seeds the
    # tests pin) keep their pools, catalog and pod groups.
    more = random.Random(seed + 1_000_003)
    kubelet = KubeletConfig(max_pods=more.choice([6, 10])) if more.random() < 0.1 else None
    types = catalog(rng, kubelet)
    names = rng.sample(["alpha", "bravo", "charlie", "delta"], rng.randint(1, 3))
    # A third stream for minValues, so the seeds the tests pin keep every other draw.
    min_values = random.Random(seed + 2_000_003)
    pools = [nodepool(rng, n, min_values) for n in names]
    daemonsets = [daemonset(rng, i) for i in range(rng.randint(0, 2))]
    nodes, running = existing_cluster(rng, types, pools, daemonsets)
    for node in nodes:
        if more.random() < 0.15:
            node["spec"]["unschedulable"] = True  # cordoned: its pods stay, no new ones come
    # A fourth stream for the long instance-type lists, again keeping every other draw.
    wide = random.Random(seed + 3_000_003)
    lists = long_type_lists(wide, types)
    pending: list[Obj] = []
    for g in range(rng.randint(1, 6)):
        pending += pending_group(rng, g, pools, TOPOLOGY, more, (wide, lists))
    return Problem(
        seed,
        types,
        {i.name: i for i in REAL_TYPES},
        pools,
        daemonsets,
        nodes,
        running,
        pending,
        topology=TOPOLOGY,
    )
