"""NodeResourcesFit: what a pod requests and whether it fits what a node has left.

A pod's request is upstream's ``resource.PodRequests`` (k8s.io/component-helpers): the sum of its
app containers; each restartable init container (a sidecar, ``restartPolicy: Always``) is added to
that sum and to every later init container; the result is the larger, per resource, of that sum
and the largest init container; then the pod overhead is added. Limits stand in for missing
requests, as API defaulting does. Besides cpu and memory it counts ``ephemeral-storage`` and the
scalar resources (extended ``<domain>/<name>``, ``hugepages-<size>``): upstream's
``fitsRequest`` rejects a node per resource with "Insufficient <name>", and "Too many pods".
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...quantity import QuantityError, to_int, to_milli

if TYPE_CHECKING:
    from .nodes import Usage

Obj = dict[str, Any]

# Upstream's defaults for scoring containers that request nothing (schedutil.DefaultMilliCPURequest...).
NONZERO_MILLI_CPU = 100
NONZERO_MEMORY = 200 * 1024 * 1024
_NATIVE = ("cpu", "memory", "ephemeral-storage", "pods")


@functools.lru_cache(maxsize=4096)
def milli(value: str | int | float) -> int:
    try:
        return max(0, to_milli(value))
    except QuantityError:
        return 0


@functools.lru_cache(maxsize=4096)
def units(value: str | int | float) -> int:
    try:
        return max(0, to_int(value))
    except QuantityError:
        return 0


def is_scalar(name: str) -> bool:
    """Upstream's ``IsScalarResourceName`` in effect: extended and prefixed resources, hugepages."""
    return "/" in name or name.startswith("hugepages-") or name.startswith("attachable-volumes-")


def _amount(name: str, value: Any) -> int:
    return milli(value) if name == "cpu" else units(value)


def _container(c: Obj) -> dict[str, int]:
    res = c.get("resources") or {}
    req = res.get("requests") or {}
    limits = res.get("limits")
    if limits:
        req = {**limits, **req}  # limits default missing requests, as API defaulting does
    out = {}
    for k, v in req.items():
        if k == "cpu":
            out[k] = milli(v)
        elif k in _NATIVE[1:3] or is_scalar(k):
            out[k] = units(v)
    return out


def _non_zero(v: dict[str, int]) -> dict[str, int]:
    if "cpu" in v and "memory" in v:
        return v
    return {"cpu": NONZERO_MILLI_CPU, "memory": NONZERO_MEMORY, **v}


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        if v > into.get(k, 0):
            into[k] = v


def _combine(
    apps: list[dict[str, int]], inits: list[tuple[dict[str, int], bool]], overhead: Obj
) -> dict[str, int]:
    total: dict[str, int] = {}
    for v in apps:
        _add(total, v)
    sidecars: dict[str, int] = {}
    init: dict[str, int] = {}
    for v, restartable in inits:
        if restartable:
            _add(total, v)
            _add(sidecars, v)
            v = dict(sidecars)
        else:
            v = dict(v)
            _add(v, sidecars)
        _max(init, v)
    _max(total, init)
    if overhead:
        _add(total, {k: _amount(k, q) for k, q in overhead.items()})
    return total


def request_vector(spec: Obj, *, non_zero: bool = False) -> dict[str, int]:
    """``resource.PodRequests``: resource name -> amount (cpu in millis), see the module docstring;
    ``non_zero``: containers without cpu or memory requests count upstream's scoring defaults."""
    apps = [_container(c) for c in spec.get("containers") or []]
    inits = [(_container(c), c.get("restartPolicy") == "Always") for c in spec.get("initContainers") or []]
    if non_zero:
        apps = [_non_zero(v) for v in apps]
        inits = [(_non_zero(v), r) for v, r in inits]
    return _combine(apps, inits, spec.get("overhead") or {})


@dataclass(frozen=True, slots=True)
class PodRequest:
    cpu: int
    mem: int
    eph: int
    scalars: tuple[tuple[str, int], ...]  # sorted, non-zero
    nz_cpu: int  # cpu and memory with upstream's non-zero defaults, for scoring
    nz_mem: int


def pod_request(spec: Obj) -> PodRequest:
    apps = [_container(c) for c in spec.get("containers") or []]
    inits = [(_container(c), c.get("restartPolicy") == "Always") for c in spec.get("initContainers") or []]
    overhead = spec.get("overhead") or {}
    req = _combine(apps, inits, overhead)
    if all("cpu" in v and "memory" in v for v in apps) and all(
        "cpu" in v and "memory" in v for v, _ in inits
    ):
        nz = req  # nothing to default
    else:
        nz = _combine([_non_zero(v) for v in apps], [(_non_zero(v), r) for v, r in inits], overhead)
    scalars = tuple(sorted((k, v) for k, v in req.items() if v > 0 and is_scalar(k)))
    return PodRequest(
        req.get("cpu", 0),
        req.get("memory", 0),
        req.get("ephemeral-storage", 0),
        scalars,
        nz.get("cpu", 0),
        nz.get("memory", 0),
    )


def pod_requests(spec: Obj) -> tuple[int, int, int, int]:
    """(cpu millis, memory bytes, and the same with upstream's non-zero defaults for scoring)."""
    r = pod_request(spec)
    return r.cpu, r.mem, r.nz_cpu, r.nz_mem


@dataclass(frozen=True, slots=True)
class Allocatable:
    cpu: int
    mem: int
    eph: int
    pods: int
    scalars: tuple[tuple[str, int], ...]

    def scalar(self, name: str) -> int:
        for k, v in self.scalars:
            if k == name:
                return v
        return 0


def allocatable_of(alloc: Obj) -> Allocatable:
    return Allocatable(
        milli(alloc.get("cpu", 0)),
        units(alloc.get("memory", 0)),
        units(alloc.get("ephemeral-storage", 0)),
        units(alloc.get("pods", 0)),
        tuple(sorted((k, units(v)) for k, v in alloc.items() if is_scalar(k))),
    )


def insufficient(req: PodRequest, alloc: Allocatable, used: Usage) -> list[str]:
    """Upstream's ``fitsRequest``: every reason the node cannot take the pod (empty: it fits)."""
    reasons = []
    if used.pods + 1 > alloc.pods:
        reasons.append("Too many pods")
    if req.cpu > 0 and used.cpu + req.cpu > alloc.cpu:
        reasons.append("Insufficient cpu")
    if req.mem > 0 and used.mem + req.mem > alloc.mem:
        reasons.append("Insufficient memory")
    if req.eph > 0 and used.eph + req.eph > alloc.eph:
        reasons.append("Insufficient ephemeral-storage")
    for name, amount in req.scalars:
        if used.scalars[name] + amount > alloc.scalar(name):
            reasons.append(f"Insufficient {name}")
    return reasons


def scalars_fit(req: PodRequest, alloc: Allocatable, used: Usage) -> bool:
    return all(used.scalars[name] + amount <= alloc.scalar(name) for name, amount in req.scalars)
