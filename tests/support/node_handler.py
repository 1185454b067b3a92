"""A node handler on fakes, for the handler's unit tests: ``node_handler`` builds one for node "n"
over a fake API and clock (settings default to the product's), ``RecordingNotifier`` keeps what it
announced."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubespot.config.drain import DrainSettings
from kubespot.config.imds import MonitorSettings
from kubespot.config.node import NodeActionSettings
from kubespot.handling.node_handler import NodeHandler
from kubespot.model import Clock, InterruptionEvent
from kubespot.model.summary import InterruptionSummary, Stage
from kubespot.observability.metrics import Metrics
from support.fake_kube import FakeKube


class RecordingNotifier:
    """What was announced: (event id, stage, summary) of each notification in ``sent``; ``broken``
    raises after recording, as a notifier breaking its never-raise contract would."""

    def __init__(self, *, broken: bool = False) -> None:
        self.sent: list[tuple[str, Stage, InterruptionSummary | None]] = []
        self.broken = broken

    def notify(
        self,
        event: InterruptionEvent,
        *,
        node_name: str,
        extra: Mapping[str, Any] | None = None,
        stage: Stage | None = None,
        summary: InterruptionSummary | None = None,
    ) -> None:
        self.sent.append((event.id, stage or Stage.STARTED, summary))
        if self.broken:
            raise RuntimeError("a notifier that breaks its contract")

    def started(self) -> list[str]:
        """The events announced as new notices (stage started)."""
        return [ident for ident, stage, _ in self.sent if stage is Stage.STARTED]

    def stages(self) -> list[str]:
        return [stage.value for _, stage, _ in self.sent]

    def summaries(self) -> list[InterruptionSummary | None]:
        return [summary for _, _, summary in self.sent]


def node_handler(
    kube: FakeKube,
    clock: Clock,
    *,
    actions: NodeActionSettings | None = None,
    monitors: MonitorSettings | None = None,
    drain: DrainSettings | None = None,
    metrics: Metrics | None = None,
    **parts: Any,
) -> NodeHandler:
    """The handler of node "n"; ``parts`` are the handler's other keyword arguments (notifier,
    recorder, HTTP calls, boot time…)."""
    return NodeHandler(
        node_name="n",
        kube=kube,  # type: ignore[arg-type]  # the fake implements what the handler calls
        actions=actions or NodeActionSettings(),
        monitors=monitors or MonitorSettings(),
        drain=drain or DrainSettings(),
        clock=clock,
        metrics=metrics or Metrics(),
        **parts,
    )
