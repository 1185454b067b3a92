"""Leader election among controller replicas, and the singleton duties the leader runs.

The queue is shared by every replica; a few duties must run once per cluster (the managed-instance
gauge, node clean-up). The replica holding a coordination.k8s.io Lease runs them, as client-go's
leaderelection package decides it:

- **Acquire** when the Lease does not exist, names nobody, or has stopped changing: a candidate
  takes it only after the record it reads has stayed the same for the lease duration *on its own
  clock* (it never compares the holder's renewTime with its own time, so clock skew between nodes
  does not matter). Writes are compare-and-set on resourceVersion: of two candidates one wins, the
  other's 409 just means "read again next round".
- **Renew** every retry period. A leader that has not renewed for the renew deadline stops its
  duties; the deadline is shorter than the lease duration, so it has stopped before anyone else may
  take over. It then competes again like any replica.
- **Release** at a clean shutdown: holder "" and leaseDurationSeconds 1, so another replica takes
  over within a retry period instead of a lease duration.

Duties are coroutines started as tasks when this replica becomes leader and cancelled when it stops
being leader; a duty must never end by itself (a crashed one is logged and restarted).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import random
import secrets
import socket
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Protocol

from kubespot.config.leader import JITTER_FACTOR, LeaderElectionSettings
from kubespot.kube import KubeError, LeaseRecord, LeaseView
from kubespot.model import Clock
from kubespot.observability.hooks import call_hook

log = logging.getLogger("kubespot.controller.leader")

#: Where Kubernetes mounts the pod's namespace with its service-account token.
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_NAMESPACE = "kube-system"
#: Seconds a crashed duty waits before it is started again (it should never crash).
DUTY_RESTART_DELAY = 5.0

Duty = Callable[[], Awaitable[None]]


class LeaseLock(Protocol):
    """What the elector needs from the API (``kubespot.kube.Leases``; a fake in tests)."""

    async def get(self, namespace: str, name: str) -> LeaseView | None: ...

    async def create(self, namespace: str, name: str, record: LeaseRecord) -> LeaseView: ...

    async def update(self, current: LeaseView, record: LeaseRecord) -> LeaseView: ...


def identity(pod_name: str | None) -> str:
    """This replica's holder identity: its pod name (else the host name) and a random suffix, so a
    restarted pod with the same name never mistakes its predecessor's lease for its own."""
    return f"{pod_name or socket.gethostname()}_{secrets.token_hex(4)}"


def lease_namespace(
    settings: LeaderElectionSettings, pod_namespace: str | None, *, sa_file: Path = SERVICE_ACCOUNT_NAMESPACE
) -> str:
    """The Lease's namespace: the setting, else the pod's, else the service account's, else kube-system."""
    if settings.namespace:
        return settings.namespace
    return own_namespace(pod_namespace, sa_file=sa_file)


def own_namespace(pod_namespace: str | None, *, sa_file: Path = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """The controller's own namespace: the pod's, else the service account's, else kube-system."""
    if pod_namespace:
        return pod_namespace
    try:
        found = sa_file.read_text(encoding="utf-8").strip()
    except OSError:
        found = ""
    return found or DEFAULT_NAMESPACE


class Duties:
    """The singleton duties as tasks: started on ``start()``, cancelled and awaited on ``stop()``."""

    def __init__(self, duties: Mapping[str, Duty], *, clock: Clock) -> None:
        self._duties = dict(duties)
        self._clock = clock
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def add(self, name: str, duty: Duty) -> None:
        self._duties[name] = duty

    @property
    def running(self) -> list[str]:
        return sorted(name for name, task in self._tasks.items() if not task.done())

    def start(self) -> None:
        for name, duty in self._duties.items():
            if name not in self._tasks or self._tasks[name].done():
                self._tasks[name] = asyncio.create_task(self._keep(name, duty), name=f"duty-{name}")

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def _keep(self, name: str, duty: Duty) -> None:
        while True:
            try:
                await duty()
                log.error("duty %s ended by itself; restarting it", name)
            except Exception:
                log.exception("duty %s failed; restarting it", name)
            await self._clock.sleep(DUTY_RESTART_DELAY)


class LeaderElector:
    """Competes for the Lease until cancelled, running ``duties`` while it leads.

    ``on_change(leading)`` is told every change of leadership (for the ``kubespot_leader`` gauge).
    """

    def __init__(
        self,
        lock: LeaseLock,
        *,
        namespace: str,
        name: str,
        identity: str,
        settings: LeaderElectionSettings,
        duties: Duties,
        clock: Clock,
        on_change: Callable[[bool], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._lock = lock
        self.namespace, self.name, self.identity = namespace, name, identity
        self._duration = settings.lease_duration
        self._renew_deadline = settings.renew_deadline
        self._retry = settings.retry_period
        self._duties = duties
        self._clock = clock
        self._on_change = on_change
        self._rng = rng or random.Random()
        self._leading = False
        #: The lease as last read or written by us, and when (our monotonic clock) its record last
        #: changed as we saw it: the basis of "has the holder stopped renewing?".
        self._lease: LeaseView | None = None
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._reported_holder: str | None = None

    @property
    def is_leader(self) -> bool:
        return self._leading

    @property
    def holder(self) -> str:
        """The holder identity last seen ("" when none)."""
        return self._observed.holder if self._observed is not None else ""

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def run(self) -> None:
        """Acquire, lead, and after a lost lease start over; release the lease when cancelled."""
        log.info("leader election on lease %s as %s", self.describe(), self.identity)
        try:
            while True:
                acquired_at = await self._acquire()
                self._set_leading(True)
                try:
                    await self._renew(acquired_at)
                finally:
                    self._set_leading(False)
                    await self._duties.stop()
        finally:
            await self._release()

    # -- the loops -------------------------------------------------------------------------------

    async def _acquire(self) -> float:
        """Try until the lease is ours; return when (monotonic) the successful attempt started."""
        while True:
            started = self._clock.monotonic()
            if await self._attempt():
                return started
            # client-go's wait.JitterUntil: the period plus up to JITTER_FACTOR periods more, so
            # candidates spread out instead of hitting the API server in step.
            await self._clock.sleep(self._retry * (1 + self._rng.random() * JITTER_FACTOR))

    async def _renew(self, renewed_at: float) -> None:
        """Renew every retry period; return once renewals have failed for the renew deadline (counted
        from ``renewed_at``, then from each successful renewal), or another replica holds the lease.

        Every deadline counts from when the successful request was *sent*: the write may have reached
        the server any time after that, and the others' lease duration counts from when they saw it.
        """
        while True:
            deadline = renewed_at + self._renew_deadline
            # After a failure the next try comes sooner if the deadline is nearer than a period, so
            # the duties stop at the deadline, not up to a period after it.
            await self._clock.sleep(min(self._retry, max(0.0, deadline - self._clock.monotonic())))
            started = self._clock.monotonic()
            if started >= deadline:
                log.warning(
                    "lost leadership of lease %s: not renewed for %.1fs",
                    self.describe(),
                    self._renew_deadline,
                )
                return
            try:
                ok = await asyncio.wait_for(self._attempt(), timeout=deadline - started)
            except TimeoutError:
                log.warning("renewal of lease %s timed out", self.describe())
                ok = False
            if ok:
                renewed_at = started
            elif self._lease is not None and not self._holds():
                log.warning("lost leadership of lease %s to %s", self.describe(), self.holder or "nobody")
                return

    # -- one round: client-go's tryAcquireOrRenew ------------------------------------------------

    async def _attempt(self) -> bool:
        """Take or renew the lease once; True when we hold it afterwards. Never raises API errors."""
        try:
            return await self._try_acquire_or_renew()
        except KubeError as err:
            log.warning("lease %s: %s", self.describe(), err)
            return False
        except Exception:  # a surprise here must not end the election (and with it the process)
            log.exception("lease %s: unexpected failure", self.describe())
            return False
        finally:
            self._report_holder()

    async def _try_acquire_or_renew(self) -> bool:
        now = self._clock.now()
        record = LeaseRecord(
            holder=self.identity,
            duration_seconds=math.ceil(self._duration),
            acquire_time=now,
            renew_time=now,
        )
        # A leader renews from its own copy without reading first (one call per period instead of
        # two); a 409 means someone else wrote, and the full round below reads what they wrote.
        if self._leading and self._lease is not None and self._holds():
            renewal = dataclasses.replace(
                record,
                acquire_time=self._lease.record.acquire_time,
                transitions=self._lease.record.transitions,
            )
            try:
                self._store(await self._lock.update(self._lease, renewal))
                return True
            except KubeError as err:
                if err.code != 409:
                    raise
                log.info("lease %s changed under us (409); reading it", self.describe())

        current = await self._lock.get(self.namespace, self.name)
        if current is None:
            try:
                self._store(await self._lock.create(self.namespace, self.name, record))
            except KubeError as err:
                if err.code != 409:
                    raise
                return False  # another replica created it first: read it next round
            return True

        if current.record != self._observed:
            self._observed = current.record
            self._observed_at = self._clock.monotonic()
        self._lease = current
        held = current.record.holder
        if held and held != self.identity and not self._expired(current.record):
            return False

        if held == self.identity:
            record = dataclasses.replace(
                record, acquire_time=current.record.acquire_time, transitions=current.record.transitions
            )
        else:
            record = dataclasses.replace(record, transitions=current.record.transitions + 1)
        try:
            self._store(await self._lock.update(current, record))
        except KubeError as err:
            if err.code != 409:
                raise
            return False  # somebody else wrote first (maybe took it): read again next round
        return True

    def _expired(self, record: LeaseRecord) -> bool:
        # The holder's own promise (leaseDurationSeconds) counts, measured from when we saw the
        # record last change; a record without one falls back to our setting.
        duration = record.duration_seconds if record.duration_seconds > 0 else self._duration
        return self._clock.monotonic() >= self._observed_at + duration

    def _holds(self) -> bool:
        return self._lease is not None and self._lease.record.holder == self.identity

    def _store(self, lease: LeaseView) -> None:
        self._lease = lease
        self._observed = lease.record
        self._observed_at = self._clock.monotonic()

    # -- transitions -----------------------------------------------------------------------------

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        if leading:
            log.info(
                "became leader of lease %s as %s; starting singleton duties", self.describe(), self.identity
            )
            self._duties.start()
        else:
            # Why (lost, cut off, shutting down) was logged where it happened.
            log.info("stopped leading lease %s; stopping singleton duties", self.describe())
        call_hook(self._on_change, leading, what="leadership", log=log)

    def _report_holder(self) -> None:
        holder = self.holder
        if holder != self._reported_holder:
            self._reported_holder = holder
            if holder and holder != self.identity:
                log.info("lease %s is held by %s", self.describe(), holder)

    async def _release(self) -> None:
        """Give the lease up (clean shutdown), so another replica need not wait for it to expire."""
        self._set_leading(False)
        await self._duties.stop()
        if not self._holds() or self._lease is None:
            return
        now = self._clock.now()
        released = LeaseRecord(
            holder="",
            duration_seconds=1,
            acquire_time=now,
            renew_time=now,
            transitions=self._lease.record.transitions,
        )
        try:
            # Bounded: a shutdown must not hang on an unreachable API server (the lease then
            # simply expires).
            self._store(
                await asyncio.wait_for(self._lock.update(self._lease, released), self._renew_deadline)
            )
        except (KubeError, TimeoutError) as err:
            log.warning("could not release lease %s: %s", self.describe(), err)
            return
        log.info("released lease %s", self.describe())


class SoleLeader:
    """Leader election switched off: this replica runs the duties for as long as it runs."""

    def __init__(self, duties: Duties, *, on_change: Callable[[bool], None] | None = None) -> None:
        self._duties = duties
        self._on_change = on_change
        self.is_leader = False

    async def run(self) -> None:
        log.info("leader election is off: this replica runs the singleton duties")
        self._set(True)
        self._duties.start()
        try:
            await asyncio.Event().wait()  # until cancelled
        finally:
            self._set(False)
            await self._duties.stop()

    def _set(self, leading: bool) -> None:
        self.is_leader = leading
        call_hook(self._on_change, leading, what="leadership", log=log)
