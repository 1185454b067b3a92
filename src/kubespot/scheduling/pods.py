"""What the simulation needs of a pod: its requests, node requirements, tolerations and host ports.

- Requests as kube-scheduler counts them (k8s.io/component-helpers ``resource.PodRequests``): the sum
  of the app containers; each init container runs alone after the sidecars started before it
  (restartable init containers, ``restartPolicy: Always``, keep running and add to everything after
  them), and the pod needs the largest of those moments; plus ``spec.overhead``. A container with a
  limit and no request requests its limit (the API server's defaulting), so manifests that were
  never created count as they will once they are.
- Node requirements as Karpenter derives them (``pkg/scheduling/requirements.go``
  ``NewPodRequirements``): ``nodeSelector`` and the first required node-affinity term; with
  preferences, the heaviest preferred term too (treated as required until relaxed).
- Topology rules (spread constraints, pod affinity and anti-affinity, preferred ones included until
  relaxed) as ``topology.PodTopology``; the pod's labels, since other pods' selectors match them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubespot.model.quantity import milli, units

from .requirements import Requirement, Requirements
from .taints import Toleration, parse_tolerations
from .topology import NO_TOPOLOGY, PodTopology, pod_topology

Obj = Mapping[str, Any]
ResourceList = dict[str, int]


def _amount(resource: str, value: str | int | float) -> int:
    return milli(value) if resource == "cpu" else units(value)


def container_requests(container: Obj) -> ResourceList:
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = {**limits, **(resources.get("requests") or {})}
    return {name: _amount(name, value) for name, value in requests.items()}


def _add(into: ResourceList, more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


def _max(into: ResourceList, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if amount > into.get(name, 0):
            into[name] = amount


def pod_requests(spec: Obj) -> ResourceList:
    """The resources the scheduler reserves for a pod with ``spec`` (see the module docstring)."""
    total: ResourceList = {}
    for container in spec.get("containers") or ():
        _add(total, container_requests(container))
    sidecars: ResourceList = {}
    peak: ResourceList = {}
    for container in spec.get("initContainers") or ():
        own = container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            moment = dict(sidecars)
        else:
            moment = dict(own)
            _add(moment, sidecars)
        _max(peak, moment)
    _max(total, peak)
    overhead = spec.get("overhead") or {}
    _add(total, {name: _amount(name, value) for name, value in overhead.items()})
    return total


def _terms(affinity: Obj, kind: str) -> list[Obj]:
    node_affinity = (affinity or {}).get("nodeAffinity") or {}
    if kind == "required":
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
        return list(required.get("nodeSelectorTerms") or [])
    return list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or [])


def unsatisfiable(key: str) -> Requirement:
    """A requirement on ``key`` no node meets, with the label or without it (empty integer bounds)."""
    return Requirement(key, True, frozenset(), gte=1, lte=0)


def _narrow(reqs: Requirements, impossible: set[str], expressions: Iterable[Obj]) -> None:
    """Add each expression to ``reqs``; note in ``impossible`` the keys where a value is asked for
    and none is left. Karpenter's algebra reads such an empty intersection as ``DoesNotExist``, which
    a node without the label would meet, while kube-scheduler's NodeAffinity matches no node at all
    (``nodeSelector`` and the term must both hold: k8s.io/component-helpers nodeaffinity
    ``GetRequiredNodeAffinity``)."""
    for expression in expressions:
        for req in Requirements.from_selector([expression]).values():
            before = reqs.get(req.key)
            reqs.add(req)
            after = reqs[req.key]
            asks = not req.excludes_only or (before is not None and not before.excludes_only)
            if asks and not after.complement and not after.values:
                impossible.add(req.key)


def node_requirements(spec: Obj, *, preferences: bool = True) -> Requirements:
    """The pod's wishes on node labels (``preferences``: the heaviest preferred term included).

    A key the wishes contradict themselves on (``nodeSelector`` asking a value the term rules out,
    say) becomes ``unsatisfiable``: no node, existing or new, takes the pod (with preferences, it is
    then tried without them).
    """
    reqs = Requirements()
    impossible: set[str] = set()
    selector = [
        {"key": str(k), "operator": "In", "values": [str(v)]}
        for k, v in (spec.get("nodeSelector") or {}).items()
    ]
    _narrow(reqs, impossible, selector)
    affinity = spec.get("affinity") or {}
    if preferences:
        preferred = sorted(_terms(affinity, "preferred"), key=lambda t: -int(t.get("weight") or 0))
        if preferred:
            _narrow(reqs, impossible, (preferred[0].get("preference") or {}).get("matchExpressions") or [])
    required = _terms(affinity, "required")
    if required:
        _narrow(reqs, impossible, required[0].get("matchExpressions") or [])
    if not impossible:
        return reqs
    return Requirements(unsatisfiable(r.key) if r.key in impossible else r for r in reqs.values())


def host_ports(spec: Obj) -> frozenset[tuple[str, str, int]]:
    """(hostIP, protocol, hostPort) of every container port bound on the node."""
    ports = set()
    for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        for port in container.get("ports") or ():
            if port.get("hostPort"):
                ports.add(
                    (
                        str(port.get("hostIP") or "0.0.0.0"),
                        str(port.get("protocol") or "TCP"),
                        int(port["hostPort"]),
                    )
                )
    return frozenset(ports)


@dataclass(frozen=True, slots=True)
class PodView:
    """One pod as the simulation reads it."""

    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    requests: Mapping[str, int]
    requirements: Requirements
    strict_requirements: Requirements
    tolerations: tuple[Toleration, ...]
    ports: frozenset[tuple[str, str, int]]
    spec: Obj
    topology: PodTopology = NO_TOPOLOGY

    @classmethod
    def of(cls, pod: Obj) -> PodView:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        namespace = str(meta.get("namespace") or "default")
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        return cls(
            namespace=namespace,
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            labels=labels,
            requests=pod_requests(spec),
            requirements=node_requirements(spec),
            strict_requirements=node_requirements(spec, preferences=False),
            tolerations=parse_tolerations(spec.get("tolerations")),
            ports=host_ports(spec),
            spec=spec,
            topology=pod_topology(spec, namespace, labels),
        )

    def with_spec(self, spec: Obj) -> PodView:
        """This pod with another spec (a relaxed one): every rule read again from it."""
        return PodView.of(
            {
                "metadata": {
                    "namespace": self.namespace,
                    "name": self.name,
                    "uid": self.uid,
                    "labels": self.labels,
                },
                "spec": spec,
            }
        )

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def views(pods: Iterable[Obj]) -> list[PodView]:
    return [PodView.of(p) for p in pods]
