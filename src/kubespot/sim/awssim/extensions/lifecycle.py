"""Auto Scaling lifecycle actions for moto: tokens, wait states, completion and heartbeats.

Stock moto 5.2.x stores lifecycle hooks but never runs them: terminating an instance removes it at
once, no ``LifecycleActionToken`` exists, no notification is sent, and ``CompleteLifecycleAction``
/ ``RecordLifecycleActionHeartbeat`` answer HTTP 500 (not implemented). kubespot's queue
processor needs the whole loop, so this module adds it:

- ``start_action()`` does what Auto Scaling does when a hooked transition begins: the instance goes
  to ``Terminating:Wait`` (or ``Pending:Wait``), a token is issued, the EventBridge event
  ("EC2 Instance-terminate Lifecycle Action") is put on the default bus, where moto's rules route
  it, and, when the hook has a notification target (SQS queue or SNS topic), the direct
  notification goes there too. Tests and the sandbox call it; nothing in moto triggers it.
- ``CompleteLifecycleAction`` and ``RecordLifecycleActionHeartbeat`` are served over HTTP with
  AWS's validation: the action is found by token or instance id within the named group and hook,
  otherwise ``ValidationError: No active Lifecycle Action found with token <t>`` (or ``with
  instance ID <i>``), as the real API answers; the result must be CONTINUE or ABANDON.
- Completing a terminate action terminates the instance (detached from the group, which launches
  a replacement unless the action was started with ``decrement_desired_capacity``); completing a
  launch action with CONTINUE puts the instance in service, ABANDON terminates it.
- A heartbeat moves the deadline to now + HeartbeatTimeout, capped by the global timeout
  (min(48 h, 100 x HeartbeatTimeout) from the start). An action past its deadline is completed
  with the hook's DefaultResult the next time anything looks at lifecycle actions.
- PutLifecycleHook keeps ``NotificationTargetARN``, ``RoleARN`` and ``NotificationMetadata``
  (moto drops them and reports placeholders).

- ``inject_fault()`` makes the next calls of one lifecycle operation fail the way AWS can fail
  them and moto never does: ``Throttling`` ("Rate exceeded") or ``AccessDeniedException``, both
  HTTP 400 as the Auto Scaling API reference's Common Errors lists them
  (https://docs.aws.amazon.com/autoscaling/ec2/APIReference/CommonErrors.html); the action is left
  as it was, so a retry can still complete it.

Every action, completion and heartbeat is recorded on the Auto Scaling backend, so ``reset()``
forgets them with everything else; read them with ``list_actions()`` (or
``MotoServer.lifecycle_actions()``, or ``GET /_kubespot/autoscaling/lifecycle-actions``).

Limits: one hook per action (with several hooks on one transition AWS waits for all of them);
no lifecycle actions are started by moto's own scale-in or instance termination.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from moto.autoscaling import models as asg_models
from moto.autoscaling import responses as asg_responses
from moto.autoscaling.exceptions import ValidationError
from moto.core.exceptions import _RESTError
from moto.core.responses import EmptyResult

__all__ = [
    "LAUNCHING",
    "TERMINATING",
    "LifecycleAction",
    "LifecycleActionError",
    "complete_action",
    "inject_fault",
    "install",
    "list_actions",
    "record_heartbeat",
    "start_action",
]

TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"
LAUNCHING = "autoscaling:EC2_INSTANCE_LAUNCHING"
_RESULTS = ("CONTINUE", "ABANDON")
_MAX_GLOBAL_TIMEOUT_S = 48 * 3600
_STORE = "_kubespot_lifecycle_actions"
_FAULTS = "_kubespot_lifecycle_faults"
#: AWS's messages for the errors ``inject_fault`` can raise (HTTP 400 each, per Common Errors).
FAULT_MESSAGES = {
    "Throttling": "Rate exceeded",
    "AccessDeniedException": "You do not have sufficient access to perform this action.",
}
_MARK = "_kubespot_lifecycle"

_lock = threading.RLock()


class LifecycleActionError(ValueError):
    """A lifecycle action cannot be started (unknown group, instance or hook)."""


@dataclass
class LifecycleAction:
    """One lifecycle action: what AWS tracks between a hooked transition and its completion."""

    token: str
    auto_scaling_group_name: str
    lifecycle_hook_name: str
    instance_id: str
    transition: str
    heartbeat_timeout: int
    default_result: str
    notification_metadata: str | None
    started_at: float
    deadline: float
    global_deadline: float
    decrement_desired_capacity: bool = False
    heartbeats: list[float] = field(default_factory=list)
    result: str | None = None
    completed_at: float | None = None
    #: "CompleteLifecycleAction" or "timeout".
    completed_by: str | None = None

    @property
    def active(self) -> bool:
        return self.completed_at is None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["active"] = self.active
        return data


# -- backend helpers -----------------------------------------------------------------------------


def _backend(account_id: str, region: str) -> Any:
    return asg_models.autoscaling_backends[account_id][region]


def _store(backend: Any) -> dict[str, LifecycleAction]:
    store: dict[str, LifecycleAction] = backend.__dict__.setdefault(_STORE, {})
    return store


def _instance_state(backend: Any, group_name: str, instance_id: str) -> Any | None:
    group = backend.autoscaling_groups.get(group_name)
    if group is None:
        return None
    return next((s for s in group.instance_states if s.instance.id == instance_id), None)


def _finish(backend: Any, action: LifecycleAction, result: str, by: str, now: float) -> None:
    action.result = result
    action.completed_at = now
    action.completed_by = by
    state = _instance_state(backend, action.auto_scaling_group_name, action.instance_id)
    if state is None:
        return
    if action.transition == LAUNCHING and result == "CONTINUE":
        state.lifecycle_state = "InService"
        return
    state.lifecycle_state = "Terminating:Proceed"
    backend.terminate_instance(action.instance_id, should_decrement=action.decrement_desired_capacity)


def _expire(backend: Any, now: float) -> None:
    for action in list(_store(backend).values()):
        if action.active and now > min(action.deadline, action.global_deadline):
            _finish(backend, action, action.default_result, "timeout", now)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ts * 1000) % 1000:03d}Z"


def _emit(backend: Any, action: LifecycleAction, hook: Any, group: Any) -> None:
    from moto.events.models import events_backends
    from moto.sns.models import sns_backends
    from moto.sqs.models import sqs_backends

    account_id, region = backend.account_id, backend.region_name
    terminating = action.transition == TERMINATING
    origin, destination = ("AutoScalingGroup", "EC2") if terminating else ("EC2", "AutoScalingGroup")
    detail: dict[str, Any] = {
        "LifecycleActionToken": action.token,
        "AutoScalingGroupName": action.auto_scaling_group_name,
        "LifecycleHookName": action.lifecycle_hook_name,
        "EC2InstanceId": action.instance_id,
        "LifecycleTransition": action.transition,
        "Origin": origin,
        "Destination": destination,
    }
    if action.notification_metadata is not None:
        detail["NotificationMetadata"] = action.notification_metadata
    kind = "terminate" if terminating else "launch"
    events_backends[account_id][region].put_events(
        [
            {
                "Source": "aws.autoscaling",
                "DetailType": f"EC2 Instance-{kind} Lifecycle Action",
                "Detail": json.dumps(detail),
                "Resources": [group.arn],
            }
        ]
    )

    target = getattr(hook, "_kubespot_target_arn", None)
    if not target:
        return
    direct: dict[str, Any] = {
        "Origin": origin,
        "LifecycleHookName": action.lifecycle_hook_name,
        "Destination": destination,
        "AccountId": account_id,
        "RequestId": str(uuid.uuid4()),
        "LifecycleTransition": action.transition,
        "AutoScalingGroupName": action.auto_scaling_group_name,
        "Service": "AWS Auto Scaling",
        "Time": _iso(action.started_at),
        "EC2InstanceId": action.instance_id,
        "LifecycleActionToken": action.token,
    }
    if action.notification_metadata is not None:
        direct["NotificationMetadata"] = action.notification_metadata
    parts = target.split(":")
    if parts[2] == "sqs":
        sqs_backends[parts[4]][parts[3]].send_message(queue_name=parts[5], message_body=json.dumps(direct))
    elif parts[2] == "sns":
        verb = "TERMINATING" if terminating else "LAUNCHING"
        sns_backends[parts[4]][parts[3]].get_topic(target).publish(
            json.dumps(direct),
            subject=f"Auto Scaling:  Lifecycle action '{verb}' for instance {action.instance_id} "
            f"in progress.",
        )


# -- public Python API ---------------------------------------------------------------------------


def start_action(
    account_id: str,
    region: str,
    auto_scaling_group_name: str,
    instance_id: str,
    *,
    lifecycle_hook_name: str | None = None,
    transition: str = TERMINATING,
    emit: bool = True,
    decrement_desired_capacity: bool = False,
    now: float | None = None,
) -> LifecycleAction:
    """Begin a lifecycle action for an instance of a group, as Auto Scaling does.

    The hook is ``lifecycle_hook_name`` or the group's first hook for ``transition``. With
    ``emit`` the EventBridge event goes to the default bus and the direct notification to the
    hook's notification target, if it has one. Raises ``LifecycleActionError`` for an unknown
    group, instance or hook.
    """
    if transition not in (TERMINATING, LAUNCHING):
        raise LifecycleActionError(f"unsupported transition {transition!r}")
    now = time.time() if now is None else now
    with _lock:
        backend = _backend(account_id, region)
        group = backend.autoscaling_groups.get(auto_scaling_group_name)
        if group is None:
            raise LifecycleActionError(f"Auto Scaling group {auto_scaling_group_name!r} not found")
        state = _instance_state(backend, auto_scaling_group_name, instance_id)
        if state is None:
            raise LifecycleActionError(f"instance {instance_id} is not in group {auto_scaling_group_name}")
        hooks = [
            h
            for h in backend.lifecycle_hooks.values()
            if h.auto_scaling_group_name == auto_scaling_group_name
            and h.lifecycle_transition == transition
            and (lifecycle_hook_name is None or h.name == lifecycle_hook_name)
        ]
        if not hooks:
            raise LifecycleActionError(
                f"group {auto_scaling_group_name} has no lifecycle hook for {transition}"
                + (f" named {lifecycle_hook_name!r}" if lifecycle_hook_name else "")
            )
        hook = hooks[0]
        timeout = int(hook.heartbeat_timeout)
        action = LifecycleAction(
            token=str(uuid.uuid4()),
            auto_scaling_group_name=auto_scaling_group_name,
            lifecycle_hook_name=hook.name,
            instance_id=instance_id,
            transition=transition,
            heartbeat_timeout=timeout,
            default_result=str(hook.default_result),
            notification_metadata=getattr(hook, "notification_metadata", None),
            started_at=now,
            deadline=now + timeout,
            global_deadline=now + min(_MAX_GLOBAL_TIMEOUT_S, 100 * timeout),
            decrement_desired_capacity=decrement_desired_capacity,
        )
        state.lifecycle_state = "Terminating:Wait" if transition == TERMINATING else "Pending:Wait"
        _store(backend)[action.token] = action
    if emit:
        _emit(backend, action, hook, group)
    return action


def list_actions(account_id: str, region: str, *, now: float | None = None) -> list[LifecycleAction]:
    """All lifecycle actions of the region, oldest first (timeouts applied first)."""
    with _lock:
        backend = _backend(account_id, region)
        _expire(backend, time.time() if now is None else now)
        return sorted(_store(backend).values(), key=lambda a: a.started_at)


def _find_active(
    backend: Any,
    group_name: str | None,
    hook_name: str | None,
    token: str | None,
    instance_id: str | None,
    now: float,
) -> LifecycleAction:
    """The action a call names, if still active at ``now`` (the caller holds ``_lock``)."""
    _expire(backend, now)
    for action in _store(backend).values():
        if (
            action.active
            and action.auto_scaling_group_name == group_name
            and action.lifecycle_hook_name == hook_name
            and (action.token == token if token else action.instance_id == instance_id)
        ):
            return action
    if token:
        raise ValidationError(f"No active Lifecycle Action found with token {token}")
    raise ValidationError(f"No active Lifecycle Action found with instance ID {instance_id}")


def _check_target(
    group_name: str | None, hook_name: str | None, token: str | None, instance: str | None
) -> None:
    if not group_name:
        raise ValidationError("AutoScalingGroupName is required")
    if not hook_name:
        raise ValidationError("LifecycleHookName is required")
    if not token and not instance:
        raise ValidationError("Either LifecycleActionToken or InstanceId must be specified")


def complete_action(
    backend: Any,
    auto_scaling_group_name: str | None,
    lifecycle_hook_name: str | None,
    lifecycle_action_token: str | None,
    instance_id: str | None,
    result: str | None,
    *,
    now: float | None = None,
) -> LifecycleAction:
    """CompleteLifecycleAction on ``backend``; raises moto's ``ValidationError`` as AWS would."""
    _check_target(auto_scaling_group_name, lifecycle_hook_name, lifecycle_action_token, instance_id)
    if result not in _RESULTS:
        raise ValidationError(
            f"1 validation error detected: Value '{result}' at 'lifecycleActionResult' failed to "
            "satisfy constraint: Member must be one of CONTINUE, ABANDON"
        )
    now = time.time() if now is None else now
    with _lock:
        action = _find_active(
            backend, auto_scaling_group_name, lifecycle_hook_name, lifecycle_action_token, instance_id, now
        )
        _finish(backend, action, result, "CompleteLifecycleAction", now)
        return action


def record_heartbeat(
    backend: Any,
    auto_scaling_group_name: str | None,
    lifecycle_hook_name: str | None,
    lifecycle_action_token: str | None,
    instance_id: str | None,
    *,
    now: float | None = None,
) -> LifecycleAction:
    """RecordLifecycleActionHeartbeat on ``backend``; raises moto's ``ValidationError`` as AWS would."""
    _check_target(auto_scaling_group_name, lifecycle_hook_name, lifecycle_action_token, instance_id)
    now = time.time() if now is None else now
    with _lock:
        action = _find_active(
            backend, auto_scaling_group_name, lifecycle_hook_name, lifecycle_action_token, instance_id, now
        )
        action.heartbeats.append(now)
        action.deadline = min(now + action.heartbeat_timeout, action.global_deadline)
        return action


class _Fault(_RESTError):
    """An injected AWS error, serialized as the Query protocol's ErrorResponse with HTTP 400."""


def inject_fault(account_id: str, region: str, operation: str, code: str, *, times: int = 1) -> None:
    """Make the next ``times`` calls of ``operation`` (CompleteLifecycleAction or
    RecordLifecycleActionHeartbeat) answer ``code`` (a key of ``FAULT_MESSAGES``) without touching
    the action. ``reset()`` forgets pending faults with the rest of the backend."""
    if operation not in ("CompleteLifecycleAction", "RecordLifecycleActionHeartbeat"):
        raise LifecycleActionError(f"cannot inject a fault into {operation!r}")
    if code not in FAULT_MESSAGES:
        raise LifecycleActionError(f"unknown fault {code!r}: one of {', '.join(FAULT_MESSAGES)}")
    with _lock:
        backend = _backend(account_id, region)
        faults: list[tuple[str, str]] = backend.__dict__.setdefault(_FAULTS, [])
        faults.extend([(operation, code)] * times)


def _raise_fault(backend: Any, operation: str) -> None:
    with _lock:
        faults: list[tuple[str, str]] = backend.__dict__.get(_FAULTS) or []
        for n, (op, code) in enumerate(faults):
            if op == operation:
                del faults[n]
                raise _Fault(code, FAULT_MESSAGES[code])


# -- moto response handlers ----------------------------------------------------------------------


def _action_named(self: Any, operation: str) -> tuple[Any, str | None, str | None, str | None, str | None]:
    """The backend and the action a lifecycle call names (group, hook, token, instance), once any
    fault injected for ``operation`` has been raised."""
    _raise_fault(self.autoscaling_backend, operation)
    return (
        self.autoscaling_backend,
        self._get_param("AutoScalingGroupName"),
        self._get_param("LifecycleHookName"),
        self._get_param("LifecycleActionToken"),
        self._get_param("InstanceId"),
    )


def _complete_lifecycle_action(self: Any) -> EmptyResult:
    complete_action(*_action_named(self, "CompleteLifecycleAction"), self._get_param("LifecycleActionResult"))
    return EmptyResult()


def _record_lifecycle_action_heartbeat(self: Any) -> EmptyResult:
    record_heartbeat(*_action_named(self, "RecordLifecycleActionHeartbeat"))
    return EmptyResult()


def _make_put_lifecycle_hook(original: Any) -> Any:
    def put_lifecycle_hook(self: Any) -> Any:
        response = original(self)
        group_name = self._get_param("AutoScalingGroupName")
        hook = self.autoscaling_backend.lifecycle_hooks.get(
            f"{group_name}_{self._get_param('LifecycleHookName')}"
        )
        if hook is not None:
            target = self._get_param("NotificationTargetARN")
            hook._kubespot_target_arn = target
            hook.notification_target_arn = target
            hook.role_arn = self._get_param("RoleARN")
            hook.notification_metadata = self._get_param("NotificationMetadata")
        return response

    return put_lifecycle_hook


def install() -> None:
    """Add the lifecycle calls to moto's Auto Scaling response class (once)."""
    cls: Any = asg_responses.AutoScalingResponse  # Any: methods are added and replaced below
    if getattr(cls, _MARK, False):
        return
    cls.complete_lifecycle_action = _complete_lifecycle_action
    cls.record_lifecycle_action_heartbeat = _record_lifecycle_action_heartbeat
    cls.put_lifecycle_hook = _make_put_lifecycle_hook(cls.put_lifecycle_hook)
    setattr(cls, _MARK, True)
