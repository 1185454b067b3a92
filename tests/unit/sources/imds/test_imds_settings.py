"""Each IMDS setting's default, its names (kubespot env + the reference handler's alias) and checks."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest

from kubespot.config.imds import ImdsSettings, MonitorSettings

SECONDS = {
    "poll_interval",
    "token_ttl",
    "token_refresh_margin",
    "request_timeout",
    "retry_backoff_base",
    "retry_backoff_cap",
    "scheduled_lead_time",
}


def test_defaults_match_the_reference_handler_and_the_design() -> None:
    s = ImdsSettings()
    assert s.url == "http://169.254.169.254" and s.tries == 3 and s.poll_interval == 1.0
    assert s.token_ttl == 21600 and s.token_refresh_margin == 60.0 and s.require_v2 is False
    assert s.request_timeout == 2.0 and (s.retry_backoff_base, s.retry_backoff_cap) == (0.1, 1.0)
    m = MonitorSettings()
    assert (m.spot_interruption_draining, m.scheduled_event_draining) == (True, True)
    assert (m.rebalance_monitoring, m.rebalance_draining, m.asg_lifecycle_draining) == (False, False, False)
    assert m.scheduled_lead_time == 300.0 and m.uptime_from_file == "" and not m.watch_rebalance
    assert MonitorSettings(rebalance_draining=True).watch_rebalance


def test_nth_aliases() -> None:
    aliases = {f.metadata["nth"] for cls in (ImdsSettings, MonitorSettings) for f in fields(cls)} - {()}
    assert aliases == {
        ("INSTANCE_METADATA_URL",),
        ("METADATA_TRIES",),
        ("ENABLE_SPOT_INTERRUPTION_DRAINING",),
        ("ENABLE_SCHEDULED_EVENT_DRAINING",),
        ("ENABLE_REBALANCE_MONITORING",),
        ("ENABLE_REBALANCE_DRAINING",),
        ("ENABLE_ASG_LIFECYCLE_DRAINING",),
        ("UPTIME_FROM_FILE",),
    }


@pytest.mark.parametrize("cls", [ImdsSettings, MonitorSettings])
def test_every_field_is_documented_with_a_kubespot_env_name(cls: type) -> None:
    for f in fields(cls):
        assert f.metadata["env"].startswith("KUBESPOT_IMDS_"), f.name
        assert len(f.metadata["doc"]) > 30, f.name
        if f.name in SECONDS:
            assert f.metadata.get("unit") == "seconds", f.name


def test_frozen() -> None:
    with pytest.raises(FrozenInstanceError):
        ImdsSettings().tries = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"tries": 0}, "KUBESPOT_IMDS_TRIES"),
        ({"token_ttl": 21601}, "KUBESPOT_IMDS_TOKEN_TTL"),
        ({"token_ttl": 60, "token_refresh_margin": 60}, "KUBESPOT_IMDS_TOKEN_REFRESH_MARGIN"),
        ({"poll_interval": 0}, "KUBESPOT_IMDS_POLL_INTERVAL"),
        ({"request_timeout": -1}, "KUBESPOT_IMDS_REQUEST_TIMEOUT"),
        ({"url": "169.254.169.254"}, "KUBESPOT_IMDS_URL"),
        ({"retry_backoff_cap": 0.01}, "KUBESPOT_IMDS_RETRY_BACKOFF_CAP"),
    ],
)
def test_invalid_values_name_the_setting(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        ImdsSettings(**kwargs)  # type: ignore[arg-type]


def test_negative_lead_time_is_refused() -> None:
    with pytest.raises(ValueError, match="KUBESPOT_IMDS_SCHEDULED_LEAD_TIME"):
        MonitorSettings(scheduled_lead_time=-1)
