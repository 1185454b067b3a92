"""The controller's handling of one queue message: parse, find the node, hand the event to that
node's handler, and tell the consumer what to do with the message once the work is done.

Each affected node gets the same ``NodeHandler`` the agent uses (same policy, same state annotation,
so an agent and the controller, or two controller replicas, never start a second drain for one
notice). A message is kept (its visibility extended by the consumer) until its node has been fenced
and drained; an Auto Scaling lifecycle action is completed only then (or once the deadline has
passed), with heartbeats while a long drain runs.

A scheduled change (AWS Health maintenance) not due yet is recorded on its Node
(``handling.scheduled``) and armed on the node's handler; when it is due further ahead than
``HOLD_HORIZON`` its message is then deleted, the Node being the durable record (the queue keeps a
message for minutes, the change is days away). A Health "closed" message removes the entry and
withdraws the event. In dry run nothing is recorded and such a message is left on the queue to
reappear shortly before the change is due, as the reminder.

Messages about instances that are not nodes of this cluster (another cluster's, an unmanaged one, a
long-gone one) are left for their owner and deleted after ``foreign_max_receives`` receives, so they
never loop for ever; malformed messages go to the configured outcome, never stop the consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Protocol

from kubespot.aws.autoscaling import LifecycleActionGone
from kubespot.aws.ec2 import InstanceInfo
from kubespot.aws.sqs import QueueMessage
from kubespot.config.drain import DrainSettings
from kubespot.config.imds import MonitorSettings
from kubespot.config.loadbalancer import LoadBalancerWaitSettings
from kubespot.config.node import NodeActionSettings
from kubespot.config.queue import QueueSettings
from kubespot.kube import EventRecorder, KubeClient, NodeView
from kubespot.model import Clock, InterruptionEvent, Kind
from kubespot.observability.logs import log_context
from kubespot.observability.metrics import Metrics
from kubespot.sources.sqs.consumer import Lease, Outcome
from kubespot.sources.sqs.errors import MessageError
from kubespot.sources.sqs.parsers import LifecycleAction, ParsedMessage, parse_message

from .lifecycle_hooks import HookClient, LifecycleHooks
from .node_handler import NodeHandler, Notifier, Settled, StageCalls
from .node_index import NodeIndex
from .policy import plan_for
from .scheduled import ScheduledChanges

log = logging.getLogger("kubespot.handling.queue")

#: An event due further ahead than this is not held in flight: once it is recorded on its node the
#: message is deleted (in dry run, or if the record cannot be written, it is left on the queue).
HOLD_HORIZON = timedelta(minutes=10)


class InstanceLookup(Protocol):
    async def lookup(self, instance_ids: list[str]) -> Mapping[str, InstanceInfo]: ...


class LifecycleClient(Protocol):
    async def complete_lifecycle_action(
        self, group: str, hook: str, instance_id: str, token: str | None = None, result: Any = "CONTINUE"
    ) -> None: ...

    async def record_heartbeat(
        self, group: str, hook: str, instance_id: str, token: str | None = None
    ) -> None: ...


class QueueHandler:
    """``await handle(message)`` gives the consumer the message's outcome."""

    def __init__(
        self,
        *,
        kube: KubeClient,
        nodes: NodeIndex,
        instances: InstanceLookup,
        lifecycle: LifecycleClient,
        queue: QueueSettings,
        monitors: MonitorSettings,
        actions: NodeActionSettings,
        drain: DrainSettings,
        clock: Clock,
        metrics: Metrics,
        recorder: EventRecorder | None = None,
        notifier: Notifier | None = None,
        http_calls: StageCalls | None = None,
        loadbalancer_wait: LoadBalancerWaitSettings | None = None,
        hooks: HookClient | None = None,
    ) -> None:
        self._kube = kube
        self._nodes = nodes
        self._instances = instances
        self._lifecycle = lifecycle
        self._queue = queue
        self._monitors = monitors
        self._actions = actions
        self._drain = drain
        self._clock = clock
        self._metrics = metrics
        self._recorder = recorder
        self._notifier = notifier
        self._http_calls = http_calls
        self._lb_wait = loadbalancer_wait
        self._handlers: dict[str, NodeHandler] = {}
        #: Launch actions, and terminate actions of instances that are no node here.
        self.hooks = (
            LifecycleHooks(
                nodes=nodes,
                client=hooks,
                queue=queue,
                instances=instances,
                clock=clock,
                metrics=metrics,
                dry_run=actions.dry_run,
            )
            if hooks is not None
            else None
        )
        self._starting: dict[str, asyncio.Task[NodeHandler]] = {}
        #: The scheduled changes recorded on nodes; ``scheduled.run()`` must run beside the consumer
        #: (it re-arms every replica's handlers from the nodes).
        self.scheduled = ScheduledChanges(
            kube=kube,
            nodes=nodes,
            handler_for=self._handler,
            clock=clock,
            metrics=metrics,
            lead_time=timedelta(seconds=monitors.scheduled_lead_time),
            acts=lambda event: plan_for(event, actions=actions, monitors=monitors).acts,
            dry_run=actions.dry_run,
        )

    @property
    def handlers(self) -> Mapping[str, NodeHandler]:
        return self._handlers

    async def aclose(self) -> None:
        await self.scheduled.aclose()
        for handler in list(self._handlers.values()):
            await handler.aclose()

    # --- one message ---------------------------------------------------------------------------------

    async def handle(self, message: QueueMessage, lease: Lease) -> Outcome:
        with log_context(message_id=message.message_id):
            try:
                parsed = parse_message(
                    message.body,
                    now=self._clock.now(),
                    lead_time=timedelta(seconds=self._monitors.scheduled_lead_time),
                    node_termination_grace=timedelta(seconds=self._drain.node_termination_grace_period),
                )
            except MessageError as err:
                outcome = Outcome.DONE if self._queue.malformed_action == "delete" else Outcome.LEAVE
                log.warning(
                    "message %s is not an event kubespot understands (%s): %s",
                    message.message_id,
                    "deleted" if outcome is Outcome.DONE else "left for the dead-letter queue",
                    err,
                )
                self._metrics.action("message", "malformed")
                return outcome
            if parsed.ignore_reason is not None:
                log.info("message %s: nothing to do: %s", message.message_id, parsed.ignore_reason)
                self._metrics.action("message", "ignored")
                return Outcome.DONE
            if parsed.launch is not None and self.hooks is not None:
                return await self.hooks.launch(parsed.launch, hold=float(self._queue.visibility_timeout))
            if not parsed.events:
                return Outcome.DONE
            outcomes = await asyncio.gather(
                *(self._event(event, parsed, message, lease) for event in parsed.events)
            )
            # One message can name several instances (Health): it goes only when all are dealt with.
            for wanted in (Outcome.LEAVE, Outcome.RETRY):
                if wanted in outcomes:
                    return wanted
            return Outcome.DONE

    async def _event(
        self, event: InterruptionEvent, parsed: ParsedMessage, message: QueueMessage, lease: Lease
    ) -> Outcome:
        with log_context(event_id=event.id, kind=event.kind.value, instance_id=event.instance_id):
            node = await self._node_of(event.instance_id)
            if node is None:
                outcome = self._foreign(event, message, parsed.lifecycle)
                if parsed.lifecycle and self._queue.delete_if_node_not_found and self.hooks is not None:
                    return await self.hooks.not_a_node(parsed.lifecycle)  # as NTH completes it
                return outcome
            handler = await self._handler(node.name)
            event = dataclasses.replace(event, node_name=node.name)
            if parsed.lifecycle is not None and self.hooks is not None and event.deadline is None:
                # A scale-in is voluntary: bounded by what the hook allows, never by a guess.
                event = dataclasses.replace(
                    event, deadline=await self.hooks.terminate_bound(parsed.lifecycle)
                )
            keep = False  # leave the message although the event was handled (a record not written)
            if self.scheduled.wanted(event):
                recorded = await self.scheduled.hold(node, event)
                ahead = event.act_at - self._clock.now()
                if ahead > HOLD_HORIZON:
                    return self._far_ahead(event, node.name, lease, recorded=recorded, ahead=ahead)
                # Due soon: the message is held until the node is drained, as for any notice; the
                # record only matters should this replica die meanwhile.
            elif event.kind is Kind.SCHEDULED_MAINTENANCE and event.cancelled:
                keep = not await self.scheduled.release(node.name, event.id)
                await handler.handle(event)
            else:
                await handler.handle(event)
            heartbeats = self._heartbeats(parsed.lifecycle) if parsed.lifecycle else None
            try:
                settled = await handler.settled(event.id)
            finally:
                if heartbeats is not None:
                    heartbeats.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await heartbeats
            log.info("event %s on node %s: %s", event.id, node.name, settled.value)
            self._metrics.action("message", settled.value)
            if parsed.lifecycle is not None:
                if self._actions.dry_run:
                    log.info("dry run: would complete the lifecycle action of %s", event.instance_id)
                elif settled is Settled.FAILED:
                    # Not drained (refused, pods left, no fence): CONTINUE would say it was. The hook
                    # ends at its own timeout with its DefaultResult; the node stays fenced.
                    log.error(
                        "lifecycle action of %s not completed: node %s was not drained",
                        event.instance_id,
                        node.name,
                    )
                    self._metrics.action("lifecycle_complete", "skipped")
                elif not await self._complete(parsed.lifecycle, settled):
                    return Outcome.LEAVE  # the message comes back for another CompleteLifecycleAction
            return Outcome.LEAVE if keep else Outcome.DONE

    def _far_ahead(
        self, event: InterruptionEvent, node: str, lease: Lease, *, recorded: bool, ahead: timedelta
    ) -> Outcome:
        """The outcome for a scheduled change armed well before it is due."""
        due = event.act_at.isoformat()
        if recorded:
            log.info("event %s is due at %s: recorded on node %s, message deleted", event.id, due, node)
            self._metrics.action("message", "recorded")
            return Outcome.DONE
        if self.scheduled.dry_run:
            # Nothing is written in dry run: the message is the reminder, shortly before it is due
            # (as long as the queue's retention keeps it).
            lease.reappear_after((ahead - HOLD_HORIZON / 2).total_seconds())
            log.info("dry run: event %s is due at %s: not recorded on the node; message left", event.id, due)
            return Outcome.LEAVE
        # The record could not be written (logged): the message comes back after its visibility
        # timeout for another try, the handler's timer meanwhile armed.
        return Outcome.LEAVE

    # --- which node ----------------------------------------------------------------------------------

    async def _node_of(self, instance_id: str) -> NodeView | None:
        """The node of ``instance_id``, if it is one of ours (and managed, when the tag is checked)."""
        await self._nodes.wait_synced()
        node = self._nodes.by_instance(instance_id)
        info: InstanceInfo | None = None
        if node is None or self._queue.check_tag_before_draining:
            info = (await self._instances.lookup([instance_id])).get(instance_id)
        if node is None and info is not None and info.private_dns_name:
            node = self._nodes.by_name(info.private_dns_name)
        unmanaged = info is None or self._queue.managed_tag not in info.tags
        if node is not None and self._queue.check_tag_before_draining and unmanaged:
            log.info("instance %s has no %s tag: not managed here", instance_id, self._queue.managed_tag)
            return None
        return node

    def _foreign(
        self, event: InterruptionEvent, message: QueueMessage, lifecycle: LifecycleAction | None
    ) -> Outcome:
        give_up = (
            self._queue.delete_if_node_not_found or message.receive_count >= self._queue.foreign_max_receives
        )
        log.info(
            "instance %s is not a node of this cluster: %s (received %d times)",
            event.instance_id,
            "message deleted" if give_up else "left for its owner",
            message.receive_count,
        )
        self._metrics.action("message", "foreign")
        return Outcome.DONE if give_up else Outcome.LEAVE

    async def _handler(self, node: str) -> NodeHandler:
        """The node's handler, created and resumed from the node's state once."""
        handler = self._handlers.get(node)
        if handler is not None:
            return handler
        starting = self._starting.get(node)
        if starting is None:
            starting = self._starting[node] = asyncio.ensure_future(self._start(node))
        try:
            return await asyncio.shield(starting)
        finally:
            if starting.done():
                self._starting.pop(node, None)

    async def _start(self, node: str) -> NodeHandler:
        handler = NodeHandler(
            node_name=node,
            kube=self._kube,
            actions=self._actions,
            monitors=self._monitors,
            drain=self._drain,
            clock=self._clock,
            metrics=self._metrics,
            recorder=self._recorder,
            notifier=self._notifier,
            http_calls=self._http_calls,
            loadbalancer_wait=self._lb_wait,
            node_hint=lambda: self._nodes.by_name(node),
        )
        await handler.start()
        self._handlers[node] = handler
        return handler

    # --- Auto Scaling lifecycle ----------------------------------------------------------------------

    def _heartbeats(self, action: LifecycleAction) -> asyncio.Task[None] | None:
        if self._queue.heartbeat_interval <= 0:
            return None
        return asyncio.create_task(self._beat(action))

    async def _beat(self, action: LifecycleAction) -> None:
        started = self._clock.monotonic()
        until = self._queue.heartbeat_until
        while True:
            await self._clock.sleep(self._queue.heartbeat_interval)
            if until > 0 and self._clock.monotonic() - started >= until:
                return
            try:
                await self._lifecycle.record_heartbeat(
                    action.group_name, action.hook_name, action.instance_id, action.token
                )
                self._metrics.action("lifecycle_heartbeat", "success")
            except LifecycleActionGone as err:  # completed or timed out: beating on is pointless
                log.info("lifecycle action of %s is over; heartbeats stop: %s", action.instance_id, err)
                self._metrics.action("lifecycle_heartbeat", "gone")
                return
            except Exception as err:  # the drain goes on; the hook may still time out by itself
                log.warning("lifecycle heartbeat for %s failed: %s", action.instance_id, err)
                self._metrics.action("lifecycle_heartbeat", "failure")

    async def _complete(self, action: LifecycleAction, settled: Settled) -> bool:
        """CONTINUE the termination now that the node's pods are gone (or the deadline passed).

        False when it failed and is worth another try (throttled, denied, no answer); an action
        AWS no longer has ("No active Lifecycle Action found") counts as done."""
        if self._queue.complete_lifecycle_action_delay > 0:
            await self._clock.sleep(self._queue.complete_lifecycle_action_delay)
        try:
            await self._lifecycle.complete_lifecycle_action(
                action.group_name, action.hook_name, action.instance_id, action.token, "CONTINUE"
            )
        except Exception as err:
            gone = isinstance(err, LifecycleActionGone)
            log.log(
                logging.INFO if gone else logging.WARNING,
                "completing the lifecycle action of %s (%s): %s",
                action.instance_id,
                settled.value,
                err,
            )
            self._metrics.action("lifecycle_complete", "gone" if gone else "failure")
            return gone
        log.info("lifecycle action of %s completed (CONTINUE) after the drain", action.instance_id)
        self._metrics.action("lifecycle_complete", "success")
        return True
