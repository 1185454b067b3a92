"""One simulated EC2 instance: its identity, and the interruption signals it carries over time."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from kubespot.sim.imdssim.events import (
    AsgTransition,
    RebalanceRecommendation,
    ScheduledEvent,
    SpotInterruption,
)
from kubespot.sim.imdssim.timefmt import iso_utc

LifeCycle = Literal["spot", "on-demand", "scheduled"]
LIFE_CYCLES: tuple[str, ...] = ("spot", "on-demand", "scheduled")

DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT = "123456789012"


def region_of(availability_zone: str) -> str:
    """``us-east-1a`` → ``us-east-1`` (zone names are the region plus one letter)."""
    return availability_zone[:-1] if availability_zone[-1:].isalpha() else availability_zone


def hostname_for(private_ip: str, region: str) -> str:
    """The EC2 private DNS name for an address: ``ip-10-0-1-5.ec2.internal`` in us-east-1."""
    dashed = "ip-" + private_ip.replace(".", "-")
    if region == "us-east-1":
        return f"{dashed}.ec2.internal"
    return f"{dashed}.{region}.compute.internal"


class _Notice(Protocol):
    @property
    def notice_at(self) -> float: ...


_N = TypeVar("_N", bound=_Notice)


def _latest_visible(items: list[_N], now: float) -> _N | None:
    # Firing a second notice replaces the first from its own notice time on, as a re-sent notice would.
    visible = [i for i in items if i.notice_at <= now]
    return max(visible, key=lambda i: i.notice_at) if visible else None


@dataclass
class SimInstance:
    """Identity (what the metadata and identity document show) plus time-stamped signals."""

    instance_id: str
    instance_type: str = "m5.large"
    availability_zone: str = "us-east-1a"
    region: str = ""
    account_id: str = DEFAULT_ACCOUNT
    private_ip: str = "10.0.0.10"
    local_hostname: str = ""
    life_cycle: LifeCycle = "spot"
    ami_id: str = "ami-0abcdef1234567890"
    mac: str = "0e:00:00:00:00:01"
    launched_at: float = 0.0
    """Epoch seconds; shown as the identity document's ``pendingTime`` and used for uptime."""
    require_v2: bool | None = None
    """``None``: follow the server-wide setting."""
    autoscaling: bool = False
    """Whether the instance belongs to an Auto Scaling group (then target-lifecycle-state exists)."""
    user_data: str | None = None

    spot: list[SpotInterruption] = field(default_factory=list)
    rebalance: list[RebalanceRecommendation] = field(default_factory=list)
    scheduled: list[ScheduledEvent] = field(default_factory=list)
    asg: list[AsgTransition] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.instance_id.startswith("i-") or not self.instance_id[2:].isalnum():
            raise ValueError(f"instance id must look like i-0123456789abcdef0, got {self.instance_id!r}")
        ipaddress.IPv4Address(self.private_ip)  # raises ValueError on a bad address
        if not self.availability_zone:
            raise ValueError("availability zone must not be empty")
        if not self.region:
            self.region = region_of(self.availability_zone)
        if not self.local_hostname:
            self.local_hostname = hostname_for(self.private_ip, self.region)

    # --- what IMDS shows at a given instant -------------------------------------------------------

    def spot_at(self, now: float) -> SpotInterruption | None:
        return _latest_visible(self.spot, now)

    def rebalance_at(self, now: float) -> RebalanceRecommendation | None:
        return _latest_visible(self.rebalance, now)

    def scheduled_at(self, now: float) -> list[ScheduledEvent]:
        return sorted((e for e in self.scheduled if e.appear_at <= now), key=lambda e: e.appear_at)

    def asg_state_at(self, now: float) -> str | None:
        if not self.autoscaling:
            return None
        state = "InService"
        for transition in sorted(self.asg, key=lambda t: t.at):
            if transition.at <= now:
                state = transition.state
        return state

    def identity_document(self) -> dict[str, Any]:
        return {
            "accountId": self.account_id,
            "architecture": "x86_64",
            "availabilityZone": self.availability_zone,
            "billingProducts": None,
            "devpayProductCodes": None,
            "marketplaceProductCodes": None,
            "imageId": self.ami_id,
            "instanceId": self.instance_id,
            "instanceType": self.instance_type,
            "kernelId": None,
            "pendingTime": iso_utc(self.launched_at),
            "privateIp": self.private_ip,
            "ramdiskId": None,
            "region": self.region,
            "version": "2017-09-30",
        }

    def summary(self, now: float, *, require_v2_default: bool) -> dict[str, Any]:
        """What the control endpoint reports about this instance at ``now``."""
        spot = self.spot_at(now)
        rebalance = self.rebalance_at(now)
        return {
            "instance_id": self.instance_id,
            "instance_type": self.instance_type,
            "availability_zone": self.availability_zone,
            "region": self.region,
            "account_id": self.account_id,
            "private_ip": self.private_ip,
            "local_hostname": self.local_hostname,
            "life_cycle": self.life_cycle,
            "uptime_seconds": max(0, int(now - self.launched_at)),
            "require_v2": require_v2_default if self.require_v2 is None else self.require_v2,
            "autoscaling": self.autoscaling,
            "visible": {
                "spot": spot.instance_action() if spot else None,
                "rebalance": rebalance.body() if rebalance else None,
                "scheduled": [e.body(now) for e in self.scheduled_at(now)],
                "asg_target_lifecycle_state": self.asg_state_at(now),
            },
            "pending": {
                "spot": [s.summary() for s in self.spot if s.notice_at > now],
                "rebalance": [iso_utc(r.notice_at) for r in self.rebalance if r.notice_at > now],
                "scheduled": [e.summary(now) for e in self.scheduled if e.appear_at > now],
                "asg": [{"at": iso_utc(t.at), "state": t.state} for t in self.asg if t.at > now],
            },
        }


def synthetic_instance(
    index: int, *, launched_at: float, availability_zones: tuple[str, ...] = ()
) -> SimInstance:
    """The ``index``-th member of a made-up fleet: distinct ids, addresses and zones, spot by default."""
    zones = availability_zones or ("us-east-1a", "us-east-1b", "us-east-1c")
    return SimInstance(
        instance_id=f"i-0a{index:015x}",
        availability_zone=zones[index % len(zones)],
        private_ip=str(ipaddress.IPv4Address("10.0.0.10") + index),
        mac=f"0e:00:00:{(index >> 16) & 0xFF:02x}:{(index >> 8) & 0xFF:02x}:{index & 0xFF:02x}",
        launched_at=launched_at,
    )
