"""Leader election (kubespot.operator.leader) on an in-memory Lease with a clock that moves only
when told: who leads, when a standby may take over, that two replicas never lead at once, and what
the Lease records."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kubespot.config.leader import LeaderElectionSettings
from kubespot.config.loader import InvalidSetting
from kubespot.kube import KubeError, LeaseRecord, LeaseView
from kubespot.operator.leader import Duties, LeaderElector, SoleLeader, identity, lease_namespace

T0 = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
NS, NAME = "kube-system", "kubespot-controller"
SETTINGS = LeaderElectionSettings()  # client-go's 15 / 10 / 2 s
STEP = 0.1


class SteppedClock:
    """Time moves only in ``advance``, in small steps, letting every woken task run between steps."""

    def __init__(self) -> None:
        self.t = 0.0
        self._moved = asyncio.Condition()

    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.t)

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        until = self.t + max(0.0, seconds)
        async with self._moved:
            await self._moved.wait_for(lambda: self.t >= until - 1e-9)

    async def advance(self, seconds: float) -> None:
        end = self.t + seconds
        while self.t < end - 1e-9:
            async with self._moved:
                self.t = min(end, self.t + STEP)
                self._moved.notify_all()
            await settle()


async def settle() -> None:
    for _ in range(30):
        await asyncio.sleep(0)


class LeaseStore:
    """One namespace's Leases with resourceVersions; ``writes`` counts successful writes."""

    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], LeaseView] = {}
        self.rv = 0
        self.writes = 0
        self.conflicts_to_inject = 0

    def record(self) -> LeaseRecord:
        return self.leases[(NS, NAME)].record

    def _put(self, namespace: str, name: str, record: LeaseRecord) -> LeaseView:
        self.rv += 1
        self.writes += 1
        view = LeaseView(namespace, name, str(self.rv), record)
        self.leases[(namespace, name)] = view
        return view


class Api:
    """One replica's view of the API: ``down`` makes every call fail as an unreachable server would."""

    def __init__(self, store: LeaseStore) -> None:
        self.store = store
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise KubeError(0, "ConnectError: connection refused")

    async def get(self, namespace: str, name: str) -> LeaseView | None:
        self._check()
        return self.store.leases.get((namespace, name))

    async def create(self, namespace: str, name: str, record: LeaseRecord) -> LeaseView:
        self._check()
        if (namespace, name) in self.store.leases:
            raise KubeError(409, "already exists", reason="AlreadyExists")
        return self.store._put(namespace, name, record)

    async def update(self, current: LeaseView, record: LeaseRecord) -> LeaseView:
        self._check()
        stored = self.store.leases.get((current.namespace, current.name))
        if self.store.conflicts_to_inject:
            self.store.conflicts_to_inject -= 1
            raise KubeError(409, "the object has been modified", reason="Conflict")
        if stored is None or stored.resource_version != current.resource_version:
            raise KubeError(409, "the object has been modified", reason="Conflict")
        return self.store._put(current.namespace, current.name, record)


@dataclasses.dataclass
class Replica:
    elector: LeaderElector
    api: Api
    duty_runs: list[str]
    task: asyncio.Task[None] | None = None


class Timeline:
    """Who led when, from the electors' on_change hooks."""

    def __init__(self, clock: SteppedClock) -> None:
        self.clock = clock
        self.leading: set[str] = set()
        self.overlaps = 0
        self.changes: list[tuple[float, str, bool]] = []

    def hook(self, who: str) -> object:
        def on_change(leading: bool) -> None:
            self.changes.append((self.clock.t, who, leading))
            if leading:
                self.leading.add(who)
                if len(self.leading) > 1:
                    self.overlaps += 1
            else:
                self.leading.discard(who)

        return on_change


def replica(
    who: str,
    store: LeaseStore,
    clock: SteppedClock,
    timeline: Timeline,
    settings: LeaderElectionSettings = SETTINGS,
) -> Replica:
    runs: list[str] = []

    async def duty() -> None:
        runs.append("started")
        try:
            await asyncio.Event().wait()
        finally:
            runs.append("stopped")

    api = Api(store)
    elector = LeaderElector(
        api,
        namespace=NS,
        name=NAME,
        identity=who,
        settings=settings,
        duties=Duties({"duty": duty}, clock=clock),
        clock=clock,
        on_change=timeline.hook(who),  # type: ignore[arg-type]
        rng=random.Random(7),
    )
    return Replica(elector, api, runs)


async def start(r: Replica) -> None:
    r.task = asyncio.create_task(r.elector.run())
    await settle()


async def stop(r: Replica) -> None:
    assert r.task is not None
    r.task.cancel()
    await asyncio.wait({r.task})


async def leader_and_standby(
    *, settle_for: float
) -> tuple[SteppedClock, LeaseStore, Timeline, Replica, Replica]:
    """Replica "a" started first, "b" a step later, then ``settle_for`` seconds on one clock and lease."""
    clock, store = SteppedClock(), LeaseStore()
    timeline = Timeline(clock)
    a, b = replica("a", store, clock, timeline), replica("b", store, clock, timeline)
    await start(a)
    await clock.advance(STEP)
    await start(b)
    await clock.advance(settle_for)
    return clock, store, timeline, a, b


async def lone_leader() -> tuple[SteppedClock, LeaseStore, Replica]:
    """One replica started on an empty lease store, leader after its first step."""
    clock, store = SteppedClock(), LeaseStore()
    a = replica("a", store, clock, Timeline(clock))
    await start(a)
    await clock.advance(STEP)
    assert a.elector.is_leader
    return clock, store, a


async def test_a_lone_replica_creates_the_lease_and_renews_it() -> None:
    clock, store, a = await lone_leader()
    assert a.duty_runs == ["started"]
    first = store.record()
    assert first.holder == "a"
    assert first.duration_seconds == 15
    assert first.transitions == 0
    assert first.acquire_time == first.renew_time == T0
    await clock.advance(10)
    renewed = store.record()
    assert renewed.renew_time is not None and renewed.renew_time >= T0 + timedelta(seconds=8)
    assert renewed.acquire_time == T0, "renewals keep the acquire time"
    assert renewed.transitions == 0
    # One write per retry period (the leader renews from its own copy, without reading first).
    assert 5 <= store.writes <= 7
    await stop(a)


async def test_two_replicas_elect_exactly_one() -> None:
    clock, store = SteppedClock(), LeaseStore()
    timeline = Timeline(clock)
    a, b = replica("a", store, clock, timeline), replica("b", store, clock, timeline)
    await start(a)
    await start(b)
    await clock.advance(30)
    leaders = [r for r in (a, b) if r.elector.is_leader]
    assert len(leaders) == 1
    follower = b if leaders[0] is a else a
    assert store.record().holder == leaders[0].elector.identity
    assert follower.duty_runs == []
    assert follower.elector.holder == leaders[0].elector.identity
    assert timeline.overlaps == 0
    await stop(a)
    await stop(b)


async def test_clean_shutdown_releases_and_the_standby_takes_over_within_a_few_retry_periods() -> None:
    clock, store, timeline, a, b = await leader_and_standby(settle_for=5)
    assert a.elector.is_leader and not b.elector.is_leader
    await stop(a)
    assert a.duty_runs == ["started", "stopped"]
    released = store.record()
    assert released.holder == ""
    assert released.duration_seconds == 1
    released_at = clock.t
    # client-go's acquire loop waits a retry period plus up to 1.2 more: 4.4 s at most.
    await clock.advance(4.5)
    assert b.elector.is_leader
    taken = [t for t, who, leading in timeline.changes if who == "b" and leading]
    assert taken and taken[0] - released_at <= 4.4 + STEP
    assert store.record().holder == "b"
    assert store.record().transitions == 1
    assert timeline.overlaps == 0
    await stop(b)


async def test_a_dead_leader_is_replaced_only_after_the_lease_duration_on_the_standbys_clock() -> None:
    clock, store, timeline, a, b = await leader_and_standby(settle_for=4)
    # SIGKILL: no release, no more renewals (its task is simply gone).
    a.api.down = True
    assert a.task is not None
    a.task.cancel()
    await asyncio.wait({a.task})
    last_renewal = store.record().renew_time
    assert store.record().holder == "a"
    assert last_renewal is not None
    renewed_at = (last_renewal - T0).total_seconds()
    await clock.advance(14)
    assert not b.elector.is_leader, "taken before the lease duration had passed"
    # b sees the last renewal within one acquire interval (at most 4.4 s), waits 15 s from then,
    # and takes the lease at its next attempt.
    await clock.advance(4.4 + 15 + 4.4 - 14)
    assert b.elector.is_leader
    record = store.record()
    assert record.holder == "b"
    assert record.transitions == 1
    took = next(t for t, who, leading in timeline.changes if who == "b" and leading)
    assert took >= renewed_at + 15
    assert record.acquire_time == T0 + timedelta(seconds=took)
    await stop(b)


async def test_a_leader_cut_off_from_the_api_stops_before_anyone_may_take_over() -> None:
    clock, _store, timeline, a, b = await leader_and_standby(settle_for=6)
    assert a.elector.is_leader
    a.api.down = True
    cut_at = clock.t
    await clock.advance(40)
    stopped = next(t for t, who, leading in timeline.changes if who == "a" and not leading)
    taken = next(t for t, who, leading in timeline.changes if who == "b" and leading)
    # a stops within the renew deadline of its last renewal (at most a retry period before the cut)...
    assert stopped - cut_at <= 10 + STEP
    assert a.duty_runs == ["started", "stopped"]
    # ...and b takes over only after the lease duration: never two leaders at once.
    assert taken > stopped
    assert timeline.overlaps == 0
    assert not a.elector.is_leader and b.elector.is_leader
    # When a's API comes back it sees b's lease and stays a standby.
    a.api.down = False
    await clock.advance(10)
    assert not a.elector.is_leader
    assert a.elector.holder == "b"
    await stop(a)
    await stop(b)


async def test_a_conflict_is_answered_by_reading_again() -> None:
    clock, store, a = await lone_leader()
    # Somebody else touched the lease (say, a label): the fast-path renewal gets a 409, and the
    # full round reads the new version and renews from it.
    view = store.leases[(NS, NAME)]
    store._put(NS, NAME, view.record)
    await clock.advance(2.5)
    assert a.elector.is_leader
    assert store.record().renew_time == T0 + timedelta(seconds=2)
    # An injected 409 on the read-then-write round too: still leading after the next periods.
    store.conflicts_to_inject = 1
    await clock.advance(4)
    assert a.elector.is_leader
    assert a.duty_runs == ["started"]
    await stop(a)


async def test_a_strangers_lease_is_respected_for_its_own_duration() -> None:
    clock, store = SteppedClock(), LeaseStore()
    store._put(NS, NAME, LeaseRecord(holder="other-tool", duration_seconds=30, renew_time=T0, transitions=4))
    a = replica("a", store, clock, Timeline(clock))
    await start(a)
    await clock.advance(29)
    assert not a.elector.is_leader
    await clock.advance(6)
    assert a.elector.is_leader
    assert store.record().transitions == 5
    await stop(a)


async def test_election_off_runs_the_duties_at_once() -> None:
    clock = SteppedClock()
    runs: list[bool] = []

    async def duty() -> None:
        await asyncio.Event().wait()

    duties = Duties({"duty": duty}, clock=clock)
    sole = SoleLeader(duties, on_change=runs.append)
    task = asyncio.create_task(sole.run())
    await settle()
    assert sole.is_leader and duties.running == ["duty"]
    task.cancel()
    await asyncio.wait({task})
    assert runs == [True, False]
    assert duties.running == []


async def test_a_crashed_duty_is_restarted() -> None:
    clock = SteppedClock()
    calls: list[int] = []

    async def flaky() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        await asyncio.Event().wait()

    duties = Duties({"flaky": flaky}, clock=clock)
    duties.start()
    await settle()
    assert len(calls) == 1
    await clock.advance(5.1)
    assert len(calls) == 2
    assert duties.running == ["flaky"]
    await duties.stop()


def test_identity_is_the_pod_name_with_a_random_suffix() -> None:
    first, second = identity("kubespot-controller-abc"), identity("kubespot-controller-abc")
    assert first.startswith("kubespot-controller-abc_") and second.startswith("kubespot-controller-abc_")
    assert first != second
    assert identity(None).rsplit("_", 1)[0]


def test_lease_namespace_prefers_the_setting_then_the_pod_then_the_service_account(tmp_path: Path) -> None:
    sa = tmp_path / "namespace"
    missing = tmp_path / "missing"
    own = LeaderElectionSettings(namespace="ops")
    assert lease_namespace(own, "kubespot", sa_file=missing) == "ops"
    assert lease_namespace(SETTINGS, "kubespot", sa_file=missing) == "kubespot"
    sa.write_text("from-sa\n")
    assert lease_namespace(SETTINGS, None, sa_file=sa) == "from-sa"
    assert lease_namespace(SETTINGS, None, sa_file=missing) == "kube-system"


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"renew_deadline": 15.0}, "renew_deadline"),
        ({"retry_period": 9.0}, "renew_deadline"),
        ({"lease_duration": 0.5, "renew_deadline": 0.4, "retry_period": 0.1}, "lease_duration"),
        ({"retry_period": 0.0}, "retry_period"),
        ({"lease_name": " "}, "lease_name"),
    ],
)
def test_timings_that_could_elect_two_leaders_are_refused(values: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidSetting) as err:
        LeaderElectionSettings(**values)  # type: ignore[arg-type]
    assert err.value.field == field
