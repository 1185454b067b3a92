"""The garbage collector of a long-running kubespot process: what start-up leaves, and how often the
collector runs while a burst of work allocates.

Both processes call ``settle_after_startup`` once their first sync is done. The controller also asks
for ``BURST_THRESHOLDS`` and runs ``collect_periodically``.

Why the controller needs more than the defaults: CPython's thresholds (700, 10, 10) made a
1 000-node burst spend 2.5 of its first 4 seconds collecting. The drains allocate hundreds of
thousands of long-lived objects (tasks, pod views, per-pod results) in a few seconds. CPython starts
a full collection every 100 young ones once the old generation has grown by a quarter, and each one
re-scanned everything the burst had built (13 full collections of 0.2 to 0.5 s, measured with
``gc.callbacks`` in ``queue_burst.py``). With the thresholds below the same burst ran no full
collection and about 1 s of young ones. It sent its first-tier Evictions 42 % sooner, for 9 MiB more
peak RSS (docs/PERFORMANCE.md).

The price: reference counting still frees everything acyclic at once, but cyclic garbage that lived
long enough to reach the old generation (a drain's tasks and the exceptions they hold, once the
drain is over) now waits for a full collection, and the thresholds alone would start one only after
about 10^8 net allocations: never, for an idle controller, so each burst's cycles would pile up on
the last one's. ``collect_periodically`` runs a full collection every ``FULL_COLLECTION_SECONDS``
instead: a burst's leftovers live minutes, not for ever.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger("kubespot.collector")

#: Net allocations (allocations minus frees of tracked objects) between young collections
#: (CPython's default: 700).
YOUNG = 20_000
#: Young collections per middle one (default 10): a middle collection scans up to ``YOUNG`` times this.
MIDDLE_EVERY = 50
#: Middle collections per full one (default 10), on top of CPython's own rule that the old
#: generation must have grown by a quarter since the last full collection: about 10^8 net
#: allocations, more than a 1 000-node burst makes. Full collections come from
#: ``collect_periodically`` instead.
FULL_EVERY = 100
BURST_THRESHOLDS = (YOUNG, MIDDLE_EVERY, FULL_EVERY)
#: Seconds between the controller's own full collections. One costs 0.2 to 0.5 s of a core in the
#: middle of a 1 000-node burst, far less when idle; every 5 minutes bounds how long a burst's cyclic
#: garbage stays without costing a burst more than one such pause.
FULL_COLLECTION_SECONDS = 300.0


def settle_after_startup(*, thresholds: tuple[int, int, int] | None = None) -> None:
    """Collect what start-up left, freeze the long-lived rest out of the collector's way, and hand
    freed heap pages back to the system; then apply ``thresholds`` if given.

    ``gc.freeze`` moves every object alive now to a generation no collection scans again: the
    modules, the settings, the synced index, and whatever work the process had started by then (in
    the controller, the states resumed at start-up and any message already received). That saves
    idle CPU in the agent, which runs on every node, and the cost of every full collection in the
    controller. A cycle among frozen objects is never freed; what start-up creates is bounded and
    alive anyway. glibc keeps freed pages until asked (~3 MiB in the agent)."""
    gc.collect()
    gc.freeze()
    with contextlib.suppress(OSError, AttributeError):  # not glibc (e.g. musl): nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    if thresholds is not None:
        gc.set_threshold(*thresholds)


async def collect_periodically(
    sleep: Callable[[float], Awaitable[None]], *, seconds: float = FULL_COLLECTION_SECONDS
) -> None:
    """A full collection every ``seconds``, until cancelled (see the module's docstring)."""
    while True:
        await sleep(seconds)
        started = time.perf_counter()
        freed = gc.collect()
        log.debug("full collection: %d objects freed in %.3f s", freed, time.perf_counter() - started)
