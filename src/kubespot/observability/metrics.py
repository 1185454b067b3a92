"""The agent's and the controller's Prometheus metrics: what they are (``METRICS``), how they are
recorded (``Metrics``).

``METRICS`` is the single description of every metric: name, type, labels, help and buckets.
``Metrics`` builds its collectors from it, and ``reference_markdown()`` renders it for the docs, so
the documentation cannot drift from what is exposed.

| metric | type | labels | meaning |
|---|---|---|---|
| ``kubespot_interruptions_total`` | counter | kind, source | interruption events seen |
| ``kubespot_actions_total`` | counter | action, result | node actions taken (taint, cordon, ...) |
| ``kubespot_drain_duration_seconds`` | histogram | result | time from drain start to its end |
| ``kubespot_notice_to_cordon_seconds`` | histogram | kind | time from the notice to the cordon |
| ``kubespot_evictions_total`` | counter | result | pods by drain outcome |
| ``kubespot_deadline_misses_total`` | counter | kind | drains still running at the deadline |
| ``kubespot_imds_errors_total`` | counter | path | failed instance metadata requests |
| ``kubespot_kube_api_errors_total`` | counter | code | failed Kubernetes API requests |
| ``kubespot_webhook_sends_total`` | counter | result | webhook notifications |
| ``kubespot_notifications_total`` | counter | target, stage, result | notifications, per target and stage |
| ``kubespot_info`` | gauge | version, node, instance_id, mode | always 1; identifies the agent |
| ``kubespot_node_interruption_phase`` | gauge | phase | 1 for the node's current phase |
| ``kubespot_last_success_timestamp_seconds`` | gauge | component | last good answer from imds/kube |
| ``kubespot_leader`` | gauge | lease | controller: 1 on the elected replica, 0 on the others |
| ``kubespot_managed_instances`` | gauge | capacity_type | controller: managed instances (leader only) |
| ``kubespot_node_cleanups_total`` | counter | result | controller: Nodes of gone instances deleted |
| ``kubespot_deregistration_seconds`` | histogram | kind | controller: fence to load balancer draining |
| ``kubespot_nodeclaims_created_total`` | counter | nodepool, capacity_type, reason | NodeClaims created |
| ``kubespot_launches_total`` | counter | capacity_type, instance_type, zone | controller: launches |
| ``kubespot_launch_failures_total`` | counter | capacity_type, instance_type, zone, reason | failed pools |
| ``kubespot_launch_fallbacks_total`` | counter | kind | controller: spot → on-demand, ICE → re-plan |
| ``kubespot_ice_to_launch_seconds`` | histogram | capacity_type | controller: an ICE to the next launch |
| ``kubespot_unavailable_offerings`` | gauge | capacity_type | controller: pools avoided now |
| ``kubespot_pool_risk`` | gauge | instance_type, zone | controller: reclaim score (capped count) |
| ``kubespot_nodeclaims`` | gauge | phase | controller: NodeClaims by lifecycle phase |
| ``kubespot_nodeclaim_timeouts_total`` | counter | kind | controller: launch/registration timeouts |
| ``kubespot_nodeclaims_garbage_collected_total`` | counter | kind | controller: GC deletions |

The provisioning metrics (from ``kubespot_nodeclaims_created_total`` on, ``LAZY``) are registered on
their first recording, and the capacity gauges only by ``watch_capacity``: the agent never records
them, so they cost it neither memory nor exposition lines.

Each ``Metrics`` owns its own ``CollectorRegistry``: never the process-wide default one, so tests
and several agents in one process (the sandbox) never see each other's samples. Recording methods
never raise: a metrics bug must not stop a drain.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, ParamSpec

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

__all__ = [
    "CAPACITY",
    "LAZY",
    "METRICS",
    "NODE_PHASES",
    "MetricSpec",
    "Metrics",
    "reference_markdown",
]

_log = logging.getLogger(__name__)

MetricType = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One exposed metric. ``name`` is the exposed name (counters include ``_total``)."""

    name: str
    type: MetricType
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] = ()


DRAIN_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0)
# Spot notices give two minutes; cordoning is meant to happen within a poll interval or two, so
# the resolution is in the sub-second range with a tail for a slow API server.
CORDON_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)

# The drain waits for deregistration: the record is meant to land within a second of the fence.
DEREGISTRATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0)

# An ICE is followed by a re-plan and a launch into another pool within seconds; minutes mean
# every pool was short.
ICE_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)

#: At most this many ``kubespot_pool_risk`` series, the highest scores (a storm can touch hundreds).
POOL_RISK_SERIES = 50

#: The node's interruption phases, in order; ``none`` when nothing is happening to the node.
NODE_PHASES = ("none", "pending", "fenced", "draining", "drained", "drain-failed")

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "kubespot_interruptions_total",
        "counter",
        ("kind", "source"),
        "Interruption events seen, by kind (spot-itn, rebalance-recommendation, ...) and source "
        "(imds, sqs, manual).",
    ),
    MetricSpec(
        "kubespot_actions_total",
        "counter",
        ("action", "result"),
        "Node actions taken (taint, cordon, label, drain, out_of_service, uncordon, undo, webhook, "
        "...), the timeline's outgoing HTTP calls (http:<name>) and its wait for load-balancer "
        "deregistration (loadbalancer_wait; timeout: the drain went ahead at its bound), and the "
        "controller's response actions (deregister, isolate, publish_sns, publish_eventbridge), by "
        "result (success, failure, timeout, dry_run, skipped).",
    ),
    MetricSpec(
        "kubespot_drain_duration_seconds",
        "histogram",
        ("result",),
        "Seconds from the start of a drain to its end, by result.",
        DRAIN_BUCKETS,
    ),
    MetricSpec(
        "kubespot_notice_to_cordon_seconds",
        "histogram",
        ("kind",),
        "Seconds from the interruption notice to the node being cordoned, by kind.",
        CORDON_BUCKETS,
    ),
    MetricSpec(
        "kubespot_evictions_total",
        "counter",
        ("result",),
        "Pods handled by drains, by outcome (evicted, deleted, deleted-at-deadline, still-running, "
        "blocked, failed, skipped, ...).",
    ),
    MetricSpec(
        "kubespot_deadline_misses_total",
        "counter",
        ("kind",),
        "Interruptions whose drain had not finished when the instance's deadline passed, by kind.",
    ),
    MetricSpec(
        "kubespot_imds_errors_total",
        "counter",
        ("path",),
        "Failed instance metadata requests (after retries), by metadata path.",
    ),
    MetricSpec(
        "kubespot_kube_api_errors_total",
        "counter",
        ("code",),
        "Failed Kubernetes API requests, by HTTP status code (0 when no response was received).",
    ),
    MetricSpec(
        "kubespot_webhook_sends_total",
        "counter",
        ("result",),
        "Webhook notifications, by result (success, failure, dropped).",
    ),
    MetricSpec(
        "kubespot_notifications_total",
        "counter",
        ("target", "stage", "result"),
        "Notification messages, by target (webhook or the named target), stage (started, finished, "
        "failed) and result (success, failure, dropped); kubespot_webhook_sends_total counts them "
        "all by result alone.",
    ),
    MetricSpec(
        "kubespot_info",
        "gauge",
        ("version", "node", "instance_id", "mode"),
        "Always 1; its labels identify the agent: version, node, instance id and mode.",
    ),
    MetricSpec(
        "kubespot_node_interruption_phase",
        "gauge",
        ("phase",),
        "1 for the node's current interruption phase (none, pending, fenced, draining, drained, "
        "drain-failed), 0 for the others.",
    ),
    MetricSpec(
        "kubespot_last_success_timestamp_seconds",
        "gauge",
        ("component",),
        "Unix time of the last successful answer from a component (imds, kube); the liveness "
        "probe fails when it grows stale.",
    ),
    MetricSpec(
        "kubespot_leader",
        "gauge",
        ("lease",),
        "Controller only: 1 while this replica holds the leader-election Lease (and runs the "
        "singleton duties), 0 otherwise; 1 when leader election is off.",
    ),
    MetricSpec(
        "kubespot_managed_instances",
        "gauge",
        ("capacity_type",),
        "Controller only, exported by the leader alone (sum over replicas is the count): nodes backed "
        "by an EC2 instance this controller manages (with managed_tag when check_tag_before_draining), "
        "by capacity type (spot, on-demand, ... from the node's Karpenter or EKS label, else the "
        "instance's lifecycle, else unknown).",
    ),
    MetricSpec(
        "kubespot_node_cleanups_total",
        "counter",
        ("result",),
        "Controller only: NotReady Nodes of terminated or vanished instances handled by the node "
        "clean-up, by result (deleted, dry_run, failure).",
    ),
    MetricSpec(
        "kubespot_deregistration_seconds",
        "histogram",
        ("kind",),
        "Controller only: seconds from a node's fence (its state annotation) to its load balancer "
        "targets' deregistration being accepted (the drain holds target pods until then), by kind.",
        DEREGISTRATION_BUCKETS,
    ),
    MetricSpec(
        "kubespot_queue_messages_overdue",
        "gauge",
        (),
        "Controller only: queue messages still being handled past their bound (the event's "
        "deadline plus held_margin; for a lifecycle hook with heartbeats, its heartbeat horizon). "
        "Above 0 means a handling step is stuck: /healthz fails its queue check too.",
    ),
    MetricSpec(
        "kubespot_nodeclaims_created_total",
        "counter",
        ("nodepool", "capacity_type", "reason"),
        "Controller only: NodeClaims the provisioner created, by NodePool, capacity type (the "
        "preferred one it allows: spot when it allows spot; a claim the capacity split narrowed, the "
        "type it was narrowed to) and reason (provisioned: for pending "
        "pods; prespin: for pods of a node going away, before its drain; dry_run: would have been "
        "created, under node_actions.dry_run).",
    ),
    MetricSpec(
        "kubespot_launches_total",
        "counter",
        ("capacity_type", "instance_type", "zone"),
        "Controller only: instances launched for NodeClaims, by capacity type, instance type and zone.",
    ),
    MetricSpec(
        "kubespot_launch_failures_total",
        "counter",
        ("capacity_type", "instance_type", "zone", "reason"),
        "Controller only: launch failures: each pool the cloud refused (EC2's error code, e.g. "
        "InsufficientInstanceCapacity), and launches failing as a whole (empty type and zone; "
        "reason InsufficientCapacityError or the launch condition's reason).",
    ),
    MetricSpec(
        "kubespot_launch_fallbacks_total",
        "counter",
        ("kind",),
        "Controller only: fallbacks, by kind (spot_to_on_demand: a NodeClaim allowing spot launched "
        "on-demand; ice_replan: no pool had capacity, the NodeClaim was deleted and its pods re-planned).",
    ),
    MetricSpec(
        "kubespot_ice_to_launch_seconds",
        "histogram",
        ("capacity_type",),
        "Controller only: seconds from an insufficient-capacity failure to the next successful "
        "launch, by the launch's capacity type.",
        ICE_BUCKETS,
    ),
    MetricSpec(
        "kubespot_unavailable_offerings",
        "gauge",
        ("capacity_type",),
        "Controller only: pools (capacity type, instance type, zone) the unavailable-offerings cache "
        "avoids now, by capacity type; a whole capacity type marked counts as one.",
    ),
    MetricSpec(
        "kubespot_pool_risk",
        "gauge",
        ("instance_type", "zone"),
        f"Controller only: reclaim-risk score of spot pools with a score, the {POOL_RISK_SERIES} "
        "highest only (bounded cardinality).",
    ),
    MetricSpec(
        "kubespot_nodeclaims",
        "gauge",
        ("phase",),
        "Controller only: NodeClaims by lifecycle phase (pending: not launched yet; launched, "
        "registered, initialized; deleting).",
    ),
    MetricSpec(
        "kubespot_nodeclaim_timeouts_total",
        "counter",
        ("kind",),
        "Controller only: NodeClaims deleted for a timeout, by kind (launch_timeout, registration_timeout).",
    ),
    MetricSpec(
        "kubespot_nodeclaims_garbage_collected_total",
        "counter",
        ("kind",),
        "Controller only: the NodeClaim garbage collector's deletions, by kind (orphan_instance: an "
        "instance without a NodeClaim; lost_claim: a NodeClaim whose instance is gone).",
    ),
)

#: Metrics registered on first use (controller only): see the module docstring.
LAZY = frozenset(
    {
        "kubespot_nodeclaims_created_total",
        "kubespot_launches_total",
        "kubespot_launch_failures_total",
        "kubespot_launch_fallbacks_total",
        "kubespot_ice_to_launch_seconds",
        "kubespot_nodeclaim_timeouts_total",
        "kubespot_nodeclaims_garbage_collected_total",
    }
)
#: Exported by ``watch_capacity`` (a collector reading the caches at scrape time).
CAPACITY = ("kubespot_unavailable_offerings", "kubespot_pool_risk", "kubespot_nodeclaims")

_SPECS = {spec.name: spec for spec in METRICS}

_P = ParamSpec("_P")


def _never_raises(method: Callable[_P, None]) -> Callable[_P, None]:
    """Log the failure at debug level instead of raising: metrics are best effort."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> None:
        try:
            method(*args, **kwargs)
        except Exception:  # a bad label value or a bug here must never reach the caller
            _log.debug("recording metric in %s failed", method.__name__, exc_info=True)

    return wrapper


def _label(value: object) -> str:
    return value if isinstance(value, str) else str(value)


class _WithoutCreated:
    """A registry view that drops the ``*_created`` series prometheus_client adds to counters and
    histograms: they double the series count on every node and nothing we ship reads them."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self._registry.collect():
            if metric.type not in ("counter", "histogram"):
                yield metric
                continue
            clean = Metric(metric.name, metric.documentation, metric.type, metric.unit)
            clean.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield clean


class _Watched:
    """A gauge whose samples are read from the controller's state when scraped."""

    def __init__(self, spec: MetricSpec, read: Callable[[], Mapping[tuple[str, ...], float]]) -> None:
        self._spec = spec
        self._read = read

    def describe(self) -> list[Metric]:
        return [GaugeMetricFamily(self._spec.name, self._spec.help, labels=self._spec.labels)]

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self._spec.name, self._spec.help, labels=self._spec.labels)
        try:
            items = sorted(self._read().items(), key=lambda kv: (-kv[1], kv[0]))
        except Exception:  # a scrape must not fail for one bad reader
            _log.debug("reading %s failed", self._spec.name, exc_info=True)
            items = []
        if self._spec.name == "kubespot_pool_risk":
            items = items[:POOL_RISK_SERIES]
        for labels, value in items:
            family.add_metric([_label(v) for v in labels], float(value))
        yield family


class Metrics:
    """The agent's metrics, in a registry of their own. All recording methods are cheap and never
    raise; ``render()`` gives the Prometheus text exposition."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._interruptions = self._counter("kubespot_interruptions_total")
        self._actions = self._counter("kubespot_actions_total")
        self._drain = self._histogram("kubespot_drain_duration_seconds")
        self._cordon = self._histogram("kubespot_notice_to_cordon_seconds")
        self._evictions = self._counter("kubespot_evictions_total")
        self._deadline_misses = self._counter("kubespot_deadline_misses_total")
        self._imds_errors = self._counter("kubespot_imds_errors_total")
        self._kube_errors = self._counter("kubespot_kube_api_errors_total")
        self._webhooks = self._counter("kubespot_webhook_sends_total")
        self._notifications = self._counter("kubespot_notifications_total")
        self._info = self._gauge("kubespot_info")
        self._phase = self._gauge("kubespot_node_interruption_phase")
        self._last_success = self._gauge("kubespot_last_success_timestamp_seconds")
        self._leader = self._gauge("kubespot_leader")
        self._managed = self._gauge("kubespot_managed_instances")
        self._cleanups = self._counter("kubespot_node_cleanups_total")
        self._deregistration = self._histogram("kubespot_deregistration_seconds")
        self._overdue = self._gauge("kubespot_queue_messages_overdue")
        self._last_success_at: dict[str, float] = {}
        self._lazy: dict[str, Counter | Histogram] = {}
        self._watched: set[str] = set()
        #: ``monotonic`` time of the first insufficient-capacity failure since the last launch.
        self._ice_since: float | None = None
        self._phases: set[str] = set(NODE_PHASES)
        # Export every phase from the start, so dashboards see "none" = 1 before any interruption.
        self.set_node_phase(None)
        self._view = _WithoutCreated(self.registry)

    # -- construction from METRICS ---------------------------------------------------------------

    def _counter(self, name: str) -> Counter:
        spec = _SPECS[name]
        return Counter(spec.name, spec.help, spec.labels, registry=self.registry)

    def _gauge(self, name: str) -> Gauge:
        spec = _SPECS[name]
        return Gauge(spec.name, spec.help, spec.labels, registry=self.registry)

    def _histogram(self, name: str) -> Histogram:
        spec = _SPECS[name]
        return Histogram(spec.name, spec.help, spec.labels, registry=self.registry, buckets=spec.buckets)

    def _get(self, name: str) -> Counter:
        """The ``LAZY`` counter ``name``, registered the first time it is recorded."""
        collector = self._lazy.get(name)
        if not isinstance(collector, Counter):
            collector = self._lazy[name] = self._counter(name)
        return collector

    def _get_histogram(self, name: str) -> Histogram:
        """The ``LAZY`` histogram ``name``, registered the first time it is recorded."""
        collector = self._lazy.get(name)
        if not isinstance(collector, Histogram):
            collector = self._lazy[name] = self._histogram(name)
        return collector

    # -- recording -------------------------------------------------------------------------------

    @_never_raises
    def interruption(self, kind: str, source: str) -> None:
        """An interruption event was seen."""
        self._interruptions.labels(_label(kind), _label(source)).inc()

    @_never_raises
    def action(self, action: str, result: str) -> None:
        """A node action ran (or was skipped or dry-run)."""
        self._actions.labels(_label(action), _label(result)).inc()

    @_never_raises
    def drain_finished(self, seconds: float, result: str) -> None:
        """A drain ended after ``seconds``."""
        self._drain.labels(_label(result)).observe(_duration(seconds))

    @_never_raises
    def notice_to_cordon(self, seconds: float, kind: str) -> None:
        """The node was cordoned ``seconds`` after the notice."""
        self._cordon.labels(_label(kind)).observe(_duration(seconds))

    @_never_raises
    def eviction(self, result: str, count: int = 1) -> None:
        """``count`` pods ended a drain with outcome ``result``."""
        if count > 0:  # a counter cannot go down; zero is a no-op rather than an empty series
            self._evictions.labels(_label(result)).inc(count)

    @_never_raises
    def deadline_miss(self, kind: str) -> None:
        """A drain was still running when the instance's deadline passed."""
        self._deadline_misses.labels(_label(kind)).inc()

    @_never_raises
    def imds_error(self, path: str) -> None:
        """An instance metadata request failed."""
        self._imds_errors.labels(_label(path)).inc()

    @_never_raises
    def kube_error(self, code: int) -> None:
        """A Kubernetes API request failed with HTTP status ``code`` (0: no response)."""
        self._kube_errors.labels(_label(code)).inc()

    @_never_raises
    def webhook(self, result: str) -> None:
        """A webhook notification was sent, failed or dropped."""
        self._webhooks.labels(_label(result)).inc()

    @_never_raises
    def notification(self, target: str, stage: str, result: str) -> None:
        """A message to notification ``target`` at ``stage`` was sent, failed or dropped."""
        self._notifications.labels(_label(target), _label(stage), _label(result)).inc()

    @_never_raises
    def set_info(self, *, version: str, node: str, instance_id: str, mode: str) -> None:
        """Identify the agent. Replaces any earlier identity, so there is one ``kubespot_info``."""
        self._info.clear()
        self._info.labels(_label(version), _label(node), _label(instance_id), _label(mode)).set(1)

    @_never_raises
    def set_node_phase(self, phase: str | None) -> None:
        """Set the node's current interruption phase (None means ``none``)."""
        current = "none" if phase is None else _label(phase)
        self._phases.add(current)
        for name in self._phases:
            self._phase.labels(name).set(1 if name == current else 0)

    @_never_raises
    def mark(self, name: str, when_unix: float) -> None:
        """Record a successful answer from component ``name`` (imds, kube) at ``when_unix``."""
        when = float(when_unix)
        if not math.isfinite(when):
            return
        self._last_success_at[_label(name)] = when
        self._last_success.labels(_label(name)).set(when)

    @_never_raises
    def set_overdue_messages(self, count: int) -> None:
        """How many queue messages are held past their bound right now."""
        self._overdue.set(count)

    @_never_raises
    def set_leader(self, lease: str, leading: bool) -> None:
        """Whether this controller replica holds the leader-election ``lease``."""
        self._leader.labels(_label(lease)).set(1 if leading else 0)

    @_never_raises
    def set_managed_instances(self, counts: Mapping[str, int]) -> None:
        """Managed instances by capacity type; replaces the previous counts (types gone drop out)."""
        self._managed.clear()
        for capacity_type, count in counts.items():
            self._managed.labels(_label(capacity_type)).set(count)

    @_never_raises
    def clear_managed_instances(self) -> None:
        """Export no managed-instance count (this replica is not the leader)."""
        self._managed.clear()

    @_never_raises
    def node_cleanup(self, result: str) -> None:
        """The node clean-up deleted a Node (or would have, or failed to)."""
        self._cleanups.labels(_label(result)).inc()

    @_never_raises
    def deregistration_latency(self, seconds: float, kind: str) -> None:
        """A node's targets started draining ``seconds`` after it was fenced."""
        self._deregistration.labels(_label(kind)).observe(_duration(seconds))

    # -- provisioning (controller only; registered on first use) ---------------------------------

    @_never_raises
    def nodeclaim_created(self, nodepool: str, capacity_type: str, reason: str) -> None:
        """The provisioner created a NodeClaim (``reason``: provisioned, prespin)."""
        counter = self._get("kubespot_nodeclaims_created_total")
        counter.labels(_label(nodepool), _label(capacity_type), _label(reason)).inc()

    @_never_raises
    def launched(self, capacity_type: str, instance_type: str, zone: str, monotonic: float) -> None:
        """An instance was launched for a NodeClaim at ``monotonic`` (``Clock.monotonic()``)."""
        self._get("kubespot_launches_total").labels(
            _label(capacity_type), _label(instance_type), _label(zone)
        ).inc()
        since, self._ice_since = self._ice_since, None
        if since is not None:
            histogram = self._get_histogram("kubespot_ice_to_launch_seconds")
            histogram.labels(_label(capacity_type)).observe(_duration(monotonic - since))

    @_never_raises
    def launch_failure(self, capacity_type: str, instance_type: str, zone: str, reason: str) -> None:
        """A pool refused a launch (or a launch failed as a whole: empty type and zone)."""
        counter = self._get("kubespot_launch_failures_total")
        counter.labels(_label(capacity_type), _label(instance_type), _label(zone), _label(reason)).inc()

    @_never_raises
    def insufficient_capacity(self, monotonic: float) -> None:
        """A launch found no capacity: starts the ICE-to-launch clock (unless it already runs)."""
        if self._ice_since is None:
            self._ice_since = float(monotonic)

    @_never_raises
    def fallback(self, kind: str) -> None:
        """A launch fell back (spot_to_on_demand, ice_replan)."""
        self._get("kubespot_launch_fallbacks_total").labels(_label(kind)).inc()

    @_never_raises
    def nodeclaim_timeout(self, kind: str) -> None:
        """A NodeClaim was deleted for a launch or registration timeout."""
        self._get("kubespot_nodeclaim_timeouts_total").labels(_label(kind)).inc()

    @_never_raises
    def garbage_collected(self, kind: str, count: int = 1) -> None:
        """The NodeClaim garbage collector deleted ``count`` things of ``kind``."""
        if count > 0:
            self._get("kubespot_nodeclaims_garbage_collected_total").labels(_label(kind)).inc(count)

    def watch(self, name: str, read: Callable[[], Mapping[tuple[str, ...], float]]) -> None:
        """Export gauge ``name`` (one of ``CAPACITY``) as ``read()`` says at each scrape: label
        values → value. Read at scrape time, so nothing is kept between scrapes; a ``read`` that
        raises exports nothing that scrape. ``kubespot_pool_risk`` keeps its ``POOL_RISK_SERIES``
        highest values. Watching a name twice replaces nothing (the first stays)."""
        if name not in CAPACITY or name in self._watched:
            return
        self._watched.add(name)
        self.registry.register(_Watched(_SPECS[name], read))

    # -- reading ---------------------------------------------------------------------------------

    def last_success(self, name: str) -> datetime | None:
        """When ``mark(name, ...)`` was last called, as an aware UTC datetime; for health checks."""
        when = self._last_success_at.get(name)
        return None if when is None else datetime.fromtimestamp(when, UTC)

    def render(self) -> tuple[bytes, str]:
        """The text exposition of every metric, and its content type.

        Text format 0.0.4: every Prometheus version and agent scraper parses it, and our names are
        plain ASCII so nothing needs the escaping of newer formats.
        """
        return generate_latest(self._view), CONTENT_TYPE_PLAIN_0_0_4


def _duration(seconds: float) -> float:
    value = float(seconds)
    # A clock step can make an interval negative; it still happened, so count it in the first bucket.
    return max(value, 0.0) if math.isfinite(value) else 0.0


def _labels_cell(labels: Iterable[str]) -> str:
    return ", ".join(f"`{label}`" for label in labels) or "none"


def reference_markdown() -> str:
    """A Markdown table of every metric (name, type, labels, help), for the agent documentation."""
    rows = [
        "| metric | type | labels | help |",
        "|---|---|---|---|",
    ]
    for spec in METRICS:
        help_text = spec.help
        if spec.buckets:
            help_text += " Buckets: " + ", ".join(f"{b:g}" for b in spec.buckets) + "."
        help_text = help_text.replace("|", "\\|")  # a pipe would end the table cell
        rows.append(f"| `{spec.name}` | {spec.type} | {_labels_cell(spec.labels)} | {help_text} |")
    return "\n".join(rows) + "\n"
