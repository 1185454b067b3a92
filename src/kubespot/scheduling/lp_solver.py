"""HiGHS for the provisioner's packing: a quiet solver instance, the restricted master LP of the
configuration LP (rows are pod shapes, columns configurations), and its integer program.

``highspy`` is imported on first use, and only here (the layering test's rule), so nothing that
never plans capacity loads it; the per-node agent never does (``.importlinter``). When it cannot
be used, ``SolverUnavailable`` says why and the simulation's greedy packs alone.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

#: Every solve is bounded by work, not time: HiGHS's ``time_limit`` is wall-clock, so a limit that
#: binds makes the plan depend on how busy the machine is (issue 13; docs/designs/provisioning.md,
#: "Determinism"). Simplex iterations one master LP solve may take (the benchmark's take at most 50).
LP_ITERATIONS = 20_000
#: Branch-and-bound nodes one pricing knapsack may explore (the benchmark's close at the root).
KNAPSACK_NODES = 1_000
#: Branch-and-bound nodes the integer program of the LP's remainder may explore. Most of its
#: work is at the root (cuts, and the sub-MIP heuristics: RINS is off, ``Master.integer``), so a
#: node limit only bounds the rest: 200 nodes took 6-7 CPU s on a 120-shape, 1 500-column
#: remainder (review 15b), 10 take about 1 s there for a remainder 0.35 % dearer (0.05 % of the plan).
#: benchmarks/scheduling.py: generic plans unchanged; diverse 10 000 pods $46.7196 -> $46.6372/h,
#: 20 000 $93.4307 -> $93.8745/h (+0.5 %); 50 nodes keep $93.4307 but take 2.2 CPU s on that cohort.
MIP_NODES = 10
#: Wall-clock seconds after which any one run is abandoned: only a guard against a solver that
#: hangs. The runs take milliseconds (the remainder's integer program under a second of CPU), so
#: this never binds on a working solver, however loaded the machine; the work limits above do.
HANG_GUARD_S = 60.0


class SolverUnavailable(Exception):
    """The LP solver is not installed, failed, or ran past its work limit (or ``HANG_GUARD_S``)."""


def module() -> Any:
    try:
        import highspy
    except ImportError as e:
        raise SolverUnavailable(f"the LP solver is not installed ({e})") from e
    return highspy


_quiet_lock = threading.Lock()
_banner_done = False


def new_solver() -> Any:
    """A silent HiGHS instance. HiGHS prints its banner to file descriptor 1 the first time an
    instance is made in a process; ``kubespot plan --output json`` owns stdout, so that first
    construction writes to stderr instead."""
    global _banner_done
    highspy = module()
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
    h.setOptionValue("time_limit", HANG_GUARD_S)
    h.setOptionValue("random_seed", 0)
    h.setOptionValue("threads", 1)
    return h


class Master:
    """The restricted master LP: rows are pod shapes (covered at least ``count`` times), columns
    are configurations with their node price."""

    def __init__(self, counts: Sequence[int]) -> None:
        self.hs = module()
        self.h = new_solver()
        self.h.setOptionValue("simplex_iteration_limit", LP_ITERATIONS)
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
        ``MIP_NODES``); None when it found no solution within them."""
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
        h = new_solver()
        # A branch-and-bound node limit, not a time limit, so the same input gives the same plan
        # however busy the machine is (a 2 s wall-clock limit used to cut it short under load).
        h.setOptionValue("mip_max_nodes", MIP_NODES)
        # Within 1 % of the best integer plan over these columns is enough, and it comes at the
        # root node: closing the last per cent can take seconds.
        h.setOptionValue("mip_rel_gap", 0.01)
        # RINS solves a sub-MIP at many nodes and at the root, each with its own node budget:
        # it was most of the work past the root there, and the plan did not need it.
        h.setOptionValue("mip_heuristic_run_rins", False)
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
