"""Poll the enabled IMDS signal paths and emit each new ``InterruptionEvent`` once.

One loop: every poll interval the enabled paths are read concurrently, their bodies parsed, and
events whose id (and, for scheduled events, cancelled flag) were not emitted before are handed to
the sink. Nothing that goes wrong in a poll (IMDS errors, garbage bodies, a failing sink) leaves the
loop: it is logged, counted in ``health``, and the next poll tries again. A failure is logged when
it starts or changes, not on every poll, so a down IMDS does not flood the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeAlias

from kubespot.config.imds import ImdsSettings, MonitorSettings
from kubespot.model import Clock, InterruptionEvent, Kind
from kubespot.observability.hooks import call_hook
from kubespot.sources.imds import parsers, paths
from kubespot.sources.imds.client import ImdsClient, InstanceIdentity
from kubespot.sources.imds.errors import ImdsError, ImdsParseError

_log = logging.getLogger(__name__)

EventSink: TypeAlias = asyncio.Queue[InterruptionEvent] | Callable[[InterruptionEvent], Awaitable[None]]
"""Where events go: a queue, or an async callback (awaited; if it raises, the event is retried)."""

_Parsed = tuple[list[InterruptionEvent], list[ImdsParseError]]


@dataclass(frozen=True)
class ImdsHealth:
    """What ``/healthz`` needs to know about the IMDS source."""

    last_contact: datetime | None
    """When IMDS last answered anything (a 404 counts)."""
    last_clean_poll: datetime | None
    """When a poll last read every enabled path without an error."""
    consecutive_failed_polls: int
    last_error: str | None

    def healthy(self, now: datetime, max_age: timedelta) -> bool:
        """IMDS answered within ``max_age`` of ``now``."""
        return self.last_contact is not None and now - self.last_contact <= max_age


_Seen = tuple[bool, datetime | None, datetime | None]


def _seen(event: InterruptionEvent) -> _Seen:
    """What makes an emission new: the cancelled flag, the deadline and, for scheduled maintenance,
    when to act. A rescheduled event (ModifyInstanceEventStartTime) keeps its EventId, hence its id,
    but moves NotBefore; a spot or rebalance notice's act_at is the time it was read, so it is left
    out for them or every poll would look new."""
    act_at = event.act_at if event.kind is Kind.SCHEDULED_MAINTENANCE and not event.cancelled else None
    return (event.cancelled, event.deadline, act_at)


@dataclass(frozen=True)
class _Probe:
    path: str
    parse: Callable[[str, datetime], _Parsed]


class ImdsMonitor:
    """Watches one instance's metadata; ``run()`` until cancelled."""

    def __init__(
        self,
        client: ImdsClient,
        *,
        settings: ImdsSettings,
        monitors: MonitorSettings,
        clock: Clock,
        sink: EventSink,
        node_name: str | None = None,
        identity: InstanceIdentity | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self._client = client
        #: Told the path of every failed read (each poll, not only when logged): for metrics.
        self._on_error = on_error
        self._settings = settings
        self._monitors = monitors
        self._clock = clock
        self._sink = sink
        self._node_name = node_name
        self._identity = identity
        self._emitted: dict[str, _Seen] = {}  # event id -> what was last emitted for it
        self._failing: dict[str, str] = {}  # path -> the error last logged for it
        self._last_clean_poll: datetime | None = None
        self._failed_polls = 0
        self._last_error: str | None = None

    @property
    def identity(self) -> InstanceIdentity | None:
        return self._identity

    @property
    def health(self) -> ImdsHealth:
        return ImdsHealth(
            last_contact=self._client.last_contact,
            last_clean_poll=self._last_clean_poll,
            consecutive_failed_polls=self._failed_polls,
            last_error=self._last_error,
        )

    @property
    def watched_paths(self) -> tuple[str, ...]:
        return tuple(p.path for p in self._probes(""))

    # --- loop --------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Read the identity (retrying until IMDS answers), then poll until cancelled."""
        interval = self._settings.poll_interval
        while self._identity is None:
            try:
                self._identity = await self._client.identity()
            except ImdsError as exc:
                self._note_failure("identity", str(exc))
                await self._clock.sleep(interval)
        _log.info(
            "IMDS monitor watching %s: %s",
            self._identity.instance_id,
            ", ".join(self.watched_paths) or "nothing (every monitor is off)",
            extra={"instance_id": self._identity.instance_id},
        )
        while True:
            started = self._clock.monotonic()
            await self.poll_once()
            await self._clock.sleep(max(0.0, interval - (self._clock.monotonic() - started)))

    async def poll_once(self) -> list[InterruptionEvent]:
        """Read every enabled path once; emit and return the events not emitted before.

        Raises ``ImdsError`` only when the identity is not known yet and cannot be read.
        """
        if self._identity is None:
            self._identity = await self._client.identity()
        now = self._clock.now()
        probes = self._probes(self._identity.instance_id)
        results = await asyncio.gather(*(self._read(p, now) for p in probes))
        clean = all(ok for ok, _ in results)
        if clean:
            self._last_clean_poll, self._failed_polls = now, 0
        else:
            self._failed_polls += 1
        emitted: list[InterruptionEvent] = []
        for _, events in results:
            for event in events:
                if self._emitted.get(event.id) == _seen(event):
                    continue
                if await self._emit(event):
                    emitted.append(event)
        return emitted

    # --- probes ------------------------------------------------------------------------------------

    def _probes(self, instance_id: str) -> list[_Probe]:
        m, node = self._monitors, self._node_name
        lead = timedelta(seconds=m.scheduled_lead_time)

        def one(event: InterruptionEvent | None) -> _Parsed:
            return ([] if event is None else [event]), []

        probes: list[_Probe] = []
        if m.spot_interruption_draining:
            probes.append(
                _Probe(
                    paths.SPOT_INSTANCE_ACTION,
                    lambda body, now: one(
                        parsers.parse_spot_instance_action(
                            body, instance_id=instance_id, now=now, node_name=node
                        )
                    ),
                )
            )
        if m.scheduled_event_draining:
            probes.append(
                _Probe(
                    paths.SCHEDULED_EVENTS,
                    lambda body, now: parsers.parse_scheduled_events(
                        body, instance_id=instance_id, now=now, lead_time=lead, node_name=node
                    ),
                )
            )
        if m.watch_rebalance:
            probes.append(
                _Probe(
                    paths.REBALANCE,
                    lambda body, now: one(
                        parsers.parse_rebalance(body, instance_id=instance_id, now=now, node_name=node)
                    ),
                )
            )
        if m.asg_lifecycle_draining:
            probes.append(
                _Probe(
                    paths.ASG_TARGET_LIFECYCLE_STATE,
                    lambda body, now: one(
                        parsers.parse_asg_target_state(body, instance_id=instance_id, now=now, node_name=node)
                    ),
                )
            )
        return probes

    async def _read(self, probe: _Probe, now: datetime) -> tuple[bool, list[InterruptionEvent]]:
        """(no error, events) for one path; never raises (but for cancellation)."""
        try:
            body = await self._client.get(probe.path)
            events, errors = ([], []) if body is None else probe.parse(body, now)
        except ImdsError as exc:
            self._note_failure(probe.path, str(exc))
            return False, []
        except Exception as exc:  # a bug must not stop interruption handling: log it loudly, go on
            _log.exception("IMDS poll of %s failed unexpectedly", probe.path, extra={"imds_path": probe.path})
            self._note_failure(probe.path, f"{type(exc).__name__}: {exc}", logged=True)
            return False, []
        if errors:
            self._note_failure(probe.path, "; ".join(str(e) for e in errors))
        elif probe.path in self._failing:
            del self._failing[probe.path]
            _log.info("IMDS poll of %s recovered", probe.path, extra={"imds_path": probe.path})
        return not errors, events

    def _note_failure(self, path: str, message: str, *, logged: bool = False) -> None:
        self._last_error = message
        call_hook(self._on_error, path, what="IMDS on_error", log=_log)
        if self._failing.get(path) != message:
            self._failing[path] = message
            if not logged:
                _log.warning("IMDS poll failed: %s", message, extra={"imds_path": path})

    # --- output ------------------------------------------------------------------------------------

    async def _emit(self, event: InterruptionEvent) -> bool:
        extra = {
            "event_id": event.id,
            "kind": event.kind.value,
            "instance_id": event.instance_id,
            "cancelled": event.cancelled,
        }
        try:
            if isinstance(self._sink, asyncio.Queue):
                await self._sink.put(event)
            else:
                await self._sink(event)
        except Exception:
            # Not recorded as emitted, so the next poll offers it again.
            _log.exception("event %s: the sink refused it; retrying next poll", event.id, extra=extra)
            return False
        self._emitted[event.id] = _seen(event)
        state = " (cancelled)" if event.cancelled else ""
        _log.info("event %s: %s%s", event.id, event.description, state, extra=extra)
        return True
