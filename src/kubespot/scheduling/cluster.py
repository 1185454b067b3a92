"""From a cluster's objects (as the API returns them) to the simulation's inputs.

- Pending pods: not bound to a node, not finished, not being deleted, not a DaemonSet's (the
  DaemonSet controller places those itself) nor a static pod's (Karpenter's ``IsProvisionable``,
  ``pkg/utils/pod/scheduling.go``; Karpenter also waits for kube-scheduler to mark a pod
  Unschedulable, which a plan of what would happen does not need).
- Existing nodes: labels, taints, ``status.allocatable``, what the pods bound to them request, and
  those pods' namespaces and labels (topology spread and pod affinity count them); read as
  Karpenter's cluster state reads them: NodeClaims without a registered Node count as nodes, a
  starting managed node is judged without its ephemeral and startup taints, a cordoned node by its
  ``node.kubernetes.io/unschedulable`` taint, and each keeps room for the DaemonSet pods to come.
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
from dataclasses import dataclass, replace
from typing import Any

from kubespot.model.quantity import milli, units

from .labels import INSTANCE_TYPE, NODEPOOL, WELL_KNOWN
from .nodepool import NodePool
from .pods import PodView, pod_requests
from .requirements import Requirements
from .simulate import ExistingNode
from .taints import EPHEMERAL_TAINT_PREFIXES, EPHEMERAL_TAINTS, Taint, parse_taints, untolerated
from .topology import required_anti_terms
from .volumes import UnprovisionablePod, Volumes, failed_to_schedule, volume_requirements

Obj = Mapping[str, Any]
_TERMINAL = ("Succeeded", "Failed")
_REGISTERED = "karpenter.sh/registered"
_INITIALIZED = "karpenter.sh/initialized"
_INSTANCE_TERMINATING = "InstanceTerminating"


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


def claim_node_names(nodes: Iterable[Obj], nodeclaims: Iterable[Obj]) -> list[str]:
    """Each NodeClaim's Node name, in the claims' order ("": none yet): the Node ``status.nodeName``
    names, else the Node whose
    ``spec.providerID`` is the claim's ``status.providerID``. Karpenter's cluster state keys a Node
    and its NodeClaim by provider ID (``state/cluster.go`` ``UpdateNode``/``UpdateNodeClaim``), so
    the two are one state node from the Node's registration on, before the claim's ``Registered``
    write sets ``nodeName``; counting them apart in that window doubles the capacity."""
    names: set[str] = set()
    by_provider: dict[str, str] = {}
    for n in nodes:
        name = str((n.get("metadata") or {}).get("name") or "")
        names.add(name)
        provider = str((n.get("spec") or {}).get("providerID") or "")
        if provider:
            by_provider[provider] = name
    out: list[str] = []
    for claim in nodeclaims:
        status = claim.get("status") or {}
        name = str(status.get("nodeName") or "")
        if name not in names:
            name = by_provider.get(str(status.get("providerID") or ""), "")
        out.append(name)
    return out


@dataclass(frozen=True, slots=True)
class StateNode:
    """A Node and its NodeClaim taken as one (Karpenter's ``state/statenode.go`` ``StateNode``):
    the claim alone before its Node exists, the Node alone when no claim owns it. What it is
    comes from the claim until the Node can say: its labels (``Labels``) until the Node is
    registered, and the zero or missing figures of its capacity (``Capacity``) until it is
    initialized (a GPU node reports ``nvidia.com/gpu: 0`` until its device plugin is up)."""

    node: Obj | None
    claim: Obj | None

    @property
    def managed(self) -> bool:
        """Karpenter v1's ``Managed``: a NodeClaim owns it. A Node carrying the NodePool label but
        no claim is not (v0.32 also went by the label): it counts as initialized and keeps its
        taints, so a dead orphan's ``unreachable`` taint still keeps pods off it."""
        return self.claim is not None

    @property
    def registered(self) -> bool:
        """Karpenter's ``Registered``: a managed node once its Node carries the registered label."""
        return not self.managed or _labels_of(self.node).get(_REGISTERED) == "true"

    @property
    def initialized(self) -> bool:
        """Karpenter's ``Initialized``: the Node's initialized label, whatever the claim says."""
        return not self.managed or _labels_of(self.node).get(_INITIALIZED) == "true"

    @property
    def deleting(self) -> bool:
        """Karpenter's ``Deleted`` (the part of ``MarkedForDeletion`` objects can say): a managed
        node by its NodeClaim alone (being deleted, or ``InstanceTerminating`` True), a Node no
        claim owns by its own deletion. A Node deleted before its claim (``kubectl delete node``,
        held by its finalizer) is not deleted yet: the claim still stands for the capacity."""
        if self.claim is not None:
            return bool(_meta_of(self.claim).get("deletionTimestamp")) or _condition_true(
                self.claim, _INSTANCE_TERMINATING
            )
        return bool(_meta_of(self.node).get("deletionTimestamp"))

    def labels(self) -> Mapping[str, Any]:
        if self.claim is not None and not self.registered:
            return _labels_of(self.claim)
        return _labels_of(self.node)

    def capacity(self) -> dict[str, int]:
        claimed = capacity_of(self.claim)
        if self.node is None:
            return claimed
        out = capacity_of(self.node)
        if self.claim is not None and not self.initialized:
            for k, v in claimed.items():
                if not out.get(k):
                    out[k] = v
        return out


def _meta_of(obj: Obj | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _labels_of(obj: Obj | None) -> Mapping[str, Any]:
    return _meta_of(obj).get("labels") or {}


def _condition_true(obj: Obj, type_: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return any(
        isinstance(c, Mapping) and c.get("type") == type_ and c.get("status") == "True" for c in conditions
    )


def capacity_of(obj: Obj | None) -> dict[str, int]:
    """An object's ``status.capacity`` in milli-CPU and units; a figure nobody can read counts
    as missing."""
    values = ((obj or {}).get("status") or {}).get("capacity")
    out: dict[str, int] = {}
    if not isinstance(values, Mapping):
        return out
    for k, v in values.items():
        try:
            out[str(k)] = milli(v) if k == "cpu" else units(v)
        except ValueError:
            continue
    return out


def state_nodes(nodes: Iterable[Obj], nodeclaims: Iterable[Obj]) -> list[StateNode]:
    """Every claim with its Node (``claim_node_names``), in the claims' order, then the Nodes no
    claim owns: what Karpenter's cluster state holds."""
    node_list = list(nodes)
    claim_list = list(nodeclaims)
    by_name = {str((n.get("metadata") or {}).get("name") or ""): n for n in node_list}
    out: list[StateNode] = []
    owned: set[str] = set()
    for claim, name in zip(claim_list, claim_node_names(node_list, claim_list), strict=True):
        node = by_name.get(name) if name else None
        if node is not None:
            owned.add(name)
        out.append(StateNode(node, claim))
    out.extend(StateNode(n, None) for name, n in by_name.items() if name not in owned)
    return out


def _resources(values: Mapping[str, Any] | None) -> dict[str, int]:
    return {k: milli(v) if k == "cpu" else units(v) for k, v in (values or {}).items()}


#: What the node lifecycle controller adds to a cordoned node (TaintNodesByCondition); the
#: scheduler's NodeUnschedulable filter lets pods tolerating it in.
_CORDONED = Taint("node.kubernetes.io/unschedulable", "NoSchedule")


def _starting_taints(taints: Iterable[Taint], startup: Iterable[Taint]) -> tuple[Taint, ...]:
    """``taints`` without the ephemeral and startup ones (``MatchTaint``: key and effect)."""
    gone = {(t.key, t.effect) for t in (*EPHEMERAL_TAINTS, *startup)}
    return tuple(
        t for t in taints if (t.key, t.effect) not in gone and not t.key.startswith(EPHEMERAL_TAINT_PREFIXES)
    )


def _claim_allocatable(claim: Obj, type_allocatable: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """A NodeClaim's ``status.allocatable``, or its instance type's when it has none yet."""
    out = _resources((claim.get("status") or {}).get("allocatable"))
    labels = (claim.get("metadata") or {}).get("labels") or {}
    name = labels.get(INSTANCE_TYPE)
    if name is None:
        # Launched: its requirements name the one type (before the launch they name many, and
        # Karpenter knows no allocatable yet either).
        chosen = Requirements.from_selector((claim.get("spec") or {}).get("requirements") or []).get(
            INSTANCE_TYPE
        )
        if chosen is not None and not chosen.complement and len(chosen.values) == 1:
            name = next(iter(chosen.values))
    known = type_allocatable.get(str(name or ""), {})
    return {**known, **{k: v for k, v in out.items() if v}}


def existing_nodes(
    nodes: Iterable[Obj],
    pods: Iterable[Obj],
    *,
    nodeclaims: Iterable[Obj] = (),
    daemonsets: Iterable[Obj] = (),
    type_allocatable: Mapping[str, Mapping[str, int]] | None = None,
) -> list[ExistingNode]:
    """The cluster's nodes, and its NodeClaims not registered as a node yet, with what their pods
    already request (``pods`` counts them) and what DaemonSet pods still to come will.

    As Karpenter's cluster state (``state/statenode.go``): a node is managed when a NodeClaim or
    the ``karpenter.sh/nodepool`` label says so, and initialized (managed ones only once labelled
    ``karpenter.sh/initialized``); a managed node not yet initialized is judged without its
    ephemeral and startup taints (``Taints``), by its NodeClaim's taints until it registers, and
    with the NodeClaim's allocatable where the node reports none (``Allocatable``)."""
    type_allocatable = type_allocatable or {}
    node_list = list(nodes)
    claim_list = list(nodeclaims)
    node_of = claim_node_names(node_list, claim_list)
    claims_by_node = {n: c for c, n in zip(claim_list, node_of, strict=True) if n}
    # A claim being deleted (``StateNode.deleting``, which the limits go by too) takes no pods:
    # Karpenter's provisioner hands its scheduler ``nodes.Active()`` only.
    in_flight = [
        c for c, n in zip(claim_list, node_of, strict=True) if not n and not StateNode(None, c).deleting
    ]
    out: dict[str, ExistingNode] = {}
    for obj in node_list:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        labels = meta.get("labels") or {}
        name = str(meta.get("name") or "")
        own = claims_by_node.get(name)
        managed = own is not None  # Karpenter v1's Managed (see StateNode.managed)
        initialized = not managed or labels.get(_INITIALIZED) == "true"
        claim_spec: Obj = (own.get("spec") or {}) if own is not None else {}
        registered = not managed or labels.get(_REGISTERED) == "true"
        taints = parse_taints(
            claim_spec.get("taints") if own is not None and not registered else spec.get("taints")
        )
        if spec.get("unschedulable") and _CORDONED not in taints:
            taints = (*taints, _CORDONED)
        allocatable = _resources(status.get("allocatable"))
        if not initialized:
            taints = _starting_taints(taints, parse_taints(claim_spec.get("startupTaints")))
            if own is not None:
                # Zero or missing figures of a starting node come from its NodeClaim.
                for k, v in _claim_allocatable(own, type_allocatable).items():
                    if not allocatable.get(k):
                        allocatable[k] = v
        out[name] = ExistingNode(
            name=name,
            # statenode.go Labels: the claim's until the Node registers (a kubelet not given the
            # claim's labels, as with custom user data, must not lose its pool and capacity type).
            requirements=Requirements.from_labels(
                (own.get("metadata") or {}).get("labels") or {}
                if own is not None and not registered
                else labels
            ),
            taints=taints,
            allocatable=allocatable,
            initialized=initialized,
            # Going away: no room for new pods, but its pods still count for topology spread and
            # pod affinity (kube-scheduler counts every node's pods). A cordoned node is not
            # closed: its taint keeps off the pods that do not tolerate it. Going away is
            # ``StateNode.deleting`` (Karpenter's ``Deleted``: its NodeClaim being deleted), the
            # definition the limits go by (``pools_in_use``), so a node they no longer count is
            # never filled (``provisioner.go`` ``Schedule`` hands the scheduler ``nodes.Active()``),
            # or a Node being deleted itself (its claim still counts it: Karpenter's termination
            # controller taints it ``karpenter.sh/disrupted:NoSchedule`` while it drains).
            closed=bool(meta.get("deletionTimestamp")) or StateNode(obj, own).deleting,
        )
    for claim in in_flight:
        # Launched (or launching) but not registered: Karpenter's cluster state holds it as a
        # node of its requirements and labels, which pods are tried on before new capacity.
        meta = claim.get("metadata") or {}
        claim_spec = claim.get("spec") or {}
        name = str(meta.get("name") or "")
        requirements = Requirements.from_selector(claim_spec.get("requirements") or [])
        requirements.add(*Requirements.from_labels(meta.get("labels") or {}).values())
        out[name] = ExistingNode(
            name=name,
            requirements=requirements,
            taints=_starting_taints(
                parse_taints(claim_spec.get("taints")), parse_taints(claim_spec.get("startupTaints"))
            ),
            allocatable=_claim_allocatable(claim, type_allocatable),
            initialized=False,
        )
    node_daemons: dict[str, dict[str, int]] = {}
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
        node.anti += required_anti_terms(spec, str(meta.get("namespace") or "default"), labels)
        if "DaemonSet" in _owner_kinds(pod):
            daemon = node_daemons.setdefault(node.name, {})
            for name, amount in pod_requests(spec).items():
                daemon[name] = daemon.get(name, 0) + amount
            daemon["pods"] = daemon.get("pods", 0) + 1
    views = [_template_view(ds) for ds in daemonsets]
    for node in out.values():
        _reserve_daemons(node, views, node_daemons.get(node.name, {}))
    return list(out.values())


def _template_view(ds: Obj) -> PodView:
    template = ((ds.get("spec") or {}).get("template")) or {}
    return PodView.of({"metadata": template.get("metadata") or {}, "spec": template.get("spec") or {}})


def _reserve_daemons(node: ExistingNode, views: Iterable[PodView], bound: Mapping[str, int]) -> None:
    """Reserve on ``node`` what the DaemonSet pods it would run but does not yet request (Karpenter's
    ``existingnode.go`` ``NewExistingNode``: the compatible daemons' requests less those already
    bound there, none below zero; ``scheduler.go`` ``getCompatibleDaemonPods``)."""
    total: dict[str, int] = {}
    for view in views:
        if untolerated(node.taints, view.tolerations):
            continue
        if node.requirements.compatibility(view.strict_requirements, frozenset()):
            continue
        for name, amount in view.requests.items():
            total[name] = total.get(name, 0) + amount
        total["pods"] = total.get("pods", 0) + 1
    for name, amount in total.items():
        still = amount - bound.get(name, 0)
        if still > 0:
            node.requested[name] = node.requested.get(name, 0) + still


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


def pools_in_use(nodes: Iterable[Obj], nodeclaims: Iterable[Obj] = ()) -> dict[str, dict[str, int]]:
    """Every NodePool's usage, by name: the capacity of its state nodes (``state_nodes``) that are
    not being deleted, and how many (``nodes``); a pool with none is absent.

    As Karpenter v1.11+ (``state/statenode.go`` ``Capacity``: a state node always has a capacity
    of one node; ``state/cluster.go`` ``updateNodePoolResources``, and ``provisioner.go``
    ``Schedule`` handing the scheduler ``nodes.Active()`` for ``scheduler.go``
    ``updateRemainingResources``): a node being deleted (``StateNode.deleting``) counts neither in
    the NodePool's status nor against its limits, so a pool at its limit may replace a node that is
    going. A state node is its pool's by its ``Labels`` (a Node not registered yet: its claim's)
    and counts its ``Capacity`` (a starting node's zero figures: its claim's).

    A NodeClaim not launched yet counts as one node with no resources. Karpenter's cluster state
    holds no such claim (it keys state nodes by provider ID), but its provisioner and its NodePool
    counter both wait while one exists (``cluster.go`` ``Synced``), so neither acts on a figure
    without it; kubespot waits for neither, so the limits check and ``status.nodes`` both count
    it, the same way."""
    out: dict[str, dict[str, int]] = {}
    for state in state_nodes(nodes, nodeclaims):
        pool = str(state.labels().get(NODEPOOL) or "")
        if not pool or state.deleting:
            continue
        used = out.setdefault(pool, {"nodes": 0})
        used["nodes"] += 1
        for name, amount in state.capacity().items():
            if name != "nodes":
                used[name] = used.get(name, 0) + amount
    return out


def pool_in_use(nodes: Iterable[Obj], pool: str, nodeclaims: Iterable[Obj] = ()) -> dict[str, int]:
    """What ``pool`` uses against its limits: ``pools_in_use`` indexed (for tests and one-off
    reads; for several pools, call ``pools_in_use`` once)."""
    return pools_in_use(nodes, nodeclaims).get(pool, {"nodes": 0})


def _daemon_views(daemonsets: Iterable[Obj], pool: NodePool) -> list[PodView]:
    """The pods of the DaemonSets a new node of ``pool`` would run (they tolerate its taints and may
    go where its requirements allow: Karpenter's scheduler.go getDaemonOverhead)."""
    out = []
    for ds in daemonsets:
        view = _template_view(ds)
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
