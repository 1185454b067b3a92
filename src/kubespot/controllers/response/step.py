"""What the reconciler asks of one AWS action: a step (docs/designs/response-actions.md).

A step runs on one side of the drain. A **pre-drain** step (deregistration) runs while the node is
fenced or draining and claims the node's ``kubespot.io/actions`` record itself, because the drain
waits for what it writes there. A **post-drain** step (isolation, the summary) runs once the drain
is over, between the reconciler's claim of the post-drain steps and its final write, and returns
the record with its entry added. Every step says which kinds it acts on (none when it is off), what
it adds to the published summary, and what it would do in dry run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from kubespot.controllers.response.events import NodeEvents
from kubespot.kube import NodeView
from kubespot.model import Clock, Kind
from kubespot.model.summary import ActionSummary
from kubespot.observability.metrics import Metrics
from kubespot.records.actions import ActionsRecord
from kubespot.records.interruption import NodeState

#: The logger of every part of the runner: the sandbox and the end-to-end tests read its lines.
LOGGER = "kubespot.controller.actions"

#: A node and its record, as a compare-and-set write left them.
Claimed = tuple[NodeView, ActionsRecord]
#: A background task a step keeps up while the duty runs, by the suffix of its task name.
Background = Mapping[str, Callable[[], Coroutine[Any, Any, None]]]

A = TypeVar("A")


class Why(StrEnum):
    """Why the post-drain steps run."""

    DRAINED = "drained"
    DEADLINE = "deadline passed"
    DELETED = "node deleted"
    WITHDRAWN = "withdrawn"


class Claims(Protocol):
    """The record writes a pre-drain step makes (``kubespot.controllers.response.claims``)."""

    async def claim(
        self, node: NodeView, event_id: str, build: Callable[[ActionsRecord | None], ActionsRecord]
    ) -> Claimed | None: ...

    async def update(
        self, node: NodeView, event_id: str, mutate: Callable[[ActionsRecord], ActionsRecord]
    ) -> Claimed | None: ...


@dataclass(frozen=True, slots=True)
class PreDrain:
    """One node's pre-drain: ``now`` is when it began, ``instance`` the Node's providerID's."""

    node: NodeView
    state: NodeState
    now: datetime
    instance: str
    #: The record a claim builds on: this event's record as it stands (a resumed one), else a new one.
    start: Callable[[ActionsRecord | None], ActionsRecord]
    claims: Claims


@dataclass(frozen=True, slots=True)
class PostDrain:
    """One node's post-drain: ``node`` None once it was deleted (nothing can be written to it)."""

    name: str
    node: NodeView | None
    state: NodeState | None
    why: Why
    #: From the Node's providerID, never from the record: an annotation anyone may write.
    instance: str


class Step(Protocol):
    """What every step offers the reconciler and the dry run."""

    #: What the step is called in the logs ("deregistration").
    name: str
    #: The kinds of event it acts on: none when its action is off.
    kinds: frozenset[Kind]

    def describe(self) -> str:
        """The start-up line's part for this step ("" when it is off)."""
        ...

    async def check(self) -> str | None:
        """What stops the controller from starting, if anything."""
        ...

    def background(self) -> Background:
        """Work to keep up while the duty runs (a warm index)."""
        ...

    def summary(self, record: ActionsRecord) -> ActionSummary | None:
        """The step's line in the published summary, from what the record holds of it."""
        ...

    async def rehearse(self, node: NodeView, instance: str) -> list[tuple[str, str]]:
        """Dry run: ``(action, what it would do)`` pairs; nothing is written anywhere."""
        ...


class PreDrainStep(Step, Protocol):
    """A step the drain waits for: it writes the record itself, claimed and then done."""

    def pending(self, record: ActionsRecord) -> bool:
        """Whether a runner claimed the step in ``record`` and left before recording its outcome."""
        ...

    def forget(self, record: ActionsRecord) -> ActionsRecord:
        """``record`` without this step's entry (the kind no longer calls for it)."""
        ...

    async def run(self, ctx: PreDrain) -> Claimed | None:
        """Act and record it through ``ctx.claims``; None when another runner has the record (or
        it could not be written)."""
        ...


class PostDrainStep(Step, Protocol):
    """A step after the drain: the reconciler claims and finishes the record around it."""

    def due(self, kind: Kind, record: ActionsRecord) -> bool:
        """Whether to run for an event of ``kind`` whose record is ``record``."""
        ...

    async def run(
        self, ctx: PostDrain, record: ActionsRecord, done: Sequence[ActionSummary]
    ) -> ActionsRecord:
        """Act and return ``record`` with the outcome in it; ``done``: the summary lines so far."""
        ...


class StepBase(ABC, Generic[A]):
    """What the steps share: their adapter (None when the action is off: then they act on no kind)
    and what they report through (metrics, node events)."""

    def __init__(
        self, adapter: A | None, kinds: frozenset[Kind], *, clock: Clock, metrics: Metrics, events: NodeEvents
    ) -> None:
        self._adapter = adapter
        self.kinds = kinds if adapter is not None else frozenset()
        self._clock = clock
        self._metrics = metrics
        self._events = events

    def describe(self) -> str:
        if self._adapter is None:
            return ""
        return f"{self._title(self._adapter)} ({_kinds_text(self.kinds)})"

    async def check(self) -> str | None:
        return None

    def background(self) -> Background:
        return {}

    @abstractmethod
    def _title(self, adapter: A) -> str:
        """What the step does, for the start-up line."""

    def _required(self) -> A:
        # Only ever run for one of ``kinds``, which are empty without the action.
        assert self._adapter is not None
        return self._adapter


def _kinds_text(kinds: frozenset[Kind]) -> str:
    return ", ".join(sorted(k.value for k in kinds)) or "no kinds"
