"""How long a scale-in may hold its instance, from the hook's timeouts (AWS API reference,
LifecycleHook: HeartbeatTimeout, and GlobalTimeout = min(48 h, 100 x HeartbeatTimeout) however many
heartbeats), with and without heartbeats, and when the hook cannot be read."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from kubespot.aws.autoscaling import HookTimeouts
from kubespot.aws.ec2 import InstanceInfo
from kubespot.aws.session import AwsError
from kubespot.config.queue import QueueSettings
from kubespot.controllers.interruption.lifecycle_hooks import UNREADABLE_RETRY, LifecycleHooks
from kubespot.controllers.interruption.sqs.parsers import LifecycleAction
from kubespot.handling.node_index import NodeIndex
from kubespot.model import SystemClock
from kubespot.observability.metrics import Metrics

STARTED = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
ACTION = LifecycleAction("ng", "drain", "tok", "i-0abc", STARTED)


class Client:
    def __init__(self, timeouts: HookTimeouts | None, *, fail: int = 0) -> None:
        self.timeouts = timeouts
        self.fail = fail
        self.asked = 0

    async def complete_lifecycle_action(
        self, group: str, hook: str, instance_id: str, token: str | None = None, result: str = "CONTINUE"
    ) -> None:
        raise AssertionError("not called here")

    async def hook_timeouts(self, group: str, hook: str) -> HookTimeouts | None:
        self.asked += 1
        if self.fail:
            self.fail -= 1
            raise AwsError("AccessDenied", "not authorized", service="autoscaling", operation="x")
        return self.timeouts


class NoInstances:
    async def lookup(self, instance_ids: list[str]) -> Mapping[str, InstanceInfo]:
        return {}


class Clock(SystemClock):
    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t


def hooks(client: Client, clock: Clock | None = None, **queue: float) -> LifecycleHooks:
    return LifecycleHooks(
        nodes=NodeIndex(None),  # type: ignore[arg-type]  # not used by the bound
        client=client,
        queue=QueueSettings(**queue),  # type: ignore[arg-type]
        instances=NoInstances(),
        clock=clock or Clock(),
        metrics=Metrics(),
        dry_run=False,
    )


async def test_without_heartbeats_the_heartbeat_timeout_is_the_bound() -> None:
    client = Client(HookTimeouts(heartbeat=300, global_=30000, default_result="CONTINUE"))
    assert await hooks(client).terminate_bound(ACTION) == STARTED + timedelta(seconds=300)


async def test_with_heartbeats_the_global_timeout_cut_by_heartbeat_until() -> None:
    client = Client(HookTimeouts(heartbeat=300, global_=30000, default_result="CONTINUE"))
    beating = hooks(client, heartbeat_interval=60)
    assert await beating.terminate_bound(ACTION) == STARTED + timedelta(seconds=30000)
    until = hooks(client, heartbeat_interval=60, heartbeat_until=1800)
    # The last heartbeat at 1 800 s keeps the action one more heartbeat timeout.
    assert await until.terminate_bound(ACTION) == STARTED + timedelta(seconds=2100)


async def test_an_unreadable_hook_gives_no_bound_and_is_asked_again_later() -> None:
    client = Client(HookTimeouts(heartbeat=300, global_=30000, default_result="CONTINUE"), fail=1)
    clock = Clock()
    h = hooks(client, clock)
    assert await h.terminate_bound(ACTION) is None  # drain.voluntary_timeout applies
    assert await h.terminate_bound(ACTION) is None and client.asked == 1  # not hammered
    clock.t += UNREADABLE_RETRY + 1
    assert await h.terminate_bound(ACTION) == STARTED + timedelta(seconds=300)
    assert await h.terminate_bound(ACTION) == STARTED + timedelta(seconds=300) and client.asked == 2
