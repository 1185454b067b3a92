"""The garbage collector of a long-running kubespot process: what start-up leaves, and how often the
collector runs while a burst of work allocates.

Both processes call ``settle_after_startup`` once their first sync is done. The controller also asks
for ``BURST_THRESHOLDS``: CPython's defaults (a young collection every 700 net allocations, a full one
every 100 young ones once the old generation grew by a quarter) made a 1 000-node burst spend 2.5 of
its first 4 seconds collecting: the drains allocate hundreds of thousands of long-lived objects
(tasks, pod views, per-pod results) in a few seconds, and each full collection re-scanned all of
them (13 full collections of 0.2 to 0.5 s, measured with ``gc.callbacks`` in ``queue_burst.py``). With
the thresholds below the same burst ran no full collection and ~1 s of young ones, and sent its
first-tier Evictions 37 % sooner at the same peak RSS (docs/PERFORMANCE.md). Only cycles are left to
the collector (reference counting frees everything else at once), so a rarer full collection costs
memory only for cyclic garbage that lived long enough to be promoted, which a full collection after
``FULL_EVERY`` young ones still reclaims.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc

#: Net allocations between young collections (CPython's default: 700).
YOUNG = 20_000
#: Young collections per middle one (default 10): a middle collection scans up to ``YOUNG`` times this.
MIDDLE_EVERY = 50
#: Middle collections per full one (default 10), on top of CPython's own rule that the old
#: generation must have grown by a quarter since the last full collection: about 10^8 allocations,
#: minutes of a burst's work or hours of an idle controller's.
FULL_EVERY = 100
BURST_THRESHOLDS = (YOUNG, MIDDLE_EVERY, FULL_EVERY)


def settle_after_startup(*, thresholds: tuple[int, int, int] | None = None) -> None:
    """Collect what start-up left, freeze the long-lived rest out of the collector's way, and hand
    freed heap pages back to the system; then apply ``thresholds`` if given.

    ``gc.freeze`` moves every object alive now (modules, settings, the synced index) to a generation
    no collection scans again: idle CPU in the agent, which runs on every node, and the cost of every
    full collection in the controller. glibc keeps freed pages until asked (~3 MiB in the agent)."""
    gc.collect()
    gc.freeze()
    with contextlib.suppress(OSError, AttributeError):  # not glibc (e.g. musl): nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    if thresholds is not None:
        gc.set_threshold(*thresholds)
