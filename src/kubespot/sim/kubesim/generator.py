"""Synthetic EKS-like clusters to seed kubesim with: pure functions, no I/O, deterministic per seed.

``generate_cluster`` returns complete Kubernetes objects (Namespaces, Nodes, Deployments with their
ReplicaSets, DaemonSets, one StatefulSet, PodDisruptionBudgets, bound and Running Pods) in the order
the store inserts them. The cluster looks like an EKS cluster running Karpenter-style spot and
on-demand node pools, and is internally consistent, so kubesim's controllers find nothing to do at
start: each ReplicaSet sees exactly ``replicas`` matching Ready pods, each DaemonSet one pod per node,
every PDB's status matches its pods, and every pod fits its node's allocatable resources.

Objects are lean (no managedFields, service-account token volumes or image lists) because the store
keeps them as dicts: 100 000 pods must fit in the simulator's memory budget. No two objects share a
mutable dict or list (the store mutates objects in place); they do share immutable strings.
"""

from __future__ import annotations

import gc
import hashlib
import math
import random
import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import accumulate
from typing import Any

from kubespot.sim.kubesim import conventions
from kubespot.sim.kubesim.instance_types import (
    INSTANCE_TYPES,
    ON_DEMAND_FAMILIES,
    SPOT_FAMILIES,
    InstanceType,
)

Obj = dict[str, Any]

#: Priority of the classes generated pods use. The two system classes are Kubernetes built-ins; the
#: user classes are what a cluster running spot capacity typically defines. PriorityClass objects are
#: not generated (kubesim does not serve them), so whoever creates pods from these templates should
#: resolve ``priorityClassName`` with this table.
PRIORITY_CLASSES: dict[str, int] = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
    "high-priority": 1_000_000,
    "low-priority": -10,
}

#: DaemonSets ``ClusterSpec.daemonsets`` may name (the EKS add-ons plus a common monitoring agent).
KNOWN_DAEMONSETS: tuple[str, ...] = (
    "aws-node",
    "kube-proxy",
    "ebs-csi-node",
    "eks-pod-identity-agent",
    "node-exporter",
)

#: Insertion order of kinds: owners before what they own, namespaces before their contents.
KIND_ORDER: tuple[str, ...] = (
    "Namespace",
    "PriorityClass",
    "Node",
    "Deployment",
    "ReplicaSet",
    "DaemonSet",
    "StatefulSet",
    "PodDisruptionBudget",
    "Pod",
)

_APP_NAMESPACES = ("shop", "payments", "search", "analytics", "platform", "batch", "web", "data")
_APP_NOUNS = (
    "api", "web", "worker", "gateway", "cart", "checkout", "catalog", "search", "auth", "billing",
    "orders", "inventory", "notifications", "recommendations", "reports", "ingest", "frontend",
    "backend", "scheduler", "cache", "pricing", "profile", "media", "events",
)  # fmt: skip
_APP_QUALIFIERS = ("v2", "internal", "public", "canary", "sync", "export", "consumer", "admin")
_BARE_POD_NAMES = ("debug-shell", "netshoot", "db-migrate-manual", "load-test-runner", "tmp-psql")
_SIDECARS = (
    ("envoy", "public.ecr.aws/appmesh/aws-appmesh-envoy:v1.29.12.1-prod", 9901),
    ("fluent-bit", "public.ecr.aws/aws-observability/aws-for-fluent-bit:2.32.5", 0),
)
# Consonant/digit alphabet Kubernetes uses for generated name suffixes and template hashes.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_ECR_ACCOUNT = "602401143452"  # the account EKS add-on images come from in most regions
_APP_ACCOUNT = "123456789012"
_KUBELET_VERSION = "v1.32.3-eks-473151a"
_OS_IMAGE = "Amazon Linux 2023.7.20250414"
_KERNEL = "6.1.132-147.221.amzn2023"
_CONTAINERD = "containerd://1.7.27"
_ROOT_VOLUME_KI = 20_959_212  # kubelet-reported capacity of the default 20 GiB root volume

# App resource menus (millicores, MiB). Small on purpose: 20 pods of these fit a 2xlarge node.
_CPU_MENU = (25, 50, 100, 100, 150, 200, 250, 500)
_MEM_MENU = (64, 128, 128, 256, 256, 512, 768, 1024)
_GRACE_CHOICES = (30, 0, 10, 60, 120)
_GRACE_WEIGHTS = (0.6, 0.05, 0.1, 0.15, 0.1)
# The scheduler would not pack nodes fuller than this on average; leaves room for replacements.
_TARGET_UTILISATION = 0.7

_ZONE_RE = re.compile(r"^([a-z]{2}(?:-[a-z]+)+-\d+)[a-z]$")
_MAX_ZONES = 16  # each zone owns 16 /16s of 10.0.0.0/8 for node and pod IPs

_NOT_READY_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
)
_DAEMONSET_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)


@dataclass(frozen=True)
class ClusterSpec:
    """What to generate. Every field has a default that makes a small, realistic cluster.

    ``nodes``: number of Nodes. ``pods_per_node``: workload pods (everything but DaemonSet pods) per
    node on average; the total is exactly ``nodes * pods_per_node`` whenever that is at least the
    fixed system workloads (coredns, the StatefulSet, the bare pods), else those alone.
    ``spot_fraction``: share of nodes that are spot (rounded). ``zones``: availability zones nodes
    are spread over round-robin (at most 16, same region). ``seed``: the whole output is a function
    of the spec, the seed and ``now``.
    """

    nodes: int = 10
    pods_per_node: int = 20
    spot_fraction: float = 0.7
    zones: tuple[str, ...] = ("us-east-1a", "us-east-1b", "us-east-1c")
    seed: int = 0
    #: Application namespaces besides default and kube-system.
    app_namespaces: int = 4
    #: Application Deployments; None picks about one per 15 application pods.
    deployments: int | None = None
    #: DaemonSets to run on every node, from ``KNOWN_DAEMONSETS``.
    daemonsets: tuple[str, ...] = ("aws-node", "kube-proxy")
    #: Share of Deployments with at least 2 replicas that get a PodDisruptionBudget.
    pdb_fraction: float = 0.8
    #: Share of those PDBs that allow no disruption at all (drains block on them). Also gives some
    #: single-replica Deployments a ``minAvailable: 1`` PDB, the classic real-world blocker.
    blocking_pdb_fraction: float = 0.0
    #: Share of Deployments whose pods carry ``conventions.SHUTDOWN_SECONDS`` (slow shutdown).
    slow_shutdown_fraction: float = 0.1
    #: Share of Deployments whose pods mount an emptyDir volume.
    emptydir_fraction: float = 0.2
    #: Pods of the single StatefulSet (pinned to on-demand nodes when there are any); 0: none.
    statefulset_replicas: int = 3
    #: Pods without an owner.
    bare_pods: int = 3
    #: Node ``pods`` capacity; None uses the EKS default for the type (ENI limit), 110 mimics prefix
    #: delegation.
    max_pods: int | None = None

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")
        if self.pods_per_node < 0:
            raise ValueError(f"pods_per_node must be >= 0, got {self.pods_per_node}")
        for name in (
            "spot_fraction",
            "pdb_fraction",
            "blocking_pdb_fraction",
            "slow_shutdown_fraction",
            "emptydir_fraction",
        ):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {value}")
        if not self.zones or len(self.zones) > _MAX_ZONES:
            raise ValueError(f"zones must name 1 to {_MAX_ZONES} availability zones, got {len(self.zones)}")
        regions = set()
        for zone in self.zones:
            m = _ZONE_RE.match(zone)
            if m is None:
                raise ValueError(f"not an availability zone name: {zone!r}")
            regions.add(m.group(1))
        if len(regions) != 1:
            raise ValueError(f"zones must all be in one region, got {sorted(regions)}")
        if len(set(self.zones)) != len(self.zones):
            raise ValueError("zones must be distinct")
        unknown = [d for d in self.daemonsets if d not in KNOWN_DAEMONSETS]
        if unknown or len(set(self.daemonsets)) != len(self.daemonsets):
            raise ValueError(
                f"daemonsets must be distinct names from {KNOWN_DAEMONSETS}, got {self.daemonsets}"
            )
        if self.deployments is not None and self.deployments < 0:
            raise ValueError(f"deployments must be >= 0, got {self.deployments}")
        if self.app_namespaces < 1:
            raise ValueError(f"app_namespaces must be >= 1, got {self.app_namespaces}")
        if self.statefulset_replicas < 0 or self.bare_pods < 0:
            raise ValueError("statefulset_replicas and bare_pods must be >= 0")
        if self.max_pods is not None and self.max_pods < 1:
            raise ValueError(f"max_pods must be >= 1, got {self.max_pods}")

    @property
    def region(self) -> str:
        m = _ZONE_RE.match(self.zones[0])
        assert m is not None  # checked in __post_init__
        return m.group(1)


def generate_cluster(spec: ClusterSpec, *, now: datetime) -> list[Obj]:
    """All objects of the cluster ``spec`` describes, as it would look at ``now``, in insertion order.

    Naive ``now`` is taken as UTC. Raises ValueError when the spec's pods cannot fit its nodes.
    """
    # The objects are acyclic, so the cycle collector only burns time rescanning the growing heap
    # (it more than doubles the run time at 100 000 pods).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return list(iter_cluster(spec, now=now))
    finally:
        if was_enabled:
            gc.enable()


def iter_cluster(spec: ClusterSpec, *, now: datetime) -> Iterator[Obj]:
    """Like ``generate_cluster`` but yields objects one by one, so a loader never holds two copies.

    Placement is decided before the first object is yielded, so spec errors surface on first ``next``.
    """
    return _Generator(spec, now).objects()


# --------------------------------------------------------------------------------------------------
# Internal records. Pods are built from a blueprint by the same function that builds the owner's pod
# template, which is what keeps owned pods and templates identical.


@dataclass(slots=True)
class _Container:
    name: str
    image: str
    image_id: str
    cpu_m: int = 0
    mem_mi: int = 0
    cpu_limit_m: int = 0
    mem_limit_mi: int = 0
    port: int = 0
    port_name: str = "http"
    mounts: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class _Blueprint:
    labels: dict[str, str]
    containers: list[_Container]
    grace: int = 30
    annotations: dict[str, str] = field(default_factory=dict)
    volumes: tuple[tuple[str, str | None], ...] = ()  # emptyDir (name, sizeLimit)
    priority_class: str | None = None
    service_account: str = "default"
    host_network: bool = False
    tolerate_all: bool = False
    extra_tolerations: tuple[tuple[str, str], ...] = ()  # (key, effect), operator Exists
    node_selector: tuple[tuple[str, str], ...] = ()

    @property
    def cpu_m(self) -> int:
        return sum(c.cpu_m for c in self.containers)

    @property
    def mem_mi(self) -> int:
        return sum(c.mem_mi for c in self.containers)

    def qos_class(self) -> str:
        if not any(c.cpu_m or c.mem_mi or c.cpu_limit_m or c.mem_limit_mi for c in self.containers):
            return "BestEffort"
        guaranteed = all(
            c.cpu_limit_m and c.mem_limit_mi and c.cpu_limit_m == c.cpu_m and c.mem_limit_mi == c.mem_mi
            for c in self.containers
        )
        return "Guaranteed" if guaranteed else "Burstable"


@dataclass(slots=True)
class _Node:
    index: int
    name: str
    ip: int
    zone: int
    capacity_type: str  # spot | on-demand
    itype: InstanceType
    created: int
    cpu_m: int  # allocatable
    mem_mi: int
    pods: int
    free_cpu: int = 0
    free_mem: int = 0
    free_pods: int = 0


@dataclass(slots=True)
class _Workload:
    kind: str  # Deployment | StatefulSet | DaemonSet | Pod (bare)
    name: str
    namespace: str
    bp: _Blueprint
    replicas: int
    created: int
    uid: str
    selector: dict[str, str]
    labels: dict[str, str]
    template_hash: str = ""
    rs_name: str = ""
    rs_uid: str = ""
    pdb: tuple[str, int | str] | None = None  # (minAvailable | maxUnavailable, value)
    placements: list[int] = field(default_factory=list)
    qos: str = ""


@dataclass(slots=True)
class _DaemonSetDef:
    namespace: str
    image: str
    cpu_m: int
    mem_mi: int
    grace: int
    host_network: bool
    priority_class: str | None
    tolerate_all: bool
    label_key: str


def _daemonset_defs(region: str) -> dict[str, _DaemonSetDef]:
    ecr = f"{_ECR_ACCOUNT}.dkr.ecr.{region}.amazonaws.com"
    return {
        "aws-node": _DaemonSetDef(
            "kube-system", f"{ecr}/amazon-k8s-cni:v1.19.4-eksbuild.1", 25, 0, 10, True,
            "system-node-critical", True, "k8s-app",
        ),
        "kube-proxy": _DaemonSetDef(
            "kube-system", f"{ecr}/eks/kube-proxy:v1.32.3-minimal-eksbuild.7", 100, 0, 30, True,
            "system-node-critical", True, "k8s-app",
        ),
        "ebs-csi-node": _DaemonSetDef(
            "kube-system", f"{ecr}/eks/aws-ebs-csi-driver:v1.42.0", 10, 40, 30, False,
            "system-node-critical", True, "app",
        ),
        "eks-pod-identity-agent": _DaemonSetDef(
            "kube-system", f"{ecr}/eks/eks-pod-identity-agent:v0.1.21", 25, 32, 30, True,
            "system-node-critical", True, "app.kubernetes.io/name",
        ),
        "node-exporter": _DaemonSetDef(
            "monitoring", "quay.io/prometheus/node-exporter:v1.9.1", 50, 64, 30, True, None, True,
            "app.kubernetes.io/name",
        ),
    }  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Small helpers.


def _cpu(m: int) -> str:
    return str(m // 1000) if m % 1000 == 0 else f"{m}m"


def _mem(mi: int) -> str:
    return f"{mi // 1024}Gi" if mi % 1024 == 0 else f"{mi}Mi"


def _ip_str(ip: int) -> str:
    return f"{ip >> 24}.{(ip >> 16) & 255}.{(ip >> 8) & 255}.{ip & 255}"


def _image_id(image: str) -> str:
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def _eks_reserved_cpu_m(vcpu: int) -> int:
    # The EKS AMI's kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of the next
    # two, 0.25% of the rest.
    reserved = 60.0
    if vcpu > 1:
        reserved += 10
    reserved += 5 * max(0, min(vcpu, 4) - 2)
    reserved += 2.5 * max(0, vcpu - 4)
    return math.ceil(reserved)


class _Clock:
    """RFC 3339 timestamps from epoch seconds, caching the date part (datetime per call is slow)."""

    def __init__(self) -> None:
        self._days: dict[int, str] = {}

    def __call__(self, ts: int) -> str:
        day, sec = divmod(ts, 86400)
        prefix = self._days.get(day)
        if prefix is None:
            prefix = datetime.fromtimestamp(day * 86400, UTC).strftime("%Y-%m-%dT")
            self._days[day] = prefix
        return f"{prefix}{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}Z"


# --------------------------------------------------------------------------------------------------
# Object builders (fresh dicts on every call).


def _container_spec(c: _Container) -> Obj:
    out: Obj = {
        "image": c.image,
        "imagePullPolicy": "IfNotPresent",
        "name": c.name,
    }
    if c.port:
        out["ports"] = [{"containerPort": c.port, "name": c.port_name, "protocol": "TCP"}]
    resources: Obj = {}
    if c.cpu_limit_m or c.mem_limit_mi:
        limits: dict[str, str] = {}
        if c.cpu_limit_m:
            limits["cpu"] = _cpu(c.cpu_limit_m)
        if c.mem_limit_mi:
            limits["memory"] = _mem(c.mem_limit_mi)
        resources["limits"] = limits
    if c.cpu_m or c.mem_mi:
        requests: dict[str, str] = {}
        if c.cpu_m:
            requests["cpu"] = _cpu(c.cpu_m)
        if c.mem_mi:
            requests["memory"] = _mem(c.mem_mi)
        resources["requests"] = requests
    out["resources"] = resources
    out["terminationMessagePath"] = "/dev/termination-log"
    out["terminationMessagePolicy"] = "File"
    if c.mounts:
        out["volumeMounts"] = [{"mountPath": path, "name": name} for name, path in c.mounts]
    return out


def _name_uid(name: str) -> str:
    h = hashlib.sha256(name.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"


def _pod_spec(bp: _Blueprint) -> Obj:
    """The pod spec of a template, with the defaults the API server fills in."""
    spec: Obj = {"containers": [_container_spec(c) for c in bp.containers]}
    spec["dnsPolicy"] = "ClusterFirstWithHostNet" if bp.host_network else "ClusterFirst"
    if bp.host_network:
        spec["hostNetwork"] = True
    if bp.node_selector:
        spec["nodeSelector"] = dict(bp.node_selector)
    if bp.priority_class:
        spec["priorityClassName"] = bp.priority_class
    spec["restartPolicy"] = "Always"
    spec["schedulerName"] = "default-scheduler"
    spec["securityContext"] = {}
    spec["serviceAccount"] = bp.service_account
    spec["serviceAccountName"] = bp.service_account
    spec["terminationGracePeriodSeconds"] = bp.grace
    tolerations: list[Obj] = []
    if bp.tolerate_all:
        tolerations.append({"operator": "Exists"})
    for key, effect in bp.extra_tolerations:
        tolerations.append(
            {"effect": effect, "key": key, "operator": "Exists"}
            if effect
            else {"key": key, "operator": "Exists"}
        )
    if tolerations:
        spec["tolerations"] = tolerations
    if bp.volumes:
        spec["volumes"] = [
            {"emptyDir": {"sizeLimit": size} if size else {}, "name": name} for name, size in bp.volumes
        ]
    return spec


def _template(bp: _Blueprint, extra_labels: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"labels": {**bp.labels, **extra_labels} if extra_labels else dict(bp.labels)}
    if bp.annotations:
        meta["annotations"] = dict(bp.annotations)
    return {"metadata": meta, "spec": _pod_spec(bp)}


def _pod_condition(type_: str, at: str) -> Obj:
    return {"lastProbeTime": None, "lastTransitionTime": at, "status": "True", "type": type_}


def _owner(api_version: str, kind: str, name: str, uid: str) -> list[Obj]:
    return [
        {
            "apiVersion": api_version,
            "blockOwnerDeletion": True,
            "controller": True,
            "kind": kind,
            "name": name,
            "uid": uid,
        }
    ]


def _pdb_numbers(rule: tuple[str, int | str], replicas: int) -> tuple[int, int]:
    """(desiredHealthy, disruptionsAllowed) the disruption controller computes with all pods ready."""
    field_name, value = rule
    # Percentages are scaled rounding up, as the disruption controller does.
    scaled = math.ceil(int(value.rstrip("%")) * replicas / 100) if isinstance(value, str) else value
    desired = scaled if field_name == "minAvailable" else max(0, replicas - scaled)
    return desired, max(0, replicas - desired)


# --------------------------------------------------------------------------------------------------


class _Generator:
    def __init__(self, spec: ClusterSpec, now: datetime) -> None:
        self.spec = spec
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        self.now = int(now.timestamp())
        self.rng = random.Random(spec.seed)
        self.ts = _Clock()
        self.region = spec.region
        self.dns_suffix = "ec2.internal" if self.region == "us-east-1" else f"{self.region}.compute.internal"
        self.app_ecr = f"{_APP_ACCOUNT}.dkr.ecr.{self.region}.amazonaws.com"
        self.used_ips: set[int] = set()
        self.pod_names: set[str] = set()
        self.nodes: list[_Node] = []
        self.workloads: list[_Workload] = []
        self.daemonsets: list[_Workload] = []
        self.namespaces: list[str] = []
        # Per node: instance id, machine id, system UUID, boot id (drawn with the node, used later).
        self.node_extras: list[tuple[str, str, str, str]] = []

    # -- identifiers -----------------------------------------------------------------------------

    def uid(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"

    def suffix(self, n: int) -> str:
        x = self.rng.getrandbits(64)
        chars = []
        for _ in range(n):
            x, r = divmod(x, 27)
            chars.append(_NAME_ALPHABET[r])
        return "".join(chars)

    def ip(self, zone: int) -> int:
        base = (10 << 24) | ((zone * 16) << 16)
        while True:
            ip = base + self.rng.getrandbits(20)
            if 0 < (ip & 255) < 255 and ip not in self.used_ips:
                self.used_ips.add(ip)
                return ip

    def unique_pod_name(self, namespace: str, prefix: str) -> str:
        while True:
            name = prefix + self.suffix(5)
            key = f"{namespace}/{name}"
            if key not in self.pod_names:
                self.pod_names.add(key)
                return name

    # -- plan ------------------------------------------------------------------------------------

    def objects(self) -> Iterator[Obj]:
        self.plan()
        yield from self.namespace_objects()
        yield from self.priority_class_objects()
        yield from (self.node_object(n) for n in self.nodes)
        deployments = [w for w in self.workloads if w.kind == "Deployment"]
        yield from (self.deployment_object(w) for w in deployments)
        yield from (self.replicaset_object(w) for w in deployments)
        yield from (self.daemonset_object(w) for w in self.daemonsets)
        yield from (self.statefulset_object(w) for w in self.workloads if w.kind == "StatefulSet")
        yield from (self.pdb_object(w) for w in self.workloads if w.pdb is not None)
        for ds in self.daemonsets:
            for node in self.nodes:
                yield self.pod_object(ds, node, 0)
        for w in self.workloads:
            for ordinal, node_index in enumerate(w.placements):
                yield self.pod_object(w, self.nodes[node_index], ordinal)

    def plan(self) -> None:
        spec = self.spec
        rng = self.rng
        ds_defs = _daemonset_defs(self.region)
        ds_cpu = sum(ds_defs[d].cpu_m for d in spec.daemonsets)
        ds_mem = sum(ds_defs[d].mem_mi for d in spec.daemonsets)
        self.make_nodes(ds_cpu, ds_mem)

        self.namespaces = ["default", "kube-system"]
        for i in range(spec.app_namespaces):
            self.namespaces.append(_APP_NAMESPACES[i] if i < len(_APP_NAMESPACES) else f"team-{i + 1}")
        if any(ds_defs[d].namespace == "monitoring" for d in spec.daemonsets):
            self.namespaces.append("monitoring")
        app_ns = self.namespaces[2 : 2 + spec.app_namespaces]

        for name in spec.daemonsets:
            self.daemonsets.append(self.make_daemonset(name, ds_defs[name]))

        total = spec.nodes * spec.pods_per_node
        if total > 0:
            self.workloads.append(self.make_coredns())
            if spec.statefulset_replicas:
                self.workloads.append(self.make_statefulset(app_ns[0]))
            fixed = sum(w.replicas for w in self.workloads) + spec.bare_pods
            self.make_app_deployments(app_ns, max(0, total - fixed))
            for i in range(spec.bare_pods):
                ns = "default" if i % 2 == 0 else app_ns[i % len(app_ns)]
                self.workloads.append(self.make_bare_pod(i, ns))
        self.scale_app_requests()
        for w in (*self.daemonsets, *self.workloads):
            w.qos = w.bp.qos_class()
        self.place(rng)

    def make_nodes(self, ds_cpu: int, ds_mem: int) -> None:
        spec = self.spec
        rng = self.rng
        n_spot = round(spec.nodes * spec.spot_fraction)
        # Node sizes: the smallest types with room for pods_per_node average pods plus DaemonSets at
        # the target utilisation; a sidecar adds about 10% to the app menu averages.
        avg_cpu = 1.1 * sum(_CPU_MENU) / len(_CPU_MENU)
        avg_mem = 1.1 * sum(_MEM_MENU) / len(_MEM_MENU)
        need_cpu = (spec.pods_per_node * avg_cpu + ds_cpu) / _TARGET_UTILISATION
        need_mem = (spec.pods_per_node * avg_mem + ds_mem) / _TARGET_UTILISATION
        need_pods = math.ceil(spec.pods_per_node * 1.6) + len(spec.daemonsets) + 2
        choices: dict[str, list[InstanceType]] = {}
        for fam in (*SPOT_FAMILIES, *ON_DEMAND_FAMILIES):
            types = [t for t in INSTANCE_TYPES.values() if t.family == fam]
            fits = [
                t
                for t in types
                if t.vcpu * 1000 - _eks_reserved_cpu_m(t.vcpu) >= need_cpu
                and t.memory_mib * 0.85 >= need_mem
                and (spec.max_pods or t.max_pods) >= need_pods
            ]
            choices[fam] = fits[:3] or types[-1:]
        size_weights = (0.55, 0.3, 0.15)
        spot_capacity_order = list(range(spec.nodes))
        rng.shuffle(spot_capacity_order)
        is_spot = [False] * spec.nodes
        for i in spot_capacity_order[:n_spot]:
            is_spot[i] = True
        for i in range(spec.nodes):
            spot = is_spot[i]
            fam = rng.choice(SPOT_FAMILIES if spot else ON_DEMAND_FAMILIES)
            options = choices[fam]
            itype = rng.choices(options, weights=size_weights[: len(options)])[0]
            zone = i % len(spec.zones)
            ip = self.ip(zone)
            age = rng.randint(3600, 7 * 86400) if spot else rng.randint(2 * 86400, 60 * 86400)
            max_pods = spec.max_pods or itype.max_pods
            cap_mem_ki = int(itype.memory_mib * 1024 * 0.947)
            alloc_mem_ki = cap_mem_ki - (11 * max_pods + 255 + 100) * 1024
            cpu = itype.vcpu * 1000 - _eks_reserved_cpu_m(itype.vcpu)
            node = _Node(
                index=i,
                name=f"ip-{_ip_str(ip).replace('.', '-')}.{self.dns_suffix}",
                ip=ip,
                zone=zone,
                capacity_type="spot" if spot else "on-demand",
                itype=itype,
                created=self.now - age,
                cpu_m=cpu,
                mem_mi=alloc_mem_ki // 1024,
                pods=max_pods,
            )
            node.free_cpu = node.cpu_m - ds_cpu
            node.free_mem = node.mem_mi - ds_mem
            node.free_pods = node.pods - len(spec.daemonsets)
            self.nodes.append(node)
        self.node_extras = [(self.instance_id(), self.uid(), self.uid(), self.uid()) for _ in self.nodes]

    def instance_id(self) -> str:
        return f"i-0{self.rng.getrandbits(64):016x}"

    def make_daemonset(self, name: str, d: _DaemonSetDef) -> _Workload:
        container = _Container(
            name=name,
            image=d.image,
            image_id=_image_id(d.image),
            cpu_m=d.cpu_m,
            mem_mi=d.mem_mi,
            port=9100 if name == "node-exporter" else 0,
            port_name="metrics",
        )
        labels = {d.label_key: name}
        bp = _Blueprint(
            labels=dict(labels),
            containers=[container],
            grace=d.grace,
            priority_class=d.priority_class,
            service_account=name,
            host_network=d.host_network,
            tolerate_all=d.tolerate_all,
        )
        created = self.now - self.rng.randint(200 * 86400, 400 * 86400)
        return _Workload(
            "DaemonSet",
            name,
            d.namespace,
            bp,
            len(self.nodes),
            created,
            self.uid(),
            labels,
            dict(labels),
            template_hash=self.suffix(10),
        )

    def make_coredns(self) -> _Workload:
        image = f"{_ECR_ACCOUNT}.dkr.ecr.{self.region}.amazonaws.com/eks/coredns:v1.11.4-eksbuild.10"
        labels = {"eks.amazonaws.com/component": "coredns", "k8s-app": "kube-dns"}
        bp = _Blueprint(
            labels=dict(labels),
            containers=[
                _Container(
                    "coredns",
                    image,
                    _image_id(image),
                    cpu_m=100,
                    mem_mi=70,
                    mem_limit_mi=170,
                    port=53,
                    port_name="dns",
                )
            ],
            priority_class="system-cluster-critical",
            service_account="coredns",
            extra_tolerations=(
                ("CriticalAddonsOnly", ""),
                ("node-role.kubernetes.io/control-plane", "NoSchedule"),
            ),
        )
        w = self.deployment("coredns", "kube-system", bp, 2, self.now - self.rng.randint(200, 400) * 86400)
        w.pdb = ("maxUnavailable", 1)
        return w

    def make_statefulset(self, namespace: str) -> _Workload:
        replicas = self.spec.statefulset_replicas
        image = "public.ecr.aws/docker/library/postgres:16.8"
        labels = {"app.kubernetes.io/name": "postgres", "app.kubernetes.io/component": "database"}
        on_demand = any(n.capacity_type == "on-demand" for n in self.nodes)
        bp = _Blueprint(
            labels=dict(labels),
            containers=[
                _Container(
                    "postgres",
                    image,
                    _image_id(image),
                    cpu_m=250,
                    mem_mi=512,
                    cpu_limit_m=250,
                    mem_limit_mi=512,
                    port=5432,
                    port_name="postgres",
                    mounts=(("data", "/var/lib/postgresql/data"),),
                )
            ],
            grace=120,
            annotations={conventions.SHUTDOWN_SECONDS: "45"},
            volumes=(("data", "10Gi"),),
            priority_class="high-priority",
            service_account="postgres",
            # Databases stay off spot capacity in most clusters that use it.
            node_selector=(("karpenter.sh/capacity-type", "on-demand"),) if on_demand else (),
        )
        created = self.now - self.rng.randint(30, 120) * 86400
        w = _Workload(
            "StatefulSet",
            "postgres",
            namespace,
            bp,
            replicas,
            created,
            self.uid(),
            dict(labels),
            dict(labels),
            template_hash=f"postgres-{self.suffix(10)}",
        )
        if replicas >= 2:
            w.pdb = ("maxUnavailable", 1)
        return w

    def deployment(self, name: str, namespace: str, bp: _Blueprint, replicas: int, created: int) -> _Workload:
        template_hash = self.suffix(10)
        selector = {k: v for k, v in bp.labels.items() if k in ("app", "k8s-app")} or dict(bp.labels)
        uid = self.uid()
        return _Workload(
            "Deployment",
            name,
            namespace,
            bp,
            replicas,
            created,
            uid,
            selector,
            dict(bp.labels),
            template_hash=template_hash,
            rs_name=f"{name}-{template_hash}",
            rs_uid=self.uid(),
        )

    def make_app_deployments(self, namespaces: Sequence[str], pods: int) -> None:
        spec = self.spec
        rng = self.rng
        if pods <= 0:
            return
        count = spec.deployments if spec.deployments is not None else max(1, pods // 15)
        count = min(count, pods)
        if count == 0:
            return
        # Heavy-tailed replica counts like real clusters: most small, a few large.
        weights = [min(rng.paretovariate(1.2), 60.0) for _ in range(count)]
        scale = pods / sum(weights)
        replicas = [max(1, int(w * scale)) for w in weights]
        diff = pods - sum(replicas)
        while diff > 0:
            replicas[rng.randrange(count)] += 1
            diff -= 1
        if diff < 0:
            for i in sorted(range(count), key=lambda i: -replicas[i]):
                take = min(-diff, replicas[i] - 1)
                replicas[i] -= take
                diff += take
                if diff == 0:
                    break
        used: set[tuple[str, str]] = set()
        on_demand_pods = sum(n.free_pods for n in self.nodes if n.capacity_type == "on-demand")
        pinned_budget = on_demand_pods // 4
        for i in range(count):
            ns = namespaces[i % len(namespaces)]
            name = self.app_name(ns, used)
            r = replicas[i]
            bp = self.app_blueprint(name, ns)
            if bp.priority_class == "high-priority" and r <= pinned_budget:
                # Business-critical services pinned to on-demand, as spot clusters often do.
                bp.node_selector = (("karpenter.sh/capacity-type", "on-demand"),)
                pinned_budget -= r
            w = self.deployment(name, ns, bp, r, self.now - rng.randint(3 * 3600, 120 * 86400))
            w.pdb = self.app_pdb(r)
            self.workloads.append(w)

    def app_name(self, namespace: str, used: set[tuple[str, str]]) -> str:
        rng = self.rng
        base = rng.choice(_APP_NOUNS)
        if rng.random() < 0.5:
            base = f"{base}-{rng.choice(_APP_QUALIFIERS)}"
        name = base
        n = 2
        while (namespace, name) in used:
            name = f"{base}-{n}"
            n += 1
        used.add((namespace, name))
        return name

    def app_blueprint(self, name: str, namespace: str) -> _Blueprint:
        spec = self.spec
        rng = self.rng
        tag = f"v{rng.randint(1, 4)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
        image = f"{self.app_ecr}/{namespace}/{name}:{tag}"
        cpu = rng.choice(_CPU_MENU)
        mem = rng.choice(_MEM_MENU)
        qos = rng.random()
        main = _Container(name, image, _image_id(image), port=rng.choice((8080, 8080, 80, 3000, 9090)))
        containers = [main]
        if rng.random() < 0.2:
            sc_name, sc_image, sc_port = rng.choice(_SIDECARS)
            containers.append(
                _Container(sc_name, sc_image, _image_id(sc_image), port=sc_port, port_name="admin")
            )
        for c in containers:
            c_cpu, c_mem = (cpu, mem) if c is main else (50, 64)
            if qos < 0.08:
                continue  # BestEffort
            c.cpu_m, c.mem_mi = c_cpu, c_mem
            if qos < 0.28:  # Guaranteed
                c.cpu_limit_m, c.mem_limit_mi = c_cpu, c_mem
            elif rng.random() < 0.7:  # Burstable, the common memory-limit-only style
                c.mem_limit_mi = c_mem * 2
        bp = _Blueprint(labels={"app": name, "app.kubernetes.io/name": name}, containers=containers)
        bp.grace = rng.choices(_GRACE_CHOICES, weights=_GRACE_WEIGHTS)[0]
        if rng.random() < spec.emptydir_fraction:
            vol = rng.choice((("cache", None), ("tmp", "1Gi"), ("scratch", "500Mi")))
            bp.volumes = (vol,)
            main.mounts = ((vol[0], f"/{vol[0]}"),)
        p = rng.random()
        if p < 0.08:
            bp.priority_class = "high-priority"
        elif p < 0.13:
            bp.priority_class = "low-priority"
        if rng.random() < 0.3:
            bp.annotations["prometheus.io/scrape"] = "true"
        if rng.random() < spec.slow_shutdown_fraction and bp.grace > 0:
            # Either a slow but finishing shutdown, or one that uses the whole grace period.
            slow = rng.choice((max(1, bp.grace // 3), bp.grace + 30))
            bp.annotations[conventions.SHUTDOWN_SECONDS] = str(slow)
        if rng.random() < 0.3:
            bp.service_account = name
        return bp

    def app_pdb(self, replicas: int) -> tuple[str, int | str] | None:
        rng = self.rng
        spec = self.spec
        blocking = rng.random() < spec.blocking_pdb_fraction
        if replicas < 2:
            return ("minAvailable", 1) if blocking and rng.random() < spec.pdb_fraction else None
        if rng.random() >= spec.pdb_fraction:
            return None
        if blocking:
            return rng.choice((("maxUnavailable", 0), ("minAvailable", "100%"), ("minAvailable", replicas)))
        return rng.choice(
            (("minAvailable", 1), ("minAvailable", "50%"), ("maxUnavailable", 1), ("maxUnavailable", "25%"))
        )

    def make_bare_pod(self, i: int, namespace: str) -> _Workload:
        rng = self.rng
        base = _BARE_POD_NAMES[i % len(_BARE_POD_NAMES)]
        name = base if i < len(_BARE_POD_NAMES) else f"{base}-{i // len(_BARE_POD_NAMES)}"
        image = rng.choice(
            (
                "public.ecr.aws/docker/library/busybox:1.37",
                "docker.io/nicolaka/netshoot:v0.13",
                "public.ecr.aws/docker/library/postgres:16.8",
            )
        )
        c = _Container("main", image, _image_id(image), cpu_m=rng.choice((0, 50, 100)), mem_mi=64)
        bp = _Blueprint(labels={"run": name}, containers=[c], grace=rng.choice((0, 30, 10)))
        if i % 2 == 1:
            bp.volumes = (("work", None),)
            c.mounts = (("work", "/work"),)
        created = self.now - rng.randint(600, 3 * 86400)
        return _Workload("Pod", name, namespace, bp, 1, created, "", {}, dict(bp.labels))

    def scale_app_requests(self) -> None:
        """Shrink workload requests (templates and pods alike) when the nodes cannot hold them all."""
        cap_cpu = sum(n.free_cpu for n in self.nodes)
        cap_mem = sum(n.free_mem for n in self.nodes)
        need_cpu = sum(w.bp.cpu_m * w.replicas for w in self.workloads)
        need_mem = sum(w.bp.mem_mi * w.replicas for w in self.workloads)
        f_cpu = min(1.0, _TARGET_UTILISATION * cap_cpu / need_cpu) if need_cpu else 1.0
        f_mem = min(1.0, _TARGET_UTILISATION * cap_mem / need_mem) if need_mem else 1.0
        if f_cpu == 1.0 and f_mem == 1.0:
            return
        for w in self.workloads:
            for c in w.bp.containers:
                if c.cpu_m:
                    c.cpu_m = max(1, int(c.cpu_m * f_cpu))
                    c.cpu_limit_m = max(c.cpu_m, int(c.cpu_limit_m * f_cpu)) if c.cpu_limit_m else 0
                if c.mem_mi:
                    c.mem_mi = max(1, int(c.mem_mi * f_mem))
                    c.mem_limit_mi = max(c.mem_mi, int(c.mem_limit_mi * f_mem)) if c.mem_limit_mi else 0

    def place(self, rng: random.Random) -> None:
        """Bind every workload pod to a node with room, weighted by node size (a scheduler's spread)."""
        nodes = self.nodes
        all_idx = list(range(len(nodes)))
        candidates_cache: dict[tuple[tuple[str, str], ...], tuple[list[int], list[int]]] = {}

        def candidates(selector: tuple[tuple[str, str], ...]) -> tuple[list[int], list[int]]:
            if selector not in candidates_cache:
                idx = all_idx
                for key, value in selector:
                    if key != "karpenter.sh/capacity-type":
                        raise AssertionError(f"unsupported generated node selector {key}")
                    idx = [i for i in idx if nodes[i].capacity_type == value]
                candidates_cache[selector] = (idx, list(accumulate(nodes[i].cpu_m for i in idx)))
            return candidates_cache[selector]

        # Constrained workloads first so the unconstrained ones cannot crowd them out.
        for w in sorted(self.workloads, key=lambda w: not w.bp.node_selector):
            idx, cum = candidates(w.bp.node_selector)
            if not idx:
                raise ValueError(f"no node matches the node selector of {w.kind} {w.namespace}/{w.name}")
            cpu, mem = w.bp.cpu_m, w.bp.mem_mi
            total = cum[-1]
            for _ in range(w.replicas):
                start = bisect_right(cum, rng.random() * total)
                start = min(start, len(idx) - 1)
                for probe in range(len(idx)):
                    node = nodes[idx[(start + probe) % len(idx)]]
                    if node.free_pods > 0 and node.free_cpu >= cpu and node.free_mem >= mem:
                        node.free_pods -= 1
                        node.free_cpu -= cpu
                        node.free_mem -= mem
                        w.placements.append(node.index)
                        break
                else:
                    raise ValueError(
                        f"cluster spec does not fit: no node has room for a pod of {w.kind} "
                        f"{w.namespace}/{w.name} ({cpu}m CPU, {mem}Mi); use more nodes or fewer pods per node"
                    )

    # -- objects ---------------------------------------------------------------------------------

    def priority_class_objects(self) -> Iterator[Obj]:
        """The cluster's own classes (the system ones come with every API server): pods created from
        the workloads' templates name them, and admission refuses a class that does not exist."""
        created = self.ts(self.now - 400 * 86400)
        for name, value in PRIORITY_CLASSES.items():
            if name.startswith("system-"):
                continue
            yield {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                # A uid of its own, not from the seeded stream, so every other object's stays as it was.
                "metadata": {
                    "annotations": {},
                    "creationTimestamp": created,
                    "labels": {},
                    "name": name,
                    "uid": _name_uid(name),
                },
                "value": value,
                "globalDefault": False,
                "preemptionPolicy": "PreemptLowerPriority",
            }

    def namespace_objects(self) -> Iterator[Obj]:
        created = self.ts(self.now - 400 * 86400)
        for name in self.namespaces:
            yield {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "annotations": {},
                    "creationTimestamp": created,
                    "labels": {"kubernetes.io/metadata.name": name},
                    "name": name,
                    "uid": self.uid(),
                },
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }

    def node_object(self, n: _Node) -> Obj:
        spec = self.spec
        t = n.itype
        instance_id, machine_id, system_uuid, boot_id = self.node_extras[n.index]
        zone = spec.zones[n.zone]
        spot = n.capacity_type == "spot"
        ip = _ip_str(n.ip)
        created = self.ts(n.created)
        ready = self.ts(n.created + 25)
        now = self.ts(self.now - 7)
        arch_kernel = "aarch64" if t.arch == "arm64" else "x86_64"
        cap_mem_ki = int(t.memory_mib * 1024 * 0.947)
        labels = {
            "beta.kubernetes.io/arch": t.arch,
            "beta.kubernetes.io/instance-type": t.name,
            "beta.kubernetes.io/os": "linux",
            "eks.amazonaws.com/capacityType": "SPOT" if spot else "ON_DEMAND",
            "failure-domain.beta.kubernetes.io/region": self.region,
            "failure-domain.beta.kubernetes.io/zone": zone,
            "karpenter.k8s.aws/instance-category": t.family[0],
            "karpenter.k8s.aws/instance-cpu": str(t.vcpu),
            "karpenter.k8s.aws/instance-family": t.family,
            "karpenter.k8s.aws/instance-generation": "".join(ch for ch in t.family if ch.isdigit()),
            "karpenter.k8s.aws/instance-memory": str(t.memory_mib),
            "karpenter.k8s.aws/instance-size": t.size,
            "karpenter.sh/capacity-type": n.capacity_type,
            "karpenter.sh/initialized": "true",
            "karpenter.sh/nodepool": n.capacity_type,
            "karpenter.sh/registered": "true",
            conventions.INSTANCE_ID_LABEL: instance_id,
            "kubernetes.io/arch": t.arch,
            "kubernetes.io/hostname": n.name,
            "kubernetes.io/os": "linux",
            "lifecycle": "Ec2Spot" if spot else "OnDemand",
            "node.kubernetes.io/instance-type": t.name,
            "node.kubernetes.io/lifecycle": "spot" if spot else "on-demand",
            "topology.kubernetes.io/region": self.region,
            "topology.kubernetes.io/zone": zone,
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "annotations": {
                    "alpha.kubernetes.io/provided-node-ip": ip,
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                },
                "creationTimestamp": created,
                "labels": labels,
                "name": n.name,
                "uid": self.uid(),
            },
            "spec": {"providerID": f"aws:///{zone}/{instance_id}"},
            "status": {
                "addresses": [
                    {"address": ip, "type": "InternalIP"},
                    {"address": n.name, "type": "InternalDNS"},
                    {"address": n.name, "type": "Hostname"},
                ],
                "allocatable": {
                    "cpu": _cpu(n.cpu_m),
                    "ephemeral-storage": str(int(_ROOT_VOLUME_KI * 1024 * 0.9) - 1_000_000_000),
                    "hugepages-1Gi": "0",
                    "hugepages-2Mi": "0",
                    "memory": f"{n.mem_mi * 1024}Ki",
                    "pods": str(n.pods),
                },
                "capacity": {
                    "cpu": str(t.vcpu),
                    "ephemeral-storage": f"{_ROOT_VOLUME_KI}Ki",
                    "hugepages-1Gi": "0",
                    "hugepages-2Mi": "0",
                    "memory": f"{cap_mem_ki}Ki",
                    "pods": str(n.pods),
                },
                "conditions": [
                    {
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": created,
                        "message": "kubelet has sufficient memory available",
                        "reason": "KubeletHasSufficientMemory",
                        "status": "False",
                        "type": "MemoryPressure",
                    },
                    {
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": created,
                        "message": "kubelet has no disk pressure",
                        "reason": "KubeletHasNoDiskPressure",
                        "status": "False",
                        "type": "DiskPressure",
                    },
                    {
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": created,
                        "message": "kubelet has sufficient PID available",
                        "reason": "KubeletHasSufficientPID",
                        "status": "False",
                        "type": "PIDPressure",
                    },
                    {
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": ready,
                        "message": "kubelet is posting ready status",
                        "reason": "KubeletReady",
                        "status": "True",
                        "type": "Ready",
                    },
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "architecture": t.arch,
                    "bootID": boot_id,
                    "containerRuntimeVersion": _CONTAINERD,
                    "kernelVersion": f"{_KERNEL}.{arch_kernel}",
                    "kubeProxyVersion": "",
                    "kubeletVersion": _KUBELET_VERSION,
                    "machineID": machine_id.replace("-", ""),
                    "operatingSystem": "linux",
                    "osImage": _OS_IMAGE,
                    "systemUUID": "ec2" + system_uuid[3:],
                },
            },
        }

    def deployment_object(self, w: _Workload) -> Obj:
        created = self.ts(w.created)
        progressed = self.ts(w.created + 40)
        r = w.replicas
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "annotations": {"deployment.kubernetes.io/revision": "1"},
                "creationTimestamp": created,
                "generation": 1,
                "labels": dict(w.labels),
                "name": w.name,
                "namespace": w.namespace,
                "uid": w.uid,
            },
            "spec": {
                "progressDeadlineSeconds": 600,
                "replicas": r,
                "revisionHistoryLimit": 10,
                "selector": {"matchLabels": dict(w.selector)},
                "strategy": {
                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
                    "type": "RollingUpdate",
                },
                "template": _template(w.bp),
            },
            "status": {
                "availableReplicas": r,
                "conditions": [
                    {
                        "lastTransitionTime": progressed,
                        "lastUpdateTime": progressed,
                        "message": "Deployment has minimum availability.",
                        "reason": "MinimumReplicasAvailable",
                        "status": "True",
                        "type": "Available",
                    },
                    {
                        "lastTransitionTime": created,
                        "lastUpdateTime": progressed,
                        "message": f'ReplicaSet "{w.rs_name}" has successfully progressed.',
                        "reason": "NewReplicaSetAvailable",
                        "status": "True",
                        "type": "Progressing",
                    },
                ],
                "observedGeneration": 1,
                "readyReplicas": r,
                "replicas": r,
                "updatedReplicas": r,
            },
        }

    def replicaset_object(self, w: _Workload) -> Obj:
        r = w.replicas
        hash_label = {"pod-template-hash": w.template_hash}
        return {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "annotations": {
                    "deployment.kubernetes.io/desired-replicas": str(r),
                    "deployment.kubernetes.io/max-replicas": str(r + math.ceil(r * 0.25)),
                    "deployment.kubernetes.io/revision": "1",
                },
                "creationTimestamp": self.ts(w.created + 1),
                "generation": 1,
                "labels": {**w.bp.labels, **hash_label},
                "name": w.rs_name,
                "namespace": w.namespace,
                "ownerReferences": _owner("apps/v1", "Deployment", w.name, w.uid),
                "uid": w.rs_uid,
            },
            "spec": {
                "replicas": r,
                "selector": {"matchLabels": {**w.selector, **hash_label}},
                "template": _template(w.bp, hash_label),
            },
            "status": {
                "availableReplicas": r,
                "fullyLabeledReplicas": r,
                "observedGeneration": 1,
                "readyReplicas": r,
                "replicas": r,
            },
        }

    def daemonset_object(self, w: _Workload) -> Obj:
        n = len(self.nodes)
        return {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "annotations": {"deprecated.daemonset.template.generation": "1"},
                "creationTimestamp": self.ts(w.created),
                "generation": 1,
                "labels": dict(w.labels),
                "name": w.name,
                "namespace": w.namespace,
                "uid": w.uid,
            },
            "spec": {
                "revisionHistoryLimit": 10,
                "selector": {"matchLabels": dict(w.selector)},
                "template": _template(w.bp),
                "updateStrategy": {
                    "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
                    "type": "RollingUpdate",
                },
            },
            "status": {
                "currentNumberScheduled": n,
                "desiredNumberScheduled": n,
                "numberAvailable": n,
                "numberMisscheduled": 0,
                "numberReady": n,
                "observedGeneration": 1,
                "updatedNumberScheduled": n,
            },
        }

    def statefulset_object(self, w: _Workload) -> Obj:
        r = w.replicas
        return {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {
                "annotations": {},
                "creationTimestamp": self.ts(w.created),
                "generation": 1,
                "labels": dict(w.labels),
                "name": w.name,
                "namespace": w.namespace,
                "uid": w.uid,
            },
            "spec": {
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                "podManagementPolicy": "OrderedReady",
                "replicas": r,
                "revisionHistoryLimit": 10,
                "selector": {"matchLabels": dict(w.selector)},
                "serviceName": w.name,
                "template": _template(w.bp),
                "updateStrategy": {"rollingUpdate": {"partition": 0}, "type": "RollingUpdate"},
            },
            "status": {
                "availableReplicas": r,
                "collisionCount": 0,
                "currentReplicas": r,
                "currentRevision": w.template_hash,
                "observedGeneration": 1,
                "readyReplicas": r,
                "replicas": r,
                "updateRevision": w.template_hash,
                "updatedReplicas": r,
            },
        }

    def pdb_object(self, w: _Workload) -> Obj:
        assert w.pdb is not None
        desired, allowed = _pdb_numbers(w.pdb, w.replicas)
        field_name, value = w.pdb
        created = self.ts(w.created)
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "annotations": {},
                "creationTimestamp": created,
                "generation": 1,
                "labels": dict(w.labels),
                "name": w.name,
                "namespace": w.namespace,
                "uid": self.uid(),
            },
            "spec": {field_name: value, "selector": {"matchLabels": dict(w.selector)}},
            "status": {
                "conditions": [
                    {
                        "lastTransitionTime": self.ts(w.created + 60),
                        "message": "",
                        "observedGeneration": 1,
                        "reason": "SufficientPods" if allowed else "InsufficientPods",
                        "status": "True" if allowed else "False",
                        "type": "DisruptionAllowed",
                    }
                ],
                "currentHealthy": w.replicas,
                "desiredHealthy": desired,
                "disruptionsAllowed": allowed,
                "expectedPods": w.replicas,
                "observedGeneration": 1,
            },
        }

    def pod_object(self, w: _Workload, node: _Node, ordinal: int) -> Obj:
        rng = self.rng
        bp = w.bp
        ns = w.namespace
        labels = dict(bp.labels)
        spec = _pod_spec(bp)
        owner: list[Obj] | None
        if w.kind == "Deployment":
            labels["pod-template-hash"] = w.template_hash
            prefix = f"{w.rs_name}-"
            name = self.unique_pod_name(ns, prefix)
            owner = _owner("apps/v1", "ReplicaSet", w.rs_name, w.rs_uid)
        elif w.kind == "DaemonSet":
            labels["controller-revision-hash"] = w.template_hash
            labels["pod-template-generation"] = "1"
            prefix = f"{w.name}-"
            name = self.unique_pod_name(ns, prefix)
            owner = _owner("apps/v1", "DaemonSet", w.name, w.uid)
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node.name]}
                                ]
                            }
                        ]
                    }
                }
            }
        elif w.kind == "StatefulSet":
            prefix = ""
            name = f"{w.name}-{ordinal}"
            labels["apps.kubernetes.io/pod-index"] = str(ordinal)
            labels["controller-revision-hash"] = w.template_hash
            labels["statefulset.kubernetes.io/pod-name"] = name
            owner = _owner("apps/v1", "StatefulSet", w.name, w.uid)
            spec["hostname"] = name
            spec["subdomain"] = w.name
        else:
            prefix = ""
            name = w.name
            owner = None
        spec["enableServiceLinks"] = True
        spec["nodeName"] = node.name
        spec["preemptionPolicy"] = "PreemptLowerPriority"
        spec["priority"] = PRIORITY_CLASSES.get(bp.priority_class or "", 0)
        # Admission (DefaultTolerationSeconds) or the DaemonSet controller add these to every pod.
        tolerations = spec.setdefault("tolerations", [])
        if w.kind == "DaemonSet":
            for key, effect in _DAEMONSET_TOLERATIONS:
                tolerations.append({"effect": effect, "key": key, "operator": "Exists"})
            if bp.host_network:
                tolerations.append(
                    {
                        "effect": "NoSchedule",
                        "key": "node.kubernetes.io/network-unavailable",
                        "operator": "Exists",
                    }
                )
        elif not bp.tolerate_all:
            for key, effect in _NOT_READY_TOLERATIONS:
                tolerations.append(
                    {"effect": effect, "key": key, "operator": "Exists", "tolerationSeconds": 300}
                )

        lo = max(w.created, node.created) + 30
        hi = max(lo, self.now - 60)
        t0 = lo + int(rng.random() * (hi - lo))
        created = self.ts(t0)
        started = self.ts(t0 + 2)
        ready = self.ts(t0 + 3 + rng.getrandbits(3))
        host_ip = _ip_str(node.ip)
        pod_ip = host_ip if bp.host_network else _ip_str(self.ip(node.zone))
        statuses = [
            {
                "containerID": f"containerd://{rng.getrandbits(256):064x}",
                "image": c.image,
                "imageID": c.image_id,
                "lastState": {},
                "name": c.name,
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": started}},
            }
            for c in sorted(bp.containers, key=lambda c: c.name)
        ]
        meta: Obj = {
            "annotations": dict(bp.annotations),
            "creationTimestamp": created,
        }
        if prefix:
            meta["generateName"] = prefix
        meta["labels"] = labels
        meta["name"] = name
        meta["namespace"] = ns
        if owner is not None:
            meta["ownerReferences"] = owner
        meta["uid"] = self.uid()
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": spec,
            "status": {
                "conditions": [
                    _pod_condition("PodReadyToStartContainers", started),
                    _pod_condition("Initialized", created),
                    _pod_condition("Ready", ready),
                    _pod_condition("ContainersReady", ready),
                    _pod_condition("PodScheduled", created),
                ],
                "containerStatuses": statuses,
                "hostIP": host_ip,
                "hostIPs": [{"ip": host_ip}],
                "phase": "Running",
                "podIP": pod_ip,
                "podIPs": [{"ip": pod_ip}],
                "qosClass": w.qos,
                "startTime": created,
            },
        }
