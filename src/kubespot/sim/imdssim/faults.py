"""Fault injection: what can go wrong on the wire, where, and how often.

A fault applies to one instance or all of them, to paths under a prefix, with a probability and an
optional budget (fire N times, then stop). The same model is read from the CLI (``kind,key=value``),
from scenario files and from the control endpoint (JSON objects with the same keys).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

FaultKind = Literal["error", "latency", "timeout", "token"]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)

TOKEN_PATH = "/latest/api/token"
DEFAULT_TIMEOUT_SECONDS = 3600.0
"""Long enough to outlast any client timeout; the server still ends the hang when it stops."""
MAX_FAULT_SECONDS = 86400.0


class FaultError(ValueError):
    """A fault description that cannot be used."""


@dataclass
class Fault:
    """One injected misbehaviour.

    - ``error``: answer ``status`` instead of the real response;
    - ``latency``: delay the real response by ``seconds``;
    - ``timeout``: never answer (hang ``seconds``, default an hour) so the client's timeout fires;
    - ``token``: the token endpoint (``PUT /latest/api/token``) answers ``status``.
    """

    kind: FaultKind
    status: int = 500
    seconds: float = 0.0
    rate: float = 1.0
    path: str = ""
    """Instance-relative path prefix such as ``/latest/meta-data/spot``; empty matches every path."""
    instance_id: str | None = None
    """``None`` applies the fault to every instance."""
    count: int | None = None
    """How many more times the fault may fire; ``None`` for no limit."""
    fault_id: str = ""

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise FaultError(f"fault kind must be one of {', '.join(FAULT_KINDS)}, got {self.kind!r}")
        if not 400 <= self.status <= 599:
            raise FaultError(f"fault status must be an HTTP error code (400..599), got {self.status}")
        if not (math.isfinite(self.seconds) and 0 <= self.seconds <= MAX_FAULT_SECONDS):
            raise FaultError(f"fault seconds must be in 0..{MAX_FAULT_SECONDS:g}, got {self.seconds}")
        if not (math.isfinite(self.rate) and 0 <= self.rate <= 1):
            raise FaultError(f"fault rate must be in 0..1, got {self.rate}")
        if self.path and not self.path.startswith("/"):
            raise FaultError(f"fault path must start with '/', got {self.path!r}")
        if self.count is not None and self.count < 0:
            raise FaultError(f"fault count must not be negative, got {self.count}")
        if self.kind == "timeout" and self.seconds == 0:
            self.seconds = DEFAULT_TIMEOUT_SECONDS

    def applies_to(self, instance_id: str, path: str, *, token_request: bool) -> bool:
        if self.instance_id is not None and self.instance_id != instance_id:
            return False
        if self.kind == "token" and not token_request:
            return False
        return path.startswith(self.path)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.fault_id,
            "kind": self.kind,
            "status": self.status,
            "seconds": self.seconds,
            "rate": self.rate,
            "path": self.path,
            "instance_id": self.instance_id,
            "count": self.count,
        }


_FIELDS = {"kind", "status", "seconds", "rate", "path", "instance_id", "instance", "count"}


def _number(key: str, value: object, *, integer: bool = False) -> float:
    if isinstance(value, bool):
        raise FaultError(f"fault {key} must be a number")
    if isinstance(value, str):
        try:
            value = int(value) if integer else float(value)
        except ValueError:
            raise FaultError(f"fault {key} must be a number, got {value!r}") from None
    if not isinstance(value, int | float):
        raise FaultError(f"fault {key} must be a number")
    if integer and (not float(value).is_integer()):
        raise FaultError(f"fault {key} must be a whole number, got {value}")
    return float(value)


def fault_from_mapping(data: dict[str, Any]) -> Fault:
    """Build a fault from JSON/YAML/CLI keys; raises ``FaultError`` with a readable reason."""
    unknown = set(data) - _FIELDS
    if unknown:
        raise FaultError(f"unknown fault keys: {', '.join(sorted(unknown))}")
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise FaultError(f"fault kind must be one of {', '.join(FAULT_KINDS)}")
    if kind not in FAULT_KINDS:
        raise FaultError(f"fault kind must be one of {', '.join(FAULT_KINDS)}, got {kind!r}")
    instance = data.get("instance_id", data.get("instance"))
    if instance is not None and not isinstance(instance, str):
        raise FaultError("fault instance_id must be a string")
    path = data.get("path", "")
    if not isinstance(path, str):
        raise FaultError("fault path must be a string")
    count = data.get("count")
    return Fault(
        kind=kind,  # type: ignore[arg-type]  # checked against FAULT_KINDS above
        status=int(_number("status", data.get("status", 500), integer=True)),
        seconds=_number("seconds", data.get("seconds", 0.0)),
        rate=_number("rate", data.get("rate", 1.0)),
        path=path,
        instance_id=instance,
        count=None if count is None else int(_number("count", count, integer=True)),
    )


def parse_fault_spec(text: str) -> Fault:
    """Read the CLI form ``KIND[,key=value...]``.

    Example: ``error,status=503,rate=0.2,path=/latest/meta-data/spot``.

    A bare number after the kind is a shorthand: the status for ``error``/``token``, the seconds for
    ``latency``/``timeout`` (``latency,2.5``, ``token,503``).
    """
    pieces = [p.strip() for p in text.split(",") if p.strip()]
    if not pieces:
        raise FaultError("empty fault spec")
    data: dict[str, Any] = {"kind": pieces[0]}
    for piece in pieces[1:]:
        key, sep, value = piece.partition("=")
        if not sep:
            data["status" if pieces[0] in ("error", "token") else "seconds"] = key
            continue
        data[key.strip().replace("-", "_")] = value.strip()
    return fault_from_mapping(data)


class FaultSet:
    """The faults currently in force, with the random source that decides partial rates."""

    def __init__(self, rng: Callable[[], float]) -> None:
        self._rng = rng
        self._faults: dict[str, Fault] = {}
        self._ids = itertools.count(1)

    def add(self, fault: Fault) -> str:
        fault.fault_id = fault.fault_id or f"f{next(self._ids)}"
        self._faults[fault.fault_id] = fault
        return fault.fault_id

    def remove(self, fault_id: str) -> bool:
        return self._faults.pop(fault_id, None) is not None

    def clear(self) -> None:
        self._faults.clear()

    def all(self) -> list[Fault]:
        return list(self._faults.values())

    def trigger(self, instance_id: str, path: str, *, token_request: bool) -> list[Fault]:
        """The faults that fire for this request; spends their budgets."""
        fired: list[Fault] = []
        for fault in list(self._faults.values()):
            if not fault.applies_to(instance_id, path, token_request=token_request):
                continue
            if fault.count == 0:
                continue
            if fault.rate < 1.0 and self._rng() >= fault.rate:
                continue
            if fault.count is not None:
                fault.count -= 1
            fired.append(fault)
        return fired
