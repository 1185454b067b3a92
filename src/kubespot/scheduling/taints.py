"""Taints and tolerations: which taints a pod tolerates, as the Kubernetes API defines it.

A toleration matches a taint when its effect is empty or equal, and either its operator is
``Exists`` (an empty key then matches every key) or its key and value equal the taint's
(``Equal``, the default operator). k8s.io/api ``core/v1`` ``Toleration.ToleratesTaint``.
Karpenter asks a pod to tolerate every taint of a NodePool, ``PreferNoSchedule`` included, and lets
preference relaxation drop those last (``pkg/scheduling/taints.go`` and ``preferences.go``);
``startupTaints`` need no toleration (they are gone before pods are scheduled there).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    @classmethod
    def parse(cls, obj: Mapping[str, object]) -> Taint:
        return cls(str(obj.get("key") or ""), str(obj.get("effect") or ""), str(obj.get("value") or ""))

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    @classmethod
    def parse(cls, obj: Mapping[str, object]) -> Toleration:
        return cls(
            str(obj.get("key") or ""),
            str(obj.get("operator") or "Equal"),
            str(obj.get("value") or ""),
            str(obj.get("effect") or ""),
        )

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.operator == "Equal" and self.key == taint.key and self.value == taint.value


def untolerated(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> list[Taint]:
    """The taints no toleration matches (empty: the pod tolerates them all)."""
    return [t for t in taints if not any(tol.tolerates(t) for tol in tolerations)]


def parse_taints(objs: Iterable[Mapping[str, object]] | None) -> tuple[Taint, ...]:
    return tuple(Taint.parse(o) for o in objs or ())


def parse_tolerations(objs: Iterable[Mapping[str, object]] | None) -> tuple[Toleration, ...]:
    return tuple(Toleration.parse(o) for o in objs or ())


#: Taints a starting node carries for a while (Karpenter's ``pkg/scheduling/taints.go``
#: ``KnownEphemeralTaints``, matched on key and effect as ``MatchTaint`` does; and its key prefixes).
EPHEMERAL_TAINTS = (
    Taint("node.kubernetes.io/not-ready", "NoSchedule"),
    Taint("node.kubernetes.io/not-ready", "NoExecute"),
    Taint("node.kubernetes.io/unreachable", "NoSchedule"),
    Taint("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule", "true"),
    Taint("karpenter.sh/unregistered", "NoExecute"),
)
EPHEMERAL_TAINT_PREFIXES = ("readiness.k8s.io/",)
