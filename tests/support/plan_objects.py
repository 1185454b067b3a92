"""The Kubernetes objects a scheduling plan implies, for the plan oracle (``support.plan_oracle``).

A planned NodeClaim becomes the Node Karpenter and the kubelet would register for it: its instance
type's labels as the kubelet, the cloud node controller and Karpenter's AWS provider set them, the
NodePool's template labels, a value of each other requirement (Karpenter's ``Requirements.Labels``),
the pool's taints without its startup taints, allocatable from the catalog, Ready. A DaemonSet
becomes the pod its controller would create for a node, and whether it would run there. Built from
the plan's and the catalog's facts only, never from the simulation's own node model.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kubespot.model.capacity import InstanceTypeInfo
from kubespot.scheduling.allocatable import NodeResources
from kubespot.scheduling.requirements import Requirement
from kubespot.scheduling.simulate import PlannedClaim
from kubespot.sim.kubesim.controllers.scheduler import node_reasons

if TYPE_CHECKING:
    from support.sched_problems import Problem

Obj = dict[str, Any]


FAMILY = "karpenter.k8s.aws/instance-family"


REGION = "us-east-1"


#: Label keys the kubelet, the cloud provider or the AWS provider set from the instance (Karpenter's
#: well-known labels, which ``Requirements.Labels`` leaves to them).
_FROM_INSTANCE_PREFIXES = ("kubernetes.io/", "node.kubernetes.io/", "topology.kubernetes.io/", "karpenter.")


def _quantities(values: Mapping[str, int]) -> dict[str, str]:
    return {k: f"{v}m" if k == "cpu" else str(v) for k, v in values.items()}


def instance_labels(info: InstanceTypeInfo, zone: str, capacity_type: str) -> dict[str, str]:
    """What the kubelet, the cloud node controller and Karpenter's AWS provider label a node of
    ``info`` with (aws ``pkg/providers/instancetype/types.go`` computeRequirements, the AWS
    provider's well-known labels; k8s.io/api well_known_labels.go)."""
    family, _, size = info.name.partition(".")
    match = re.match(r"([a-z]+)(\d+)", family)
    category, generation = (match.group(1), match.group(2)) if match else (family, "")
    return {
        "node.kubernetes.io/instance-type": info.name,
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": REGION,
        "karpenter.sh/capacity-type": capacity_type,
        "kubernetes.io/arch": "arm64" if info.architecture == "arm64" else "amd64",
        "kubernetes.io/os": "linux",
        FAMILY: family,
        "karpenter.k8s.aws/instance-size": size,
        "karpenter.k8s.aws/instance-category": category,
        "karpenter.k8s.aws/instance-generation": generation,
        "karpenter.k8s.aws/instance-cpu": str(info.vcpus),
        "karpenter.k8s.aws/instance-memory": str(info.memory_mib),
    }


def node_object(
    name: str,
    info: InstanceTypeInfo,
    resources: NodeResources,
    zone: str,
    capacity_type: str,
    *,
    nodepool: str | None,
    labels: Mapping[str, str],
    taints: Sequence[Obj],
) -> Obj:
    """A Ready Node of ``info`` as it registers (hostname label as the kubelet sets it)."""
    all_labels = {**labels, **instance_labels(info, zone, capacity_type), "kubernetes.io/hostname": name}
    if nodepool is not None:
        all_labels["karpenter.sh/nodepool"] = nodepool
    spec: Obj = {"taints": [dict(t) for t in taints]} if taints else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": {
            "capacity": _quantities(resources.capacity),
            "allocatable": _quantities(resources.allocatable),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def bound(pod: Obj, node: str) -> Obj:
    out = copy.deepcopy(pod)
    out["spec"]["nodeName"] = node
    return out


def pod_key(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace') or 'default'}/{pod['metadata']['name']}"


def requirement_label(req: Requirement, rng: random.Random) -> str | None:
    """A value Karpenter would label a node with for ``req`` (``Requirement.Any``: one of an In set;
    for NotIn and Exists a random integer within the bounds that is not excluded; DoesNotExist none)."""
    if not req.complement:
        return rng.choice(sorted(req.values)) if req.values else None
    low = 0 if req.gte is None else req.gte
    high = (1 << 31) if req.lte is None else req.lte
    for _ in range(100):
        value = str(rng.randint(low, high))
        if value not in req.values:
            return value
    return None


def broken_requirements(labels: Mapping[str, str], claim: PlannedClaim) -> list[str]:
    """The claim's requirements a node with ``labels`` breaks (keys it does not carry are left to
    the requirement-derived labels, checked when the node is built)."""
    out = []
    for key, req in claim.requirements.items():
        if key in labels and not req.has(labels[key]):
            out.append(f"{key}={labels[key]} not in {req}")
    return out


def offered_zones(problem: Problem, claim: PlannedClaim, type_name: str) -> list[str]:
    """The claim's zones where ``type_name`` has an available offering of its capacity type."""
    it = problem.types()[type_name]
    return sorted(
        {
            o.zone
            for o in it.offerings
            if o.available and o.capacity_type == claim.capacity_type and o.zone in claim.zones
        }
    )


def claim_node(
    problem: Problem, claim: PlannedClaim, index: int, type_name: str, zone: str, rng: random.Random
) -> tuple[Obj, list[str]]:
    """The Node a claim becomes when launched as ``type_name`` in ``zone``, and the claim's
    requirements its labels break (none, for a sound plan)."""
    it = problem.types()[type_name]
    pool = next(p for p in problem.nodepools if p["metadata"]["name"] == claim.pool)
    template = pool["spec"]["template"]
    node = node_object(
        f"claim-{index}",
        problem.infos[type_name],
        it.resources,
        zone,
        claim.capacity_type,
        nodepool=claim.pool,
        labels=template["metadata"]["labels"],
        taints=template["spec"].get("taints") or [],
    )
    labels = node["metadata"]["labels"]
    # Karpenter labels the NodeClaim with a value of every other requirement (core
    # pkg/scheduling/requirements.go Labels, skipping restricted and well-known keys).
    for key, req in sorted(claim.requirements.items()):
        if key in labels or key.startswith(_FROM_INSTANCE_PREFIXES) or "kubernetes.io/" in key:
            continue
        value = requirement_label(req, rng)
        if value is not None:
            labels[key] = value
    return node, broken_requirements(labels, claim)


def daemon_pod(ds: Obj, node: str) -> Obj:
    """The pod the DaemonSet controller would create for ``node`` (pinned to it as upstream pins them)."""
    name = ds["metadata"]["name"]
    template = ds["spec"]["template"]
    spec = copy.deepcopy(template["spec"])
    spec["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            }
        }
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{node}",
            "namespace": "kube-system",
            "labels": dict(template["metadata"]["labels"]),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": name}],
        },
        "spec": spec,
    }


def runs_daemon(pod: Obj, node: Obj) -> bool:
    """Whether the DaemonSet controller would run ``pod`` on ``node``: its taints and node affinity
    allow it (pkg/controller/daemon/daemon_controller.go NodeShouldRunDaemonPod, which leaves
    resources to the scheduler)."""
    reasons = node_reasons(pod, node, [])
    return not reasons or all(r.startswith(("Insufficient", "Too many pods")) for r in reasons)


def daemon_pods(problem: Problem, node: Obj) -> list[Obj]:
    out = []
    for ds in problem.daemonsets:
        pod = bound(daemon_pod(ds, node["metadata"]["name"]), node["metadata"]["name"])
        if runs_daemon(pod, node):
            out.append(pod)
    return out
