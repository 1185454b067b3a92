"""New capacity packed by the configuration LP: which nodes of which types hold a cohort of pods.

The configuration LP (Gilmore-Gomory; docs/designs/provisioning.md, "The lower bound, and where the
packing stands") has one column per (instance type, how many pods of each shape one node of it
holds) and one row per pod shape: buy enough nodes of each configuration to cover every pending
pod, at least cost. Its relaxation is solved by column generation: the restricted LP's duals price
each pod shape, and per type a bounded integer knapsack over every requested resource (and the pod
slots) finds the configuration worth more than the node costs. Each improving column is added and
the LP re-solved until no type has one (or the rounds or the work budget end the search). The
solution is then rounded down to whole nodes and re-generated for what is left while that yields
whole nodes; the last pods go to an integer program over the columns found (a small plan is also
solved whole that way), and each node becomes the cheapest type that holds its pods. Whatever is
still unplaced is the simulation's greedy's.

Deterministic, and no I/O of its own: shapes, types and prices in, whole nodes out. The pricing
problem is ``knapsack``'s; HiGHS (``lp_solver``) solves the LPs and integer programs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .knapsack import Pricing
from .lp_solver import Master
from .pods import PodView

#: Rounds of column generation (LP solve, pricing of every type) in one search: the deterministic
#: end of a search that neither converges nor runs out of exact rounds (the generic mix needs
#: 20-30).
MAX_ROUNDS = 100
#: Work one cohort's search may do for one capacity type, in knapsack cells: a pricing round costs
#: one cell per (type, shape), since the greedy knapsack prices every shape for every type and the
#: LP it re-solves grows with them. A guard for a pathological input: past it, the columns found so
#: far are used (the restricted LP is always a valid plan, only a less cheap one). Work, not time,
#: so the same input gives the same plan however busy the machine (docs/designs/provisioning.md,
#: "Determinism"): a CPU-seconds budget used to cut review 15b's 120-shape cohort at a different
#: round under load (847 vs 839 nodes). On this machine a cell costs about 6 microseconds of CPU
#: (LP solve included: 5.8 on the benchmark's 30 shapes x 154 types, 6.6 on that cohort's
#: 120 x 72), so this is about the 3 CPU s the old budget allowed; not a hard bound in seconds
#: (a cell's cost depends on the input: 120 shapes x 24 types spent 4.4 CPU s in the column
#: generation) nor in cells (the budget is checked before a round, so a phase can overrun it by one
#: round: 720 000 cells on 4 000 shapes x 60 types), but the same for the same input.
#: benchmarks/scheduling.py's searches end by their rounds at at most 102 000 cells (22 rounds of
#: 30 x 154), well within it;
#: that cohort's search is cut at round 44 of the 58 it would take (3.3 CPU s). The rounding and
#: the remainder come on top, which is why the provisioner plans in a worker thread.
WORK_BUDGET = 500_000
#: Columns priced below ``price * (1 + EPSILON)`` are not worth the iteration (rounding noise).
EPSILON = 1e-6
#: An LP solution of at most this many nodes is also solved whole as an integer program.
WHOLE_MIP_NODES = 64
#: Exact (MIP) pricing rounds after the greedy knapsack finds nothing: each costs ~10 ms per type.
EXACT_ROUNDS = 3


def lp_eligible(pod: PodView) -> bool:
    """Whether a pod may be packed by the LP: it shares a node with any pod of its cohort and its
    placement depends on nothing but the node's resources. Host ports (one pod per node per port),
    topology spread and pod (anti-)affinity (counted per domain) stay with the greedy."""
    if pod.ports:
        return False
    spec = pod.spec
    affinity = spec.get("affinity") or {}
    return not (
        spec.get("topologySpreadConstraints")
        or affinity.get("podAffinity")
        or affinity.get("podAntiAffinity")
    )


@dataclass(frozen=True, slots=True)
class NodeType:
    """One candidate instance type: what a new node of it has free for pods, and its price."""

    name: str
    free: Mapping[str, int]
    price: float


@dataclass(frozen=True, slots=True)
class Nodes:
    """``count`` whole nodes of ``types[type]``, each holding ``pattern[s]`` pods of shape ``s``."""

    type: int
    pattern: tuple[tuple[int, int], ...]
    count: int


@dataclass(frozen=True, slots=True)
class Packing:
    """The LP's whole nodes, its value, and how it was found. ``proven``: the search ended because
    no type had an improving configuration (the exact knapsacks solved within 2 %), so ``bound``
    is within about that of the LP's optimum; otherwise the rounds or the work budget ran out first."""

    nodes: tuple[Nodes, ...]
    bound: float
    proven: bool
    columns: int
    note: str


#: Types whose knapsack the MIP solves per exact round, most promising first (each ~10 ms).
EXACT_TYPES = 12
#: Starting columns per shape: its cheapest types per pod, alone on a node.
SEED_TYPES = 3


def pack(
    needs: Sequence[Mapping[str, int]],
    counts: Sequence[int],
    types: Sequence[NodeType],
    *,
    budget: int = WORK_BUDGET,
    exact_rounds: int = EXACT_ROUNDS,
    whole: bool = True,
) -> Packing:
    """Whole nodes covering as many of ``counts[s]`` pods needing ``needs[s]`` (pod slot included)
    as the rounded LP solution holds (none unless ``whole``: the LP's value is all that is asked).
    Raises ``SolverUnavailable`` when HiGHS cannot be used, and ``ValueError`` when no shape fits
    any type."""
    # A quarter of the budget is kept for the rounding's own column generation.
    reserve = budget // 4 if whole else 0
    work = _Work(budget - reserve)
    # A shape no type holds is left out (its pods stay pending for the greedy to explain).
    counts = [
        c if any(all(t.free.get(r, 0) >= v for r, v in need.items()) for t in types) else 0
        for need, c in zip(needs, counts, strict=True)
    ]
    if not any(counts):
        raise ValueError("no shape fits any type")
    master = Master(counts)
    pricing = Pricing(types, needs, counts)
    caps = pricing.caps
    # Each shape alone on its cheapest types per pod: the restricted LP is feasible from the start.
    for s in range(len(needs)):
        fits = [t for t in range(len(types)) if caps[t, s] > 0]
        for t in sorted(fits, key=lambda t: (types[t].price / caps[t, s], t))[:SEED_TYPES]:
            master.add(t, {s: int(caps[t, s])}, types[t].price)
    bound, x, proven = _generate(master, pricing, types, work, exact_rounds)
    stopped = "" if proven else ", stopped early"
    note = f"configuration LP ${bound:.4f}/h over {len(master.columns)} columns{stopped}"
    if not whole:
        return Packing((), bound, proven, len(master.columns), note)
    work.left += reserve
    # Rounding: each configuration's count rounded down, its pods capped at what is still
    # pending; the LP re-generated for the rest (columns sized to what is left) while that buys
    # whole nodes; then the rest, a node or so per shape, by the integer program over every
    # column found. What is still left is the greedy's.
    nodes = sum(x)
    left = list(counts)
    out: list[Nodes] = []
    while work.left > 0:
        floor = [int(v + 1e-9) for v in x]
        if not any(floor):
            break
        _buy(master, floor, left, out)
        if not any(left):
            break
        master.set_counts(left)
        _, x, _ = _generate(master, Pricing(types, needs, left), types, work, 0)
    if any(left):
        # More choice for the integer program: every type's best configuration of what is left,
        # improving or not (a node that is a poor buy in the LP can be the right last node).
        master.set_counts(left)
        _, _, duals = master.solve()
        patterns, _ = Pricing(types, needs, left).greedy(duals)
        for t in range(len(types)):
            master.add(*pricing.tightest({s: int(n) for s, n in enumerate(patterns[t]) if n}, t))
        # And every configuration found, cut to what is left, on the cheapest type that holds it.
        for t, pattern, _ in list(master.columns):
            cut = {s: min(n, left[s]) for s, n in pattern.items() if min(n, left[s]) > 0}
            master.add(*pricing.tightest(cut, t))
    if nodes <= WHOLE_MIP_NODES:
        # A small plan: rounding down bought few nodes and left the rest to be decided alone;
        # the integer program over every column (those cut to the rest included) decides all.
        exact = master.integer(counts)
        if exact is not None:
            left, out = list(counts), []
            _buy(master, exact, left, out)
    elif any(left):
        exact = master.integer(left)
        if exact is not None:
            _buy(master, exact, left, out)
    return Packing(tuple(_downsized(out, pricing)), bound, proven, len(master.columns), note)


class _Work:
    """What is left of a search's ``WORK_BUDGET``, shared by its column generations."""

    def __init__(self, left: int) -> None:
        self.left = left


def _generate(
    master: Master, pricing: Pricing, types: Sequence[NodeType], work: _Work, exact_rounds: int
) -> tuple[float, list[float], bool]:
    """Column generation until no type has an improving configuration (proven), the exact
    rounds find none, or the work is spent: the LP's value, its solution, and whether it is
    optimal."""
    np = pricing.np
    value, x, duals = master.solve()
    # A pricing round's cells (``WORK_BUDGET``): every type prices every shape.
    cells = len(types) * len(pricing.need)
    for _ in range(MAX_ROUNDS):
        if work.left <= 0:
            break
        work.left -= cells
        patterns, values = pricing.greedy(duals)
        added = 0
        for t in map(int, np.argsort(-(values - pricing.price), kind="stable")):
            if values[t] <= types[t].price * (1 + EPSILON):
                break
            added += master.add(t, {s: int(n) for s, n in enumerate(patterns[t]) if n}, types[t].price)
        if not added:
            if not exact_rounds:
                return value, x, False
            exact_rounds -= 1
            bounds = pricing.upper_bounds(duals)
            hopeful = [t for t in range(len(types)) if bounds[t] > types[t].price * (1 + EPSILON)]
            # The types the greedy came closest to an improving column with first.
            hopeful.sort(key=lambda t: (types[t].price - values[t], t))
            for t in hopeful[:EXACT_TYPES]:
                pattern = pricing.exact(t, duals)
                worth = sum(duals[s] * n for s, n in pattern.items())
                if worth > types[t].price * (1 + EPSILON):
                    added += master.add(t, pattern, types[t].price)
            if not added:
                return value, x, len(hopeful) <= EXACT_TYPES
        value, x, duals = master.solve()
    return value, x, False


def _cost(nodes: Sequence[Nodes], types: Sequence[NodeType]) -> float:
    return sum(types[n.type].price * n.count for n in nodes)


def _downsized(nodes: Sequence[Nodes], pricing: Pricing) -> list[Nodes]:
    """Each node as the cheapest type that holds its pods: a configuration cut to the pods left
    (the last nodes of a shape) often fits a smaller type than the one the LP priced it for."""
    np = pricing.np
    out = []
    for n in nodes:
        used = sum(pricing.need[s] * k for s, k in n.pattern)
        holds = (pricing.free >= used[None, :]).all(axis=1)
        prices = np.where(holds, pricing.price, np.inf)
        best = int(np.argmin(prices))  # the first of equal prices: deterministic
        out.append(Nodes(best, n.pattern, n.count) if prices[best] < pricing.price[n.type] else n)
    return out


def _buy(master: Master, whole: Sequence[int], left: list[int], out: list[Nodes]) -> None:
    """``whole[j]`` nodes of each column, largest counts first, each holding at most what is left."""
    for j in sorted(range(len(whole)), key=lambda j: (-whole[j], j)):
        t, pattern, _ = master.columns[j]
        n = whole[j]
        # Fewer nodes when the pods ran out (a column may over-cover a shape).
        while n > 0:
            take = {s: min(k, left[s]) for s, k in pattern.items() if min(k, left[s]) > 0}
            if not take:
                break
            k = max(1, min(n, *(left[s] // c for s, c in take.items())))
            for s, c in take.items():
                left[s] -= c * k
            out.append(Nodes(t, tuple(sorted(take.items())), k))
            n -= k
