"""DescribeSpotPriceHistory: plausible prices instead of moto's constant placeholder.

Stock moto answers ``SpotPrice: "0.00001"`` for every instance type and zone, with a timestamp
from 2006. A provisioner that ranks offerings by price, or drops spot offerings dearer than
on-demand, cannot be exercised against that. Once ``configure()`` has been given on-demand prices
(``aws-ondemand-prices.json`` or a mapping), each (instance type, zone) gets a stable spot price
between 25 % and 45 % of on-demand, derived from a hash so every run sees the same table, and
the timestamp is "now". Without a table, or for a type missing from it, moto's answer stays.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from moto.core.responses import ActionResult
from moto.core.utils import utcnow
from moto.ec2.responses import spot_instances

__all__ = ["configure", "install", "price_for"]

_MARK = "_kubespot_spot_prices"
_DISCOUNT_MIN = 0.25
_DISCOUNT_SPAN = 0.20

_lock = threading.Lock()
_ondemand: dict[str, float] = {}


def configure(prices: Mapping[str, float] | Path | str, *, region: str = "us-east-1") -> None:
    """Load the on-demand price table (USD/hour by instance type) the spot prices derive from.

    A path is read as JSON: either ``{"regions": {region: {type: price}}}`` (the shape of
    ``aws-ondemand-prices.json``) or a flat ``{type: price}``.
    """
    table: Mapping[str, Any]
    if isinstance(prices, (str, Path)):
        data = json.loads(Path(prices).read_text())
        table = data["regions"][region] if "regions" in data else data
    else:
        table = prices
    with _lock:
        _ondemand.clear()
        _ondemand.update({str(k): float(v) for k, v in table.items()})


def price_for(instance_type: str, zone: str) -> float | None:
    """The spot price the extension reports for ``instance_type`` in ``zone``, if it has one."""
    ondemand = _ondemand.get(instance_type)
    if ondemand is None:
        return None
    digest = hashlib.sha256(f"{instance_type}/{zone}".encode()).digest()
    fraction = _DISCOUNT_MIN + _DISCOUNT_SPAN * (int.from_bytes(digest[:4], "big") / 0xFFFFFFFF)
    return round(ondemand * fraction, 6)


def _make_describe(original: Any) -> Any:
    def describe_spot_price_history(self: Any) -> ActionResult:
        if not _ondemand:
            stock: ActionResult = original(self)
            return stock
        instance_types = self._get_param("InstanceTypes", [])
        offerings = self.ec2_backend.describe_spot_price_history(
            instance_types, self._filters_from_querystring()
        )
        timestamp = utcnow().strftime("%Y-%m-%dT%H:%M:%S.000Z")
        history = []
        for offering in offerings:
            price = price_for(offering["InstanceType"], offering["Location"])
            history.append(
                {
                    "InstanceType": offering["InstanceType"],
                    "ProductDescription": "Linux/UNIX (Amazon VPC)",
                    "SpotPrice": "0.00001" if price is None else f"{price:.6f}",
                    "AvailabilityZone": offering["Location"],
                    "Timestamp": timestamp,
                }
            )
        return ActionResult({"SpotPriceHistory": history})

    return describe_spot_price_history


def install() -> None:
    """Patch moto's EC2 spot-instances response class (once)."""
    cls: Any = spot_instances.SpotInstances  # Any: its method is replaced below
    if getattr(cls, _MARK, False):
        return
    cls.describe_spot_price_history = _make_describe(cls.describe_spot_price_history)
    setattr(cls, _MARK, True)
