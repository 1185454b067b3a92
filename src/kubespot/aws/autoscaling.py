"""Auto Scaling lifecycle actions: complete one (let the instance go) or record a heartbeat, and
read a hook's timeouts (how long an action of it can wait).

A hook's action that is already over (completed by someone, or timed out and completed with the
hook's default result) answers ``ValidationError: No active Lifecycle Action found …``; that comes
out as ``LifecycleActionGone`` so callers can tell "nothing left to do" from a failure worth
retrying.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from kubespot.aws.session import AwsClients, AwsError

__all__ = [
    "HookTimeouts",
    "LifecycleActionGone",
    "LifecycleActions",
    "LifecycleResult",
]

LifecycleResult = Literal["CONTINUE", "ABANDON"]
_GONE_TEXT: Final = "no active lifecycle action"
#: AWS's bounds on a hook (API reference, PutLifecycleHook / LifecycleHook): HeartbeatTimeout is
#: 30..7200 s, and an action waits at most GlobalTimeout = min(48 h, 100 x HeartbeatTimeout) however
#: many heartbeats it gets.
MAX_HEARTBEAT_TIMEOUT: Final = 7200
MAX_GLOBAL_TIMEOUT: Final = 48 * 3600


@dataclass(frozen=True, slots=True)
class HookTimeouts:
    """A lifecycle hook's timeouts: an action ends ``heartbeat`` seconds after it started or after
    its last heartbeat, and ``global_`` seconds after it started at the latest."""

    heartbeat: int
    global_: int
    default_result: str


class LifecycleActionGone(AwsError):
    """The lifecycle action is not (or no longer) waiting: completed, timed out, or never started.

    Not retryable: asking again gets the same answer.
    """


def _gone_or_same(exc: AwsError) -> AwsError:
    if exc.code == "ValidationError" and _GONE_TEXT in exc.message.lower():
        return LifecycleActionGone(
            exc.code,
            exc.message,
            service=exc.service,
            operation=exc.operation,
            status=exc.status,
        )
    return exc


class LifecycleActions:
    """CompleteLifecycleAction and RecordLifecycleActionHeartbeat for one account and region."""

    def __init__(self, clients: AwsClients) -> None:
        self._clients = clients

    async def complete_lifecycle_action(
        self,
        group: str,
        hook: str,
        instance_id: str,
        token: str | None = None,
        result: LifecycleResult = "CONTINUE",
    ) -> None:
        """Complete the action for ``instance_id`` (identified by ``token`` too, when known).

        Raises ``LifecycleActionGone`` if there is no action waiting, ``AwsError`` otherwise.
        """
        await self._call(
            "CompleteLifecycleAction",
            group,
            hook,
            instance_id,
            token,
            LifecycleActionResult=result,
        )

    async def record_heartbeat(
        self, group: str, hook: str, instance_id: str, token: str | None = None
    ) -> None:
        """Push the action's deadline out by the hook's heartbeat timeout."""
        await self._call("RecordLifecycleActionHeartbeat", group, hook, instance_id, token)

    async def hook_timeouts(self, group: str, hook: str) -> HookTimeouts | None:
        """The hook's timeouts (DescribeLifecycleHooks), or None when the group has no such hook.

        Raises ``AwsError`` when AWS cannot be asked (e.g. a policy without the permission)."""
        answer = await self._clients.call(
            "autoscaling",
            "DescribeLifecycleHooks",
            AutoScalingGroupName=group,
            LifecycleHookNames=[hook],
        )
        for found in answer.get("LifecycleHooks") or ():
            if found.get("LifecycleHookName") == hook:
                beat = int(found.get("HeartbeatTimeout") or MAX_HEARTBEAT_TIMEOUT)
                return HookTimeouts(
                    heartbeat=beat,
                    global_=int(found.get("GlobalTimeout") or min(MAX_GLOBAL_TIMEOUT, 100 * beat)),
                    default_result=str(found.get("DefaultResult") or "ABANDON"),
                )
        return None

    async def _call(
        self, operation: str, group: str, hook: str, instance_id: str, token: str | None, **extra: Any
    ) -> None:
        kwargs: dict[str, Any] = {
            "AutoScalingGroupName": group,
            "LifecycleHookName": hook,
            "InstanceId": instance_id,
            **extra,
        }
        if token:
            kwargs["LifecycleActionToken"] = token
        try:
            await self._clients.call("autoscaling", operation, **kwargs)
        except AwsError as exc:
            raise _gone_or_same(exc) from None
