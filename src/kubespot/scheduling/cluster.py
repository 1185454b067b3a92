"""From a cluster's objects (as the API returns them) to the simulation's inputs.

- Pending pods: not bound to a node, not finished, not being deleted, not a DaemonSet's (the
  DaemonSet controller places those itself) nor a static pod's (Karpenter's ``IsProvisionable``,
  ``pkg/utils/pod/scheduling.go``; Karpenter also waits for kube-scheduler to mark a pod
  Unschedulable, which a plan of what would happen does not need).
- Existing nodes: labels, taints, ``status.allocatable``, what the pods bound to them request, and
  those pods' namespaces and labels (topology spread and pod affinity count them).
- Namespaces' labels, for pod affinity terms with a ``namespaceSelector``.
- DaemonSet overhead of a NodePool: the requests of every DaemonSet whose pods would run on its
  nodes (they tolerate the pool's taints and may go where its requirements allow), as Karpenter
  reserves it on each new node.
- Zonal volumes: a pending pod's claims become node requirements (``volumes.py``), added to both
  its requirements and its strict ones (Karpenter adds them to every required term, so relaxation
  never drops them); a pod whose claims cannot be judged is left out with Karpenter's reason.
- Workloads from manifests (``kubespot plan -f``): a Deployment, ReplicaSet or StatefulSet becomes
  its replicas' pods (a Job its parallelism's), named as their controllers would name them; a
  StatefulSet's ``volumeClaimTemplates`` become each pod's claims (``<template>-<pod>``), created
  as the StatefulSet controller would when the cluster does not have them yet.

Pure: dicts in, scheduling inputs out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from kubespot.model.quantity import milli, units

from .labels import NODEPOOL, WELL_KNOWN
from .nodepool import NodePool
from .pods import PodView, pod_requests
from .requirements import Requirements
from .simulate import ExistingNode
from .taints import parse_taints, untolerated
from .volumes import UnprovisionablePod, Volumes, failed_to_schedule, volume_requirements

Obj = Mapping[str, Any]
_TERMINAL = ("Succeeded", "Failed")


def _owner_kinds(obj: Obj) -> set[str]:
    return {str(ref.get("kind")) for ref in (obj.get("metadata") or {}).get("ownerReferences") or ()}


def is_pending(pod: Obj) -> bool:
    """Waiting for a node, and one the provisioner should find capacity for."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if spec.get("nodeName") or meta.get("deletionTimestamp") or status.get("phase") in _TERMINAL:
        return False
    if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
        return False
    return not _owner_kinds(pod) & {"DaemonSet", "Node"}


def pending_pods(pods: Iterable[Obj]) -> list[PodView]:
    return [PodView.of(p) for p in pods if is_pending(p)]


def provisionable_pods(pods: Iterable[Obj], volumes: Volumes) -> tuple[list[PodView], dict[str, list[str]]]:
    """The pending pods with their volumes' requirements, and those left out with the reason."""
    out: list[PodView] = []
    left_out: dict[str, list[str]] = {}
    for pod in pods:
        if not is_pending(pod):
            continue
        view = PodView.of(pod)
        try:
            zonal = volume_requirements(pod, volumes)
        except UnprovisionablePod as exc:
            left_out[view.key] = [failed_to_schedule(exc)]
            continue
        if zonal:
            view = replace(
                view,
                requirements=_with(view.requirements, zonal),
                strict_requirements=_with(view.strict_requirements, zonal),
            )
        out.append(view)
    return out, left_out


def _with(reqs: Requirements, more: Requirements) -> Requirements:
    out = reqs.copy()
    out.add(*more.values())
    return out


def _resources(values: Mapping[str, Any] | None) -> dict[str, int]:
    return {k: milli(v) if k == "cpu" else units(v) for k, v in (values or {}).items()}


def existing_nodes(nodes: Iterable[Obj], pods: Iterable[Obj]) -> list[ExistingNode]:
    """The cluster's nodes with what their pods already request (``pods`` counts them)."""
    out: dict[str, ExistingNode] = {}
    for obj in nodes:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        # Going away or cordoned: no room for new pods, but its pods still count for topology
        # spread and pod affinity (kube-scheduler counts every node's pods).
        closed = bool(meta.get("deletionTimestamp") or spec.get("unschedulable"))
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
        )
        name = str(meta.get("name") or "")
        out[name] = ExistingNode(
            name=name,
            requirements=Requirements.from_labels(meta.get("labels") or {}),
            taints=parse_taints(spec.get("taints")),
            allocatable=_resources(status.get("allocatable")),
            initialized=ready,
            closed=closed,
        )
    for pod in pods:
        spec = pod.get("spec") or {}
        node = out.get(str(spec.get("nodeName") or ""))
        if node is None or (pod.get("status") or {}).get("phase") in _TERMINAL:
            continue
        for name, amount in pod_requests(spec).items():
            node.requested[name] = node.requested.get(name, 0) + amount
        node.requested["pods"] = node.requested.get("pods", 0) + 1
        node.ports |= PodView.of(pod).ports
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            # A terminating pod still holds its requests and ports, but topology leaves it out
            # (Karpenter's IgnoredForTopology, kube-scheduler's countPodsMatchSelector): a rollout's
            # old pods must not push the new ones to other zones.
            continue
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        node.pods.append((str(meta.get("namespace") or "default"), labels))
    return list(out.values())


def namespace_labels(namespaces: Iterable[Obj]) -> dict[str, dict[str, str]]:
    """Each namespace's labels (with ``kubernetes.io/metadata.name``, which the API server sets)."""
    out: dict[str, dict[str, str]] = {}
    for ns in namespaces:
        meta = ns.get("metadata") or {}
        name = str(meta.get("name") or "")
        out[name] = {
            "kubernetes.io/metadata.name": name,
            **{str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        }
    return out


def pool_in_use(nodes: Iterable[Obj], pool: str) -> dict[str, int]:
    """What the pool's nodes have (their capacity, and how many), counted against its limits."""
    used: dict[str, int] = {"nodes": 0}
    for node in nodes:
        meta = node.get("metadata") or {}
        if (meta.get("labels") or {}).get(NODEPOOL) != pool:
            continue
        used["nodes"] += 1
        for name, amount in _resources((node.get("status") or {}).get("capacity")).items():
            used[name] = used.get(name, 0) + amount
    return used


def _daemon_views(daemonsets: Iterable[Obj], pool: NodePool) -> list[PodView]:
    """The pods of the DaemonSets a new node of ``pool`` would run (they tolerate its taints and may
    go where its requirements allow: Karpenter's scheduler.go getDaemonOverhead)."""
    out = []
    for ds in daemonsets:
        template = ((ds.get("spec") or {}).get("template")) or {}
        view = PodView.of({"metadata": template.get("metadata") or {}, "spec": template.get("spec") or {}})
        if untolerated(pool.taints, view.tolerations):
            continue
        if pool.requirements.compatibility(view.strict_requirements, WELL_KNOWN):
            continue
        out.append(view)
    return out


def daemon_overhead(daemonsets: Iterable[Obj], pool: NodePool) -> dict[str, int]:
    """The requests of the DaemonSet pods a new node of ``pool`` would run."""
    total: dict[str, int] = {}
    for view in _daemon_views(daemonsets, pool):
        for name, amount in view.requests.items():
            total[name] = total.get(name, 0) + amount
        total["pods"] = total.get("pods", 0) + 1
    return total


def daemon_ports(daemonsets: Iterable[Obj], pool: NodePool) -> frozenset[tuple[str, str, int]]:
    """The host ports those DaemonSet pods bind on every new node of ``pool`` (Karpenter's
    scheduler.go getDaemonHostPortUsage: a pod wanting one of them cannot share the node)."""
    return frozenset(port for view in _daemon_views(daemonsets, pool) for port in view.ports)


_REPLICATED = {"Deployment", "ReplicaSet", "StatefulSet"}


def workload_pods(objs: Iterable[Obj]) -> list[dict[str, Any]]:
    """The pods ``objs`` (Pods, Deployments, ReplicaSets, StatefulSets, Jobs) would create."""
    out: list[dict[str, Any]] = []
    for obj in objs:
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        namespace = meta.get("namespace") or "default"
        if kind == "Pod":
            pod = copy.deepcopy(dict(obj))
            pod.setdefault("metadata", {}).setdefault("namespace", namespace)
            out.append(pod)
            continue
        field = "replicas" if kind in _REPLICATED else "parallelism" if kind == "Job" else None
        if field is None:
            continue
        count = spec.get(field, 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"{kind} {meta.get('name')!r}: {field} must be a whole number, got {count!r}")
        template = spec.get("template") or {}
        claims = spec.get("volumeClaimTemplates") or [] if kind == "StatefulSet" else []
        for i in range(count):
            name = f"{meta.get('name')}-{i}" if kind == "StatefulSet" else f"{meta.get('name')}-plan-{i}"
            pod_spec = copy.deepcopy(template.get("spec") or {})
            for claim in claims:
                # The StatefulSet controller's volume per template, replacing one of that name.
                claim_name = str((claim.get("metadata") or {}).get("name"))
                volumes = [v for v in pod_spec.get("volumes") or [] if v.get("name") != claim_name]
                ref = {"claimName": f"{claim_name}-{name}"}
                pod_spec["volumes"] = [*volumes, {"name": claim_name, "persistentVolumeClaim": ref}]
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        **copy.deepcopy(template.get("metadata") or {}),
                        "name": name,
                        "namespace": namespace,
                        "ownerReferences": [{"kind": kind, "name": meta.get("name")}],
                    },
                    "spec": pod_spec,
                }
            )
    return out


def workload_claims(objs: Iterable[Obj]) -> list[dict[str, Any]]:
    """The claims StatefulSets in ``objs`` would create for their pods (``<template>-<sts>-<i>``),
    unbound, from their ``volumeClaimTemplates``."""
    out: list[dict[str, Any]] = []
    for obj in objs:
        if obj.get("kind") != "StatefulSet":
            continue
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        count = spec.get("replicas", 1)
        for template in spec.get("volumeClaimTemplates") or []:
            claim = str((template.get("metadata") or {}).get("name"))
            for i in range(count if isinstance(count, int) else 0):
                out.append(
                    {
                        "apiVersion": "v1",
                        "kind": "PersistentVolumeClaim",
                        "metadata": {
                            "name": f"{claim}-{meta.get('name')}-{i}",
                            "namespace": meta.get("namespace") or "default",
                        },
                        "spec": copy.deepcopy(template.get("spec") or {}),
                    }
                )
    return out
