"""Settings of the IMDS source: how to talk to the instance metadata service, and what to watch.

Request rate on IMDS. Each poll is one GET per enabled signal path, over kept-alive connections
(no TCP handshake per request). With the defaults (spot + scheduled, 1 s interval) that is 2 GETs
per second per node, 4 with every monitor on. A GET and its answer on an open connection are about
four to six packets, so that is ~10 packets per second by default and ~25 at most. AWS caps traffic
to the link-local services (IMDS, the Route 53 Resolver, Amazon Time Sync) at 1024 packets per
second per network interface and drops the excess, counted in the ENA driver's
``linklocal_allowance_exceeded`` statistic (ElastiCache User Guide, "Troubleshooting: network-related
issues"; EKS Best Practices Guide, "Monitoring EKS workloads for network performance issues"). The
agent therefore uses about 1 % of that budget (2-3 % with every monitor on), which leaves the rest
for DNS and other IMDS users on the node. The token is fetched once per TTL (6 h by default). The
reference handler polls every 2 s and acts on a 1 s tick, up to 3 s from notice to action;
polling every second cuts that to about 1 s at a cost that is still small.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from kubespot.config.base import setting

#: IMDS refuses token TTLs outside 1..21600 seconds with 400.
MAX_TOKEN_TTL = 21600


@dataclass(frozen=True)
class ImdsSettings:
    """How the agent talks to the EC2 instance metadata service."""

    url: str = setting(
        "http://169.254.169.254",
        doc="Base URL of the instance metadata service. Change it only for a simulator "
        "(imdssim) or a metadata proxy; a path prefix is kept (http://host:port/i-0123...).",
        env="KUBESPOT_IMDS_URL",
        nth="INSTANCE_METADATA_URL",
        flag="--imds-url",
    )
    tries: int = setting(
        3,
        doc="Attempts per metadata read (first try included) before it is reported as failed. "
        "The reference handler's default; a failed poll is retried at the next interval anyway.",
        env="KUBESPOT_IMDS_TRIES",
        nth="METADATA_TRIES",
        unit="attempts",
    )
    poll_interval: float = setting(
        1.0,
        doc="Seconds between polls of the signal paths. 1 s puts ~2-4 GETs per second on IMDS "
        "(far below its 1024 packets/s link-local limit) and bounds notice-to-detection at 1 s, "
        "against up to 3 s for the reference handler (2 s poll + 1 s tick).",
        env="KUBESPOT_IMDS_POLL_INTERVAL",
        flag="--poll-interval",
        unit="seconds",
    )
    token_ttl: int = setting(
        MAX_TOKEN_TTL,
        doc="Lifetime requested for IMDSv2 session tokens (1..21600). The maximum means one token "
        "PUT every 6 h; a stolen token is no risk here since the agent never hands it out.",
        env="KUBESPOT_IMDS_TOKEN_TTL",
        unit="seconds",
    )
    token_refresh_margin: float = setting(
        60.0,
        doc="A token is replaced this long before it expires, so no read races its expiry. "
        "A minute covers any clock drift and request latency; a 401 still triggers one refresh.",
        env="KUBESPOT_IMDS_TOKEN_REFRESH_MARGIN",
        unit="seconds",
    )
    request_timeout: float = setting(
        2.0,
        doc="Whole-request timeout for one IMDS call. IMDS answers in milliseconds; 2 s tolerates "
        "a loaded host while three tries still end well inside a 120 s spot notice.",
        env="KUBESPOT_IMDS_REQUEST_TIMEOUT",
        unit="seconds",
    )
    require_v2: bool = setting(
        False,
        doc="Refuse to fall back to IMDSv1 when no session token can be had. Off by default, as "
        "in the reference handler, so instances with v1 allowed keep working when the token "
        "endpoint misbehaves; turn on where policy forbids v1.",
        env="KUBESPOT_IMDS_REQUIRE_V2",
    )
    retry_backoff_base: float = setting(
        0.1,
        doc="First retry waits up to this long (full jitter: a random time in [0, base * 2^n], "
        "capped), so a node fleet does not retry in step.",
        env="KUBESPOT_IMDS_RETRY_BACKOFF_BASE",
        unit="seconds",
    )
    retry_backoff_cap: float = setting(
        1.0,
        doc="Longest wait between retries of one read. Kept at the poll interval: waiting longer "
        "than the next poll gains nothing.",
        env="KUBESPOT_IMDS_RETRY_BACKOFF_CAP",
        unit="seconds",
    )

    def __post_init__(self) -> None:
        _check(self, "url", self.url.startswith(("http://", "https://")), "must be an http(s) URL")
        _check(self, "tries", self.tries >= 1, "must be at least 1")
        _check(self, "poll_interval", self.poll_interval > 0, "must be positive")
        _check(self, "token_ttl", 1 <= self.token_ttl <= MAX_TOKEN_TTL, f"must be in 1..{MAX_TOKEN_TTL}")
        _check(
            self,
            "token_refresh_margin",
            0 <= self.token_refresh_margin < self.token_ttl,
            "must be at least 0 and less than token_ttl",
        )
        _check(self, "request_timeout", self.request_timeout > 0, "must be positive")
        _check(self, "retry_backoff_base", self.retry_backoff_base >= 0, "must not be negative")
        _check(
            self,
            "retry_backoff_cap",
            self.retry_backoff_cap >= self.retry_backoff_base,
            "must not be less than retry_backoff_base",
        )


@dataclass(frozen=True)
class MonitorSettings:
    """Which IMDS signals the agent watches (the reference handler's switches and defaults)."""

    spot_interruption_draining: bool = setting(
        True,
        doc="Watch spot/instance-action and handle spot interruption notices (two minutes' warning).",
        env="KUBESPOT_IMDS_SPOT_INTERRUPTION_DRAINING",
        nth="ENABLE_SPOT_INTERRUPTION_DRAINING",
    )
    scheduled_event_draining: bool = setting(
        True,
        doc="Watch events/maintenance/scheduled and handle reboots, stops and retirements at "
        "NotBefore minus scheduled_lead_time; canceled or completed events are undone.",
        env="KUBESPOT_IMDS_SCHEDULED_EVENT_DRAINING",
        nth="ENABLE_SCHEDULED_EVENT_DRAINING",
    )
    rebalance_monitoring: bool = setting(
        False,
        doc="Watch events/recommendations/rebalance and cordon on a rebalance recommendation "
        "(an early, often false, warning; off by default as in the reference handler).",
        env="KUBESPOT_IMDS_REBALANCE_MONITORING",
        nth="ENABLE_REBALANCE_MONITORING",
    )
    rebalance_draining: bool = setting(
        False,
        doc="Also drain on a rebalance recommendation (implies watching it).",
        env="KUBESPOT_IMDS_REBALANCE_DRAINING",
        nth="ENABLE_REBALANCE_DRAINING",
    )
    asg_lifecycle_draining: bool = setting(
        False,
        doc="Watch autoscaling/target-lifecycle-state and drain when it becomes Terminated. Useful "
        "in Auto Scaling groups with a termination lifecycle hook (which buys the drain time).",
        env="KUBESPOT_IMDS_ASG_LIFECYCLE_DRAINING",
        nth="ENABLE_ASG_LIFECYCLE_DRAINING",
    )
    scheduled_lead_time: float = setting(
        300.0,
        doc="Handle a scheduled event this long before its NotBefore instead of at once (the "
        "reference handler drains as soon as the event is announced, often days early). 5 min is "
        "more than twice the spot window, room for a drain that waits on PDBs and 120 s grace "
        "periods, while the node keeps serving for nearly all of the notice.",
        env="KUBESPOT_IMDS_SCHEDULED_LEAD_TIME",
        unit="seconds",
    )
    uptime_from_file: str = setting(
        "",
        doc="File to read host uptime from (first number, seconds, as in /proc/uptime), used to "
        "tell that a scheduled reboot has happened. Empty: /proc/uptime.",
        env="KUBESPOT_IMDS_UPTIME_FROM_FILE",
        nth="UPTIME_FROM_FILE",
        unit="path",
    )

    def __post_init__(self) -> None:
        _check(self, "scheduled_lead_time", self.scheduled_lead_time >= 0, "must not be negative")

    @property
    def watch_rebalance(self) -> bool:
        """Rebalance recommendations are polled when either rebalance switch is on."""
        return self.rebalance_monitoring or self.rebalance_draining


def _check(obj: object, name: str, ok: bool, why: str) -> None:
    """Raise a start-up error naming the setting by its field and environment variable."""
    if ok:
        return
    env = next((f.metadata.get("env") for f in fields(obj) if f.name == name), None)  # type: ignore[arg-type]
    label = f"{name} ({env})" if env else name
    raise ValueError(f"invalid setting {label}: {why}, got {getattr(obj, name)!r}")
