"""The NodeClaims of a pass that may still take a pod, indexed by free CPU and memory.

Each pod group scans the open NodeClaims for room (Karpenter tries every in-flight NodeClaim before
a new one), and most NodeClaims of a large pass are nearly full, so a scan of all of them is the
pass's largest cost. Here they sit in buckets by pod count and by how many of the pending pods'
distinct CPU and memory requests their free room covers: a group walks only the buckets that may
hold its request, in the order the scan always used (fewest pods first, then the order they were
opened), and stops when it is placed.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator

from .claim import Claim

#: At most this many bucket edges per resource (a pass's requests rarely have more distinct values;
#: with more, every other value is an edge and a bucket's NodeClaims are checked one by one).
MAX_LEVELS = 32


def _levels(values: Iterable[int]) -> list[int]:
    distinct = sorted(set(values))
    while len(distinct) > MAX_LEVELS:
        distinct = distinct[::2]
    return distinct


class OpenClaims:
    """NodeClaims in buckets by pod count and free (CPU, memory); ``fitting`` walks those with room
    for a request in the scan's order."""

    def __init__(self, cpu_requests: Iterable[int], memory_requests: Iterable[int]) -> None:
        self._cpu_levels = _levels(cpu_requests)
        self._memory_levels = _levels(memory_requests)
        #: Per pod count (kept sorted in ``_counts``), per (CPU, memory) bucket, the sequence
        #: numbers of its claims in order.
        self._by_pods: dict[int, dict[tuple[int, int], list[int]]] = {}
        self._counts: list[int] = []
        self._claims: dict[int, Claim] = {}
        #: Per claim (by identity): where it is filed and its place in the order claims were added.
        self._at: dict[int, tuple[int, tuple[int, int], int]] = {}
        self._added = 0

    def __len__(self) -> int:
        return len(self._at)

    def _file(self, claim: Claim, seq: int) -> None:
        free = claim.free
        pods = len(claim.pods)
        bucket = (
            bisect_right(self._cpu_levels, free.get("cpu", 0)),
            bisect_right(self._memory_levels, free.get("memory", 0)),
        )
        level = self._by_pods.get(pods)
        if level is None:
            level = self._by_pods[pods] = {}
            insort(self._counts, pods)
        insort(level.setdefault(bucket, []), seq)
        self._claims[seq] = claim
        self._at[id(claim)] = (pods, bucket, seq)

    def _unfile(self, at: tuple[int, tuple[int, int], int]) -> None:
        pods, bucket, seq = at
        level = self._by_pods[pods]
        seqs = level[bucket]
        del seqs[bisect_left(seqs, seq)]
        del self._claims[seq]
        if not seqs:
            del level[bucket]
            if not level:
                del self._by_pods[pods]
                del self._counts[bisect_left(self._counts, pods)]

    def add(self, claim: Claim) -> None:
        """A new NodeClaim that may take more pods (claims are added in the order they open)."""
        self._file(claim, self._added)
        self._added += 1

    def moved(self, claim: Claim) -> None:
        """Pods joined ``claim``: it is filed again by its new pod count and free room."""
        at = self._at.get(id(claim))
        if at is not None:
            self._unfile(at)
            self._file(claim, at[2])

    def discard(self, claim: Claim) -> None:
        """``claim`` takes no more pods."""
        at = self._at.pop(id(claim), None)
        if at is not None:
            self._unfile(at)

    def fitting(self, cpu: int, memory: int) -> Iterator[Claim]:
        """The open NodeClaims with at least ``cpu`` and ``memory`` free, fewest pods first, then
        in the order they were added, as they were when the walk began: a claim the caller fills
        on the way (``moved``) is not visited again, and the claims not visited yet keep their
        room and pod count, so stopping early costs nothing and changes nothing."""
        # Buckets from these on hold claims with at least the request free; one below holds some
        # only when the request lies between two edges (more distinct requests than edges).
        cpu_from, cpu_edge = _first_bucket(self._cpu_levels, cpu)
        memory_from, memory_edge = _first_bucket(self._memory_levels, memory)
        claims = self._claims
        visited: set[int] = set()
        at = 0
        while at < len(self._counts):
            pods = self._counts[at]
            streams: list[Iterable[int]] = []
            for (i, j), seqs in self._by_pods[pods].items():
                if i < cpu_edge or j < memory_edge:
                    continue
                if i >= cpu_from and j >= memory_from:
                    # A copy: the caller's fills move claims between buckets during the walk.
                    streams.append(list(seqs))
                else:
                    streams.append(
                        [
                            seq
                            for seq in seqs
                            if claims[seq].free.get("cpu", 0) >= cpu
                            and claims[seq].free.get("memory", 0) >= memory
                        ]
                    )
            for seq in streams[0] if len(streams) == 1 else heapq.merge(*streams):
                if seq not in visited:
                    visited.add(seq)
                    yield claims[seq]
            # The counts may have changed while the caller filled claims: resume past this one.
            at = bisect_right(self._counts, pods)


def _first_bucket(levels: list[int], request: int) -> tuple[int, int]:
    """The first bucket whose claims all have ``request`` free, and the first that may have some
    that do (the same, unless the request lies strictly between two edges)."""
    below = bisect_left(levels, request)  # edges under the request
    if below < len(levels) and levels[below] == request:
        return below + 1, below + 1
    return below + 1, below
