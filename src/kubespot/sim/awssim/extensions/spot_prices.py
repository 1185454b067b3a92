"""DescribeSpotPriceHistory: a documented synthetic spot market instead of moto's constant placeholder.

Stock moto answers ``SpotPrice: "0.00001"`` for every instance type and zone, dated 2006, and
ignores ``StartTime``/``EndTime``, ``ProductDescriptions`` and paging. A provisioner that ranks
offerings by price, or drops spot offerings dearer than on-demand, cannot be exercised against that.

The model (deterministic given the time, so every run and every process sees the same market):

- Each (instance type, zone) has a stable *base* price between 22 % and 40 % of the type's
  on-demand price (hash-derived, so zones differ as they do on AWS).
- The price changes only at step boundaries (``STEP_SECONDS``, 6 h, aligned on the Unix epoch): a
  record per step, timestamped at the step's start. At step ``k`` the price is the base times
  ``1 + 0.10 * sin(2 pi * k * STEP / PERIOD + phase)``, with ``PERIOD_SECONDS`` = 14 days and a
  hash-derived phase: a slow drift of at most ~1.2 % per step, ±10 % around the base. Prices thus
  stay between 19.8 % and 44 % of on-demand: discounts of 56-80 %, the range AWS advertises and
  the provisioning design (decision 2) names.

Query semantics follow the EC2 API reference for DescribeSpotPriceHistory: the records whose
timestamps fall within ``[StartTime, EndTime]`` plus the last change before ``StartTime`` (the
price in effect then), oldest first; ``EndTime`` defaults to now and is capped at now (no future
prices); a ``StartTime`` in the future means now (a client clock ahead of ours still gets today's
price). Without ``StartTime`` only the price in effect at ``EndTime`` is listed (AWS would list up to
90 days; nothing kubespot runs asks for that). ``InstanceTypes``, ``AvailabilityZone``,
``ProductDescriptions`` and the ``instance-type``, ``availability-zone`` and
``product-description`` filters select records; ``MaxResults`` (default 1000) and ``NextToken``
page them. Every record's product description is ``Linux/UNIX (Amazon VPC)``.

The on-demand table is ``kubespot.sim.awssim.price_data`` (generated from
``shared/data/aws-ondemand-prices.json``) unless ``configure()`` names another one; an empty table
(``configure({})``) restores moto's stock answer. A type missing from the table has no spot
history at all (not moto's placeholder ``0.00001``, which a provisioner would take for the cheapest
capacity on offer): without an on-demand price the model has nothing to derive a spot price from,
and a client then has no spot offering for it, as for any type without a price.

``pin_prices({(type, zone): price})`` (a context manager) holds chosen pools at a constant price
for its duration, in DescribeSpotPriceHistory and in the spot market's CreateFleet alike: tests
whose client has a catalog of its own use it so that EC2 and the client agree on prices, as they
do on AWS.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from moto.core.responses import ActionResult
from moto.ec2.exceptions import InvalidNextToken
from moto.ec2.responses import spot_instances

from kubespot.sim.awssim.extensions import xml_writer
from kubespot.sim.awssim.price_data import ONDEMAND_PRICES

__all__ = [
    "PERIOD_SECONDS",
    "PRODUCT_DESCRIPTION",
    "STEP_SECONDS",
    "configure",
    "install",
    "pin_prices",
    "price_at",
    "price_for",
    "set_clock",
]

_MARK = "_kubespot_spot_prices"
#: Base spot price as a share of on-demand: [_BASE_MIN, _BASE_MIN + _BASE_SPAN].
_BASE_MIN = 0.22
_BASE_SPAN = 0.18
#: Relative amplitude of the slow drift around the base.
_DRIFT = 0.10
#: Prices change at most once per step.
STEP_SECONDS = 6 * 3600
#: One full cycle of the drift.
PERIOD_SECONDS = 14 * 24 * 3600
PRODUCT_DESCRIPTION = "Linux/UNIX (Amazon VPC)"
_DEFAULT_PAGE = 1000

_lock = threading.Lock()
_ondemand: dict[str, float] = dict(ONDEMAND_PRICES.get("us-east-1", {}))
_clock: Callable[[], float] = time.time
#: (type, zone) -> a constant price that replaces the model's.
_pinned: dict[tuple[str, str], float] = {}


def configure(prices: Mapping[str, float] | Path | str | None, *, region: str = "us-east-1") -> None:
    """Set the on-demand table (USD/hour by instance type) the spot prices derive from.

    A path is read as JSON: either ``{"regions": {region: {type: price}}}`` (the shape of
    ``aws-ondemand-prices.json``) or a flat ``{type: price}``. ``None``: the packaged table for
    ``region``. An empty mapping: moto's stock placeholder answer.
    """
    table: Mapping[str, Any]
    if prices is None:
        table = ONDEMAND_PRICES.get(region, {})
    elif isinstance(prices, (str, Path)):
        data = json.loads(Path(prices).read_text())
        table = data["regions"][region] if "regions" in data else data
    else:
        table = prices
    with _lock:
        _ondemand.clear()
        _ondemand.update({str(k): float(v) for k, v in table.items()})


def ondemand_price(instance_type: str) -> float | None:
    """The on-demand price the model derives from (None: the type is not in the table)."""
    return _ondemand.get(instance_type)


def set_clock(clock: Callable[[], float] | None) -> None:
    """Use ``clock`` (Unix seconds) for "now" instead of ``time.time`` (None restores it)."""
    global _clock
    _clock = clock or time.time


@functools.lru_cache(maxsize=65536)
def _unit(instance_type: str, zone: str, salt: str) -> float:
    # Pure; kept because every page of the history asks it twice per record (a hash each).
    digest = hashlib.sha256(f"{instance_type}/{zone}/{salt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 0xFFFFFFFF


@contextlib.contextmanager
def pin_prices(prices: Mapping[tuple[str, str], float]) -> Iterator[None]:
    """Hold each (type, zone) at its price while the block runs (the model's price after)."""
    with _lock:
        saved = dict(_pinned)
        _pinned.update({key: float(price) for key, price in prices.items()})
    try:
        yield
    finally:
        with _lock:
            _pinned.clear()
            _pinned.update(saved)


def _step_price(instance_type: str, zone: str, step: int) -> float | None:
    pinned = _pinned.get((instance_type, zone))
    if pinned is not None:
        return pinned
    ondemand = _ondemand.get(instance_type)
    if ondemand is None:
        return None
    base = _BASE_MIN + _BASE_SPAN * _unit(instance_type, zone, "base")
    phase = 2 * math.pi * _unit(instance_type, zone, "phase")
    drift = 1 + _DRIFT * math.sin(2 * math.pi * step * STEP_SECONDS / PERIOD_SECONDS + phase)
    return round(ondemand * base * drift, 6)


def price_at(instance_type: str, zone: str, when: float) -> float | None:
    """The spot price in effect at Unix time ``when`` (None: no on-demand price to derive it from)."""
    return _step_price(instance_type, zone, math.floor(when / STEP_SECONDS))


def price_for(instance_type: str, zone: str) -> float | None:
    """The spot price in effect now for ``instance_type`` in ``zone``, if the model has one."""
    return price_at(instance_type, zone, _clock())


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _parse_time(value: datetime | str | None) -> float | None:
    # moto's parameter parser hands timestamps over as datetimes (naive means UTC); be lenient.
    if not value:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def _offset(token: str | None) -> int:
    if not token:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(token.encode()))["o"])
    except (ValueError, KeyError, TypeError):
        return -1


def _make_describe(original: Any) -> Any:
    def describe_spot_price_history(self: Any) -> ActionResult:
        if not _ondemand:
            stock: ActionResult = original(self)
            return stock
        filters: dict[str, list[str]] = self._filters_from_querystring() or {}
        descriptions = list(self._get_param("ProductDescriptions", [])) + filters.pop(
            "product-description", []
        )
        if descriptions and PRODUCT_DESCRIPTION not in descriptions:
            return ActionResult({"SpotPriceHistory": []})
        zone = self._get_param("AvailabilityZone")
        if zone:
            filters.setdefault("availability-zone", []).append(zone)
        offerings = self.ec2_backend.describe_spot_price_history(
            self._get_param("InstanceTypes", []), filters
        )
        now = _clock()
        end = min(_parse_time(self._get_param("EndTime")) or now, now)
        start = _parse_time(self._get_param("StartTime"))
        start = end if start is None else min(start, end)
        first, last = math.floor(start / STEP_SECONDS), math.floor(end / STEP_SECONDS)
        records = []
        for step in range(first, last + 1):
            stamp = _timestamp(step * STEP_SECONDS)
            for offering in offerings:
                name, location = offering["InstanceType"], offering["Location"]
                price = _step_price(name, location, step)
                if price is None:
                    continue
                records.append(
                    {
                        "InstanceType": name,
                        "ProductDescription": PRODUCT_DESCRIPTION,
                        "SpotPrice": f"{price:.6f}",
                        "AvailabilityZone": location,
                        "Timestamp": stamp,
                    }
                )
        offset = _offset(self._get_param("NextToken"))
        if offset < 0:
            raise InvalidNextToken(self._get_param("NextToken"))
        size = int(self._get_param("MaxResults") or _DEFAULT_PAGE)
        page = records[offset : offset + size]
        result: dict[str, Any] = {"SpotPriceHistory": page}
        if offset + size < len(records):
            result["NextToken"] = _token(offset + size)
        # moto's serialiser took ~0.7 s per page of 1 000 records; the writer's bytes are the same.
        writer = xml_writer.entry_writer("DescribeSpotPriceHistory", "SpotPriceHistory")
        if writer is None or not page:
            return ActionResult(result)
        fragments: list[str] = []
        for record in page:
            writer(record, fragments)
        marker, marker_xml = xml_writer.marker_fragment(writer)
        result["SpotPriceHistory"] = [marker]
        return xml_writer.Spliced(result, marker_xml, fragments)

    return describe_spot_price_history


def install() -> None:
    """Patch moto's EC2 spot-instances response class (once)."""
    cls: Any = spot_instances.SpotInstances  # Any: its method is replaced below
    if getattr(cls, _MARK, False):
        return
    cls.describe_spot_price_history = _make_describe(cls.describe_spot_price_history)
    setattr(cls, _MARK, True)
