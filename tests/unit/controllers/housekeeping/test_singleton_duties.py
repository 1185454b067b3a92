"""The controller's singleton duties (kubespot.controllers.housekeeping.singleton) on fakes: which
NotReady nodes the clean-up deletes, what dry run does, and how the managed-instance gauge counts."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, cast

from prometheus_client.parser import text_string_to_metric_families

from kubespot.aws import InstanceInfo
from kubespot.config.cleanup import NodeCleanupSettings
from kubespot.config.queue import QueueSettings
from kubespot.controllers.housekeeping.singleton import ManagedInstancesGauge, NodeCleanup, capacity_type
from kubespot.kube import NodeView
from kubespot.observability.metrics import Metrics
from support.fake_kube import FakeKube

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
TAG = "aws-node-termination-handler/managed"


class Clock:
    def now(self) -> datetime:
        return NOW

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        raise AssertionError("not used")


class Index:
    def __init__(self, nodes: list[NodeView]) -> None:
        self.by = {n.name: n for n in nodes}

    def nodes(self) -> list[NodeView]:
        return list(self.by.values())

    async def wait_synced(self) -> None:
        return None


class Directory:
    def __init__(self, infos: list[InstanceInfo]) -> None:
        self.infos = {i.instance_id: i for i in infos}
        self.asked: list[list[str]] = []

    async def lookup(self, ids: Iterable[str]) -> dict[str, InstanceInfo]:
        wanted = list(ids)
        self.asked.append(wanted)
        return {i: self.infos[i] for i in wanted if i in self.infos}


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def node(self, node: NodeView, reason: str, message: str, *, warning: bool = False) -> None:
        self.events.append((node.name, reason, message))


def node(
    name: str,
    instance: str | None,
    *,
    ready: bool | None,
    for_seconds: float = 600,
    labels: dict[str, str] | None = None,
) -> NodeView:
    return NodeView(
        name,
        uid=f"uid-{name}",
        provider_id=f"aws:///us-east-1a/{instance}" if instance else "",
        ready=ready,
        ready_since=NOW - timedelta(seconds=for_seconds),
        labels=labels or {},
    )


def info(instance: str, state: str, *, managed: bool = True, lifecycle: str | None = "spot") -> InstanceInfo:
    tags = MappingProxyType({TAG: ""} if managed else {"team": "x"})
    return InstanceInfo(instance, f"ip-{instance}", "us-east-1a", state, tags, lifecycle)


IDS = {k: f"i-{k:0>17}" for k in ("a", "b", "c", "d", "e", "f", "g", "h")}


def world(
    nodes: list[NodeView], infos: list[InstanceInfo], *, check_tag: bool = True, dry_run: bool = False
) -> tuple[NodeCleanup, FakeKube, Recorder, Metrics, Directory]:
    index = Index(nodes)
    kube = FakeKube(*nodes)
    recorder = Recorder()
    metrics = Metrics()
    directory = Directory(infos)
    cleanup = NodeCleanup(
        kube=cast(Any, kube),
        nodes=cast(Any, index),
        instances=cast(Any, directory),
        settings=NodeCleanupSettings(enabled=True, not_ready_for=300),
        queue=QueueSettings(check_tag_before_draining=check_tag),
        dry_run=dry_run,
        metrics=metrics,
        clock=Clock(),
        recorder=cast(Any, recorder),
    )
    return cleanup, kube, recorder, metrics, directory


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(metrics.render()[0].decode()):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


MIXED = [
    node("terminated", IDS["a"], ready=None),  # Unknown, instance terminated: deleted
    node("shutting", IDS["b"], ready=False),  # NotReady, shutting-down: deleted
    node("running", IDS["c"], ready=False),  # NotReady but the instance runs: kept
    node("ready", IDS["d"], ready=True),  # Ready (instance terminated, the kubelet lags): kept
    node("recent", IDS["e"], ready=False, for_seconds=60),  # NotReady for a minute only: kept
    node("vanished", IDS["f"], ready=False),  # EC2 does not know it
    node("foreign", IDS["g"], ready=False),  # terminated, no managed tag
    node("no-provider", None, ready=False),  # not an AWS instance: kept
]
INFOS = [
    info(IDS["a"], "terminated"),
    info(IDS["b"], "shutting-down"),
    info(IDS["c"], "running"),
    info(IDS["d"], "terminated"),
    info(IDS["e"], "terminated"),
    info(IDS["g"], "terminated", managed=False),
]


async def test_cleanup_deletes_long_notready_nodes_of_gone_managed_instances() -> None:
    cleanup, kube, recorder, metrics, directory = world(MIXED, INFOS)
    assert sorted(await cleanup.sweep()) == ["shutting", "terminated"]
    assert sorted(kube.deleted_nodes) == ["shutting", "terminated"]
    # Only the long-NotReady nodes of AWS instances were looked up, in one call.
    assert len(directory.asked) == 1
    assert sorted(directory.asked[0]) == sorted(IDS[k] for k in ("a", "b", "c", "f", "g"))
    assert {(name, reason) for name, reason, _ in recorder.events} == {
        ("terminated", "NodeDeleted"),
        ("shutting", "NodeDeleted"),
    }
    message = next(m for name, _, m in recorder.events if name == "terminated")
    assert IDS["a"] in message and "terminated" in message
    assert sample(metrics, "kubespot_node_cleanups_total", result="deleted") == 2


async def test_without_the_tag_check_unknown_and_untagged_instances_go_too() -> None:
    cleanup, kube, _, _, _ = world(MIXED, INFOS, check_tag=False)
    assert sorted(await cleanup.sweep()) == ["foreign", "shutting", "terminated", "vanished"]
    assert "running" not in kube.deleted_nodes and "ready" not in kube.deleted_nodes


async def test_dry_run_deletes_nothing_and_says_so_once() -> None:
    cleanup, kube, recorder, metrics, _ = world(MIXED, INFOS, dry_run=True)
    assert sorted(await cleanup.sweep()) == ["shutting", "terminated"]
    await cleanup.sweep()
    assert kube.deleted_nodes == []
    assert sorted((n, r) for n, r, _ in recorder.events) == [("shutting", "DryRun"), ("terminated", "DryRun")]
    assert sample(metrics, "kubespot_node_cleanups_total", result="dry_run") == 2


async def test_a_node_that_came_back_or_was_replaced_is_kept() -> None:
    cleanup, kube, _, _, _ = world([node("n", IDS["a"], ready=False)], [info(IDS["a"], "terminated")])
    # Between the index's copy and the delete, a namesake registered (another uid).
    kube.put_node(NodeView("n", uid="new-uid", provider_id=f"aws:///us-east-1a/{IDS['a']}", ready=False))
    original = NodeView(
        "n",
        uid="uid-n",
        provider_id=f"aws:///us-east-1a/{IDS['a']}",
        ready=False,
        ready_since=NOW - timedelta(seconds=600),
    )
    cleanup._nodes = cast(Any, Index([original]))
    assert await cleanup.sweep() == []
    assert kube.deleted_nodes == []


def test_capacity_type_from_labels_then_lifecycle() -> None:
    assert (
        capacity_type(node("k", IDS["a"], ready=True, labels={"karpenter.sh/capacity-type": "spot"}), None)
        == "spot"
    )
    eks = node("e", IDS["a"], ready=True, labels={"eks.amazonaws.com/capacityType": "ON_DEMAND"})
    assert capacity_type(eks, None) == "on-demand"
    plain = node("p", IDS["a"], ready=True)
    assert capacity_type(plain, info(IDS["a"], "running", lifecycle=None)) == "on-demand"
    assert capacity_type(plain, info(IDS["a"], "running", lifecycle="spot")) == "spot"
    assert capacity_type(plain, None) == "unknown"


async def test_managed_instances_are_counted_by_capacity_type() -> None:
    nodes = [
        node("a", IDS["a"], ready=True, labels={"karpenter.sh/capacity-type": "spot"}),
        node("b", IDS["b"], ready=True, labels={"karpenter.sh/capacity-type": "on-demand"}),
        node("c", IDS["c"], ready=True),
        node("d", IDS["d"], ready=True),  # not tagged managed
        node("e", None, ready=True),  # no AWS providerID
    ]
    infos = [
        info(IDS["a"], "running"),
        info(IDS["b"], "running"),
        info(IDS["c"], "running", lifecycle="spot"),
        info(IDS["d"], "running", managed=False),
    ]
    metrics = Metrics()
    directory = Directory(infos)

    def gauge(check_tag: bool) -> ManagedInstancesGauge:
        return ManagedInstancesGauge(
            nodes=cast(Any, Index(nodes)),
            instances=cast(Any, directory),
            queue=QueueSettings(check_tag_before_draining=check_tag),
            metrics=metrics,
            clock=Clock(),
        )

    assert await gauge(True).count() == {"spot": 2, "on-demand": 1}
    # Without the tag check every node of an AWS instance counts, and EC2 is not asked.
    asked = len(directory.asked)
    assert await gauge(False).count() == {"spot": 1, "on-demand": 1, "unknown": 2}
    assert len(directory.asked) == asked
    metrics.set_managed_instances({"spot": 2, "on-demand": 1})
    assert sample(metrics, "kubespot_managed_instances", capacity_type="spot") == 2
    metrics.set_managed_instances({"on-demand": 1})
    assert sample(metrics, "kubespot_managed_instances", capacity_type="spot") is None
    metrics.clear_managed_instances()
    assert sample(metrics, "kubespot_managed_instances") is None
