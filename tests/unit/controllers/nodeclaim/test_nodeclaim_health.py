"""The NodeClaim controller's /healthz checks (``controllers.nodeclaim.controller.NodeClaims.checks``).

kubespot's own (Karpenter has no such check): the pattern of the provisioning controller's
(``controllers/provisioning/controller.py`` ``Provisioning.checks``), its loop's dispatcher and
reconciles, and the garbage collector's passes.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from unittest.mock import MagicMock

from kubespot.cloud.fake import FakeCloud
from kubespot.config.drain import DrainSettings
from kubespot.config.launch import LaunchSettings
from kubespot.controllers.nodeclaim.controller import NodeClaims, build
from kubespot.model import SystemClock

NOW = datetime(2026, 11, 26, tzinfo=UTC)


def parts() -> NodeClaims:
    return build(
        kube=MagicMock(),
        cloud=FakeCloud(),
        launch=LaunchSettings(),
        drain=DrainSettings(),
        clock=SystemClock(),
        recorder=None,
        stuck_after=60.0,
    )


def test_checks_hold_on_a_standby_and_fail_when_a_loop_is_stuck() -> None:
    p = parts()
    checks = p.checks(NOW)
    assert [(c.name, c.ok) for c in checks] == [("nodeclaim", True), ("nodeclaim-gc", True)]
    loop, gc = p.loop, p.gc
    loop.started = gc.started = NOW - timedelta(minutes=10)
    loop.last_pass = NOW - timedelta(seconds=30)
    gc.last_pass = NOW - timedelta(seconds=30)
    assert all(c.ok for c in p.checks(NOW))
    loop.last_pass = NOW - timedelta(seconds=61)
    gc.last_pass = NOW - timedelta(seconds=61 + 120)
    loop_check, gc_check = p.checks(NOW)
    assert not loop_check.ok and "stuck" in loop_check.detail
    assert not gc_check.ok and "stuck" in gc_check.detail


async def test_a_reconcile_running_too_long_fails_the_check() -> None:
    p = parts()
    loop = p.loop
    loop.started = loop.last_pass = NOW
    task = asyncio.create_task(asyncio.sleep(10))
    try:
        loop._running["general-abc"] = (task, NOW - timedelta(seconds=61))
        loop_check, _ = p.checks(NOW)
        assert not loop_check.ok and "general-abc" in loop_check.detail
        # A termination (its drain may take an hour) does not count.
        loop.claims["general-abc"] = {
            "metadata": {"name": "general-abc", "deletionTimestamp": "2026-11-26T00:00:00Z"}
        }
        loop_check, _ = p.checks(NOW)
        assert loop_check.ok
    finally:
        task.cancel()


def test_the_garbage_collectors_pace_comes_from_the_launch_settings() -> None:
    """aws/karpenter-provider-aws pkg/controllers/nodeclaim/garbagecollection/controller.go: 10 s
    between passes (2 min later on) and instances younger than 30 s spared, by default; the
    settings scale both (the end-to-end tests run them on a compressed clock)."""
    assert (parts().gc.intervals, parts().gc.min_age) == ((10.0, 20, 120.0), 30.0)
    fast = build(
        kube=MagicMock(),
        cloud=FakeCloud(),
        launch=LaunchSettings(garbage_collection_interval=0.5, garbage_collection_min_age=1.0),
        drain=DrainSettings(),
        clock=SystemClock(),
        recorder=None,
        stuck_after=60.0,
    )
    assert (fast.gc.intervals, fast.gc.min_age) == ((0.5, 20, 6.0), 1.0)
