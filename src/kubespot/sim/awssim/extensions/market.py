"""The spot market's capacity pools: free capacity, usage, counters and interruption-rate bands.

A *pool* is one (capacity type, instance type, zone), the unit EC2 runs out of and Karpenter's
unavailable-offerings cache keys on (docs/designs/launching-research.md §1.3). Each pool has a
``capacity`` (instances it can hold at once; ``None`` = unlimited, the default, so code that never
configures the market sees stock moto's endless capacity), the instances launched into it and not
yet terminated (``used``), and counters for the stats route (launches, errors, reclaimed
instances).

Capacity is set by *rules*: ``set_capacity(n, capacity_type=…, instance_type=…, zone=…)`` with
``fnmatch`` patterns (``"*"`` matches all), applied to the pools that exist and remembered for
pools seen later; the last matching rule wins. A reclaim (``reclaims.py``) is such a rule too.

Interruption rates follow the Spot Instance Advisor's five bands (research note §5.3: ``<5%``,
``5-10%``, ``10-15%``, ``15-20%``, ``>20%``), per spot pool; by default each pool's band is
hash-derived (stable in every process, mostly ``<5%`` as on the Advisor), and
``set_interruption_band`` overrides it by pattern. Nothing in the market acts on the band: it is
information for whoever reads it (the sandbox's verdict).

State lives on moto's EC2 backend (``_kubespot_market``), so ``/moto-api/reset`` forgets pools,
rules and counters with the instances. One lock guards it: CreateFleet calls arrive on several
server threads at once and must not book the same free slot twice.
"""

from __future__ import annotations

import fnmatch
import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from moto.ec2.models import ec2_backends

__all__ = [
    "BANDS",
    "ON_DEMAND",
    "SPOT",
    "MarketState",
    "Pool",
    "PoolKey",
    "free_of",
    "hold_answers",
    "interruption_rates",
    "lock",
    "now",
    "pool",
    "pools",
    "set_capacity",
    "set_clock",
    "set_interruption_band",
    "set_time_scale",
    "state",
]

SPOT = "spot"
ON_DEMAND = "on-demand"
#: The Spot Instance Advisor's interruption-frequency bands, by index.
BANDS = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")
#: Default band shares: most pools in the lowest band, as on the Advisor's pages.
_BAND_WEIGHTS = (0.60, 0.15, 0.10, 0.08, 0.07)
_STORE = "_kubespot_market"

PoolKey = tuple[str, str, str]
"""(capacity type, instance type, zone)."""

lock = threading.RLock()
_clock: Callable[[], float] = time.time


def set_clock(clock: Callable[[], float] | None) -> None:
    """Use ``clock`` (Unix seconds) for the market's "now" (None restores ``time.time``)."""
    global _clock
    _clock = clock or time.time


def now() -> float:
    return _clock()


@dataclass
class Pool:
    """One capacity pool and what happened to it."""

    capacity_type: str
    instance_type: str
    zone: str
    #: Instances the pool holds at most (None: unlimited).
    capacity: int | None = None
    used: int = 0
    launches: int = 0
    errors: int = 0
    reclaimed: int = 0

    @property
    def key(self) -> PoolKey:
        return (self.capacity_type, self.instance_type, self.zone)

    @property
    def free(self) -> float:
        """Instances that can still launch here (``inf`` when unlimited)."""
        if self.capacity is None:
            return float("inf")
        return float(max(0, self.capacity - self.used))

    def to_dict(self, band: int | None) -> dict[str, Any]:
        free = None if self.capacity is None else int(self.free)
        data: dict[str, Any] = {
            "CapacityType": self.capacity_type,
            "InstanceType": self.instance_type,
            "AvailabilityZone": self.zone,
            "Capacity": self.capacity,
            "Used": self.used,
            "Free": free,
            "Launches": self.launches,
            "Errors": self.errors,
            "Reclaimed": self.reclaimed,
        }
        if band is not None:
            data["InterruptionBand"] = BANDS[band]
        return data


@dataclass(frozen=True)
class _Rule:
    capacity_type: str
    instance_type: str
    zone: str
    value: int | None

    def matches(self, key: PoolKey) -> bool:
        ct, itype, zone = key
        return (
            fnmatch.fnmatchcase(ct, self.capacity_type)
            and fnmatch.fnmatchcase(itype, self.instance_type)
            and fnmatch.fnmatchcase(zone, self.zone)
        )


@dataclass
class MarketState:
    """Everything the market knows for one account and region."""

    pools: dict[PoolKey, Pool] = field(default_factory=dict)
    capacity_rules: list[_Rule] = field(default_factory=list)
    band_rules: list[_Rule] = field(default_factory=list)
    #: Multiplies the market's default delays (2-minute warning): 0.01 turns 120 s into 1.2 s.
    time_scale: float = 1.0
    fleet_calls: int = 0
    #: One record per CreateFleet ``instant`` call (``fleet.py``): when it came and was answered,
    #: what it launched and which errors it carried, for latency figures (``fleet_call_log``).
    call_log: list[dict[str, Any]] = field(default_factory=list)
    #: Seconds the next CreateFleet ``instant`` answers are held after launching, one per call
    #: (``hold_answers``).
    answer_holds: list[float] = field(default_factory=list)
    #: ClientToken -> (request fingerprint, answer) for CreateFleet idempotence.
    tokens: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    #: Instance id -> pool key, for instances launched by CreateFleet and not yet terminated.
    instances: dict[str, PoolKey] = field(default_factory=dict)
    #: Timed reclaim steps and their records (owned by ``reclaims.py``).
    schedule: list[Any] = field(default_factory=list)
    reclaims: list[Any] = field(default_factory=list)


def _backend(account_id: str, region: str) -> Any:
    return ec2_backends[account_id][region]


def state(account_id: str, region: str) -> MarketState:
    """The market of one account and region (created on first use; the caller holds ``lock``)."""
    backend = _backend(account_id, region)
    market: MarketState | None = backend.__dict__.get(_STORE)
    if market is None:
        market = MarketState()
        backend.__dict__[_STORE] = market
    return market


def state_of_backend(backend: Any) -> MarketState | None:
    """The market stored on ``backend``, if one was ever created."""
    market: MarketState | None = backend.__dict__.get(_STORE)
    return market


def pool(market: MarketState, capacity_type: str, instance_type: str, zone: str) -> Pool:
    """The pool of (capacity type, type, zone), created with the capacity its rules give."""
    key = (capacity_type, instance_type, zone)
    found = market.pools.get(key)
    if found is None:
        found = Pool(capacity_type, instance_type, zone)
        for rule in market.capacity_rules:
            if rule.matches(key):
                found.capacity = rule.value
        market.pools[key] = found
    return found


def free_of(market: MarketState, key: PoolKey) -> float:
    """What ``pool(...).free`` would answer, without creating the pool (it stays out of the stats)."""
    found = market.pools.get(key)
    if found is not None:
        return found.free
    capacity: int | None = None
    for rule in market.capacity_rules:
        if rule.matches(key):
            capacity = rule.value
    return float("inf") if capacity is None else float(capacity)


def add_capacity_rule(
    market: MarketState, capacity: int | None, capacity_type: str, instance_type: str, zone: str
) -> list[Pool]:
    """Record a capacity rule and apply it to the existing pools it matches (which it returns)."""
    if capacity is not None and capacity < 0:
        raise ValueError(f"capacity must be >= 0 or None, not {capacity}")
    if capacity_type not in (SPOT, ON_DEMAND, "*"):
        raise ValueError(f"capacity type must be spot, on-demand or '*', not {capacity_type!r}")
    rule = _Rule(capacity_type, instance_type, zone, capacity)
    market.capacity_rules.append(rule)
    if "*" not in capacity_type + instance_type + zone and not any(c in instance_type + zone for c in "?["):
        # A rule naming one pool creates it, so it is listed (stats) before anything launches.
        pool(market, capacity_type, instance_type, zone)
    matched = [p for p in market.pools.values() if rule.matches(p.key)]
    for p in matched:
        p.capacity = capacity
    return matched


def set_capacity(
    account_id: str,
    region: str,
    capacity: int | None,
    *,
    capacity_type: str = "*",
    instance_type: str = "*",
    zone: str = "*",
) -> list[dict[str, Any]]:
    """Let the pools matching the patterns hold ``capacity`` instances (None: unlimited).

    Applies to the pools that exist and to those seen later; answers the existing pools changed.
    """
    with lock:
        market = state(account_id, region)
        changed = add_capacity_rule(market, capacity, capacity_type, instance_type, zone)
        return [p.to_dict(band_of(market, p)) for p in changed]


def _default_band(instance_type: str, zone: str) -> int:
    digest = hashlib.sha256(f"{instance_type}/{zone}/interruption".encode()).digest()
    unit = int.from_bytes(digest[:4], "big") / 0xFFFFFFFF
    total = 0.0
    for band, weight in enumerate(_BAND_WEIGHTS):
        total += weight
        if unit <= total:
            return band
    return len(BANDS) - 1


def band_index(market: MarketState, instance_type: str, zone: str) -> int:
    """The interruption band of the spot pool (type, zone): the last matching rule, else the default."""
    band = _default_band(instance_type, zone)
    for rule in market.band_rules:
        if rule.matches((SPOT, instance_type, zone)):
            band = int(rule.value or 0)
    return band


def band_of(market: MarketState, p: Pool) -> int | None:
    return band_index(market, p.instance_type, p.zone) if p.capacity_type == SPOT else None


def _parse_band(band: int | str) -> int:
    if isinstance(band, int):
        if not 0 <= band < len(BANDS):
            raise ValueError(f"band index must be 0-{len(BANDS) - 1}, not {band}")
        return band
    if band not in BANDS:
        raise ValueError(f"band must be one of {', '.join(BANDS)}, not {band!r}")
    return BANDS.index(band)


def set_interruption_band(
    account_id: str, region: str, band: int | str, *, instance_type: str = "*", zone: str = "*"
) -> None:
    """Put the spot pools matching the patterns in ``band`` (an index or a label such as ``"<5%"``)."""
    index = _parse_band(band)
    with lock:
        state(account_id, region).band_rules.append(_Rule(SPOT, instance_type, zone, index))


def interruption_rates(
    account_id: str, region: str, *, instance_types: list[str] | None = None, zones: list[str] | None = None
) -> list[dict[str, Any]]:
    """The band of every spot pool known to the market, or of each (type, zone) asked for."""
    with lock:
        market = state(account_id, region)
        if instance_types and zones:
            keys = sorted({(t, z) for t in instance_types for z in zones})
        else:
            keys = sorted(
                (p.instance_type, p.zone)
                for p in market.pools.values()
                if p.capacity_type == SPOT
                and (not instance_types or p.instance_type in instance_types)
                and (not zones or p.zone in zones)
            )
        out = []
        for itype, zone in keys:
            index = band_index(market, itype, zone)
            out.append(
                {"InstanceType": itype, "AvailabilityZone": zone, "Band": BANDS[index], "BandIndex": index}
            )
        return out


def pools(account_id: str, region: str) -> dict[str, Any]:
    """Stats of every pool the market knows (free/used, launches, errors, reclaims) and call counts."""
    with lock:
        market = state(account_id, region)
        listed = sorted(market.pools.values(), key=lambda p: p.key)
        return {
            "Pools": [p.to_dict(band_of(market, p)) for p in listed],
            "FleetCalls": market.fleet_calls,
            "TimeScale": market.time_scale,
        }


def fleet_call_log(account_id: str, region: str) -> list[dict[str, Any]]:
    """Every CreateFleet ``instant`` call so far, oldest first: ``{"Start", "End"}`` (epoch seconds),
    ``"Launched": [{CapacityType, InstanceType, AvailabilityZone, Count}]``, ``"Errors":
    [{CapacityType, InstanceType, AvailabilityZone, ErrorCode}]``, and ``"Request"``: what was asked
    (``fleet._request_facts``, with ``"Target": {"spot": n, "on-demand": m}`` and ``"Pools":
    [{InstanceType, AvailabilityZone, Priority}]``, one per override, ``Priority`` null when unset).
    Idempotent replays are not calls."""
    with lock:
        return [dict(c) for c in state(account_id, region).call_log]


def hold_answers(account_id: str, region: str, seconds: float, *, times: int = 1) -> None:
    """Hold the answers of the next ``times`` CreateFleet ``instant`` calls ``seconds`` each: the
    instances launch (and the call is logged) at once, the caller hears of them only later.
    ``times=0`` drops the holds not used yet."""
    if seconds < 0 or times < 0:
        raise ValueError(f"seconds and times must be >= 0, not {seconds}, {times}")
    with lock:
        holds = state(account_id, region).answer_holds
        if times == 0:
            holds.clear()
        holds.extend([float(seconds)] * times)


def set_time_scale(account_id: str, region: str, scale: float) -> None:
    """Multiply the market's default delays by ``scale`` (> 0; 1 = AWS's timings)."""
    if scale <= 0:
        raise ValueError(f"time scale must be > 0, not {scale}")
    with lock:
        state(account_id, region).time_scale = float(scale)


def release(backend: Any, instance_id: str) -> None:
    """An instance launched by CreateFleet left the running states: give its slot back."""
    with lock:
        market = state_of_backend(backend)
        if market is None:
            return
        key = market.instances.pop(instance_id, None)
        if key is not None and key in market.pools:
            held = market.pools[key]
            held.used = max(0, held.used - 1)
