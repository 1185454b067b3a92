"""Bound pods indexed for the scheduler's pod-counting plugins (InterPodAffinity, PodTopologySpread).

Upstream's PreFilter of those plugins walks every pod on every node for each pod it schedules; with
100 000 pods that is too slow here, so ``PodIndex`` keeps, per distinct group of terms, how many
bound pods on each node match it, updated as pods are bound, start terminating and are removed
(a group is registered on first use with one scan of the pods of the namespaces concerned), and the
existing pods' required anti-affinity terms per node.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ...selectors import LabelSelector
from ...store import ObjKey

#: Bound on registered term groups; rebuilt on demand.
_MAX_GROUPS = 1024

NamespaceLabels = Callable[[str], Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class Term:
    topology_key: str
    selector: LabelSelector
    namespaces: frozenset[str]
    ns_selector: LabelSelector | None  # None: no namespaceSelector
    key: bytes  # identity (same key, same matching)

    def matches(self, ns: str, labels: Mapping[str, str], ns_labels: NamespaceLabels) -> bool:
        if ns not in self.namespaces and (
            self.ns_selector is None or not self.ns_selector.matches(ns_labels(ns))
        ):
            return False
        return self.selector.matches(labels)


@dataclass(slots=True)
class _Group:
    """Bound pods matching all of ``terms``, per node name."""

    terms: tuple[Term, ...]
    live_only: bool  # terminating pods do not count (PodTopologySpread)
    per_node: Counter[str] = field(default_factory=Counter)

    def matches(self, ns: str, labels: Mapping[str, str], ns_labels: NamespaceLabels) -> bool:
        return all(t.matches(ns, labels, ns_labels) for t in self.terms)


@dataclass(slots=True)
class _Bound:
    node: str
    ns: str
    labels: dict[str, str]
    anti: tuple[Term, ...]
    live: bool = True  # not terminating


class PodIndex:
    """Bound pods by namespace, per-node counts of registered term groups, existing anti-affinity."""

    def __init__(self, ns_labels: NamespaceLabels) -> None:
        self.ns_labels = ns_labels
        self._bound: dict[ObjKey, _Bound] = {}
        self._by_ns: dict[str, set[ObjKey]] = {}
        self._groups: dict[bytes, _Group] = {}
        #: Existing pods' anti-affinity terms: term key -> (term, pods with it per node).
        self._anti: dict[bytes, tuple[Term, Counter[str]]] = {}
        #: Moves when a term enters or leaves ``_anti`` (not when its counts change).
        self.anti_version = 0

    def add(self, key: ObjKey, node: str, ns: str, labels: dict[str, str], anti: tuple[Term, ...]) -> None:
        self._bound[key] = b = _Bound(node, ns, labels, anti)
        self._by_ns.setdefault(ns, set()).add(key)
        for g in self._groups.values():
            if g.matches(ns, labels, self.ns_labels):
                g.per_node[node] += 1
        for t in anti:
            entry = self._anti.get(t.key)
            if entry is None:
                entry = self._anti[t.key] = (t, Counter())
                self.anti_version += 1
            entry[1][b.node] += 1

    def remove(self, key: ObjKey) -> None:
        b = self._bound.pop(key, None)
        if b is None:
            return
        keys = self._by_ns.get(b.ns)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_ns[b.ns]
        for g in self._groups.values():
            if (
                (b.live or not g.live_only)
                and g.per_node[b.node]
                and g.matches(b.ns, b.labels, self.ns_labels)
            ):
                _decrement(g.per_node, b.node)
        for t in b.anti:
            entry = self._anti.get(t.key)
            if entry is not None:
                _decrement(entry[1], b.node)
                if not entry[1]:
                    del self._anti[t.key]
                    self.anti_version += 1

    def namespace_labels_changed(self) -> None:
        """Forget the groups whose terms select namespaces by label (rebuilt on next use) and
        invalidate what callers keep of the existing anti-affinity matches."""
        for gkey in [k for k, g in self._groups.items() if any(t.ns_selector is not None for t in g.terms)]:
            del self._groups[gkey]
        self.anti_version += 1

    def terminating(self, key: ObjKey) -> None:
        """The pod got a deletionTimestamp: it leaves the live-only counts."""
        b = self._bound.get(key)
        if b is None or not b.live:
            return
        b.live = False
        for g in self._groups.values():
            if g.live_only and g.per_node[b.node] and g.matches(b.ns, b.labels, self.ns_labels):
                _decrement(g.per_node, b.node)

    @contextlib.contextmanager
    def without(self, keys: Iterable[ObjKey]) -> Iterator[None]:
        """The counts as if the pods ``keys`` were gone, for the duration of the block."""
        saved = [(k, self._bound[k]) for k in keys if k in self._bound]
        for k, _ in saved:
            self.remove(k)
        try:
            yield
        finally:
            for k, b in saved:
                self.add(k, b.node, b.ns, b.labels, b.anti)
                if not b.live:
                    self.terminating(k)

    def per_node(self, terms: tuple[Term, ...], *, live_only: bool = False) -> Counter[str]:
        """Bound pods matching all ``terms``, per node (registered and kept up to date from now on)."""
        gkey = (b"live|" if live_only else b"all|") + b"|".join(t.key for t in terms)
        g = self._groups.get(gkey)
        if g is None:
            if len(self._groups) >= _MAX_GROUPS:
                self._groups.clear()
            g = self._groups[gkey] = _Group(terms, live_only)
            for ns in self._namespaces(terms):
                for key in self._by_ns.get(ns, ()):
                    b = self._bound[key]
                    if (b.live or not live_only) and g.matches(b.ns, b.labels, self.ns_labels):
                        g.per_node[b.node] += 1
        return g.per_node

    def _namespaces(self, terms: tuple[Term, ...]) -> Iterable[str]:
        if any(t.ns_selector is not None for t in terms):
            return list(self._by_ns)
        common = frozenset.intersection(*(t.namespaces for t in terms))
        return [ns for ns in common if ns in self._by_ns]

    def existing_anti(self, ns: str, labels: Mapping[str, str]) -> list[tuple[str, Counter[str]]]:
        """(topology key, nodes with pods whose anti-affinity term matches this pod)."""
        return [
            (t.topology_key, nodes)
            for t, nodes in self._anti.values()
            if t.matches(ns, labels, self.ns_labels)
        ]

    @property
    def has_existing_anti(self) -> bool:
        return bool(self._anti)


def _decrement(counter: Counter[str], key: str) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]
