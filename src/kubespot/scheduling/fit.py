"""Whether pods fit a node's free resources and host ports, in kube-scheduler's words when not.

Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import explain
from .pods import PodView


def pod_needs(requests: Mapping[str, int]) -> dict[str, int]:
    """What one more pod takes of a node: its requests and a pod slot."""
    return {**requests, "pods": requests.get("pods", 0) + 1}


def how_many_fit(free: Mapping[str, int], need: Mapping[str, int], limit: int) -> int:
    """How many pods needing ``need`` fit in ``free`` (at most ``limit``)."""
    n = limit
    for name, amount in need.items():
        if amount > 0:
            n = min(n, free.get(name, 0) // amount)
            if n <= 0:
                return 0
    return n


def short_of(free: Mapping[str, int], need: Mapping[str, int]) -> str:
    """The kube-scheduler's words for the first resource a node lacks for one more pod."""
    for name, amount in need.items():
        if amount > free.get(name, 0):
            return "Too many pods" if name == "pods" else f"Insufficient {name}"
    return explain.NODE_FULL


def clash(a: tuple[str, str, int], b: tuple[str, str, int]) -> bool:
    """Two host ports clash on one node: same protocol and port, and the same or a wildcard IP."""
    return a[1:] == b[1:] and (a[0] == b[0] or "0.0.0.0" in (a[0], b[0]))


def ports_allow(pod: PodView, used: set[tuple[str, str, int]]) -> int:
    """How many pods of this shape a node with ``used`` ports takes: one at most with host ports."""
    if not pod.ports:
        return 1 << 30
    return 0 if any(clash(p, u) for p in pod.ports for u in used) else 1
