"""A simulated load balancer: a steady request stream over ELBv2 target groups, judged by the cluster.

Owns ``LoadBalancerSim`` and its result. It joins two views that a real load balancer joins:

- **What AWS says** about each target, read with DescribeTargetHealth over HTTP (boto3, any
  endpoint: moto with kubespot's ``elbv2_draining`` extension in tests and the sandbox) every
  ``refresh_s``, optionally applied ``propagation_s`` later (ALB and NLB take a few seconds to stop
  routing to a deregistered target). Over HTTP rather than from moto's backend in-process, so the
  simulator works against a moto in another process and sees exactly what the product sees.
- **What the cluster does**, from pod and node watches on the API server (``cluster.ClusterView``,
  which documents the serving model: a terminating pod refuses new connections).

Routing: requests go round-robin to the targets AWS reports ``healthy`` or ``initial`` that the
balancer's own health checks have not failed; never to ``draining`` or ``unused`` targets. When no
target qualifies but some are registered, the balancer fails open to all of them, as ALB does;
with none registered the request fails (``no-target``, an HTTP 503).

Health checks: every ``HealthCheck.interval_s`` (at a per-target phase) the balancer probes each
registered target with the same serving model; ``unhealthy_threshold`` consecutive failures stop
routing to it, ``healthy_threshold`` consecutive passes resume. Until then requests keep reaching a
dead backend, which is the error window a spot interruption causes without deregistration.

AWS Load Balancer Controller (optional, on by default): ``lag_s`` after the API shows an ip
target's pod gone, terminating or not running (or an instance target's node deleted, not Ready or
labelled ``node.kubernetes.io/exclude-from-external-load-balancers``), the controller calls
DeregisterTargets: how a real cluster eventually stops the errors without kubespot.

Not modelled: request latency and in-flight requests (a request is an instant), connection reuse,
slow start, stickiness, cross-zone and per-zone routing, the controller registering new pods (the
target groups only shrink unless the test registers targets), several listeners or weighted
forwarding (all target groups given form one pool).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .cluster import EXCLUDE_LABEL, ClusterView, Reason

if TYPE_CHECKING:
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client

__all__ = [
    "ControllerModel",
    "Deregistration",
    "HealthCheck",
    "HealthEvent",
    "LoadBalancerResult",
    "LoadBalancerSim",
    "SecondCount",
    "TargetGroup",
    "TargetView",
]

log = logging.getLogger("kubespot.sim.lbsim")

#: AWS target states the load balancer routes to (before its own health checks have a say).
ROUTABLE = frozenset({"healthy", "initial"})
#: States of a registered target (health-checked; the controller may deregister it).
REGISTERED = frozenset({"healthy", "initial", "unhealthy", "unavailable"})
# Longest the traffic loop sleeps, so health checks and the controller keep their timing at low rates.
_MAX_SLEEP_S = 0.05


@dataclass(frozen=True)
class TargetGroup:
    """One ELBv2 target group the load balancer forwards to.

    ``namespace`` and ``selector`` (the pod labels of the backing Deployment) matter for ``instance``
    targets only: a node answers if one of those pods runs Ready on it. Without them a live node is
    enough. ``ip`` targets are matched to pods by ``status.podIP``.
    """

    arn: str
    namespace: str | None = None
    selector: Mapping[str, str] | None = None


@dataclass(frozen=True)
class HealthCheck:
    """The balancer's health checks; defaults are ALB's (interval 30 s there, 5 s is a common setting)."""

    interval_s: float = 5.0
    unhealthy_threshold: int = 2
    healthy_threshold: int = 5


@dataclass(frozen=True)
class ControllerModel:
    """The AWS Load Balancer Controller deregistering targets whose backend the API shows gone."""

    lag_s: float = 5.0


@dataclass(frozen=True)
class SecondCount:
    """Requests in one second of the run (``second`` counts from the start)."""

    second: int
    sent: int
    failed: int


@dataclass(frozen=True)
class Deregistration:
    """A DeregisterTargets call made by the simulated controller."""

    at: float  # epoch seconds
    target_group_arn: str
    target_id: str
    port: int
    reason: str
    ok: bool


@dataclass(frozen=True)
class HealthEvent:
    """The balancer's health checks changed their verdict on a target."""

    at: float  # epoch seconds
    target_group_arn: str
    target_id: str
    port: int
    healthy: bool


@dataclass(frozen=True)
class TargetView:
    """What the balancer currently thinks of one target."""

    target_group_arn: str
    target_id: str
    port: int
    target_type: str
    #: The state AWS reported (``healthy``, ``initial``, ``draining``...), after propagation.
    state: str
    #: The balancer's own health-check verdict.
    lb_healthy: bool
    #: Whether new requests may go to it (state routable and health checks passing).
    routed: bool
    #: Why its backend would refuse a request now (None: it answers).
    problem: str | None
    sent: int
    failed: int


@dataclass(frozen=True)
class LoadBalancerResult:
    """What the request stream saw. Times are epoch seconds."""

    sent: int
    failed: int
    #: From the first failed request to the last, plus one request interval (so one failure counts
    #: for 1/rate s); 0 when nothing failed.
    error_window_s: float
    first_failure_at: float | None
    last_failure_at: float | None
    started_at: float
    duration_s: float
    rate: float
    per_second: tuple[SecondCount, ...]
    failures_by_reason: Mapping[str, int]
    #: "<target id>:<port>" -> requests sent to it.
    sent_by_target: Mapping[str, int]
    deregistrations: tuple[Deregistration, ...] = ()
    health_events: tuple[HealthEvent, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (for a summary)."""
        data = asdict(self)
        data["failures_by_reason"] = dict(self.failures_by_reason)
        data["sent_by_target"] = dict(self.sent_by_target)
        return data


@dataclass
class _Target:
    group: TargetGroup
    target_type: str
    target_id: str
    port: int
    state: str
    next_check: float
    lb_healthy: bool = True
    fails: int = 0
    passes: int = 0
    #: Monotonic time since which the API has shown the backend gone (for the controller's lag).
    api_bad_since: float | None = None
    deregistering: bool = False
    sent: int = 0
    failed: int = 0

    @property
    def label(self) -> str:
        return f"{self.target_id}:{self.port}"


class _Counts:
    """Counters of one measurement (``reset_counts`` starts a new one)."""

    def __init__(self, wall: float, mono: float) -> None:
        self.started_wall = wall
        self.started_mono = mono
        self.sent = 0
        self.failed = 0
        self.first_failure: float | None = None
        self.last_failure: float | None = None
        self.per_second: dict[int, list[int]] = {}
        self.reasons: dict[str, int] = {}
        self.by_target: dict[str, int] = {}
        self.deregistrations: list[Deregistration] = []
        self.health_events: list[HealthEvent] = []


class LoadBalancerSim:
    """A load balancer in front of pods in kubesim, with targets from ELBv2 (module docstring).

    ::

        lb = LoadBalancerSim(kube_url=sim.url, elbv2=aws.client("elbv2"), target_groups=[arn])
        async with lb:
            ...  # interrupt a node
        lb.result().failed
    """

    def __init__(
        self,
        *,
        kube_url: str,
        elbv2: ElasticLoadBalancingv2Client,
        target_groups: Sequence[TargetGroup | str],
        rate: float = 50.0,
        health_check: HealthCheck | None = None,
        controller: ControllerModel | None = ControllerModel(),
        refresh_s: float = 0.25,
        propagation_s: float = 0.0,
        time_scale: float = 1.0,
        kube_token: str | None = None,
    ) -> None:
        """Prepare the balancer; nothing runs until ``start()``.

        ``rate`` is requests per second. ``health_check`` defaults to ``HealthCheck()``;
        ``controller=None`` leaves the AWS Load Balancer Controller out. ``refresh_s`` is how often
        DescribeTargetHealth is read; ``propagation_s`` delays what it says further. ``time_scale``
        divides the model's durations (health-check interval, controller lag, propagation), for a
        sandbox running compressed time; ``rate`` and ``refresh_s`` are real.
        """
        if rate <= 0 or refresh_s <= 0 or time_scale <= 0 or propagation_s < 0:
            raise ValueError("rate, refresh_s and time_scale must be positive, propagation_s >= 0")
        check = health_check or HealthCheck()
        if check.interval_s <= 0 or check.unhealthy_threshold < 1 or check.healthy_threshold < 1:
            raise ValueError("health check interval must be positive and thresholds at least 1")
        self.groups = [g if isinstance(g, TargetGroup) else TargetGroup(g) for g in target_groups]
        if not self.groups:
            raise ValueError("at least one target group")
        self.rate = rate
        self.health_check = check
        self.controller = controller
        self.refresh_s = refresh_s
        self.time_scale = time_scale
        self.cluster = ClusterView(kube_url, token=kube_token)
        self._elbv2 = elbv2
        self._interval_s = check.interval_s / time_scale
        self._lag_s = None if controller is None else controller.lag_s / time_scale
        self._propagation_s = propagation_s / time_scale
        self._types: dict[str, str] = {}
        self._targets: dict[tuple[str, str, int], _Target] = {}
        self._pending: deque[tuple[float, str, dict[tuple[str, int], str]]] = deque()
        self._rr = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._refresh_now = asyncio.Event()
        self._counts: _Counts | None = None
        self._wall0 = 0.0
        self._mono0 = 0.0
        self._stopped_result: LoadBalancerResult | None = None
        #: DescribeTargetHealth calls that failed (the last view is kept meanwhile).
        self.refresh_errors = 0

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> LoadBalancerSim:
        """Sync the cluster view, read the target groups once, then start the request stream.

        Raises what DescribeTargetGroups raises for an unknown group (nothing is left running).
        """
        if self._counts is not None:
            raise RuntimeError("LoadBalancerSim already started (one run per instance)")
        loop = asyncio.get_running_loop()
        await self.cluster.start()
        try:
            described = await asyncio.to_thread(
                self._elbv2.describe_target_groups, TargetGroupArns=[g.arn for g in self.groups]
            )
            self._types = {
                g["TargetGroupArn"]: g.get("TargetType", "instance") for g in described["TargetGroups"]
            }
            self._wall0, self._mono0 = time.time(), loop.time()
            await self.refresh(apply_now=True)
        except BaseException:
            await self.cluster.stop()
            raise
        self._counts = _Counts(self._wall0, self._mono0)
        self._tasks = [
            asyncio.create_task(self._traffic(), name="lbsim traffic"),
            asyncio.create_task(self._refresh_loop(), name="lbsim refresh"),
        ]
        return self

    async def stop(self) -> LoadBalancerResult:
        """Stop the stream and the watches; returns the result (also kept for ``result()``)."""
        if self._counts is None:
            raise RuntimeError("LoadBalancerSim is not started")
        if self._stopped_result is None:
            self._stopped_result = self.result()
        for task in [*self._tasks, *self._side_tasks]:
            task.cancel()
        for task in [*self._tasks, *self._side_tasks]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        self._side_tasks.clear()
        await self.cluster.stop()
        assert self._stopped_result is not None
        return self._stopped_result

    async def __aenter__(self) -> LoadBalancerSim:
        return await self.start()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # -- public API -------------------------------------------------------------------------------

    def result(self) -> LoadBalancerResult:
        """The counts so far (or at ``stop()``, once stopped)."""
        if self._stopped_result is not None:
            return self._stopped_result
        counts = self._counts
        if counts is None:
            raise RuntimeError("LoadBalancerSim is not started")
        now = time.time()
        window = 0.0
        if counts.first_failure is not None and counts.last_failure is not None:
            window = counts.last_failure - counts.first_failure + 1.0 / self.rate
        return LoadBalancerResult(
            sent=counts.sent,
            failed=counts.failed,
            error_window_s=round(window, 6),
            first_failure_at=counts.first_failure,
            last_failure_at=counts.last_failure,
            started_at=counts.started_wall,
            duration_s=now - counts.started_wall,
            rate=self.rate,
            per_second=tuple(
                SecondCount(second, sent, failed)
                for second, (sent, failed) in sorted(counts.per_second.items())
            ),
            failures_by_reason=dict(counts.reasons),
            sent_by_target=dict(counts.by_target),
            deregistrations=tuple(counts.deregistrations),
            health_events=tuple(counts.health_events),
        )

    def reset_counts(self) -> None:
        """Start a new measurement (e.g. the second run of a comparison); the model state stays."""
        if self._counts is None:
            raise RuntimeError("LoadBalancerSim is not started")
        loop = asyncio.get_running_loop()
        self._counts = _Counts(time.time(), loop.time())

    def targets(self) -> list[TargetView]:
        """Every target the balancer knows, with its AWS state and the balancer's verdict."""
        return [
            TargetView(
                target_group_arn=t.group.arn,
                target_id=t.target_id,
                port=t.port,
                target_type=t.target_type,
                state=t.state,
                lb_healthy=t.lb_healthy,
                routed=self._routable(t),
                problem=self._problem(t),
                sent=t.sent,
                failed=t.failed,
            )
            for t in self._ordered()
        ]

    def routed(self, target_id: str, port: int | None = None) -> bool:
        """Whether new requests may go to this target (in any of the target groups)."""
        return any(
            self._routable(t)
            for t in self._targets.values()
            if t.target_id == target_id and (port is None or t.port == port)
        )

    def mark_node_down(self, node: str) -> None:
        """The node's instance is gone (the harness terminated it); the API may not show it yet."""
        self.cluster.mark_node_down(node)

    def mark_node_up(self, node: str) -> None:
        self.cluster.mark_node_up(node)

    async def refresh(self, *, apply_now: bool = False) -> None:
        """Read DescribeTargetHealth for every group now (the periodic refresh does the same).

        What it reads takes effect after ``propagation_s`` unless ``apply_now``.
        """
        loop = asyncio.get_running_loop()
        for group in self.groups:
            try:
                answer = await asyncio.to_thread(self._elbv2.describe_target_health, TargetGroupArn=group.arn)
            except Exception as exc:  # a flaky endpoint must not stop the stream: keep the last view
                self.refresh_errors += 1
                log.debug("lbsim: DescribeTargetHealth %s failed: %s", group.arn, exc)
                continue
            snapshot: dict[tuple[str, int], str] = {}
            for desc in answer["TargetHealthDescriptions"]:
                target: Mapping[str, Any] = desc.get("Target") or {}
                health: Mapping[str, Any] = desc.get("TargetHealth") or {}
                state = health.get("State", "unavailable")
                snapshot[(str(target.get("Id")), int(target.get("Port") or 0))] = str(state)
            when = loop.time() + (0.0 if apply_now else self._propagation_s)
            self._pending.append((when, group.arn, snapshot))
        self._apply_pending(loop.time())

    # -- model ------------------------------------------------------------------------------------

    def _ordered(self) -> list[_Target]:
        return [self._targets[k] for k in sorted(self._targets)]

    def _group(self, arn: str) -> TargetGroup:
        return next(g for g in self.groups if g.arn == arn)

    def _apply_pending(self, now: float) -> None:
        while self._pending and self._pending[0][0] <= now:
            _when, arn, snapshot = self._pending.popleft()
            group = self._group(arn)
            target_type = self._types.get(arn, "instance")
            for key in [k for k in self._targets if k[0] == arn and (k[1], k[2]) not in snapshot]:
                del self._targets[key]  # deregistration finished: unused, no longer listed
            for (target_id, port), state in snapshot.items():
                t = self._targets.get((arn, target_id, port))
                if t is None:
                    phase = zlib.crc32(f"{arn}/{target_id}/{port}".encode()) / 2**32
                    t = _Target(group, target_type, target_id, port, state, now + phase * self._interval_s)
                    self._targets[(arn, target_id, port)] = t
                elif state in REGISTERED and t.state not in REGISTERED:
                    # Registered again (e.g. while draining): a fresh target for the controller and
                    # for the health checks, which start over as AWS's do.
                    t.deregistering = False
                    t.api_bad_since = None
                    t.lb_healthy, t.fails, t.passes = True, 0, 0
                t.state = state

    def _problem(self, t: _Target, *, api_visible: bool = False) -> str | None:
        if t.target_type == "ip":
            return self.cluster.ip_target_problem(t.target_id, api_visible=api_visible)
        return self.cluster.instance_target_problem(
            t.target_id, namespace=t.group.namespace, selector=t.group.selector, api_visible=api_visible
        )

    def _routable(self, t: _Target) -> bool:
        return t.state in ROUTABLE and t.lb_healthy

    def _candidates(self) -> list[_Target]:
        ordered = self._ordered()
        routable = [t for t in ordered if self._routable(t)]
        if routable:
            return routable
        # ALB fails open: with every registered target failing its checks, it tries them all.
        return [t for t in ordered if t.state in ROUTABLE]

    def _health_checks(self, now: float) -> None:
        for t in self._targets.values():
            if t.state not in REGISTERED or t.next_check > now:
                continue
            while t.next_check <= now:
                t.next_check += self._interval_s
            if self._problem(t) is None:
                t.fails, t.passes = 0, t.passes + 1
                if not t.lb_healthy and t.passes >= self.health_check.healthy_threshold:
                    self._set_health(t, True, now)
            else:
                t.fails, t.passes = t.fails + 1, 0
                if t.lb_healthy and t.fails >= self.health_check.unhealthy_threshold:
                    self._set_health(t, False, now)

    def _set_health(self, t: _Target, healthy: bool, now: float) -> None:
        t.lb_healthy = healthy
        if self._counts is not None:
            self._counts.health_events.append(
                HealthEvent(self._wall(now), t.group.arn, t.target_id, t.port, healthy)
            )

    def _controller_problem(self, t: _Target) -> str | None:
        if t.target_type == "ip":
            return self._problem(t, api_visible=True)
        node = self.cluster.node_of_instance(t.target_id)
        if node is not None and EXCLUDE_LABEL in ((node.get("metadata") or {}).get("labels") or {}):
            return "node-excluded"
        name = None if node is None else (node.get("metadata") or {}).get("name")
        return self.cluster.node_problem(name, api_visible=True)

    def _reconcile(self, now: float) -> None:
        if self._lag_s is None:
            return
        for t in self._targets.values():
            if t.state not in REGISTERED or t.deregistering:
                continue
            problem = self._controller_problem(t)
            if problem is None:
                t.api_bad_since = None
                continue
            if t.api_bad_since is None:
                t.api_bad_since = now
            if now - t.api_bad_since >= self._lag_s:
                t.deregistering = True
                task = asyncio.create_task(self._deregister(t, problem), name=f"lbsim deregister {t.label}")
                self._side_tasks.add(task)
                task.add_done_callback(self._side_tasks.discard)

    async def _deregister(self, t: _Target, reason: str) -> None:
        loop = asyncio.get_running_loop()
        ok = True
        try:
            await asyncio.to_thread(
                self._elbv2.deregister_targets,
                TargetGroupArn=t.group.arn,
                Targets=[{"Id": t.target_id, "Port": t.port}],
            )
        except Exception as exc:  # the controller retries on its next reconcile, after the lag again
            ok = False
            log.debug("lbsim: DeregisterTargets %s failed: %s", t.label, exc)
            t.deregistering = False
            t.api_bad_since = loop.time()
        if self._counts is not None:
            self._counts.deregistrations.append(
                Deregistration(self._wall(loop.time()), t.group.arn, t.target_id, t.port, reason, ok)
            )
        self._refresh_now.set()

    # -- traffic ----------------------------------------------------------------------------------

    def _wall(self, mono: float) -> float:
        return self._wall0 + (mono - self._mono0)

    def _send(self, at: float) -> None:
        counts = self._counts
        assert counts is not None
        candidates = self._candidates()
        target: _Target | None = None
        if candidates:
            target = candidates[self._rr % len(candidates)]
            self._rr += 1
            problem = self._problem(target)
            target.sent += 1
            counts.by_target[target.label] = counts.by_target.get(target.label, 0) + 1
        else:
            problem = Reason.NO_TARGET
        second = int(at - counts.started_mono)
        bucket = counts.per_second.setdefault(second, [0, 0])
        bucket[0] += 1
        counts.sent += 1
        if problem is None:
            return
        bucket[1] += 1
        counts.failed += 1
        counts.reasons[problem] = counts.reasons.get(problem, 0) + 1
        if target is not None:
            target.failed += 1
        wall = self._wall(at)
        if counts.first_failure is None:
            counts.first_failure = wall
        counts.last_failure = wall

    async def _traffic(self) -> None:
        loop = asyncio.get_running_loop()
        interval = 1.0 / self.rate
        next_at = loop.time()
        while True:
            now = loop.time()
            self._apply_pending(now)
            self._health_checks(now)
            self._reconcile(now)
            # Requests due while the loop was busy go out now, each stamped with its own time, so
            # the stream stays steady on average even when the event loop stalls.
            while next_at <= now:
                self._send(next_at)
                next_at += interval
            await asyncio.sleep(max(0.0, min(next_at - loop.time(), _MAX_SLEEP_S)))

    async def _refresh_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._refresh_now.wait(), self.refresh_s)
            self._refresh_now.clear()
            await self.refresh()
