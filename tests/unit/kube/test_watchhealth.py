"""The bound on a watch's silence, the record of when each watch last heard from the server, and
the ``/healthz`` check built from it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kubespot.config.kube import KubeSettings
from kubespot.config.loader import InvalidSetting
from kubespot.kube.watchhealth import DEFAULT_IDLE_TIMEOUT, Watches, server_timeout
from kubespot.observability.health import silence

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_watch_asks_the_server_to_end_it_within_its_idle_bound() -> None:
    # The default bound is a little above the 60 s a watch asks for (kopf: 70 s; kube-rs: +5 s).
    assert KubeSettings().watch_idle_timeout == DEFAULT_IDLE_TIMEOUT == 75.0
    assert server_timeout(75.0) == 60
    assert server_timeout(600.0) == 60
    assert server_timeout(10.0) == 8
    assert server_timeout(2.0) == 1
    with pytest.raises(InvalidSetting, match="watch_idle_timeout"):
        KubeSettings(watch_idle_timeout=1.0)


def test_each_running_watch_reports_its_silence_until_it_ends() -> None:
    now = [100.0]
    watches = Watches(10.0, clock=lambda: now[0])
    assert watches.health_limit == 20.0
    with watches.running("nodes") as nodes, watches.running("all pods"):
        now[0] = 105.0
        nodes.hear()
        now[0] = 112.0
        assert dict(watches.silences()) == {"nodes": 7.0, "all pods": 12.0}
    assert watches.silences() == []


def test_the_watches_check_names_the_watch_silent_too_long() -> None:
    assert silence("watches", [], now=NOW, limit=20).ok
    green = silence("watches", [("nodes", 3.0), ("all pods", 19.0)], now=NOW, limit=20)
    assert green.ok and "silent for 19.0s" in green.detail
    red = silence("watches", [("nodes", 3.0), ("all pods", 31.5)], now=NOW, limit=20)
    assert not red.ok
    assert red.detail == "all pods silent for 31.5s (more than 20s)"
    assert red.last_success is not None and (NOW - red.last_success).total_seconds() == 31.5
