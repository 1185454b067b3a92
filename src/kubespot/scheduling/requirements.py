"""The requirements algebra: node-selector requirements on labels, intersected and compared.

One ``Requirement`` is the set of values a label may take: a finite set (``In``, ``DoesNotExist`` as
the empty set) or the complement of one (``NotIn``, ``Exists`` as the complement of nothing), with
optional integer bounds (``Gt``/``Lt`` are kept as the inclusive ``Gte``/``Lte``, Karpenter's
canonical form) and Karpenter's ``minValues``. ``Requirements`` holds one per label key; adding a
second requirement on a key intersects them. A NodePool's requirements, a pod's node selector and
affinity, an instance type's labels and an offering's zone and capacity type all become
``Requirements``, and "may this pod go there" is ``compatible``.

Semantics follow Karpenter's ``pkg/scheduling/requirement.go`` and ``requirements.go``
(kubernetes-sigs/karpenter): deprecated beta label keys are normalised to their stable names;
two requirements on a key are compatible when some value satisfies both, or when both only exclude
values (``NotIn``/``DoesNotExist``); a key one side does not mention is acceptable when it is a
well-known label (the instance types define it) or the other side only excludes values.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from .labels import NORMALIZED_LABELS

#: Operators of a Kubernetes node selector requirement, plus Karpenter's ``Gte``/``Lte`` (v1.9).
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
_BOUNDED = ("Gt", "Lt", "Gte", "Lte")


class RequirementError(ValueError):
    """A requirement that cannot be built: an unknown operator or a bound that is not an integer."""


def _as_int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def _within(value: str, gte: int | None, lte: int | None) -> bool:
    if gte is None and lte is None:
        return True
    number = _as_int(value)  # with a bound set, only integers qualify
    if number is None:
        return False
    return (gte is None or number >= gte) and (lte is None or number <= lte)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


@dataclass(frozen=True, slots=True)
class Requirement:
    """The values one label key may take (see the module docstring for the representation)."""

    key: str
    #: True: every value except ``values`` (NotIn, Exists); False: only ``values`` (In, DoesNotExist).
    complement: bool
    values: frozenset[str]
    #: Inclusive integer bounds; only kept on complement sets (a finite set is filtered instead).
    gte: int | None = None
    lte: int | None = None
    #: Karpenter's ``minValues``: how many distinct values a launch must keep open for this key.
    min_values: int | None = None

    @classmethod
    def of(
        cls,
        key: str,
        operator: str,
        values: Iterable[str] = (),
        min_values: int | None = None,
    ) -> Requirement:
        """Build from a node selector requirement (``key``, ``operator``, ``values``)."""
        key = NORMALIZED_LABELS.get(key, key)
        vals = tuple(values)
        if operator == "In":
            return cls(key, False, frozenset(vals), min_values=min_values)
        if operator == "NotIn":
            return cls(key, True, frozenset(vals), min_values=min_values)
        if operator == "Exists":
            return cls(key, True, frozenset(), min_values=min_values)
        if operator == "DoesNotExist":
            return cls(key, False, frozenset(), min_values=min_values)
        if operator not in _BOUNDED:
            raise RequirementError(f"unknown operator {operator!r} for key {key!r}")
        bound = _as_int(vals[0]) if len(vals) == 1 else None
        if bound is None:
            raise RequirementError(
                f"operator {operator} for key {key!r} needs one integer value, got {list(vals)}"
            )
        if operator == "Gt":
            return cls(key, True, frozenset(), gte=bound + 1, min_values=min_values)
        if operator == "Lt":
            return cls(key, True, frozenset(), lte=bound - 1, min_values=min_values)
        if operator == "Gte":
            return cls(key, True, frozenset(), gte=bound, min_values=min_values)
        return cls(key, True, frozenset(), lte=bound, min_values=min_values)

    @property
    def operator(self) -> str:
        """The operator this set reads as: bounds read as ``Exists`` (with the bounds beside it)."""
        if self.complement:
            return "NotIn" if self.values else "Exists"
        return "In" if self.values else "DoesNotExist"

    @property
    def excludes_only(self) -> bool:
        """True for ``NotIn`` and ``DoesNotExist``: it rules values out and asks for none."""
        return self.operator in ("NotIn", "DoesNotExist")

    def has(self, value: str) -> bool:
        """True when a label with ``value`` satisfies this requirement."""
        inside = value in self.values
        return (inside != self.complement) and _within(value, self.gte, self.lte)

    def intersection(self, other: Requirement) -> Requirement:
        """The values both allow (``minValues``: the larger of the two)."""
        gte, lte = _max(self.gte, other.gte), _min(self.lte, other.lte)
        min_values = _max(self.min_values, other.min_values)
        if gte is not None and lte is not None and gte > lte:
            return Requirement(self.key, False, frozenset(), min_values=min_values)
        complement = self.complement and other.complement
        if complement:
            values = self.values | other.values
        elif self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        values = frozenset(v for v in values if _within(v, gte, lte))
        if not complement:
            gte = lte = None
        return Requirement(self.key, complement, values, gte, lte, min_values)

    def intersects(self, other: Requirement) -> bool:
        """True when some value satisfies both (without building the intersection)."""
        gte, lte = _max(self.gte, other.gte), _min(self.lte, other.lte)
        if gte is not None and lte is not None and gte > lte:
            return False
        if self.complement and other.complement:
            return True
        if self.complement:
            return any(v not in self.values and _within(v, gte, lte) for v in other.values)
        if other.complement:
            return any(v not in other.values and _within(v, gte, lte) for v in self.values)
        return any(v in other.values and _within(v, gte, lte) for v in self.values)

    def as_selector(self) -> list[dict[str, object]]:
        """Back to node selector requirements (two when both bounds are set), values sorted."""
        out: list[dict[str, object]] = []
        if self.gte is not None:
            out.append({"key": self.key, "operator": "Gte", "values": [str(self.gte)]})
        if self.lte is not None:
            out.append({"key": self.key, "operator": "Lte", "values": [str(self.lte)]})
        if not out:
            entry: dict[str, object] = {"key": self.key, "operator": self.operator}
            if self.values:
                entry["values"] = sorted(self.values)
            out.append(entry)
        if self.min_values is not None:
            for entry in out:
                entry["minValues"] = self.min_values
        return out

    def identity(self) -> tuple[object, ...]:
        """Every field, values sorted: equal for equal sets. ``str`` shortens long value lists for
        display, so two different sets can read alike; memo and group keys use this instead."""
        return (self.key, self.complement, tuple(sorted(self.values)), self.gte, self.lte, self.min_values)

    def __str__(self) -> str:
        """For display: a list of more than five values is shortened (see ``identity``)."""
        op = self.operator
        if op in ("Exists", "DoesNotExist"):
            text = f"{self.key} {op}"
        else:
            shown = sorted(self.values)
            if len(shown) > 5:
                shown = [*shown[:5], f"and {len(shown) - 5} others"]
            text = f"{self.key} {op} [{' '.join(shown)}]"
        if self.gte is not None:
            text += f" >={self.gte}"
        if self.lte is not None:
            text += f" <={self.lte}"
        if self.min_values is not None:
            text += f" minValues {self.min_values}"
        return text


class Requirements(Mapping[str, Requirement]):
    """One requirement per label key; ``add`` intersects with what the key already has."""

    __slots__ = ("_by_key", "_identity")

    def __init__(self, requirements: Iterable[Requirement] = ()) -> None:
        self._by_key: dict[str, Requirement] = {}
        self._identity: tuple[object, ...] | None = None
        self.add(*requirements)

    @classmethod
    def from_selector(cls, terms: Iterable[Mapping[str, object]]) -> Requirements:
        """From node selector requirements (``key``, ``operator``, ``values``, ``minValues``)."""
        out = cls()
        for term in terms:
            values = term.get("values") or []
            min_values = term.get("minValues")
            out.add(
                Requirement.of(
                    str(term["key"]),
                    str(term["operator"]),
                    [str(v) for v in values] if isinstance(values, list) else [],
                    min_values if isinstance(min_values, int) else None,
                )
            )
        return out

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Requirements:
        """Each label as ``key In [value]``: what a node or an instance type offers."""
        return cls(Requirement.of(k, "In", [v]) for k, v in labels.items())

    def add(self, *requirements: Requirement) -> None:
        self._identity = None
        for req in requirements:
            existing = self._by_key.get(req.key)
            self._by_key[req.key] = req if existing is None else req.intersection(existing)

    def copy(self) -> Requirements:
        out = Requirements()
        out._by_key = dict(self._by_key)
        out._identity = self._identity
        return out

    def get_or_any(self, key: str) -> Requirement:
        """The key's requirement, or ``Exists`` (anything) when it has none."""
        return self._by_key.get(key) or Requirement(key, True, frozenset())

    def __getitem__(self, key: str) -> Requirement:
        return self._by_key[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def conflicts(self, other: Requirements) -> list[str]:
        """Why ``other`` and these cannot both hold, key by key (empty when they can)."""
        small, large = (self, other) if len(self) <= len(other) else (other, self)
        reasons: list[str] = []
        for key in small:
            if key not in large:
                continue
            mine, theirs = self._by_key[key], other._by_key[key]
            if mine.intersects(theirs) or (mine.excludes_only and theirs.excludes_only):
                continue
            reasons.append(f"key {key}, {theirs} not in {mine}")
        return sorted(reasons)

    def compatibility(self, other: Requirements, allow_undefined: frozenset[str] = frozenset()) -> list[str]:
        """Why ``other`` (a pod's wishes, say) cannot be met by these (a NodePool's, say).

        A key ``other`` asks for that these do not define is only acceptable when it is in
        ``allow_undefined`` (the well-known labels every instance type defines) or when ``other``
        only excludes values. Empty when compatible.
        """
        reasons = [
            f'label "{key}" does not have known values'
            for key, req in other._by_key.items()
            if key not in allow_undefined and key not in self._by_key and not req.excludes_only
        ]
        return reasons + self.conflicts(other)

    def is_compatible(self, other: Requirements, allow_undefined: frozenset[str] = frozenset()) -> bool:
        return not self.compatibility(other, allow_undefined)

    def has_min_values(self) -> bool:
        return any(r.min_values is not None for r in self._by_key.values())

    def identity(self) -> tuple[object, ...]:
        """Every requirement in full (``Requirement.identity``), by key: the same for the same
        requirements, whatever their order. The key of every memo and group that stands for
        "these requirements"; kept until the next ``add``, as the memos ask for it often."""
        if self._identity is None:
            self._identity = tuple(self._by_key[k].identity() for k in sorted(self._by_key))
        return self._identity

    def __str__(self) -> str:
        """For display only: long value lists are shortened (see ``identity``)."""
        return ", ".join(sorted(str(r) for r in self._by_key.values()))

    def __repr__(self) -> str:
        return f"Requirements({self})"
