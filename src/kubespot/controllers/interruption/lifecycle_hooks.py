"""Auto Scaling lifecycle actions that are not an interruption of one of this cluster's nodes:
launch actions, completed once the new instance's node is Ready, and terminate actions for
instances that are not nodes here, completed when the user asked for such messages to be deleted.

Launch: a group with an ``EC2_INSTANCE_LAUNCHING`` hook keeps each new instance in
``Pending:Wait`` until the hook is completed or times out, and then applies its DefaultResult;
with ABANDON (the default aws-node-termination-handler's README recommends) an instance that is
never confirmed is terminated. As NTH does (README "Handle ASG Instance Launch Lifecycle
Notifications"; pkg/interruptionevent/asg/launch/handler.go), the action is completed with CONTINUE
once a node backed by the instance exists and is Ready. kubespot waits for that on the node index
while it holds the message (one visibility timeout at a time); not Ready by then, the message is
left to come back; once the hook's own timeout has passed (DescribeLifecycleHooks, else AWS's
largest HeartbeatTimeout, 7200 s) nobody waits any longer and the message is deleted: the hook's
DefaultResult decides. A ``CompleteLifecycleAction`` that fails for another reason than "No active
Lifecycle Action found" keeps the message for another try.

Not a node here: NTH with ``DELETE_SQS_MSG_IF_NODE_NOT_FOUND`` runs the event's post-drain task,
which for an ASG termination is ``CompleteLifecycleAction(CONTINUE)``, and deletes the message
(pkg/interruptionevent/draincordon/handler.go); so does kubespot, except for an instance that is
known and lacks the managed tag (another cluster's, which completes it itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Protocol

from kubespot.aws.autoscaling import MAX_HEARTBEAT_TIMEOUT, HookTimeouts, LifecycleActionGone, LifecycleResult
from kubespot.aws.ec2 import InstanceInfo
from kubespot.config.queue import QueueSettings
from kubespot.controllers.interruption.sqs.consumer import Outcome
from kubespot.controllers.interruption.sqs.parsers import LifecycleAction
from kubespot.handling.node_index import NodeIndex
from kubespot.kube import NodeView
from kubespot.model import Clock
from kubespot.observability.metrics import Metrics

__all__ = ["HookClient", "LifecycleHooks"]

log = logging.getLogger("kubespot.handling.lifecycle")

#: Looked at a little past the hook's timeout: the notification's time has whole seconds (EventBridge)
#: and AWS's clock is not ours.
TIMEOUT_SLACK = timedelta(seconds=5)
#: Seconds before a hook that could not be read (DescribeLifecycleHooks failed) is asked again.
UNREADABLE_RETRY = 300.0


class HookClient(Protocol):
    async def complete_lifecycle_action(
        self,
        group: str,
        hook: str,
        instance_id: str,
        token: str | None = None,
        result: LifecycleResult = "CONTINUE",
    ) -> None: ...

    async def hook_timeouts(self, group: str, hook: str) -> HookTimeouts | None: ...


class Instances(Protocol):
    async def lookup(self, instance_ids: list[str]) -> Mapping[str, InstanceInfo]: ...


class LifecycleHooks:
    """``launch(action, hold)`` and ``not_a_node(action)`` give the message's outcome."""

    def __init__(
        self,
        *,
        nodes: NodeIndex,
        client: HookClient,
        queue: QueueSettings,
        instances: Instances,
        clock: Clock,
        metrics: Metrics,
        dry_run: bool,
    ) -> None:
        self._nodes = nodes
        self._client = client
        self._queue = queue
        self._instances = instances
        self._clock = clock
        self._metrics = metrics
        self._dry_run = dry_run
        #: (group, hook) -> its timeouts (None: no such hook), read once.
        self._timeouts: dict[tuple[str, str], HookTimeouts | None] = {}
        #: (group, hook) -> when reading it failed (the fallback applies until it is asked again).
        self._unreadable: dict[tuple[str, str], float] = {}

    # --- launch --------------------------------------------------------------------------------------

    async def launch(self, action: LifecycleAction, hold: float) -> Outcome:
        """Complete a launch action once its node is Ready, waiting at most ``hold`` seconds now."""
        iid = action.instance_id
        if self._queue.check_tag_before_draining and await self._unmanaged(iid):
            log.info("launch of %s: the instance is not managed here; message deleted", iid)
            self._metrics.action("lifecycle_launch", "unmanaged")
            return Outcome.DONE
        ends = await self._ends(action)
        wait = hold if ends is None else min(hold, (ends - self._clock.now()).total_seconds())
        node = await self._ready(iid, max(0.0, wait))
        if node is None:
            if ends is not None and self._clock.now() >= ends:
                log.warning(
                    "launch of %s: no Ready node before the hook %s timed out; its DefaultResult applies",
                    iid,
                    action.hook_name,
                )
                self._metrics.action("lifecycle_launch", "timed_out")
                return Outcome.DONE
            log.info("launch of %s: no Ready node yet; message left for another look", iid)
            self._metrics.action("lifecycle_launch", "waiting")
            return Outcome.LEAVE
        if self._dry_run:
            log.info("dry run: would complete the launch action of %s (node %s Ready)", iid, node.name)
            self._metrics.action("lifecycle_launch", "dry_run")
            return Outcome.DONE
        if await self._complete(action, f"node {node.name} is Ready"):
            self._metrics.action("lifecycle_launch", "success")
            return Outcome.DONE
        self._metrics.action("lifecycle_launch", "failure")
        return Outcome.LEAVE

    async def _ready(self, instance_id: str, wait: float) -> NodeView | None:
        """The instance's node once it is Ready, waiting up to ``wait`` seconds for it."""
        await self._nodes.wait_synced()
        changed = asyncio.Event()
        unsubscribe = self._nodes.subscribe(lambda _name: changed.set())
        try:
            started = self._clock.monotonic()
            while True:
                node = self._nodes.by_instance(instance_id)
                if node is not None and node.ready:
                    return node
                left = wait - (self._clock.monotonic() - started)
                if left <= 0:
                    return None
                changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), left)
        finally:
            unsubscribe()

    async def _ends(self, action: LifecycleAction) -> datetime | None:
        """When the launch action times out by itself (kubespot sends no heartbeat for it)."""
        if action.started_at is None:
            return None
        timeouts = await self._timeouts_of(action)
        seconds = timeouts.heartbeat if timeouts is not None else MAX_HEARTBEAT_TIMEOUT
        return action.started_at + timedelta(seconds=seconds) + TIMEOUT_SLACK

    async def _timeouts_of(self, action: LifecycleAction) -> HookTimeouts | None:
        """The hook's timeouts, read once per hook; None when it cannot be read (asked again after
        ``UNREADABLE_RETRY``, so a throttled call is no lasting fallback)."""
        key = (action.group_name, action.hook_name)
        if key in self._timeouts:
            return self._timeouts[key]
        failed = self._unreadable.get(key)
        if failed is not None and self._clock.monotonic() - failed < UNREADABLE_RETRY:
            return None
        try:
            self._timeouts[key] = found = await self._client.hook_timeouts(*key)
        except Exception as err:  # e.g. NTH's IAM policy, which lacks the permission
            log.info("cannot read hook %s of %s: %s", key[1], key[0], err)
            self._unreadable[key] = self._clock.monotonic()
            return None
        self._unreadable.pop(key, None)
        return found

    # --- terminate -----------------------------------------------------------------------------------

    async def terminate_bound(self, action: LifecycleAction) -> datetime | None:
        """How long a terminate action can keep its instance: the hook's heartbeat timeout from its
        start, or with heartbeats on (``queue.heartbeat_interval``) its global timeout (AWS: min(48 h,
        100 x heartbeat timeout)), cut by ``queue.heartbeat_until``. None when the hook cannot be read
        (the drain is then bounded by ``drain.voluntary_timeout``)."""
        timeouts = None if action.started_at is None else await self._timeouts_of(action)
        if timeouts is None or action.started_at is None:
            return None
        seconds = timeouts.heartbeat
        if self._queue.heartbeat_interval > 0:
            seconds = timeouts.global_
            if self._queue.heartbeat_until > 0:
                seconds = min(seconds, int(self._queue.heartbeat_until) + timeouts.heartbeat)
        return action.started_at + timedelta(seconds=seconds)

    # --- not a node here -----------------------------------------------------------------------------

    async def not_a_node(self, action: LifecycleAction) -> Outcome:
        """A terminate action for an instance that is no node here, with delete-if-not-found on."""
        iid = action.instance_id
        if self._queue.check_tag_before_draining and await self._unmanaged(iid):
            return Outcome.DONE  # another cluster's instance: its owner completes the action
        if self._dry_run:
            log.info("dry run: would complete the lifecycle action of %s (not a node here)", iid)
            return Outcome.DONE
        ok = await self._complete(action, "the instance is not a node of this cluster")
        self._metrics.action("lifecycle_complete", "success" if ok else "failure")
        return Outcome.DONE if ok else Outcome.LEAVE

    # --- both ----------------------------------------------------------------------------------------

    async def _unmanaged(self, instance_id: str) -> bool:
        """The instance is known and lacks the managed tag: someone else's (cached lookups)."""
        info = (await self._instances.lookup([instance_id])).get(instance_id)
        return info is not None and self._queue.managed_tag not in info.tags

    async def _complete(self, action: LifecycleAction, why: str) -> bool:
        """CONTINUE; False when it failed and deserves another try (AWS no longer having the action
        counts as done)."""
        try:
            await self._client.complete_lifecycle_action(
                action.group_name, action.hook_name, action.instance_id, action.token, "CONTINUE"
            )
        except LifecycleActionGone as err:
            log.info("lifecycle action of %s is already over: %s", action.instance_id, err)
            return True
        except Exception as err:
            log.warning("completing the lifecycle action of %s failed (retried): %s", action.instance_id, err)
            return False
        log.info("lifecycle action of %s completed (CONTINUE): %s", action.instance_id, why)
        return True
