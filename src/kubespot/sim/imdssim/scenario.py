"""Scenarios: a fleet and what happens to it, as plain data (JSON, or YAML when PyYAML is present).

Format (every key optional unless noted; unknown keys are errors so typos do not pass silently)::

    {
      "require_v2": false,
      "instances": [
        {"instance_id": "i-0123456789abcdef0", "instance_type": "m5.large",
         "availability_zone": "us-east-1a", "life_cycle": "spot", "autoscaling": true,
         "events": [
           {"kind": "spot-itn", "after_seconds": 5, "action": "terminate"},
           {"kind": "rebalance", "at": "2026-11-20T16:40:02Z"},
           {"kind": "scheduled", "code": "system-reboot", "not_before_in": 600,
            "state_changes": [{"after_seconds": 60, "state": "canceled"}]},
           {"kind": "asg-terminated", "after_seconds": 3}
         ]}
      ],
      "faults": [{"kind": "error", "status": 500, "rate": 0.1}]
    }

Times: ``after_seconds`` counts from when the scenario is applied (server start), ``at`` is absolute
(ISO 8601 or epoch seconds); neither means "immediately". Inside a scheduled event, ``not_before_in``
and each state change's ``after_seconds`` count from the moment the event appears.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kubespot.sim.imdssim.events import (
    ASG_STATES,
    SCHEDULED_CODES,
    SCHEDULED_STATES,
    SPOT_ACTIONS,
    SPOT_LEAD_SECONDS,
    ScheduledCode,
    ScheduledState,
    SpotAction,
)
from kubespot.sim.imdssim.faults import Fault, FaultError, fault_from_mapping
from kubespot.sim.imdssim.fleet import DEFAULT_EVENT_DURATION, DEFAULT_NOT_BEFORE_IN, Fleet
from kubespot.sim.imdssim.instance import LIFE_CYCLES, LifeCycle, SimInstance, synthetic_instance
from kubespot.sim.imdssim.timefmt import parse_time

SCENARIO_EVENT_KINDS = ("spot-itn", "rebalance", "scheduled", "asg-lifecycle", "asg-terminated")
DEFAULT_UPTIME_SECONDS = 3600.0
"""How long an instance has been running when the scenario starts, unless it says otherwise."""


class ScenarioError(ValueError):
    """A scenario (or control request) that cannot be used; the message names the offending key."""


# --- small readers that turn untyped data into typed values or a ScenarioError ----------------------


def _mapping(data: object, where: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{where}: expected an object")
    return data


def _check_keys(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ScenarioError(f"{where}: unknown keys {', '.join(map(str, unknown))}")


def _str(data: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str | None:
    value = data.get(key, default)
    if value is not None and not isinstance(value, str):
        raise ScenarioError(f"{where}.{key}: expected a string")
    return value


def _num(data: Mapping[str, Any], key: str, where: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScenarioError(f"{where}.{key}: expected a number")
    if value < 0:
        raise ScenarioError(f"{where}.{key}: must not be negative")
    return float(value)


def _bool(data: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = data.get(key)
    if value is not None and not isinstance(value, bool):
        raise ScenarioError(f"{where}.{key}: expected true or false")
    return value


def _choice(data: Mapping[str, Any], key: str, where: str, choices: tuple[str, ...], default: str) -> str:
    value = _str(data, key, where, default)
    if value not in choices:
        raise ScenarioError(f"{where}.{key}: must be one of {', '.join(choices)}, got {value!r}")
    return value


def _list(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise ScenarioError(f"{where}.{key}: expected a list")
    return value


# --- the model ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class When:
    """A moment: ``at`` (absolute) or ``after_seconds`` from an origin; neither means the origin itself."""

    after_seconds: float | None = None
    at: float | None = None

    def resolve(self, origin: float) -> float:
        return self.at if self.at is not None else origin + (self.after_seconds or 0.0)

    @staticmethod
    def read(data: Mapping[str, Any], where: str) -> When:
        after = _num(data, "after_seconds", where)
        raw_at = data.get("at")
        if raw_at is not None and after is not None:
            raise ScenarioError(f"{where}: give either 'at' or 'after_seconds', not both")
        if raw_at is None:
            return When(after_seconds=after)
        try:
            return When(at=parse_time(raw_at))
        except ValueError as exc:
            raise ScenarioError(f"{where}.at: {exc}") from None


@dataclass(frozen=True)
class StateChangeSpec:
    state: ScheduledState
    when: When
    """Relative to the scheduled event's appearance."""


@dataclass(frozen=True)
class EventSpec:
    """One signal to put on an instance (see the module docstring for the keys of each kind)."""

    kind: str
    when: When = When()
    action: SpotAction = "terminate"
    lead_seconds: float = SPOT_LEAD_SECONDS
    code: ScheduledCode = "system-reboot"
    event_id: str | None = None
    description: str | None = None
    not_before_in: float | None = None
    not_before: float | None = None
    duration_seconds: float = DEFAULT_EVENT_DURATION
    not_before_deadline_in: float | None = None
    state_changes: tuple[StateChangeSpec, ...] = ()
    state: str = "Terminated"

    def apply(self, fleet: Fleet, instance_id: str, origin: float) -> dict[str, Any]:
        """Put the signal on the instance; returns a short JSON description of what was added."""
        at = self.when.resolve(origin)
        if self.kind == "spot-itn":
            itn = fleet.fire_spot_itn(instance_id, self.action, at=at, lead_seconds=self.lead_seconds)
            return {"kind": self.kind, **itn.summary()}
        if self.kind == "rebalance":
            notice = fleet.fire_rebalance(instance_id, at=at)
            return {"kind": self.kind, **notice.body()}
        if self.kind == "scheduled":
            if self.not_before is not None:
                start = self.not_before
            elif self.not_before_in is not None:
                start = at + self.not_before_in
            else:
                start = at + DEFAULT_NOT_BEFORE_IN
            deadline = None if self.not_before_deadline_in is None else at + self.not_before_deadline_in
            event = fleet.add_scheduled_event(
                instance_id,
                self.code,
                at=at,
                not_before=start,
                not_after=start + self.duration_seconds,
                not_before_deadline=deadline,
                description=self.description,
                event_id=self.event_id,
            )
            for change in self.state_changes:
                fleet.set_scheduled_state(
                    instance_id, event.event_id, change.state, at=change.when.resolve(at)
                )
            return {"kind": self.kind, **event.summary(fleet.clock())}
        transition = fleet.set_asg_state(instance_id, self.state, at=at)
        return {"kind": "asg-lifecycle", "state": transition.state, "at": transition.at}

    @staticmethod
    def read(data: object, where: str = "event") -> EventSpec:
        obj = _mapping(data, where)
        kind = _choice(obj, "kind", where, SCENARIO_EVENT_KINDS, "")
        common = {"kind", "after_seconds", "at"}
        when = When.read(obj, where)
        if kind == "spot-itn":
            _check_keys(obj, common | {"action", "lead_seconds"}, where)
            lead = _num(obj, "lead_seconds", where)
            return EventSpec(
                kind=kind,
                when=when,
                action=cast(SpotAction, _choice(obj, "action", where, SPOT_ACTIONS, "terminate")),
                lead_seconds=SPOT_LEAD_SECONDS if lead is None else lead,
            )
        if kind == "rebalance":
            _check_keys(obj, common, where)
            return EventSpec(kind=kind, when=when)
        if kind == "scheduled":
            return EventSpec._read_scheduled(obj, when, where)
        if kind == "asg-terminated":
            _check_keys(obj, common, where)
            return EventSpec(kind=kind, when=when, state="Terminated")
        _check_keys(obj, common | {"state"}, where)
        return EventSpec(kind=kind, when=when, state=_choice(obj, "state", where, ASG_STATES, "Terminated"))

    @staticmethod
    def _read_scheduled(obj: Mapping[str, Any], when: When, where: str) -> EventSpec:
        allowed = {"kind", "after_seconds", "at", "code", "event_id", "description", "not_before_in"}
        allowed |= {"not_before", "duration_seconds", "not_before_deadline_in", "state_changes"}
        _check_keys(obj, allowed, where)
        if "not_before" in obj and "not_before_in" in obj:
            raise ScenarioError(f"{where}: give either 'not_before' or 'not_before_in', not both")
        not_before = None
        if obj.get("not_before") is not None:
            try:
                not_before = parse_time(obj["not_before"])
            except ValueError as exc:
                raise ScenarioError(f"{where}.not_before: {exc}") from None
        changes = []
        for i, raw in enumerate(_list(obj, "state_changes", where)):
            cwhere = f"{where}.state_changes[{i}]"
            cobj = _mapping(raw, cwhere)
            _check_keys(cobj, {"state", "after_seconds", "at"}, cwhere)
            if "state" not in cobj:
                raise ScenarioError(f"{cwhere}.state: required")
            state = cast(ScheduledState, _choice(cobj, "state", cwhere, SCHEDULED_STATES, "canceled"))
            changes.append(StateChangeSpec(state=state, when=When.read(cobj, cwhere)))
        duration = _num(obj, "duration_seconds", where)
        event_id = _str(obj, "event_id", where)
        if event_id is not None and not event_id.strip():
            raise ScenarioError(f"{where}.event_id: must not be empty")
        return EventSpec(
            kind="scheduled",
            when=when,
            code=cast(ScheduledCode, _choice(obj, "code", where, SCHEDULED_CODES, "system-reboot")),
            event_id=event_id,
            description=_str(obj, "description", where),
            not_before_in=_num(obj, "not_before_in", where),
            not_before=not_before,
            duration_seconds=DEFAULT_EVENT_DURATION if duration is None else duration,
            not_before_deadline_in=_num(obj, "not_before_deadline_in", where),
            state_changes=tuple(changes),
        )


_INSTANCE_KEYS = {
    "instance_id",
    "instance_type",
    "availability_zone",
    "region",
    "account_id",
    "private_ip",
    "local_hostname",
    "life_cycle",
    "ami_id",
    "mac",
    "uptime_seconds",
    "require_v2",
    "autoscaling",
    "user_data",
    "events",
}


@dataclass(frozen=True)
class InstanceSpec:
    """An instance to create; unset identity fields get distinct synthetic values."""

    fields: Mapping[str, Any] = field(default_factory=dict)
    uptime_seconds: float = DEFAULT_UPTIME_SECONDS
    events: tuple[EventSpec, ...] = ()

    def build(self, *, index: int, origin: float) -> SimInstance:
        base = synthetic_instance(index, launched_at=origin - self.uptime_seconds)
        kwargs: dict[str, Any] = {
            "instance_id": base.instance_id,
            "private_ip": base.private_ip,
            "mac": base.mac,
            "availability_zone": base.availability_zone,
            "launched_at": base.launched_at,
            **self.fields,
        }
        try:
            return SimInstance(**kwargs)
        except ValueError as exc:
            raise ScenarioError(f"instance: {exc}") from None

    @staticmethod
    def read(data: object, where: str = "instance") -> InstanceSpec:
        obj = _mapping(data, where)
        _check_keys(obj, _INSTANCE_KEYS, where)
        fields: dict[str, Any] = {}
        for key in ("instance_id", "instance_type", "availability_zone", "region", "account_id"):
            if (value := _str(obj, key, where)) is not None:
                fields[key] = value
        for key in ("private_ip", "local_hostname", "ami_id", "mac", "user_data"):
            if (value := _str(obj, key, where)) is not None:
                fields[key] = value
        if "life_cycle" in obj:
            fields["life_cycle"] = cast(LifeCycle, _choice(obj, "life_cycle", where, LIFE_CYCLES, "spot"))
        for key in ("require_v2", "autoscaling"):
            if (flag := _bool(obj, key, where)) is not None:
                fields[key] = flag
        uptime = _num(obj, "uptime_seconds", where)
        events = tuple(
            EventSpec.read(e, f"{where}.events[{i}]") for i, e in enumerate(_list(obj, "events", where))
        )
        return InstanceSpec(
            fields=fields,
            uptime_seconds=DEFAULT_UPTIME_SECONDS if uptime is None else uptime,
            events=events,
        )


@dataclass(frozen=True)
class Scenario:
    instances: tuple[InstanceSpec, ...] = ()
    require_v2: bool | None = None
    faults: tuple[Mapping[str, Any], ...] = ()
    """Kept as validated mappings: a Fault carries a mutable budget, so each run builds fresh ones."""

    @staticmethod
    def read(data: object) -> Scenario:
        obj = _mapping(data, "scenario")
        _check_keys(obj, {"instances", "require_v2", "faults"}, "scenario")
        instances = tuple(
            InstanceSpec.read(raw, f"instances[{i}]")
            for i, raw in enumerate(_list(obj, "instances", "scenario"))
        )
        faults = []
        for i, raw in enumerate(_list(obj, "faults", "scenario")):
            fobj = _mapping(raw, f"faults[{i}]")
            try:
                fault_from_mapping(dict(fobj))
            except FaultError as exc:
                raise ScenarioError(f"faults[{i}]: {exc}") from None
            faults.append(fobj)
        return Scenario(
            instances=instances, require_v2=_bool(obj, "require_v2", "scenario"), faults=tuple(faults)
        )

    def with_instances(self, extra: tuple[InstanceSpec, ...]) -> Scenario:
        return dataclasses.replace(self, instances=self.instances + extra)

    def new_faults(self) -> list[Fault]:
        return [fault_from_mapping(dict(f)) for f in self.faults]


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file: ``.json``, or ``.yaml``/``.yml`` when PyYAML is installed."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if p.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ScenarioError(
                f"{p}: YAML scenarios need PyYAML (pip install pyyaml), or use JSON"
            ) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ScenarioError(f"{p}: not valid YAML: {exc}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScenarioError(f"{p}: not valid JSON: {exc}") from None
    return Scenario.read(data)


def apply_scenario(fleet: Fleet, scenario: Scenario, *, origin: float | None = None) -> list[SimInstance]:
    """Create the scenario's instances and signals in ``fleet``.

    Relative times count from ``origin`` (default: now).
    """
    start = fleet.clock() if origin is None else origin
    if scenario.require_v2 is not None:
        fleet.require_v2 = scenario.require_v2
    created = []
    first_index = len(fleet)
    for offset, spec in enumerate(scenario.instances):
        instance = spec.build(index=first_index + offset, origin=start)
        try:
            fleet.add(instance)
        except ValueError as exc:
            raise ScenarioError(f"instances[{offset}]: {exc}") from None
        for i, event in enumerate(spec.events):
            try:
                event.apply(fleet, instance.instance_id, start)
            except (ValueError, KeyError) as exc:
                raise ScenarioError(f"instances[{offset}].events[{i}]: {exc}") from None
        created.append(instance)
    for fault in scenario.new_faults():
        fleet.faults.add(fault)
    return created
