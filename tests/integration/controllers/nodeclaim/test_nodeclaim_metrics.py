"""The NodeClaim controller's metrics, scraped as Prometheus would (the registry's text exposition,
parsed back) while the lifecycle loop and the GC run against kubesim and a ``FakeCloud``.

Karpenter's counterparts: aws ``pkg/cloudprovider/metrics`` (``instance_launch_failures_total`` by
zone, capacity type, instance type and reason), core ``pkg/controllers/nodeclaim/lifecycle``
(``liveness.go`` ``deleteNodeClaimForTimeout`` counting a disruption with the timeout's reason) and
``pkg/controllers/nodeclaim/garbagecollection``.
"""

from __future__ import annotations

from nodeclaim_world import CLAIM, Obj, gone, is_, ready_claim, running

from kubespot.cloud.pool_risk import PoolRisk
from kubespot.cloud.signals import CapacitySignals
from kubespot.cloud.unavailable import UnavailableOfferings
from kubespot.config.launch import LaunchSettings
from kubespot.controllers.nodeclaim.controller import risk_gauge, unavailable_gauge
from kubespot.kube import KubeError
from kubespot.model import SystemClock
from kubespot.observability.metrics import Metrics
from support.metrics_scrape import value


async def test_an_ice_then_an_on_demand_fallback_are_counted_and_timed() -> None:
    """core launch.go launchNodeClaim (ICE: the claim deleted, its pods re-planned); aws
    instance.go CreateFleet errors per pool (instance_launch_failures_total labels) and
    getCapacityType (spot pools all unavailable → on-demand)."""
    metrics = Metrics()
    async with running(metrics=metrics) as env:
        metrics.watch("kubespot_nodeclaims", env.loop.phases)
        signals = CapacitySignals(env.unavailable, PoolRisk(SystemClock()))
        metrics.watch("kubespot_unavailable_offerings", lambda: unavailable_gauge(signals))
        for zone in ("z1", "z2"):
            env.cloud.capacity[("spot", "m5.large", zone)] = 0
        await env.create_claim()
        await env.until(CLAIM, gone)
        for zone in ("z1", "z2"):
            failed = value(
                metrics,
                "kubespot_launch_failures_total",
                capacity_type="spot",
                instance_type="m5.large",
                zone=zone,
                reason="InsufficientInstanceCapacity",
            )
            assert failed == 1
        assert value(metrics, "kubespot_launch_fallbacks_total", kind="ice_replan") == 1
        assert value(metrics, "kubespot_unavailable_offerings", capacity_type="spot") == 2
        assert value(metrics, "kubespot_ice_to_launch_seconds_count", capacity_type="on-demand") is None

        await env.create_claim()  # the re-plan's claim: spot is marked, on-demand launches
        claim = await env.until(CLAIM, is_("Launched", "True"))
        assert claim is not None and claim["metadata"]["labels"]["karpenter.sh/capacity-type"] == "on-demand"
        zone = claim["metadata"]["labels"]["topology.kubernetes.io/zone"]
        launched = value(
            metrics, "kubespot_launches_total", capacity_type="on-demand", instance_type="m5.large", zone=zone
        )
        assert launched == 1
        assert value(metrics, "kubespot_launch_fallbacks_total", kind="spot_to_on_demand") == 1
        assert value(metrics, "kubespot_ice_to_launch_seconds_count", capacity_type="on-demand") == 1
        assert value(metrics, "kubespot_nodeclaims", phase="launched") == 1
        assert value(metrics, "kubespot_nodeclaims", phase="pending") == 0


async def test_a_create_error_counts_a_whole_launch_failure_by_its_reason() -> None:
    """core launch.go launchNodeClaim (CreateError: Launched Unknown with its reason, retried)."""
    metrics = Metrics()
    async with running(metrics=metrics) as env:
        env.cloud.fail_create = 1
        await env.create_claim()
        await env.until(CLAIM, is_("Launched", "True"))
        assert (
            value(
                metrics,
                "kubespot_launch_failures_total",
                capacity_type="",
                instance_type="",
                zone="",
                reason="LaunchFailed",
            )
            == 1
        )
        assert value(metrics, "kubespot_launch_fallbacks_total", kind="spot_to_on_demand") is None


async def test_a_registration_timeout_is_counted() -> None:
    """core liveness.go Reconcile → deleteNodeClaimForTimeout("registration_timeout")."""
    metrics = Metrics()
    async with running(LaunchSettings(registration_timeout=0.5), metrics=metrics) as env:
        await env.create_claim()
        await env.until(CLAIM, gone, within=15.0)
        assert value(metrics, "kubespot_nodeclaim_timeouts_total", kind="registration_timeout") == 1


async def test_gc_of_a_lost_claim_is_counted() -> None:
    """core nodeclaim/garbagecollection/controller.go Reconcile: a Registered claim whose instance
    the cloud no longer lists is deleted."""
    metrics = Metrics()
    async with running(metrics=metrics) as env:
        _, node = await ready_claim(env)
        env.cloud.launched.clear()
        await env.call("PATCH", f"/api/v1/nodes/{node}", {"metadata": {"finalizers": None}})
        await env.call("DELETE", f"/api/v1/nodes/{node}")
        await env.until(CLAIM, gone)
        assert value(metrics, "kubespot_nodeclaims_garbage_collected_total", kind="lost_claim") == 1


def test_pool_risk_gauge_lists_scored_pools() -> None:
    """The reclaim score per spot pool (cloud.pool_risk), only pools with a score."""
    risk = PoolRisk(SystemClock())
    risk.interruption_warning("m5.large", "z1")
    signals = CapacitySignals(UnavailableOfferings(SystemClock()), risk)
    gauge = risk_gauge(signals)
    assert list(gauge) == [("m5.large", "z1")] and 0.99 < gauge[("m5.large", "z1")] <= 1.0


async def test_a_launch_whose_status_write_failed_is_neither_launched_nor_counted_again() -> None:
    """Review 15a #4. core pkg/controllers/nodeclaim/lifecycle/launch.go Reconcile: the created
    claim is cached by UID, so a reconcile retried after the status write failed does not call
    CloudProvider.Create again (nor count the launch twice). Spot is marked unavailable, so the
    launch is also the spot→on-demand fallback, counted once."""
    metrics = Metrics()
    async with running(metrics=metrics) as env:
        for zone in ("z1", "z2"):
            env.unavailable.mark("spot", "m5.large", zone, reason="InsufficientInstanceCapacity")
        api = env.loop._claims_api
        real = api.replace_status
        failed = [0]

        async def flaky(obj: Obj) -> Obj:
            if not failed[0]:
                failed[0] += 1
                raise KubeError(500, "injected: the status write after the launch failed")
            return await real(obj)

        api.replace_status = flaky  # type: ignore[method-assign]
        await env.create_claim()
        claim = await env.until(CLAIM, is_("Launched", "True"))
        assert failed[0] == 1
        assert len(env.cloud.create_calls) == 1 and len(env.cloud.launched) == 1
        labels = claim["metadata"]["labels"]
        assert labels["karpenter.sh/capacity-type"] == "on-demand"
        zone = labels["topology.kubernetes.io/zone"]
        launched = value(
            metrics, "kubespot_launches_total", capacity_type="on-demand", instance_type="m5.large", zone=zone
        )
        assert launched == 1
        assert value(metrics, "kubespot_launch_fallbacks_total", kind="spot_to_on_demand") == 1
