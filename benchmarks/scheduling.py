"""The provisioner's scheduling simulation: time, memory and fleet price against lower bounds.

Karpenter's benchmark mix (kubernetes-sigs/karpenter ``scheduling_benchmark_test.go``: CPU 100-1500 m,
memory 100 Mi-4 Gi) on 400 real instance types read through the production path (EC2
``DescribeInstanceTypes`` / ``DescribeInstanceTypeOfferings``, Pricing ``GetProducts``,
``DescribeSpotPriceHistory``, served by awssim) for one NodePool allowing spot and on-demand.
For each size it reports the simulation's seconds (wall, and the process's CPU seconds, which
other load on a shared machine inflates much less), pods per second, nodes and fleet price, and two
references measured in the same run:

- ``lp_bound_per_hour``: the configuration LP (Gilmore-Gomory): one column per (instance type, set of
  pods that fits one node), its LP relaxation solved to optimality by column generation (HiGHS via
  scipy, a dev dependency; the pricing problem is an integer knapsack per type). No packing can cost
  less. ``cost_ratio`` is the plan's price over it.
- ``summed_lp_bound_per_hour``: the bound issue 13 names (the cheapest mix of types whose summed
  allocatable covers the summed requests); unattainable on a real catalog (it buys CPU from tiny
  burstable types and memory from the largest memory type), reported for comparison.
- ``ffd_cost_per_hour``: Karpenter's packing, first-fit-decreasing into NodeClaims that keep every
  type still fitting (fewest pods first), each launched as its cheapest remaining type; null for
  the diverse mix (it ignores topology, so it would stack the pods onto a few of the largest types).

The "diverse" mix is Karpenter's ``makeDiversePods`` (core ``scheduling_benchmark_test.go`` since
PR #1938, v1.3): a fifth each of generic pods, zonal and hostname topology spread (maxSkew 1,
DoNotSchedule, random ``my-label`` labels and selectors out of seven values), zonal self-affinity
(a random ``my-affininity`` label, the selector equal to it) and hostname self-anti-affinity, the
rest generic; CPU and memory requests from Karpenter's ``randomCPU``/``randomMemory`` values. Pods
that still find no domain stay unschedulable (``unschedulable``). Its LP bound is over the pods the
plan placed and ignores topology (one node may mix what the rules keep apart), so its
``cost_ratio`` is only a reference, with no goal.

    python benchmarks/scheduling.py                          # 100 1000 5000 10000 20000 pods
    python benchmarks/scheduling.py --sizes 100,1000 --no-lp   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from kubespot.aws import AwsClients
from kubespot.aws.catalog import Catalog
from kubespot.config.aws import AwsSettings
from kubespot.scheduling.instance_types import InstanceType
from kubespot.scheduling.labels import ARCH, HOSTNAME, ON_DEMAND, SPOT, ZONE
from kubespot.scheduling.nodepool import NodePool
from kubespot.scheduling.pods import PodView
from kubespot.scheduling.simulate import PoolCapacity, simulate
from kubespot.sim.awssim import MotoServer

CPU_MILLI = (100, 250, 500, 1000, 1500)
MEMORY_MI = (100, 256, 512, 1024, 2048, 4096)
KEYS = ("cpu", "memory", "pods")


def catalog_types(count: int, seed: int) -> list[InstanceType]:
    """``count`` amd64 types of awssim's catalog (real EC2 data), read the way the operator reads them."""

    async def read() -> list[InstanceType]:
        with MotoServer() as server:
            settings = AwsSettings(region=server.region, endpoint_url=server.endpoint_url, max_attempts=2)
            async with AwsClients(settings, session=server.session()) as clients:
                catalog = Catalog(clients, server.region)
                await catalog.refresh()
                return catalog.instance_types()

    types = [
        t
        for t in asyncio.run(read())
        if t.requirements[ARCH].has("amd64") and any(o.available for o in t.offerings)
    ]
    random.Random(seed).shuffle(types)
    return sorted(types[:count], key=lambda t: t.name)


def pool() -> NodePool:
    return NodePool.of(
        {
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "requirements": [{"key": ARCH, "operator": "In", "values": ["amd64"]}],
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"},
                    }
                }
            },
        }
    )


def generic_pods(count: int, seed: int) -> list[PodView]:
    rnd = random.Random(seed)
    return [
        PodView.of(
            {
                "metadata": {"name": f"p{i:05d}", "namespace": "bench"},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "resources": {
                                "requests": {
                                    "cpu": f"{rnd.choice(CPU_MILLI)}m",
                                    "memory": f"{rnd.choice(MEMORY_MI)}Mi",
                                }
                            },
                        }
                    ]
                },
            }
        )
        for i in range(count)
    ]


def _pod(name: str, rnd: random.Random, labels: dict[str, str], **spec: Any) -> PodView:
    requests = {"cpu": f"{rnd.choice(CPU_MILLI)}m", "memory": f"{rnd.choice(MEMORY_MI)}Mi"}
    return PodView.of(
        {
            "metadata": {"name": name, "namespace": "bench", "labels": labels},
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}], **spec},
        }
    )


def diverse_pods(count: int, seed: int) -> list[PodView]:
    """Karpenter's ``makeDiversePods`` (see the module docstring), with this module's random source."""
    rnd = random.Random(seed)
    values = "abcdefg"

    def label() -> dict[str, str]:
        return {"my-label": rnd.choice(values)}

    def affinity_label() -> dict[str, str]:
        return {"my-affininity": rnd.choice(values)}  # Karpenter's spelling

    def spread(key: str) -> dict[str, Any]:
        constraint = {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": label()},
        }
        return {"topologySpreadConstraints": [constraint]}

    def affinity(kind: str, key: str, selector: dict[str, str]) -> dict[str, Any]:
        term = {"labelSelector": {"matchLabels": selector}, "topologyKey": key}
        return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}

    share = count // 5
    pods: list[PodView] = []

    def add(n: int, make: Any) -> None:
        for _ in range(n):
            pods.append(make(f"d{len(pods):05d}"))

    def self_affine(name: str) -> PodView:
        # Self-affinity (labels equal to the selector), as Karpenter's mix has had since core
        # PR #1938 (v1.3): every pod can schedule, which affinity to other random labels did not.
        own = affinity_label()
        return _pod(name, rnd, own, **affinity("podAffinity", ZONE, own))

    add(share, lambda n: _pod(n, rnd, label()))
    add(share, lambda n: _pod(n, rnd, label(), **spread(ZONE)))
    add(share, lambda n: _pod(n, rnd, label(), **spread(HOSTNAME)))
    add(share, self_affine)
    nginx = {"app": "nginx"}
    add(share, lambda n: _pod(n, rnd, nginx, **affinity("podAntiAffinity", HOSTNAME, nginx)))
    add(count - len(pods), lambda n: _pod(n, rnd, label()))
    return pods


def best_price(it: InstanceType) -> float | None:
    """The type's cheapest available offering, spot or on-demand (what the plan may buy)."""
    prices = [o.price for o in it.offerings if o.available and o.capacity_type in (SPOT, ON_DEMAND)]
    return min(prices) if prices else None


def _vector(it: InstanceType) -> tuple[int, int, int]:
    a = it.allocatable
    return a.get("cpu", 0), a.get("memory", 0), a.get("pods", 0)


def priced_frontier(types: Sequence[InstanceType]) -> list[tuple[str, tuple[int, int, int], float]]:
    """(name, allocatable, price) of the types no other type beats on price and every resource."""
    rows = sorted(
        ((t.name, _vector(t), p) for t in types if (p := best_price(t)) is not None), key=lambda r: r[2]
    )
    kept: list[tuple[str, tuple[int, int, int], float]] = []
    for name, vec, price in rows:
        if not any(all(k >= v for k, v in zip(kv, vec, strict=True)) for _, kv, _ in kept):
            kept.append((name, vec, price))
    return kept


@contextlib.contextmanager
def solver_output_to_stderr() -> Iterator[None]:
    """HiGHS writes some diagnostics straight to file descriptor 1; the benchmark's stdout must hold
    its one JSON object, so the solver's writes go to stderr meanwhile."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def configuration_lp(pods: Sequence[PodView], types: Sequence[InstanceType]) -> float:
    """The configuration LP's optimum by column generation (a lower bound on any packing)."""
    with solver_output_to_stderr():
        return _configuration_lp(pods, types)


def _configuration_lp(pods: Sequence[PodView], types: Sequence[InstanceType]) -> float:
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, linprog, milp

    shapes = Counter((p.requests.get("cpu", 0), p.requests.get("memory", 0)) for p in pods)
    keys = list(shapes)
    counts = np.array([shapes[k] for k in keys], dtype=float)
    frontier = priced_frontier(types)
    sizes = np.array([[k[0] for k in keys], [k[1] / 2**20 for k in keys], [1.0] * len(keys)])
    caps = [np.array([cpu, mem / 2**20, slots]) for _, (cpu, mem, slots), _ in frontier]
    columns: list[tuple[float, np.ndarray]] = []
    for (_, _, price), cap in zip(frontier, caps, strict=True):
        for s in range(len(keys)):
            n = min(int(min(cap[r] // sizes[r, s] for r in range(3) if sizes[r, s] > 0)), int(counts[s]))
            if n > 0:
                col = np.zeros(len(keys))
                col[s] = n
                columns.append((price, col))
    value = float("inf")
    for _ in range(1000):
        a = np.array([c for _, c in columns]).T
        res = linprog([p for p, _ in columns], A_ub=-a, b_ub=-counts, bounds=(0, None), method="highs")
        value = float(res.fun)
        duals = -res.ineqlin.marginals
        # Cheap columns first (a greedy knapsack per type); the exact knapsack of every type only
        # when the greedy finds none, so the optimum is still proven.
        added = 0
        for (_, _, price), cap in zip(frontier, caps, strict=True):
            col = _greedy_column(duals, sizes, cap, counts)
            if price - duals @ col < -1e-9:
                columns.append((price, col))
                added += 1
        if added:
            continue
        for (_, _, price), cap in zip(frontier, caps, strict=True):
            best = milp(
                -duals,
                constraints=LinearConstraint(sizes, -np.inf, cap),
                integrality=np.ones(len(keys)),
                bounds=Bounds(0, counts),
            )
            if best.status == 0 and price + best.fun < -1e-9:
                columns.append((price, np.round(best.x)))
                added += 1
        if not added:
            return value
    return value


def _greedy_column(duals: Any, sizes: Any, cap: Any, counts: Any) -> Any:
    """The best of a few greedy fills of one node: shapes by dual value per unit of size, the
    size weighing the resources as shares of the node, and each resource alone."""
    import numpy as np

    shares = sizes / cap[:, None]
    best, best_value = np.zeros(len(counts)), 0.0
    for weights in (np.ones(3), *np.eye(3)):
        size = weights @ shares
        order = np.argsort(-(duals / np.maximum(size, 1e-12)), kind="stable")
        left = cap.copy()
        col = np.zeros(len(counts))
        for s in order:
            if duals[s] <= 0:
                continue
            need = sizes[:, s]
            n = min(counts[s], *(left[r] // need[r] for r in range(3) if need[r] > 0))
            if n > 0:
                col[s] = n
                left -= need * n
        if duals @ col > best_value:
            best, best_value = col, float(duals @ col)
    return best


def summed_lp(pods: Sequence[PodView], types: Sequence[InstanceType]) -> float:
    with solver_output_to_stderr():
        return _summed_lp(pods, types)


def _summed_lp(pods: Sequence[PodView], types: Sequence[InstanceType]) -> float:
    from scipy.optimize import linprog

    frontier = priced_frontier(types)
    # Memory in MiB: byte counts (1e12) next to prices (1e-3) defeat the solver's scaling.
    scale = (1.0, 2.0**-20, 1.0)
    need = [
        sum(p.requests.get("cpu", 0) for p in pods),
        sum(p.requests.get("memory", 0) for p in pods) * scale[1],
    ]
    need.append(len(pods))
    a = [[-vec[i] * scale[i] for _, vec, _ in frontier] for i in range(3)]
    res = linprog([p for _, _, p in frontier], A_ub=a, b_ub=[-n for n in need], bounds=(0, None))
    return float(res.fun)


def ffd(pods: Sequence[PodView], types: Sequence[InstanceType]) -> tuple[float, int]:
    """Karpenter's packing: largest first, into the claim with fewest pods whose candidate types
    still hold it, else a new claim of every type that holds the pod; launched as the cheapest.

    The claims wait in a heap by (pods, age), the order Karpenter tries them in; each claim keeps
    its candidates as arrays, so "does a type still hold this pod" is one vectorised test."""
    import heapq

    import numpy as np

    priced = [(t, p) for t in types if (p := best_price(t)) is not None]
    alloc = np.array([_vector(t) for t, _ in priced], dtype=np.int64)
    price = np.array([p for _, p in priced])
    order = sorted(pods, key=lambda p: (-p.requests.get("cpu", 0), -p.requests.get("memory", 0)))
    claims: list[tuple[Any, Any]] = []  # (requested so far, indices of the candidate types)
    heap: list[tuple[int, int]] = []  # (pods, claim index)
    for pod in order:
        need = np.array([pod.requests.get("cpu", 0), pod.requests.get("memory", 0), 1], dtype=np.int64)
        skipped = []
        placed = False
        while heap:
            n, i = heapq.heappop(heap)
            total, cands = claims[i]
            keep = cands[(alloc[cands] >= total + need).all(axis=1)]
            if len(keep):
                claims[i] = (total + need, keep)
                heapq.heappush(heap, (n + 1, i))
                placed = True
                break
            skipped.append((n, i))
        for item in skipped:
            heapq.heappush(heap, item)
        if not placed:
            claims.append((need, np.flatnonzero((alloc >= need).all(axis=1))))
            heapq.heappush(heap, (1, len(claims) - 1))
    return float(sum(price[cands].min() for _, cands in claims)), len(claims)


def measure(
    pods: list[PodView], types: list[InstanceType], *, lp: bool, topology: bool = False
) -> dict[str, Any]:
    started, cpu_started = time.perf_counter(), time.process_time()
    plan = simulate(pods, [], [PoolCapacity(pool(), types)])
    seconds = time.perf_counter() - started
    # Process CPU time: what other load on the shared machine does not inflate much.
    cpu_seconds = time.process_time() - cpu_started
    if topology:
        # The bounds below ignore topology; they are taken over the pods the plan placed.
        pods = [p for p in pods if p.key not in plan.unschedulable]
    else:
        assert not plan.unschedulable, next(iter(plan.unschedulable.items()))
    out: dict[str, Any] = {
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu_seconds, 3),
        "pods_per_s": round(len(pods) / seconds),
        "nodes": len(plan.claims),
        "cost_per_hour": round(plan.cost_per_hour, 4),
        "capacity_types": dict(Counter(c.capacity_type for c in plan.claims)),
    }
    if topology:
        out["unschedulable"] = len(plan.unschedulable)
    if topology:
        # The reference packs by resources alone: without the mix's spread and (anti-)affinity it
        # stacks hundreds of pods onto a few of the largest types, a figure nothing is compared with.
        out["ffd_cost_per_hour"] = out["ffd_nodes"] = None
    else:
        ffd_cost, ffd_nodes = ffd(pods, types)
        out["ffd_cost_per_hour"] = round(ffd_cost, 4)
        out["ffd_nodes"] = ffd_nodes
    if lp:
        bound = configuration_lp(pods, types)
        out["lp_bound_per_hour"] = round(bound, 4)
        out["cost_ratio"] = round(plan.cost_per_hour / bound, 4)
        out["summed_lp_bound_per_hour"] = round(summed_lp(pods, types), 4)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100,1000,5000,10000,20000")
    parser.add_argument("--types", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-lp", action="store_true", help="skip the LP bounds (they take a while)")
    parser.add_argument("--mixes", default="generic,diverse", help="generic, diverse or both")
    args = parser.parse_args(argv)
    types = catalog_types(args.types, args.seed)
    mixes: dict[str, dict[str, Any]] = {"generic": {}, "diverse": {}}
    for mix in args.mixes.split(","):
        make = generic_pods if mix == "generic" else diverse_pods
        for size in (int(s) for s in args.sizes.split(",")):
            pods = make(size, args.seed + size)
            mixes[mix][str(size)] = measure(pods, types, lp=not args.no_lp, topology=mix == "diverse")
            print(f"{mix} {size}: {mixes[mix][str(size)]}", file=sys.stderr, flush=True)
    result = {
        **mixes,
        "diverse_lp_note": "the LP bounds ignore topology and cover only the pods the plan placed",
        "instance_types": len(types),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
