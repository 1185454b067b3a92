"""The index of open NodeClaims (``scheduling/open_claims.py``) walks exactly what a full scan would.

Karpenter's scheduler tries the NodeClaims of the pass before opening one, fewest pods first
(kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/scheduler.go ``add``: the
``sort.Slice`` of ``newNodeClaims`` by ``len(Pods)`` before ``addToInflightNode``); kubespot scans
only those with room for the request, ties in the order they were opened. The index must give that
order, visit each claim once while the caller fills them, and skip nothing that fits.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import cast

from kubespot.scheduling.claim import Claim
from kubespot.scheduling.open_claims import MAX_LEVELS, OpenClaims


@dataclass
class _Stub:
    """What the index reads of a NodeClaim: its free room and its pods."""

    free: dict[str, int]
    pods: list[str] = field(default_factory=list)


def _scan(claims: list[_Stub], cpu: int, memory: int) -> list[_Stub]:
    """The full scan the index replaces: room first, then fewest pods, ties in opening order."""
    fits = [c for c in claims if c.free.get("cpu", 0) >= cpu and c.free.get("memory", 0) >= memory]
    return sorted(fits, key=lambda c: len(c.pods))


def _build(
    rng: random.Random, cpus: list[int], memories: list[int], n: int
) -> tuple[OpenClaims, list[_Stub]]:
    index = OpenClaims(cpus, memories)
    claims = [
        _Stub(
            {"cpu": rng.randrange(0, 4000), "memory": rng.randrange(0, 8 << 30)},
            [f"p{i}" for i in range(rng.randrange(0, 6))],
        )
        for _ in range(n)
    ]
    for c in claims:
        index.add(cast(Claim, c))
    return index, claims


def test_the_walk_is_the_full_scan_for_every_request() -> None:
    """Requests that are bucket edges, requests between edges (more distinct requests than
    ``MAX_LEVELS``), zero and larger than any claim: the same claims in the same order."""
    rng = random.Random(7)
    cpus = [100, 250, 500, 1000, 1500]
    memories = [100 << 20, 256 << 20, 1 << 30, 4 << 30]
    many_cpus = [rng.randrange(1, 3000) for _ in range(5 * MAX_LEVELS)]
    for levels in (cpus, many_cpus):
        index, claims = _build(rng, levels, memories, 300)
        for cpu in [0, *levels[:20], 1, 4001]:
            for memory in [0, *memories, 9 << 30]:
                assert [id(c) for c in index.fitting(cpu, memory)] == [
                    id(c) for c in _scan(claims, cpu, memory)
                ]


def test_claims_filled_during_the_walk_are_visited_once_and_refiled() -> None:
    """The caller fills claims as it walks (Karpenter's ``nodeClaim.Add``): each claim comes once,
    in the order of the scan taken when the walk began, and later walks see the new room and pod
    counts; a claim with no room left is discarded."""
    rng = random.Random(11)
    levels = [100, 250, 500, 1000, 1500]
    memories = [100 << 20, 1 << 30]
    index, claims = _build(rng, levels, memories, 200)
    expected = _scan(claims, 250, 100 << 20)
    seen = []
    for claim in index.fitting(250, 100 << 20):
        stub = cast(_Stub, claim)
        seen.append(id(stub))
        stub.pods.extend(["x", "y"])
        stub.free["cpu"] -= 250
        if stub.free["cpu"] < 100:
            index.discard(claim)
        else:
            index.moved(claim)
    assert seen == [id(c) for c in expected]
    open_now = [c for c in claims if not (c in expected and c.free["cpu"] < 100)]
    assert len(index) == len(open_now)
    assert [id(c) for c in index.fitting(100, 0)] == [id(c) for c in _scan(open_now, 100, 0)]


def test_a_walk_stopped_early_leaves_the_index_whole() -> None:
    """Stopping after the first claims (the group is placed) changes nothing for the next walk."""
    rng = random.Random(3)
    index, claims = _build(rng, [100, 500, 1000], [1 << 30], 50)
    walk = index.fitting(100, 0)
    first = next(walk)
    assert first is cast(Claim, _scan(claims, 100, 0)[0])
    assert len(index) == 50
    assert [id(c) for c in index.fitting(100, 0)] == [id(c) for c in _scan(claims, 100, 0)]
