"""The controller's handling of one queue message: parse, find the node, hand the event to that
node's handler, and tell the consumer what to do with the message once the work is done.

Each affected node gets the same ``NodeHandler`` the agent uses (same policy, same state annotation,
so an agent and the controller, or two controller replicas, never start a second drain for one
notice). A message is kept (its visibility extended by the consumer) until its node has been fenced
and drained; an Auto Scaling lifecycle action is completed only then (or once the deadline has
passed), with heartbeats while a long drain runs.

A scheduled change (AWS Health maintenance) not due yet is recorded on its Node
(``controllers.interruption.scheduled``) and armed on the node's handler; when it is due further
ahead than ``HOLD_HORIZON`` its message is then deleted, the Node being the durable record (the
queue keeps a message for minutes, the change is days away). A Health "closed" message removes the entry and
withdraws the event. In dry run nothing is recorded and such a message is left on the queue to
reappear shortly before the change is due, as the reminder.

Every wait for one message is bounded by its event's deadline plus ``held_margin`` (the instance is
gone by then): a follow-up for a node already fenced and drained for a stronger reason settles at
once (``NodeHandler`` covers it), and a message still held past its bound is counted in
``kubespot_queue_messages_overdue`` and fails the queue health check.

Handlers belong to a Node object (its UID), not to a name: EKS and Karpenter name nodes by private IP
and IPs are reused, so a handler is dropped when its Node goes away or a new Node takes its name.
At start-up, once the node index is synced, every Node with a ``kubespot.io/interruption`` state gets
its handler, which resumes it (an interrupted drain, a rebalance's auto-undo, a pending undo), as the
agent does at its start.

Messages about instances that are not nodes of this cluster (another cluster's, an unmanaged one, a
long-gone one) are given back to the queue at once for their owner (``foreign_pause``) and deleted
after ``foreign_max_receives`` receives, so they never loop for ever; malformed messages go to the
configured outcome, never stop the consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from kubespot.aws.autoscaling import LifecycleActionGone
from kubespot.aws.ec2 import InstanceInfo
from kubespot.aws.sqs import QueueMessage
from kubespot.cloud.signals import CapacitySignals
from kubespot.config.drain import DrainSettings
from kubespot.config.imds import MonitorSettings
from kubespot.config.loadbalancer import LoadBalancerWaitSettings
from kubespot.config.loader import InvalidSetting
from kubespot.config.node import NodeActionSettings
from kubespot.config.queue import QueueSettings
from kubespot.controllers.interruption.lifecycle_hooks import HookClient, LifecycleHooks
from kubespot.controllers.interruption.scheduled import ScheduledChanges
from kubespot.controllers.interruption.sqs.consumer import Lease, Outcome
from kubespot.controllers.interruption.sqs.errors import MessageError
from kubespot.controllers.interruption.sqs.parsers import LifecycleAction, ParsedMessage, parse_message
from kubespot.handling.node_handler import NodeHandler, Notifier, Settled, StageCalls
from kubespot.handling.node_index import NodeIndex
from kubespot.handling.policy import effective_deadline, plan_for, voluntary
from kubespot.kube import EventRecorder, KubeClient, NodeView
from kubespot.model import Clock, InterruptionEvent, Kind
from kubespot.observability.logs import log_context
from kubespot.observability.metrics import Metrics
from kubespot.records.interruption import STATE_ANNOTATION, Phase, StateError, decode

log = logging.getLogger("kubespot.handling.queue")

#: An event due further ahead than this is not held in flight: once it is recorded on its node the
#: message is deleted (in dry run, or if the record cannot be written, it is left on the queue).
HOLD_HORIZON = timedelta(minutes=10)
#: With heartbeats and no heartbeat_until, a lifecycle hook is kept at most this long: Auto Scaling's
#: own limit (the global timeout: 100 x the heartbeat timeout or 48 hours, whichever is smaller).
LIFECYCLE_MAX = timedelta(hours=48)
#: How often handlers of Nodes that went away are dropped.
PRUNE_EVERY = 30.0
#: Resumes at start-up run this many at a time (each reads nothing: the index has the node).
RESUME_CONCURRENCY = 32


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
        capacity: CapacitySignals | None = None,
        cluster: str = "",
    ) -> None:
        self._kube = kube
        #: Told of every event on a node of this cluster: what the provisioner learns from it.
        self._capacity = capacity
        #: The cluster kubespot's provisioner launches for: its instances count as managed.
        self._cluster = cluster
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
        # Built once: a setting too large for a duration fails here, at start-up, rather than in
        # every message's handle().
        self._lead_time = _duration("imds.scheduled_lead_time", monitors.scheduled_lead_time)
        self._grace = _duration("drain.node_termination_grace_period", drain.node_termination_grace_period)
        self._voluntary = _duration("drain.voluntary_timeout", drain.voluntary_timeout)
        self._notice = _duration("queue.interruption_notice", queue.interruption_notice)
        self._margin = _duration("queue.held_margin", queue.held_margin)
        self._heartbeat_until = _duration("queue.heartbeat_until", max(queue.heartbeat_until, 0.0))
        #: Per node name, the handler of the Node object that has that name now (see ``_handler``).
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
        #: Messages being handled: (message id, event id) -> (monotonic bound, what it is).
        self._held: dict[tuple[str, str], tuple[float, str]] = {}
        self._closing: set[asyncio.Task[None]] = set()
        #: The scheduled changes recorded on nodes; ``scheduled.run()`` must run beside the consumer
        #: (it re-arms every replica's handlers from the nodes).
        self.scheduled = ScheduledChanges(
            kube=kube,
            nodes=nodes,
            handler_for=self._handler,
            clock=clock,
            metrics=metrics,
            lead_time=self._lead_time,
            acts=lambda event: plan_for(event, actions=actions, monitors=monitors).acts,
            dry_run=actions.dry_run,
        )

    @property
    def handlers(self) -> Mapping[str, NodeHandler]:
        return self._handlers

    async def aclose(self) -> None:
        await self.scheduled.aclose()
        # Each releases its hold on its node at once, so another replica takes over without waiting.
        await asyncio.gather(*(handler.aclose() for handler in list(self._handlers.values())))
        if self._closing:
            await asyncio.wait(self._closing)

    # --- the handlers' life --------------------------------------------------------------------------

    async def run(self) -> None:
        """Resume every node's state once the index is synced, then, every ``PRUNE_EVERY`` seconds,
        drop the handlers of Nodes that went away and refresh the overdue-messages gauge (also
        refreshed by each /healthz call). Runs until cancelled."""
        await self._nodes.wait_synced()
        await self.resume_all()
        while True:
            await self._clock.sleep(PRUNE_EVERY)
            self.prune()
            self.overdue()

    async def resume_all(self) -> int:
        """Start (and so resume) the handler of every Node that has a kubespot state; returns how many."""
        stated = [n.name for n in self._nodes.nodes() if _needs_resume(n)]
        if not stated:
            return 0
        log.info("resuming the state of %d nodes", len(stated))
        gate = asyncio.Semaphore(RESUME_CONCURRENCY)

        async def one(name: str) -> None:
            async with gate:
                try:
                    await self._handler(name)
                except Exception:  # one node's failure must not stop the others
                    log.exception("resuming node %s failed", name)

        await asyncio.gather(*(one(name) for name in stated))
        return len(stated)

    def prune(self) -> None:
        """Drop the handlers whose Node is gone or was replaced by a Node of the same name."""
        for name, handler in list(self._handlers.items()):
            node = self._nodes.by_name(name)
            if node is None or (handler.node_uid and node.uid != handler.node_uid):
                self._drop(name, handler, "deleted" if node is None else "replaced by a new Node")

    def _drop(self, name: str, handler: NodeHandler, why: str) -> None:
        if self._handlers.get(name) is handler:
            del self._handlers[name]
        log.info("node %s (uid %s) %s: its handler is dropped", name, handler.node_uid or "?", why)
        handler.close_gone()
        task = asyncio.create_task(handler.aclose(release=False))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    # --- messages held ---------------------------------------------------------------------------------

    def overdue(self) -> list[str]:
        """The messages still being handled past their bound (a stuck step), for /healthz."""
        now = self._clock.monotonic()
        late = [what for bound, what in self._held.values() if now > bound]
        self._metrics.set_overdue_messages(len(late))
        return late

    def _bound(self, event: InterruptionEvent, parsed: ParsedMessage) -> datetime:
        """Until when the handling of ``event`` may hold its message."""
        now = self._clock.now()
        try:
            if event.deadline is None and voluntary(event):
                # Nothing stops the instance: the drain is bounded by voluntary_timeout (policy).
                ends = now + self._voluntary
            else:
                ends = effective_deadline(event, now=now, window=self._grace)
            if parsed.lifecycle is not None and self._queue.heartbeat_interval > 0:
                until = self._heartbeat_until if self._queue.heartbeat_until > 0 else LIFECYCLE_MAX
                ends = max(ends, now + until)
            # At least held_margin from now: a message that arrives late (an EC2 state change's
            # deadline is its own time) is still handed to its node's handler, which acts on it.
            return max(ends, now) + self._margin
        except OverflowError:
            # Past the last time a datetime holds: no bound in practice, and no reason to fail.
            return datetime.max.replace(tzinfo=now.tzinfo)

    # --- one message ---------------------------------------------------------------------------------

    async def handle(self, message: QueueMessage, lease: Lease) -> Outcome:
        with log_context(message_id=message.message_id):
            try:
                parsed = parse_message(
                    message.body,
                    now=self._clock.now(),
                    lead_time=self._lead_time,
                    node_termination_grace=self._grace,
                    notice=self._notice,
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
            if parsed.lifecycle is not None and self.hooks is not None and event.deadline is None:
                # A scale-in is voluntary: bounded by what the hook allows, never by a guess.
                event = dataclasses.replace(
                    event, deadline=await self.hooks.terminate_bound(parsed.lifecycle)
                )
            bound = self._bound(event, parsed)
            left = (bound - self._clock.now()).total_seconds()
            key = (message.message_id, event.id)
            self._held[key] = (
                self._clock.monotonic() + left,
                f"message {message.message_id} ({event.kind.value} {event.id})",
            )
            try:
                async with asyncio.timeout(max(0.0, left)):
                    return await self._event_within(event, parsed, message, lease)
            except TimeoutError:
                # The instance is gone by now: holding the message serves no one, and an Auto
                # Scaling group waits for its hook only until the hook's own timeout anyway.
                log.error(
                    "event %s: not settled by %s (deadline plus held_margin): message released",
                    event.id,
                    bound.isoformat(),
                )
                self._metrics.action("message", "overdue")
                # A lifecycle action is not completed: the node was not seen drained, and the hook
                # has reached its own timeout (its DefaultResult applies) or the instance is gone.
                return Outcome.DONE
            finally:
                self._held.pop(key, None)

    async def _event_within(
        self, event: InterruptionEvent, parsed: ParsedMessage, message: QueueMessage, lease: Lease
    ) -> Outcome:
        node = await self._node_of(event.instance_id)
        if node is None:
            outcome = self._foreign(event, message, parsed.lifecycle, lease)
            if parsed.lifecycle and self._queue.delete_if_node_not_found and self.hooks is not None:
                return await self.hooks.not_a_node(parsed.lifecycle)  # as NTH completes it
            return outcome
        if self._capacity is not None and self._capacity.observe(event, node.labels):
            # kubespot_actions_total{action="capacity_signal", result=<kind>}
            self._metrics.action("capacity_signal", event.kind.value)
            log.info("%s on node %s: the provisioner learns of its spot pool", event.kind.value, node.name)
        handler = await self._handler(node.name, node.uid)
        event = dataclasses.replace(event, node_name=node.name)
        if self.scheduled.outdated(node, event):
            return Outcome.DONE
        keep = False  # leave the message although the event was handled (a record not written)
        if self.scheduled.wanted(event):
            recorded = await self.scheduled.hold(node, event)
            ahead = event.act_at - self._clock.now()
            if ahead > HOLD_HORIZON:
                return self._far_ahead(event, node.name, lease, recorded=recorded, ahead=ahead)
            # Due soon: the message is held until the node is drained, as for any notice; the
            # record only matters should this replica die meanwhile.
        elif event.kind is Kind.SCHEDULED_MAINTENANCE and event.cancelled:
            keep = not await self.scheduled.release(node.name, event.id, closed=event)
            await asyncio.shield(handler.handle(event))
        else:
            # Shielded: a bound that runs out must not cancel the handler half-way through its
            # decision (the new event current, its work not started).
            await asyncio.shield(handler.handle(event))
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
        unmanaged = info is None or not info.is_managed(self._queue.managed_tag, self._cluster)
        if node is not None and self._queue.check_tag_before_draining and unmanaged:
            log.info(
                "instance %s has no %s tag and was not launched by kubespot for this cluster: "
                "not managed here",
                instance_id,
                self._queue.managed_tag,
            )
            return None
        return node

    def _foreign(
        self,
        event: InterruptionEvent,
        message: QueueMessage,
        lifecycle: LifecycleAction | None,
        lease: Lease,
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
        if not give_up:
            lease.reappear_after(foreign_pause(message.receive_count, self._queue.visibility_timeout))
        return Outcome.DONE if give_up else Outcome.LEAVE

    async def _handler(self, node: str, uid: str | None = None) -> NodeHandler:
        """The handler of the Node named ``node`` now (``uid``: as the caller saw it; default: as the
        index has it), created and resumed from the node's state once. A handler of an older Node
        of that name (a reused private-IP name) is dropped first: its notices ended with that Node.
        """
        if uid is None:
            seen = self._nodes.by_name(node)
            uid = seen.uid if seen is not None else ""
        handler = self._handlers.get(node)
        if handler is not None:
            if not uid or not handler.node_uid or handler.node_uid == uid:
                return handler
            self._drop(node, handler, "replaced by a new Node")
        starting = self._starting.get(node)
        if starting is None:
            starting = self._starting[node] = asyncio.ensure_future(self._start(node, uid))
        try:
            return await asyncio.shield(starting)
        finally:
            if starting.done():
                self._starting.pop(node, None)

    async def _start(self, node: str, uid: str) -> NodeHandler:
        handler = NodeHandler(
            node_name=node,
            node_uid=uid,
            # A thousand handlers in a burst: the per-pod results are in the logs and the summary.
            keep_last_drain=False,
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


def _duration(name: str, seconds: float) -> timedelta:
    """``seconds`` as a timedelta, or a settings error naming ``name`` when no timedelta holds it."""
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise InvalidSetting(name, f"{seconds:g} seconds is too long for a duration") from None


def foreign_pause(receive_count: int, visibility_timeout: int) -> float:
    """Seconds a message about another cluster's instance stays hidden once given back.

    Visible again at once after its first receive, so the cluster that owns the instance gets it
    within its next poll instead of after our visibility timeout (a spot notice gives two minutes;
    the reference handler leaves such a message hidden for its own timeout, 20 s by default, and
    deletes it only with DELETE_SQS_MSG_IF_NODE_NOT_FOUND). A message that keeps coming back here
    (no owner is polling) is hidden 1, 2, 4 … s, up to the visibility timeout, so it never spins
    between this cluster's receivers and its receives (``foreign_max_receives``) span seconds, not
    milliseconds, of the owner's chances.
    """
    if receive_count <= 1:
        return 0.0
    return float(min(visibility_timeout, 2 ** (receive_count - 2)))


def _needs_resume(node: NodeView) -> bool:
    """Whether ``node``'s state has work left for a handler: a fence or drain in progress (or failed,
    to retry), or a rebalance's undo to re-arm. A drained node has none: resuming it would only
    rewrite its holder, a write per drained node at every restart."""
    try:
        state = decode(node.annotations.get(STATE_ANNOTATION))
    except StateError:
        return False
    return state is not None and (state.phase is not Phase.DRAINED or state.undo_at is not None)
