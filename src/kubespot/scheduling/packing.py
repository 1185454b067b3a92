"""New capacity packed by the configuration LP: which nodes of which types hold a cohort of pods.

The configuration LP (Gilmore-Gomory; docs/designs/provisioning.md, "The lower bound, and where the
packing stands") has one column per (instance type, how many pods of each shape one node of it
holds) and one row per pod shape: buy enough nodes of each configuration to cover every pending
pod, at least cost. Its relaxation is solved by column generation: the restricted LP's duals price
each pod shape, and per type a bounded integer knapsack over every requested resource (and the pod
slots) finds the configuration worth more than the node costs. Each improving column is added and
the LP re-solved until no type has one (or the rounds or the time budget end the search). The
solution is then rounded down to whole nodes and re-generated for what is left while that yields
whole nodes; the last pods go to an integer program over the columns found (a small plan is also
solved whole that way), and each node becomes the cheapest type that holds its pods. Whatever is
still unplaced is the simulation's greedy's.

Deterministic, and no I/O but for keeping HiGHS's banner off stdout: shapes, types and prices in,
whole nodes out. The LP solver is HiGHS through ``highspy`` (the decision and its measurements are
in the design note), imported on first use so nothing that never plans capacity loads it; the
per-node agent never does (``.importlinter``).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .pods import PodView

#: Rounds of column generation (LP solve, pricing of every type) in one search: the deterministic
#: end of a search that neither converges nor runs out of exact rounds (the generic mix needs
#: 20-30).
MAX_ROUNDS = 100
#: Seconds one cohort's search may take for one capacity type, a guard for a starved machine: past
#: it, the columns found so far are used (the restricted LP is always a valid plan, only a less
#: cheap one). A 20 000-pod plan must stay within the 8 s goal with two capacity types to compare.
TIME_BUDGET_S = 3.0
#: A single LP or knapsack solve that takes this long means HiGHS is in trouble: the packing falls
#: back to the greedy instead of waiting on it.
SOLVE_LIMIT_S = 1.0
#: Columns priced below ``price * (1 + EPSILON)`` are not worth the iteration (rounding noise).
EPSILON = 1e-6
#: Seconds HiGHS may spend on the integer program of the LP's fractional remainder (a few dozen
#: nodes at most); past it the greedy packs that remainder.
RESIDUE_LIMIT_S = 2.0
#: Branch-and-bound nodes the integer program may explore (deterministic, unlike its time limit).
MIP_NODES = 200
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
    is within about that of the LP's optimum; otherwise rounds or time ran out first."""

    nodes: tuple[Nodes, ...]
    bound: float
    proven: bool
    columns: int
    note: str


class SolverUnavailable(Exception):
    """The LP solver is not installed, failed, or ran past ``SOLVE_LIMIT_S``."""


_quiet_lock = threading.Lock()
_banner_done = False


def _highs() -> Any:
    """A silent HiGHS instance. HiGHS prints its banner to file descriptor 1 the first time an
    instance is made in a process; ``kubespot plan --output json`` owns stdout, so that first
    construction writes to stderr instead."""
    global _banner_done
    highspy = _module()
    with _quiet_lock:
        if not _banner_done:
            sys.stdout.flush()
            saved = os.dup(1)
            try:
                os.dup2(2, 1)
                h = highspy.Highs()
                # C's stdio buffers what HiGHS printed: out it goes while fd 1 is still stderr.
                ctypes.CDLL(None).fflush(None)
            finally:
                os.dup2(saved, 1)
                os.close(saved)
            _banner_done = True
        else:
            h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", SOLVE_LIMIT_S)
    h.setOptionValue("random_seed", 0)
    h.setOptionValue("threads", 1)
    return h


class _Master:
    """The restricted master LP: rows are pod shapes (covered at least ``count`` times), columns
    are configurations with their node price."""

    def __init__(self, counts: Sequence[int]) -> None:
        self.hs = _module()
        self.h = _highs()
        inf = self.hs.kHighsInf
        rows = len(counts)
        self.h.addRows(rows, [float(c) for c in counts], [inf] * rows, 0, [0] * (rows + 1), [], [])
        self.columns: list[tuple[int, dict[int, int], float]] = []
        self.seen: set[tuple[int, tuple[tuple[int, int], ...]]] = set()

    def add(self, t: int, pattern: Mapping[int, int], price: float) -> bool:
        key = (t, tuple(sorted(pattern.items())))
        if key in self.seen or not pattern:
            return False
        self.seen.add(key)
        idx = sorted(pattern)
        self.h.addCol(price, 0.0, self.hs.kHighsInf, len(idx), idx, [float(pattern[i]) for i in idx])
        self.columns.append((t, dict(pattern), price))
        return True

    def set_counts(self, counts: Sequence[int]) -> None:
        n = len(counts)
        self.h.changeRowsBounds(n, list(range(n)), [float(c) for c in counts], [self.hs.kHighsInf] * n)

    def integer(self, counts: Sequence[int]) -> list[int] | None:
        """Whole nodes per column covering ``counts`` at least cost (HiGHS's MIP within
        ``RESIDUE_LIMIT_S``); None when it found no solution in time."""
        hs = self.hs
        lp = hs.HighsLp()
        lp.num_col_ = len(self.columns)
        lp.num_row_ = len(counts)
        lp.col_cost_ = [price for _, _, price in self.columns]
        lp.col_lower_ = [0.0] * len(self.columns)
        lp.col_upper_ = [float(max(counts, default=0))] * len(self.columns)
        lp.row_lower_ = [float(c) for c in counts]
        lp.row_upper_ = [hs.kHighsInf] * len(counts)
        lp.a_matrix_.format_ = hs.MatrixFormat.kColwise
        starts, index, values = [0], [], []
        for _, pattern, _ in self.columns:
            for s in sorted(pattern):
                index.append(s)
                values.append(float(pattern[s]))
            starts.append(len(index))
        lp.a_matrix_.start_ = starts
        lp.a_matrix_.index_ = index
        lp.a_matrix_.value_ = values
        lp.integrality_ = [hs.HighsVarType.kInteger] * len(self.columns)
        h = _highs()
        # A branch-and-bound node limit, not only a time limit, so the same input gives the same
        # plan however busy the machine is; the time limit is the guard against a slow solve.
        h.setOptionValue("mip_max_nodes", MIP_NODES)
        # Within 1 % of the best integer plan over these columns is enough, and it comes at the
        # root node: closing the last per cent can take seconds.
        h.setOptionValue("mip_rel_gap", 0.01)
        h.setOptionValue("time_limit", RESIDUE_LIMIT_S)
        h.passModel(lp)
        h.run()
        if h.getInfo().primal_solution_status != 2:  # kSolutionStatusFeasible
            return None
        return [round(v) for v in h.getSolution().col_value]

    def solve(self) -> tuple[float, list[float], list[float]]:
        self.h.run()
        status = self.h.getModelStatus()
        if status != self.hs.HighsModelStatus.kOptimal:
            raise SolverUnavailable(f"the LP ended {self.h.modelStatusToString(status)}")
        sol = self.h.getSolution()
        return self.h.getInfo().objective_function_value, list(sol.col_value), list(sol.row_dual)


class _Pricing:
    """The pricing problem of every type at once: per type, the configuration the duals value most,
    a bounded integer knapsack over every resource the shapes request (the pod slot included).

    ``greedy`` fills every type's node at once (numpy across types), shapes in order of dual value
    per unit of size, for a few ways of weighing the resources; ``exact`` asks HiGHS's MIP for the
    types whose upper bound says the greedy may have missed a column."""

    def __init__(self, types: Sequence[NodeType], needs: Sequence[Mapping[str, int]], counts: Sequence[int]):
        import numpy as np

        self.np = np
        self.resources = sorted({k for need in needs for k, v in need.items() if v > 0})
        self.need = np.array([[need.get(r, 0) for r in self.resources] for need in needs], dtype=np.int64)
        self.free = np.array(
            [[max(t.free.get(r, 0), 0) for r in self.resources] for t in types], dtype=np.int64
        ).reshape(len(types), len(self.resources))
        self.price = np.array([t.price for t in types], dtype=float)
        big = np.int64(1 << 40)
        # caps[t, s]: how many pods of shape s one node of type t holds alone (at most all of them).
        per = np.where(self.need[None, :, :] > 0, self.free[:, None, :] // np.maximum(self.need, 1), big)
        self.caps = np.minimum(per.min(axis=2), np.array(counts, dtype=np.int64)[None, :])
        shares = self.need[None, :, :] / np.maximum(self.free[:, None, :], 1)  # T x S x R
        # A size per way of weighing the resources: each alone, and mixes leaning to each in turn
        # (which one packs a node best depends on the node's shape and the duals).
        mixes = [np.eye(len(self.resources))[r] for r in range(len(self.resources))]
        for lean in (0.25, 1.0, 4.0):
            for r in range(len(self.resources)):
                w = np.ones(len(self.resources))
                w[r] = lean
                mixes.append(w)
        unique = {tuple(m) for m in mixes}
        self.sizes = [shares @ np.array(m) for m in sorted(unique)]
        self.mips: dict[int, Any] = {}

    def greedy(self, duals: Sequence[float]) -> tuple[Any, Any]:
        """Per type, the best greedy configuration and its dual value."""
        np = self.np
        d = np.maximum(np.array(duals, dtype=float), 0.0)
        types, shapes = self.caps.shape
        rows = np.arange(types)
        usable = (self.caps > 0) & (d[None, :] > 1e-12)
        best = np.zeros((types, shapes), dtype=np.int64)
        best_value = np.zeros(types)
        for size in self.sizes:
            score = np.where(usable, d[None, :] / np.maximum(size, 1e-12), -1.0)
            order = np.argsort(-score, axis=1, kind="stable")
            left = self.free.copy()
            pattern = np.zeros((types, shapes), dtype=np.int64)
            for k in range(shapes):
                s = order[:, k]
                need = self.need[s]  # types x resources
                fit = np.where(need > 0, left // np.maximum(need, 1), 1 << 40).min(axis=1)
                n = np.where(score[rows, s] > 0, np.minimum(fit, self.caps[rows, s]), 0)
                pattern[rows, s] = n
                left -= need * n[:, None]
            value = pattern @ d
            better = value > best_value + 1e-12
            best[better] = pattern[better]
            best_value[better] = value[better]
        for part in ADAPTIVE_PARTS:
            pattern = self._adaptive(d, usable, part)
            value = pattern @ d
            better = value > best_value + 1e-12
            best[better] = pattern[better]
            best_value[better] = value[better]
        return best, best_value

    def _adaptive(self, d: Any, usable: Any, part: int) -> Any:
        """Per type, a node filled a little at a time (``1/part`` of what still fits of the chosen
        shape), each time with the shape worth most per share of the resource it uses most of what
        is left: as one resource runs low, shapes light on it win, so the node fills evenly."""
        np = self.np
        types, shapes = self.caps.shape
        left = self.free.copy()
        pattern = np.zeros((types, shapes), dtype=np.int64)
        need = self.need[None, :, :].astype(float)
        active = np.arange(types)
        for _ in range(MAX_STEPS):
            # need / room <= 1 for every resource: the shape still fits (room 0 counts as half a
            # unit, so a shape needing one of it does not).
            share = (need / np.maximum(left[active, None, :], 0.5)).max(axis=2)
            ok = usable[active] & (share <= 1.0) & (pattern[active] < self.caps[active])
            score = np.where(ok, d[None, :] / np.maximum(share, 1e-12), -1.0)
            s = score.argmax(axis=1)
            go = score[np.arange(len(active)), s] > 0
            if not go.all():
                active, s = active[go], s[go]
                if not len(active):
                    break
            chosen = self.need[s]
            fit = np.where(chosen > 0, left[active] // np.maximum(chosen, 1), 1 << 40).min(axis=1)
            k = np.minimum(self.caps[active, s] - pattern[active, s], np.maximum(fit // part, 1))
            pattern[active, s] += k
            left[active] -= chosen * k[:, None]
        return pattern

    def tightest(self, pattern: Mapping[int, int], t: int) -> tuple[int, Mapping[int, int], float]:
        """The cheapest type holding ``pattern`` (``t`` unless one is cheaper), for ``_Master.add``."""
        np = self.np
        used = sum(
            (self.need[s] * k for s, k in pattern.items()), np.zeros(len(self.resources), dtype=np.int64)
        )
        prices = np.where((self.free >= used[None, :]).all(axis=1), self.price, np.inf)
        best = int(np.argmin(prices))
        if not prices[best] < self.price[t]:
            best = t
        return best, pattern, float(self.price[best])

    def upper_bounds(self, duals: Sequence[float]) -> Any:
        """Per type, a bound no configuration's dual value exceeds: for each resource every live
        shape needs, the best value per unit times what the node has (and never more than every
        pod the node holds alone)."""
        np = self.np
        d = np.maximum(np.array(duals, dtype=float), 0.0)
        live = (self.caps > 0) & (d[None, :] > 1e-12)
        bound = (self.caps * d[None, :]).sum(axis=1).astype(float)
        for r in range(len(self.resources)):
            need = self.need[:, r]
            dens = np.where(live & (need[None, :] > 0), d[None, :] / np.maximum(need, 1)[None, :], 0.0)
            covered = ~(live & (need[None, :] == 0)).any(axis=1)
            bound = np.where(covered, np.minimum(bound, dens.max(axis=1) * self.free[:, r]), bound)
        return bound

    def exact(self, t: int, duals: Sequence[float]) -> dict[int, int]:
        hs = _module()
        shapes = self.need.shape[0]
        mip = self.mips.get(t)
        if mip is None:
            lp = hs.HighsLp()
            lp.num_col_ = shapes
            lp.num_row_ = len(self.resources)
            lp.col_cost_ = [0.0] * shapes
            lp.col_lower_ = [0.0] * shapes
            lp.col_upper_ = [float(c) for c in self.caps[t]]
            lp.row_lower_ = [-hs.kHighsInf] * len(self.resources)
            lp.row_upper_ = [float(v) for v in self.free[t]]
            lp.a_matrix_.format_ = hs.MatrixFormat.kColwise
            starts, index, values = [0], [], []
            for s in range(shapes):
                for r in range(len(self.resources)):
                    if self.need[s, r] > 0:
                        index.append(r)
                        values.append(float(self.need[s, r]))
                starts.append(len(index))
            lp.a_matrix_.start_ = starts
            lp.a_matrix_.index_ = index
            lp.a_matrix_.value_ = values
            lp.integrality_ = [hs.HighsVarType.kInteger] * shapes
            lp.sense_ = hs.ObjSense.kMaximize
            mip = self.mips[t] = _highs()
            # A column within 2 % of the best one is as good for the LP: stop there.
            mip.setOptionValue("mip_rel_gap", 0.02)
            mip.setOptionValue("presolve", "off")
            mip.passModel(lp)
        mip.changeColsCost(shapes, list(range(shapes)), [max(d, 0.0) for d in duals])
        mip.run()
        if mip.getModelStatus() != hs.HighsModelStatus.kOptimal:
            raise SolverUnavailable("a knapsack did not solve in time")
        pattern = {s: round(v) for s, v in enumerate(mip.getSolution().col_value) if round(v) > 0}
        # HiGHS's integrality tolerance: a rounded solution must still fit the node.
        if any(
            sum(self.need[s, r] * n for s, n in pattern.items()) > self.free[t, r]
            for r in range(len(self.resources))
        ):
            return {}
        return pattern


def _module() -> Any:
    try:
        import highspy
    except ImportError as e:
        raise SolverUnavailable(f"the LP solver is not installed ({e})") from e
    return highspy


#: The adaptive greedy's steps: each takes ``1/part`` of what still fits of one shape, so a node of
#: a hundred pods fills in a few dozen steps.
ADAPTIVE_PARTS = (2, 4)
MAX_STEPS = 64
#: Types whose knapsack the MIP solves per exact round, most promising first (each ~10 ms).
EXACT_TYPES = 12
#: Starting columns per shape: its cheapest types per pod, alone on a node.
SEED_TYPES = 3


def pack(
    needs: Sequence[Mapping[str, int]],
    counts: Sequence[int],
    types: Sequence[NodeType],
    *,
    budget_s: float = TIME_BUDGET_S,
    exact_rounds: int = EXACT_ROUNDS,
    whole: bool = True,
) -> Packing:
    """Whole nodes covering as many of ``counts[s]`` pods needing ``needs[s]`` (pod slot included)
    as the rounded LP solution holds (none unless ``whole``: the LP's value is all that is asked).
    Raises ``SolverUnavailable`` when HiGHS cannot be used, and ``ValueError`` when no shape fits
    any type."""
    started = time.monotonic()
    # A quarter of the budget is kept for the rounding's own column generation.
    deadline = started + budget_s * (0.75 if whole else 1.0)
    # A shape no type holds is left out (its pods stay pending for the greedy to explain).
    counts = [
        c if any(all(t.free.get(r, 0) >= v for r, v in need.items()) for t in types) else 0
        for need, c in zip(needs, counts, strict=True)
    ]
    if not any(counts):
        raise ValueError("no shape fits any type")
    master = _Master(counts)
    pricing = _Pricing(types, needs, counts)
    caps = pricing.caps
    # Each shape alone on its cheapest types per pod: the restricted LP is feasible from the start.
    for s in range(len(needs)):
        fits = [t for t in range(len(types)) if caps[t, s] > 0]
        for t in sorted(fits, key=lambda t: (types[t].price / caps[t, s], t))[:SEED_TYPES]:
            master.add(t, {s: int(caps[t, s])}, types[t].price)
    bound, x, proven = _generate(master, pricing, types, deadline, exact_rounds)
    stopped = "" if proven else ", stopped early"
    note = f"configuration LP ${bound:.4f}/h over {len(master.columns)} columns{stopped}"
    if not whole:
        return Packing((), bound, proven, len(master.columns), note)
    deadline = started + budget_s
    # Rounding: each configuration's count rounded down, its pods capped at what is still
    # pending; the LP re-generated for the rest (columns sized to what is left) while that buys
    # whole nodes; then the rest, a node or so per shape, by the integer program over every
    # column found. What is still left is the greedy's.
    nodes = sum(x)
    left = list(counts)
    out: list[Nodes] = []
    while time.monotonic() < deadline:
        floor = [int(v + 1e-9) for v in x]
        if not any(floor):
            break
        _buy(master, floor, left, out)
        if not any(left):
            break
        master.set_counts(left)
        _, x, _ = _generate(master, _Pricing(types, needs, left), types, deadline, 0)
    if any(left):
        # More choice for the integer program: every type's best configuration of what is left,
        # improving or not (a node that is a poor buy in the LP can be the right last node).
        master.set_counts(left)
        _, _, duals = master.solve()
        patterns, _ = _Pricing(types, needs, left).greedy(duals)
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


def _generate(
    master: _Master, pricing: _Pricing, types: Sequence[NodeType], deadline: float, exact_rounds: int
) -> tuple[float, list[float], bool]:
    """Column generation until no type has an improving configuration (proven), the exact
    rounds find none, or the deadline: the LP's value, its solution, and whether it is optimal."""
    np = pricing.np
    value, x, duals = master.solve()
    for _ in range(MAX_ROUNDS):
        if time.monotonic() >= deadline:
            break
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


def _downsized(nodes: Sequence[Nodes], pricing: _Pricing) -> list[Nodes]:
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


def _buy(master: _Master, whole: Sequence[int], left: list[int], out: list[Nodes]) -> None:
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
