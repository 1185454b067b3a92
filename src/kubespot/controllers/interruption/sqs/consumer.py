"""Consumes the interruption queue: concurrent long polls, one task per message, leases kept alive.

``QueueConsumer.run`` keeps ``settings.receivers`` ReceiveMessage long polls going, hands each
message to ``handle`` in its own task, and acts on the ``Outcome`` it returns (DONE deletes, LEAVE
lets it reappear, RETRY makes it visible again at once). While a handler runs, its message's
visibility is renewed a third of the way through each visibility timeout, so a message stays hidden
exactly as long as someone works on it and comes back soon after a crash (the reference handler
used a fixed 20 s and handled long drains twice). Renewals and deletes of all messages go out
together in batches of ten.

Receiving pauses while ``max_in_flight`` messages are being handled: a poll only asks for as many
messages as there are free slots, so the cap holds exactly. A handler that raises is logged with the
message id and counted as LEAVE; a receive that fails is logged and retried with backoff. Neither
stops the consumer. ``drain`` stops receiving and lets the handlers finish, up to a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kubespot.aws import AwsError, Queue, QueueMessage
from kubespot.config.queue import QueueSettings
from kubespot.model import Clock
from kubespot.model.backoff import full_jitter
from kubespot.observability.logs import log_context

__all__ = ["ConsumerStats", "Lease", "Outcome", "QueueConsumer"]

_log = logging.getLogger(__name__)

#: Receive errors back off from this to ``_BACKOFF_MAX`` (doubling, full jitter): a throttled or
#: unreachable SQS is retried soon but never hammered.
_BACKOFF_MIN = 0.5
_BACKOFF_MAX = 30.0
#: With ``wait_time`` 0 an empty receive returns at once; this keeps such a loop from spinning.
_EMPTY_PAUSE = 1.0
#: SQS's maximum visibility timeout.
_MAX_VISIBILITY = 43_200


class Outcome(enum.Enum):
    """What the handler decided about its message."""

    DONE = "done"
    """Handled: delete the message."""
    LEAVE = "leave"
    """Keep it: it reappears when its visibility lapses (or after ``Lease.reappear_after``)."""
    RETRY = "retry"
    """Keep it and make it visible again at once, for another attempt now."""


class Lease:
    """A handler's hold on its message, kept alive by the consumer while the handler runs."""

    def __init__(self, message: QueueMessage, received_at: float, visibility_timeout: int) -> None:
        self.message = message
        self.received_at = received_at
        """Clock.monotonic() when the receive that returned the message was sent."""
        self.renewals = 0
        """Visibility renewals made so far."""
        self.lost = False
        """SQS refused a renewal (the receipt is no longer valid): another consumer may hold the
        message now, and deleting it will fail."""
        self._visibility = visibility_timeout
        self._renewed_at = received_at
        self._reappear_after: int | None = None
        self._renewal: asyncio.Future[list[str]] | None = None

    def reappear_after(self, seconds: float) -> None:
        """When the handler returns LEAVE, hide the message this long (0..12 h) instead of until
        its current visibility lapses: e.g. a scheduled event worth looking at again later."""
        self._reappear_after = max(0, min(_MAX_VISIBILITY, round(seconds)))

    def _due(self, now: float) -> bool:
        return not self.lost and now - self._renewed_at >= self._visibility / 3


@dataclass
class ConsumerStats:
    """Counters since start (``in_flight`` is current)."""

    received: int = 0
    deleted: int = 0
    left: int = 0
    """Messages not deleted (LEAVE, RETRY, handler errors, cancelled at drain)."""
    errors: int = 0
    """Handlers that raised."""
    in_flight: int = 0
    receive_errors: int = 0
    renewals: int = 0
    renew_errors: int = 0
    delete_errors: int = 0


Handler = Callable[[QueueMessage, Lease], Awaitable[Outcome]]


class QueueConsumer:
    """Receives from ``queue`` and runs ``handle`` for each message until cancelled or drained."""

    def __init__(self, queue: Queue, *, settings: QueueSettings, handle: Handler, clock: Clock) -> None:
        self._queue = queue
        self._settings = settings
        self._handle = handle
        self._clock = clock
        self.stats = ConsumerStats()
        self._leases: dict[str, Lease] = {}  # by receipt handle: a redelivery is a new lease
        self._handlers: set[asyncio.Task[None]] = set()
        self._receivers: list[asyncio.Task[None]] = []
        self._renewer: asyncio.Task[None] | None = None
        # One permit per message being handled or asked for by a poll in flight: the cap holds
        # even while polls are out.
        self._slots = asyncio.Semaphore(settings.max_in_flight)
        self._stopping = asyncio.Event()
        self._stopped = asyncio.Event()

    # -- running ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Receive and handle until ``drain`` completes. Cancelling stops everything at once:
        handlers are cancelled and their messages made visible again."""
        if self._receivers:
            raise RuntimeError("QueueConsumer.run is already running")
        self._receivers = [
            asyncio.create_task(self._receive_loop(n), name=f"kubespot-sqs-receiver-{n}")
            for n in range(self._settings.receivers)
        ]
        self._renewer = asyncio.create_task(self._renew_loop(), name="kubespot-sqs-renewer")
        try:
            await self._stopped.wait()
        finally:
            await self._cancel_all(self._receivers)
            await self._cancel_all(self._handlers)
            if self._renewer is not None:
                await self._cancel_all([self._renewer])

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109 - a grace period, not a call timeout
        """Stop receiving, give running handlers up to ``timeout`` seconds, then cancel the rest.

        Messages of cancelled handlers are made visible again at once. ``run`` returns afterwards.
        """
        self._stopping.set()
        await self._cancel_all(self._receivers)
        pending = set(self._handlers)
        if pending:
            _, pending = await asyncio.wait(pending, timeout=max(0.0, timeout))
        if pending:
            _log.warning(
                "drain timed out; %d message handlers cancelled, their messages released", len(pending)
            )
            await self._cancel_all(pending)
        self._stopped.set()

    @property
    def in_flight(self) -> int:
        return len(self._leases)

    # -- receiving -------------------------------------------------------------------------------

    async def _reserve(self) -> int:
        """Wait for one free slot, then take up to nine more that are free now (never waits)."""
        await self._slots.acquire()
        slots = 1
        while slots < 10 and not self._slots.locked():
            await self._slots.acquire()  # returns at once: a permit is free
            slots += 1
        return slots

    async def _receive_loop(self, index: int) -> None:
        settings = self._settings
        failures = 0
        while not self._stopping.is_set():
            slots = await self._reserve()
            handed = 0
            pause = 0.0
            try:
                started = self._clock.monotonic()
                messages = await self._queue.receive(
                    max_messages=slots,
                    wait_time=settings.wait_time,
                    visibility_timeout=settings.visibility_timeout,
                )
                for message in messages[:slots]:
                    self._start_handler(message, started)
                    handed += 1
                failures = 0
                if not messages and settings.wait_time == 0:
                    pause = _EMPTY_PAUSE
            except Exception as exc:
                # AwsError is the expected kind; anything else is a bug, but a dead receiver would
                # silently halve intake, so it is logged with its traceback and retried the same way.
                failures += 1
                self.stats.receive_errors += 1
                pause = full_jitter(failures - 1, base=_BACKOFF_MIN, cap=_BACKOFF_MAX)
                _log.warning(
                    "SQS receive failed (receiver %d, attempt %d): %s; retrying in %.1f s",
                    index,
                    failures,
                    exc,
                    pause,
                    exc_info=not isinstance(exc, AwsError),
                )
            finally:
                for _ in range(slots - handed):
                    self._slots.release()
            if pause:
                await self._clock.sleep(pause)

    def _start_handler(self, message: QueueMessage, received_at: float) -> None:
        lease = Lease(message, received_at, self._settings.visibility_timeout)
        self._leases[message.receipt_handle] = lease
        self.stats.received += 1
        self.stats.in_flight = len(self._leases)
        task = asyncio.create_task(self._run_handler(lease), name=f"kubespot-sqs-{message.message_id}")
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    # -- handling --------------------------------------------------------------------------------

    async def _run_handler(self, lease: Lease) -> None:
        message = lease.message
        outcome = Outcome.LEAVE
        with log_context(message_id=message.message_id):
            try:
                try:
                    outcome = await self._handle(message, lease)
                except asyncio.CancelledError:
                    # Drain gave up on it (or run was cancelled): give the message back now
                    # rather than after its visibility lapses.
                    self._finish_lease(lease)
                    with contextlib.suppress(AwsError, asyncio.CancelledError):
                        await asyncio.wait_for(self._queue.extend([message], 0), timeout=5)
                    self.stats.left += 1
                    raise
                except Exception:
                    self.stats.errors += 1
                    _log.exception(
                        "handler failed for message %s (receive %d); leaving it on the queue",
                        message.message_id,
                        message.receive_count,
                    )
                    outcome = Outcome.LEAVE
                if not isinstance(outcome, Outcome):
                    _log.error(
                        "handler returned %r for message %s; treated as LEAVE", outcome, message.message_id
                    )
                    outcome = Outcome.LEAVE
                # Renewal stops before the outcome is applied, so a renewal cannot undo a RETRY.
                self._finish_lease(lease)
                await self._apply(lease, outcome)
            finally:
                self._finish_lease(lease)

    def _finish_lease(self, lease: Lease) -> None:
        if self._leases.get(lease.message.receipt_handle) is lease:
            del self._leases[lease.message.receipt_handle]
            self.stats.in_flight = len(self._leases)
            self._slots.release()

    async def _apply(self, lease: Lease, outcome: Outcome) -> None:
        message = lease.message
        try:
            if outcome is Outcome.DONE:
                failed = await self._queue.delete([message])
                if failed:
                    self.stats.delete_errors += 1
                    _log.warning(
                        "SQS refused to delete message %s (receipt expired?); it will be seen again",
                        message.message_id,
                    )
                else:
                    self.stats.deleted += 1
                return
            self.stats.left += 1
            seconds = 0 if outcome is Outcome.RETRY else lease._reappear_after
            if seconds is not None:
                renewal = lease._renewal
                if renewal is not None and not renewal.done():
                    # A renewal still on the wire could land after this and hide the message again.
                    await asyncio.wait([renewal])
                await self._queue.extend([message], seconds)
        except AwsError as exc:
            if outcome is Outcome.DONE:
                self.stats.delete_errors += 1
            _log.warning("SQS %s of message %s failed: %s", outcome.value, message.message_id, exc)

    # -- keeping leases alive --------------------------------------------------------------------

    async def _renew_loop(self) -> None:
        visibility = self._settings.visibility_timeout
        # Ticks at a sixth of the timeout, renewing leases a third old: a lease is renewed at most
        # half a timeout after the last renewal, whatever the phase of the tick.
        tick = max(0.25, visibility / 6)
        while True:
            await self._clock.sleep(tick)
            now = self._clock.monotonic()
            due = [lease for lease in self._leases.values() if lease._due(now)]
            if not due:
                continue
            # One call per ten due leases; the queue batches them. A task, so a handler finishing
            # meanwhile can wait for it (see _apply) and the call survives this loop's cancellation.
            renewal = asyncio.ensure_future(self._queue.extend([lease.message for lease in due], visibility))
            for lease in due:
                lease._renewed_at = now
                lease._renewal = renewal
            renewal.add_done_callback(_consume_exception)
            try:
                failed = set(await asyncio.shield(renewal))
            except Exception as exc:  # AwsError, or a bug: the renewer must outlive either
                self.stats.renew_errors += 1
                _log.warning("renewing visibility of %d messages failed: %s; retrying", len(due), exc)
                for lease in due:
                    # Due again at the next tick, not a third of a timeout later.
                    lease._renewed_at -= visibility
                continue
            for lease in due:
                if lease.message.receipt_handle not in self._leases:
                    continue  # finished meanwhile (and maybe deleted): nothing to renew any more
                if lease.message.message_id in failed:
                    lease.lost = True
                    self.stats.renew_errors += 1
                    _log.warning(
                        "SQS refused to renew message %s; another consumer may receive it",
                        lease.message.message_id,
                    )
                else:
                    lease.renewals += 1
                    self.stats.renewals += 1

    # -- helpers ---------------------------------------------------------------------------------

    @staticmethod
    async def _cancel_all(tasks: set[asyncio.Task[None]] | list[asyncio.Task[None]]) -> None:
        tasks = [t for t in tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def _consume_exception(future: asyncio.Future[list[str]]) -> None:
    # The renewer may be cancelled (drain) while a renewal is out; its error then has no reader.
    if not future.cancelled():
        future.exception()
