"""Pending pods grouped by scheduling shape: identical pods are placed a group at a time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .explain import GroupStory
from .pods import PodView


@dataclass
class Group:
    """Pending pods of one scheduling shape, in the order they are placed."""

    exemplar: PodView
    pods: list[PodView]
    placed: int = 0
    story: GroupStory = field(default_factory=GroupStory)
    #: The group this one places a slice of (narrowed to a topology domain), if any.
    origin: Group | None = None

    @property
    def left(self) -> int:
        return len(self.pods) - self.placed

    def take(self, n: int) -> list[PodView]:
        out = self.pods[self.placed : self.placed + n]
        self.placed += n
        return out


def group_shape(pod: PodView, label_keys: frozenset[str]) -> tuple[object, ...]:
    return (
        tuple(sorted(pod.requests.items())),
        pod.requirements.identity(),
        pod.strict_requirements.identity(),
        pod.tolerations,
        pod.ports,
        pod.topology,
        # Other pods' selectors read these; a label no selector mentions changes nothing.
        tuple(sorted((k, v) for k, v in pod.labels.items() if k in label_keys)),
        pod.namespace if label_keys or pod.topology else "",
    )


def selector_keys(pods: Sequence[PodView]) -> frozenset[str]:
    keys: set[str] = set()
    for shape in {p.topology for p in pods if p.topology}:
        for scope in [*(s.scope for s in shape.spreads), *(t.scope for t in shape.terms)]:
            if scope.selector is not None:
                keys.update(k for k, _ in scope.selector.match_labels)
                keys.update(k for k, _, _ in scope.selector.expressions)
    return frozenset(keys)


def group_pods(pods: Sequence[PodView]) -> list[Group]:
    """Identical pods together, groups largest first (CPU, then memory), pods by name."""
    groups: dict[tuple[object, ...], Group] = {}
    label_keys = selector_keys(pods)
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name, p.uid)):
        key = group_shape(pod, label_keys)
        if key in groups:
            groups[key].pods.append(pod)
        else:
            groups[key] = Group(pod, [pod])
    return sorted(
        groups.values(),
        key=lambda g: (-g.exemplar.requests.get("cpu", 0), -g.exemplar.requests.get("memory", 0)),
    )
