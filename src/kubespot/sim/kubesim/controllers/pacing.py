"""Serve API requests ahead of the simulated control plane, which shares their CPU and event loop.

A real kube-apiserver does not share a CPU with the controller manager, the scheduler and the
kubelets; kubesim runs all of them on one asyncio loop. Without pacing, a request that arrives while
the controllers have work waits behind a slice of every busy work loop, so a burst of API calls is
served at the rate the control plane's slices allow rather than at the API's own cost.

One ``Pacer`` per simulated cluster sits between the two. The HTTP layer reports each request it
serves (``request_started`` / ``request_finished``; long-running watch streams are not requests in
this sense). Every control-plane work loop asks ``due(slice_start)`` between units of work and, when
it is, awaits ``pause(slice_start)``; a loop about to wait for new work reports its last slice with
``charge(slice_start)``. The rules:

- **Slices.** While requests are coming (one started or finished in the last ``linger`` seconds), a
  work loop yields after ``busy_slice`` seconds of work (1 ms), otherwise after ``idle_slice``
  (20 ms: fewer switches when nobody waits), but see the share below.
- **Share.** The control plane's work is summed over a short window (an exponentially decaying sum
  with time constant ``window``, 50 ms). Below ``min_share`` of the wall time in that window a work
  loop does not yield early (only after ``idle_slice``): one turn of the event loop serving many
  requests can take longer than a slice, so short slices alone would not keep the share. At or above
  it, while requests are coming, a yielding loop stays away (sleeps), so the event loop serves
  requests meanwhile, until the share has decayed to ``min_share``. So the control plane never
  starves: it keeps about ``min_share`` of wall time while requests keep coming, and everything when
  they stop.
- **Idle.** Staying away is done in steps of ``quiet`` seconds (2 ms). A step in which no request
  started or finished, or in which the event loop's thread was busy less than half the time although
  the control plane was out of its way, shows that the requests do not need the time: the control
  plane then stops staying away for a ``window`` (it still yields after ``busy_slice``), so it idles
  beside an API that does not use the CPU for at most one step per window. (Whether requests wait
  cannot be judged while the controllers run: requests held up behind them look like none.)

The decisions depend only on the two clocks (both injectable) and the counters, so they are
unit-tested without an event loop (``due``, ``hold_for``, ``stayed_away``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

#: Seconds a control-plane work loop runs before yielding while requests are coming.
BUSY_SLICE_SECONDS = 0.001
#: Seconds a work loop runs before yielding otherwise (so a start-up resync of a large cluster still
#: lets a first request through within tens of milliseconds).
IDLE_SLICE_SECONDS = 0.02
#: Time constant, in seconds, of the window over which the control plane's share is measured.
WINDOW_SECONDS = 0.05
#: Seconds after the last request started or finished during which requests count as coming.
LINGER_SECONDS = 0.25
#: Seconds of one step of staying away; a step without requests or with the loop mostly idle ends it.
QUIET_SECONDS = 0.002
#: Least fraction of a step of staying away the event loop must be busy for it to go on.
BUSY_FRACTION = 0.5
#: Default least share of wall time the control plane keeps while requests go first.
DEFAULT_MIN_SHARE = 0.4


class Pacer:
    """Decides when the simulated control plane yields to API requests. See the module docstring."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        min_share: float = DEFAULT_MIN_SHARE,
        busy_slice: float = BUSY_SLICE_SECONDS,
        idle_slice: float = IDLE_SLICE_SECONDS,
        window: float = WINDOW_SECONDS,
        linger: float = LINGER_SECONDS,
        quiet: float = QUIET_SECONDS,
        clock: Callable[[], float] = time.perf_counter,
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        if not 0.0 < min_share <= 1.0:
            raise ValueError(f"the control plane's share must be in (0, 1], not {min_share}")
        if min(busy_slice, idle_slice, window, linger, quiet) <= 0:
            raise ValueError("pacing intervals must be positive")
        #: Off (or a share of 1): work loops yield after ``idle_slice`` and never wait for the API.
        self.enabled = enabled and min_share < 1.0
        self.min_share = min_share
        self.busy_slice = busy_slice
        self.idle_slice = idle_slice
        self.window = window
        self.linger = linger
        self.quiet = quiet
        self.clock = clock
        #: CPU seconds of the event loop's thread (tells whether the loop idled while holding back).
        self.cpu_clock = cpu_clock
        #: Requests being served now.
        self.in_flight = 0
        #: Counters for tests and benchmarks: requests served; times the control plane stayed away.
        self.served = 0
        self.pauses = 0
        self._activity = 0  # requests started + finished
        self._last_request = -math.inf
        self._idle_at = -math.inf  # when a step of staying away last found the requests not needing it
        self._spent = 0.0  # control-plane seconds, decayed with time constant ``window``
        self._spent_at = clock()

    # -- the API side ------------------------------------------------------------------------------

    def request_started(self) -> None:
        self.in_flight += 1
        self._activity += 1
        self._last_request = self.clock()

    def request_finished(self) -> None:
        self.in_flight -= 1
        self.served += 1
        self._activity += 1
        self._last_request = self.clock()

    def requests_coming(self, now: float | None = None) -> bool:
        """Whether a request is being served or one was in the last ``linger`` seconds."""
        if not self.enabled:
            return False
        if self.in_flight > 0:
            return True
        return (self.clock() if now is None else now) - self._last_request < self.linger

    def requests_waiting(self, now: float | None = None) -> bool:
        """Whether clients may be waiting for the loop: requests are coming, and no step of staying
        away in the last ``window`` found them not needing the time."""
        now = self.clock() if now is None else now
        return self.requests_coming(now) and now - self._idle_at >= self.window

    # -- the control-plane side --------------------------------------------------------------------

    def due(self, started: float) -> bool:
        """Whether a work loop whose slice began at ``started`` (a ``clock()`` reading) should yield.

        After ``idle_slice`` always; after ``busy_slice`` while requests are coming, unless the control
        plane (counting this slice) is still below its share: then it goes on, however long the event
        loop's turns are (a turn serving many requests at once can take longer than a slice)."""
        now = self.clock()
        elapsed = now - started
        if elapsed < self.busy_slice:
            return False
        if elapsed >= self.idle_slice:
            return True
        if not self.requests_coming(now):
            return False
        return self._decayed(now) + elapsed >= self.min_share * self.window

    def charge(self, started: float) -> float:
        """Account for a slice of control-plane work that began at ``started``; returns the time now."""
        now = self.clock()
        self._decay(now)
        self._spent += max(0.0, now - started)
        return now

    def share(self, now: float | None = None) -> float:
        """The control plane's share of wall time over the recent window (about 0 to 1)."""
        now = self.clock() if now is None else now
        self._decay(now)
        return self._spent / self.window

    def hold_for(self, now: float | None = None) -> float:
        """Seconds a yielding work loop should stay away now (0: just yield once and go on).

        Positive only while clients may be waiting and the control plane has had its share of the
        window: the time until that share has decayed to ``min_share``, but at most ``quiet`` (one
        step, after which the caller asks again).
        """
        now = self.clock() if now is None else now
        if not self.requests_waiting(now):
            return 0.0
        self._decay(now)
        floor = self.min_share * self.window
        if self._spent <= floor:
            return 0.0
        return min(self.window * math.log(self._spent / floor), self.quiet)

    def stayed_away(self, since: float, cpu_since: float, activity: int, now: float, cpu_now: float) -> None:
        """Judge a step of staying away that began at ``since`` (``clock``), ``cpu_since`` (``cpu_clock``)
        when the request activity counter read ``activity``: if no request came, or the loop's thread
        was busy less than ``BUSY_FRACTION`` of the step, the requests did not need the time."""
        took = now - since
        if took <= 0:
            return
        no_request = activity == self._activity and self.in_flight == 0
        if no_request or (cpu_now - cpu_since) / took < BUSY_FRACTION:
            self._idle_at = now

    async def pause(self, started: float) -> float:
        """End a slice that began at ``started``: yield, or stay away while requests go first.

        Returns the start of the next slice."""
        now = self.charge(started)
        wait = self.hold_for(now)
        if wait <= 0.0:
            await asyncio.sleep(0)
            return self.clock()
        self.pauses += 1
        while wait > 0.0:
            activity, cpu = self._activity, self.cpu_clock()
            await asyncio.sleep(wait)
            later = self.clock()
            if later - now >= self.quiet:
                self.stayed_away(now, cpu, activity, later, self.cpu_clock())
            now = later
            wait = self.hold_for(now)
        return now

    def _decayed(self, now: float) -> float:
        dt = now - self._spent_at
        return self._spent * math.exp(-dt / self.window) if dt > 0 else self._spent

    def _decay(self, now: float) -> None:
        if now > self._spent_at:
            self._spent = self._decayed(now)
            self._spent_at = now
