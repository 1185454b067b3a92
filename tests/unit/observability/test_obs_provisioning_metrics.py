"""The controller's provisioning metrics: registered on first use (the agent exposes none of them),
the ICE-to-launch histogram, and the scrape-time capacity gauges with bounded pool-risk cardinality.

Names follow Karpenter's with the kubespot_ prefix: core ``pkg/controllers/nodeclaim/lifecycle``
(``NodeClaimsCreatedTotal`` with ``reason``/``nodepool``), aws ``pkg/cloudprovider/metrics``
(``instance_launch_failures_total`` by zone, capacity type, instance type and reason).
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from kubespot.observability.metrics import CAPACITY, LAZY, POOL_RISK_SERIES, Metrics
from support.metrics_scrape import samples, value


def test_agent_exposes_no_provisioning_metric_until_recorded() -> None:
    """The agent never records them: not one HELP line of theirs in its exposition."""
    m = Metrics()
    names = {f.name for f in text_string_to_metric_families(m.render()[0].decode())}
    assert not {n.removesuffix("_total") for n in LAZY | set(CAPACITY)} & names
    m.launched("spot", "m5.large", "us-east-1a", 5.0)
    assert (
        value(m, "kubespot_launches_total", capacity_type="spot", instance_type="m5.large", zone="us-east-1a")
        == 1
    )


def test_ice_to_launch_is_observed_once_from_the_first_ice() -> None:
    """aws pkg/providers/instance/instance.go CreateFleet errors → the next launch: the time from the
    first insufficient-capacity failure (a second one does not restart it) to the launch."""
    m = Metrics()
    m.launched("spot", "m5.large", "a", 1.0)  # no ICE before: nothing observed
    m.insufficient_capacity(10.0)
    m.insufficient_capacity(12.0)
    m.launched("on-demand", "m5.large", "a", 17.0)
    m.launched("on-demand", "m5.large", "a", 30.0)  # the clock stopped at the launch
    assert value(m, "kubespot_ice_to_launch_seconds_count", capacity_type="on-demand") == 1
    assert value(m, "kubespot_ice_to_launch_seconds_sum", capacity_type="on-demand") == 7.0
    assert value(m, "kubespot_ice_to_launch_seconds_count", capacity_type="spot") is None


def test_counters_by_their_labels() -> None:
    """karpenter_nodeclaims_created_total{reason,nodepool}; instance_launch_failures_total labels."""
    m = Metrics()
    m.nodeclaim_created("default", "spot", "prespin")
    m.launch_failure("spot", "m5.large", "us-east-1b", "InsufficientInstanceCapacity")
    m.launch_failure("spot", "m5.large", "us-east-1b", "InsufficientInstanceCapacity")
    m.fallback("spot_to_on_demand")
    m.nodeclaim_timeout("launch_timeout")
    m.garbage_collected("orphan_instance", 2)
    m.garbage_collected("orphan_instance", 0)
    assert (
        value(
            m, "kubespot_nodeclaims_created_total", nodepool="default", capacity_type="spot", reason="prespin"
        )
        == 1
    )
    failures = value(
        m,
        "kubespot_launch_failures_total",
        capacity_type="spot",
        instance_type="m5.large",
        zone="us-east-1b",
        reason="InsufficientInstanceCapacity",
    )
    assert failures == 2
    assert value(m, "kubespot_launch_fallbacks_total", kind="spot_to_on_demand") == 1
    assert value(m, "kubespot_nodeclaim_timeouts_total", kind="launch_timeout") == 1
    assert value(m, "kubespot_nodeclaims_garbage_collected_total", kind="orphan_instance") == 2


def test_capacity_gauges_are_read_at_scrape_time_and_pool_risk_is_capped() -> None:
    """Pool risk: one series per scored pool, the POOL_RISK_SERIES highest only."""
    m = Metrics()
    state = {("spot",): 3.0}
    m.watch("kubespot_unavailable_offerings", lambda: state)
    risk = {(f"m5.{i}xlarge", "us-east-1a"): float(i) for i in range(POOL_RISK_SERIES + 20)}
    m.watch("kubespot_pool_risk", lambda: risk)

    def broken() -> dict[tuple[str, ...], float]:
        raise RuntimeError("boom")

    m.watch("kubespot_nodeclaims", broken)
    assert value(m, "kubespot_unavailable_offerings", capacity_type="spot") == 3
    state[("spot",)] = 0.0
    state[("on-demand",)] = 1.0
    assert value(m, "kubespot_unavailable_offerings", capacity_type="on-demand") == 1
    series = [k for k in samples(m) if k[0] == "kubespot_pool_risk"]
    assert len(series) == POOL_RISK_SERIES
    top = POOL_RISK_SERIES + 19
    assert value(m, "kubespot_pool_risk", instance_type=f"m5.{top}xlarge", zone="us-east-1a") == top
    assert value(m, "kubespot_pool_risk", instance_type="m5.0xlarge", zone="us-east-1a") is None
    assert not [k for k in samples(m) if k[0] == "kubespot_nodeclaims"]  # a failing reader: no series
