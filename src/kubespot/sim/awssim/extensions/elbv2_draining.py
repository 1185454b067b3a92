"""ELBv2 target deregistration as AWS does it: ``draining`` for the deregistration delay, then gone.

Stock moto 5.2.x removes a deregistered target at once (DescribeTargetHealth never shows
``draining``), ignores the target group's ``deregistration_delay.timeout_seconds``, and answers
``InvalidTarget`` when a target that is not registered is deregistered. kubespot's response actions
deregister targets before draining their pods and wait for ``draining`` (docs/designs/
response-actions.md), so the stand-in has to behave like the real API:

- DeregisterTargets of a registered target puts it in ``draining`` (reason
  ``Target.DeregistrationInProgress``) for the group's ``deregistration_delay.timeout_seconds``
  (default 300, read at deregistration time); after that it is gone: not listed, and ``unused`` /
  ``Target.NotRegistered`` when asked for by id. A delay of 0 skips ``draining``.
- DeregisterTargets of a target that is not registered (never was, already draining, or registered
  on another port) succeeds and changes nothing, as AWS documents ("If the specified target does not
  exist, the action returns successfully"). A target is matched by id and port, an omitted port
  meaning the group's port, so a target registered with a port override needs that port to be
  deregistered, as on AWS.
- DescribeTargetHealth without targets lists draining targets besides registered ones.
- RegisterTargets of a draining target registers it again at once.
- TerminateInstances of a registered instance deregisters it the same way (moto reported such a
  target ``draining`` forever).
- A target that is not registered is ``unused`` / ``Target.NotRegistered`` whatever its type (moto
  answered ``unavailable`` for ip targets).

Health is not simulated: a registered target is ``healthy`` at once (no ``initial`` phase, no health
checks, not ``unused`` when no load balancer uses the group), as stock moto reports; the load
balancer simulator (``kubespot.sim.lbsim``) models health checks on its own side. Targets are keyed
by id as in moto, so one id cannot be registered on two ports at once.

Draining time runs on ``time.monotonic``; expiry is applied whenever a target group is looked at,
so no timer thread is needed. Tests shorten the wait by setting the attribute (e.g. to 1 or 2 s).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moto.elbv2 import models as elbv2_models
from moto.elbv2.exceptions import TargetGroupNotFoundError

__all__ = ["DEFAULT_DELAY_S", "DELAY_ATTRIBUTE", "draining_targets", "install"]

DELAY_ATTRIBUTE = "deregistration_delay.timeout_seconds"
DEFAULT_DELAY_S = 300
_MARK = "_kubespot_elbv2_draining"
_STATE = "_kubespot_draining"

#: The clock deadlines are measured on (a module attribute so a test could swap it; none needs to).
clock: Callable[[], float] = time.monotonic

# moto serves requests on several threads; the draining tables and moto's target dicts they move
# targets between are only touched under this lock.
_lock = threading.RLock()


@dataclass
class _Draining:
    target: dict[str, Any]  # {"Id": ..., "Port": ...} as moto stores a registered target
    until: float  # clock() time at which the deregistration completes


def _draining(group: Any) -> dict[str, _Draining]:
    table: dict[str, _Draining] = group.__dict__.setdefault(_STATE, {})
    return table


def _delay_s(group: Any) -> float:
    raw = group.attributes.get(DELAY_ATTRIBUTE, DEFAULT_DELAY_S)
    try:
        return max(0.0, float(raw))
    except (TypeError, ValueError):
        return float(DEFAULT_DELAY_S)


def _expire(group: Any, now: float) -> None:
    table = _draining(group)
    for target_id, entry in list(table.items()):
        if entry.until <= now:
            del table[target_id]
            group.deregistered_targets[target_id] = entry.target


def _start_draining(group: Any, target: dict[str, Any], now: float) -> None:
    delay = _delay_s(group)
    if delay <= 0:
        group.deregistered_targets[target["Id"]] = target
        return
    _draining(group)[target["Id"]] = _Draining(dict(target), now + delay)


def _port_of(group: Any, target: dict[str, Any]) -> int | None:
    port = target.get("Port", group.port)
    try:
        return None if port is None else int(port)
    except (TypeError, ValueError):
        return None


def _status(target_id: str, port: Any, group: Any, state: str, reason: str, description: str) -> Any:
    return elbv2_models.FakeHealthStatus(target_id, port, group.health_check_port, state, reason, description)


# -- the patched methods ---------------------------------------------------------------------------


def _make_register(original: Callable[..., None]) -> Callable[..., None]:
    def register(self: Any, targets: list[dict[str, Any]]) -> None:
        with _lock:
            _expire(self, clock())
            original(self, targets)
            # Registering a draining target cancels its deregistration (AWS: registered again).
            table = _draining(self)
            for target in targets:
                table.pop(target["Id"], None)
                self.terminated_targets.pop(target["Id"], None)

    return register


def _deregister(self: Any, targets: list[dict[str, Any]]) -> None:
    with _lock:
        now = clock()
        _expire(self, now)
        for target in targets:
            registered = self.targets.get(target["Id"])
            # Not registered (or not on that port): AWS returns successfully and does nothing.
            if registered is None or _port_of(self, registered) != _port_of(self, target):
                continue
            del self.targets[target["Id"]]
            _start_draining(self, registered, now)


def _deregister_terminated_instances(self: Any, instance_ids: list[str]) -> None:
    with _lock:
        now = clock()
        _expire(self, now)
        for instance_id in instance_ids:
            registered = self.targets.pop(instance_id, None)
            if registered is not None:
                _start_draining(self, registered, now)


def _make_health_for(original: Callable[..., Any]) -> Callable[..., Any]:
    def health_for(self: Any, target: dict[str, Any], ec2_backend: Any) -> Any:
        with _lock:
            _expire(self, clock())
            target_id = target["Id"]
            if target_id in self.targets:
                return original(self, target, ec2_backend)
            entry = _draining(self).get(target_id)
            if entry is not None and (
                "Port" not in target or _port_of(self, target) == _port_of(self, entry.target)
            ):
                return _status(
                    target_id,
                    entry.target["Port"],
                    self,
                    "draining",
                    "Target.DeregistrationInProgress",
                    "Target deregistration is in progress",
                )
            return _status(
                target_id,
                target.get("Port", self.port),
                self,
                "unused",
                "Target.NotRegistered",
                "Target is not registered to the target group",
            )

    return health_for


def _describe_target_health(self: Any, target_group_arn: str, targets: list[dict[str, Any]]) -> list[Any]:
    group = self.target_groups.get(target_group_arn)
    if group is None:
        raise TargetGroupNotFoundError()
    with _lock:
        _expire(group, clock())
        if not targets:
            # AWS lists draining targets too: they are still members until the delay is over.
            targets = [*group.targets.values(), *(d.target for d in _draining(group).values())]
        return [group.health_for(target, self.ec2_backend) for target in targets]


# -- public --------------------------------------------------------------------------------------


def draining_targets(account_id: str, region: str, target_group_arn: str) -> dict[str, float]:
    """Target id -> seconds of draining left, for one target group (in-process introspection)."""
    group = elbv2_models.elbv2_backends[account_id][region].target_groups.get(target_group_arn)
    if group is None:
        return {}
    with _lock:
        now = clock()
        _expire(group, now)
        return {target_id: entry.until - now for target_id, entry in _draining(group).items()}


def install() -> None:
    """Patch moto's target group and ELBv2 backend (once)."""
    group_cls: Any = elbv2_models.FakeTargetGroup  # Any: its methods are replaced below
    if getattr(group_cls, _MARK, False):
        return
    group_cls.register = _make_register(group_cls.register)
    group_cls.deregister = _deregister
    group_cls.deregister_terminated_instances = _deregister_terminated_instances
    group_cls.health_for = _make_health_for(group_cls.health_for)
    backend_cls: Any = elbv2_models.ELBv2Backend
    backend_cls.describe_target_health = _describe_target_health
    setattr(group_cls, _MARK, True)
