"""The provisioning controller's catalog refresh: every 12 h when it works, sooner with backoff when
AWS fails, the last good catalog kept, and /healthz saying when it is stale.

Sources: aws/karpenter-provider-aws ``pkg/controllers/providers/instancetype/controller.go`` and
``pkg/controllers/providers/pricing/controller.go`` (a 12-hour refresh; an error is returned and
the reconcile retried with the controller-runtime rate limiter's backoff).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from kubespot.aws.catalog import Catalog
from kubespot.config.pricing import PricingSettings
from kubespot.config.provisioning import ProvisioningSettings
from kubespot.controllers.provisioning.catalog_refresh import CatalogRefresh
from kubespot.controllers.provisioning.controller import Provisioning
from support.catalog_aws import CatalogAws
from support.clocks import ManualClock, settle

TYPES = "DescribeInstanceTypes"


async def test_failures_retry_with_backoff_then_the_schedule_resumes() -> None:
    clock = ManualClock(datetime(2026, 11, 1, tzinfo=UTC))
    ec2 = CatalogAws(fail=True)
    pricing = PricingSettings(refresh_interval=43200, use_pricing_api=False)
    settings = ProvisioningSettings(retry_base=2.0, retry_cap=60.0, stuck_after=600.0)
    catalog = Catalog(ec2, "us-east-1", pricing, clock=clock)  # type: ignore[arg-type]
    refresh = CatalogRefresh(catalog, settings, clock=clock, rng=lambda: 0.999)
    task = asyncio.create_task(refresh.run())
    try:
        await settle()
        assert ec2.count(TYPES) == 1 and refresh.failures == 1 and "instance-types" in refresh.errors()
        # The first retry comes within retry_base (full jitter below 2 s), not in 12 h.
        await clock.advance(2.0)
        assert ec2.count(TYPES) == 2 and refresh.failures == 2
        ec2.fail = False
        await clock.advance(4.0)  # the second retry waits below 4 s
        assert ec2.count(TYPES) == 3 and refresh.failures == 0 and refresh.last_success == clock.now()
        assert list(catalog.infos()) == ["m5.large"]
        # Then the 12-hour schedule: nothing for 11 hours.
        await clock.advance(11 * 3600.0, step=3600.0)
        assert ec2.count(TYPES) == 3
        await clock.advance(3600.0)
        assert ec2.count(TYPES) == 4
    finally:
        task.cancel()


async def test_a_failed_refresh_keeps_the_last_catalog_and_health_turns_red_when_stale() -> None:
    clock = ManualClock(datetime(2026, 11, 1, tzinfo=UTC))
    ec2 = CatalogAws(fail=True)
    ec2.fail = False
    pricing = PricingSettings(refresh_interval=3600, use_pricing_api=False)
    settings = ProvisioningSettings(stuck_after=600.0)
    catalog = Catalog(ec2, "us-east-1", pricing, clock=clock)  # type: ignore[arg-type]
    refresh = CatalogRefresh(catalog, settings, clock=clock)
    assert await refresh.refresh_once()
    ec2.fail = True
    await clock.advance(3600.0)
    assert not await refresh.refresh_once()
    assert list(catalog.infos()) == ["m5.large"]  # kept
    parts = Provisioning(settings, pricing, clock, refresh, cloud=None, status=_NotStarted())  # type: ignore[arg-type]
    status_check, catalog_check = parts.checks(clock.now())
    assert status_check.ok and catalog_check.ok and "RequestLimitExceeded" in catalog_check.detail
    await clock.advance(601.0)  # refresh_interval + stuck_after since the last success
    _, catalog_check = parts.checks(clock.now())
    assert not catalog_check.ok


class _NotStarted:
    started = None
    last_pass = None


class _Loop:
    def __init__(self, started: datetime, last_pass: datetime | None) -> None:
        self.started, self.last_pass = started, last_pass

    def unserved(self) -> list[str]:
        return []  # every kind served (a CRD missing: test_status_loop_lifecycle)


def test_status_check_turns_red_when_no_pass_finished_for_stuck_after() -> None:
    """/healthz follows the other controllers' checks (a named check, ok, detail, last success)."""
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    settings = ProvisioningSettings(stuck_after=600.0)
    refresh = CatalogRefresh(None, settings, clock=None)  # type: ignore[arg-type]
    refresh.errors = lambda: {}  # type: ignore[method-assign]

    def check(loop: _Loop, now: datetime) -> tuple[bool, str]:
        parts = Provisioning(settings, PricingSettings(), None, refresh, None, loop)  # type: ignore[arg-type]
        status_check = parts.checks(now)[0]
        return status_check.ok, status_check.detail

    assert check(_Loop(t0, None), t0.replace(minute=9))[0]  # starting: within stuck_after
    assert not check(_Loop(t0, None), t0.replace(minute=11))[0]  # never finished a pass
    assert check(_Loop(t0, t0.replace(minute=30)), t0.replace(minute=39))[0]
    ok, detail = check(_Loop(t0, t0.replace(minute=30)), t0.replace(minute=41))
    assert not ok and "stuck" in detail


async def test_health_turns_red_when_no_refresh_ever_succeeded_and_holds_after_the_lease_is_lost() -> None:
    """A catalog that never loads (the catalog IAM group missing) is retried every retry_cap at
    most, below stuck_after: the bound counts from the first attempt, not the latest retry, so
    /healthz turns red stuck_after after the start (docs/controller.md; aws/karpenter-provider-aws
    pkg/controllers/providers/instancetype/controller.go returns the error and is retried with
    backoff meanwhile). Once the loop is cancelled (the lease lost) the check holds, as on any
    standby."""
    clock = ManualClock(datetime(2026, 11, 1, tzinfo=UTC))
    ec2 = CatalogAws(fail=True)  # fails until told otherwise
    pricing = PricingSettings(refresh_interval=43200, use_pricing_api=False)
    settings = ProvisioningSettings(retry_base=2.0, retry_cap=300.0, stuck_after=900.0)
    catalog = Catalog(ec2, "us-east-1", pricing, clock=clock)  # type: ignore[arg-type]
    refresh = CatalogRefresh(catalog, settings, clock=clock, rng=lambda: 0.999)
    parts = Provisioning(settings, pricing, clock, refresh, cloud=None, status=_NotStarted())  # type: ignore[arg-type]
    task = asyncio.create_task(refresh.run())
    try:
        await settle()
        await clock.advance(890.0, step=10.0)
        assert parts.checks(clock.now())[1].ok
        await clock.advance(20.0, step=10.0)
        assert refresh.failures > 5 and refresh.last_success is None
        catalog_check = parts.checks(clock.now())[1]
        assert not catalog_check.ok and "never refreshed" in catalog_check.detail
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    catalog_check = parts.checks(clock.now())[1]
    assert catalog_check.ok and "not the leader" in catalog_check.detail
