"""The configuration LP's pricing problem for every candidate type at once: per type, the
configuration (pods of each shape on one node) the LP's duals value most, a bounded integer
knapsack over every resource the shapes request and the pod slots.

Greedy fills vectorised across types with numpy (fixed orders by dual value per unit of size, and
an adaptive fill that keeps a node's resources even) find most columns; HiGHS's MIP solves the
knapsack of the most promising types exactly when the greedy finds none (``lp_solver``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import lp_solver

if TYPE_CHECKING:
    from .packing import NodeType

#: The adaptive greedy's steps: each takes ``1/part`` of what still fits of one shape, so a node of
#: a hundred pods fills in a few dozen steps.
ADAPTIVE_PARTS = (2, 4)
MAX_STEPS = 64


class Pricing:
    """The pricing problem of every type at once: per type, the configuration the duals value most,
    a bounded integer knapsack over every resource the shapes request (the pod slot included).

    ``greedy`` fills every type's node at once (numpy across types), shapes in order of dual value
    per unit of size, for a few ways of weighing the resources, and adaptively; ``exact`` asks
    HiGHS's MIP for one type (the caller picks those the greedy came closest with);
    ``upper_bounds`` says which types could still hold an improving configuration at all."""

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
        hs = lp_solver.module()
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
            mip = self.mips[t] = lp_solver.new_solver()
            # A column within 2 % of the best one is as good for the LP: stop there.
            mip.setOptionValue("mip_rel_gap", 0.02)
            mip.setOptionValue("presolve", "off")
            # Work, not time, bounds it (lp_solver: a plan must not depend on the machine's load).
            mip.setOptionValue("mip_max_nodes", lp_solver.KNAPSACK_NODES)
            mip.passModel(lp)
        mip.changeColsCost(shapes, list(range(shapes)), [max(d, 0.0) for d in duals])
        mip.run()
        if mip.getModelStatus() != hs.HighsModelStatus.kOptimal:
            raise lp_solver.SolverUnavailable("a knapsack did not solve within its work limit")
        pattern = {s: round(v) for s, v in enumerate(mip.getSolution().col_value) if round(v) > 0}
        # HiGHS's integrality tolerance: a rounded solution must still fit the node.
        if any(
            sum(self.need[s, r] * n for s, n in pattern.items()) > self.free[t, r]
            for r in range(len(self.resources))
        ):
            return {}
        return pattern
