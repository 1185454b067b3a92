"""Instance prices for the capacity catalog: on-demand from the Pricing API, spot from EC2, account discounts.

As Karpenter's AWS pricing provider (``pkg/providers/pricing/pricing.go``), with kubespot's
differences noted:

- On-demand: ``GetProducts`` for ``AmazonEC2`` with Linux, no pre-installed software,
  ``capacitystatus=Used``, ``marketoption=OnDemand`` and the region's ``regionCode``, asked twice
  (shared-tenancy ``Compute Instance`` and dedicated ``Compute Instance (bare metal)``), 100 per
  page. Until that succeeds (or when ``use_pricing_api`` is off, or the Pricing API fails) the
  table shipped in ``ondemand_prices`` (the region's, else us-east-1's) is used; a failed refresh
  keeps the last good prices.
- Spot: ``DescribeSpotPriceHistory`` with ``StartTime`` now (the price in effect per type and zone),
  Linux product descriptions, paged; the newest record per (type, zone) wins and prices not in the
  answer are kept. Unlike Karpenter, no spot price is assumed before the first answer: a type and
  zone without one has no spot offering (docs/designs/provisioning.md, decision 2).
- Discounts (``PricingSettings.ondemand_discounts``, beyond Karpenter): the on-demand price a caller
  sees is the list price less this account's Savings Plan / Reserved Instance discount for the
  type or its family. Spot prices are not discounted (those commitments do not cover spot).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from kubespot.config.pricing import PricingSettings
from kubespot.model import Clock, SystemClock

from .ondemand_prices import ONDEMAND_PRICES
from .session import AwsClients, AwsError

__all__ = ["LINUX_SPOT_PRODUCTS", "Prices", "ondemand_query", "parse_price_list"]

#: The product descriptions of Linux spot prices (VPC and classic spellings).
LINUX_SPOT_PRODUCTS: Final = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")
_PRICING_PAGE: Final = 100  # GetProducts' maximum
_SPOT_PAGE: Final = 1000  # DescribeSpotPriceHistory's maximum


def ondemand_query(region: str) -> list[list[dict[str, str]]]:
    """The GetProducts filter lists that together cover ``region``'s Linux on-demand prices."""
    common = {
        "regionCode": region,
        "operatingSystem": "Linux",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "marketoption": "OnDemand",
    }
    out = []
    for family, tenancy in (("Compute Instance", "Shared"), ("Compute Instance (bare metal)", "Dedicated")):
        terms = {**common, "productFamily": family, "tenancy": tenancy}
        out.append([{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in terms.items()])
    return out


def parse_price_list(items: Iterable[str]) -> dict[str, float]:
    """Instance type → USD per hour from ``PriceList`` JSON strings (entries without a positive USD
    price, or that do not parse, are skipped, as Karpenter's ``onDemandPage`` does)."""
    out: dict[str, float] = {}
    for text in items:
        try:
            item: Mapping[str, Any] = json.loads(text)
            name = item["product"]["attributes"]["instanceType"]
            terms = item["terms"]["OnDemand"].values()
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        for term in terms:
            for dimension in (term.get("priceDimensions") or {}).values():
                try:
                    price = float(dimension["pricePerUnit"]["USD"])
                except (KeyError, TypeError, ValueError):
                    continue
                if price > 0:
                    out[str(name)] = price
    return out


class Prices:
    """The latest known prices of one region, refreshed on request; reads never call AWS."""

    def __init__(
        self,
        clients: AwsClients,
        region: str,
        settings: PricingSettings | None = None,
        *,
        clock: Clock | None = None,
        static: Mapping[str, Mapping[str, float]] = ONDEMAND_PRICES,
    ) -> None:
        self._clients = clients
        self.region = region
        self.settings = settings or PricingSettings()
        self._clock = clock or SystemClock()
        table = static.get(region) or static.get("us-east-1") or {}
        self._ondemand: dict[str, float] = dict(table)
        #: ``static`` (the shipped table) until GetProducts has answered, then ``pricing-api``.
        self.ondemand_source = "static"
        self._spot: dict[str, dict[str, tuple[datetime, float]]] = {}
        #: The last refresh error per kind (``ondemand``, ``spot``), cleared by a success.
        self.errors: dict[str, AwsError] = {}
        #: Moves whenever a price may have changed: what is built from the prices is kept until then.
        self.generation = 0
        #: The discount per type of ``_discounts_of`` (the catalog asks for every type per build).
        self._discounts: dict[str, float] = {}
        self._discounts_of: PricingSettings | None = None

    # -- reads ------------------------------------------------------------------------------------

    def list_price(self, instance_type: str) -> float | None:
        """The on-demand list price (USD/hour), before this account's discount."""
        return self._ondemand.get(instance_type)

    def ondemand_price(self, instance_type: str) -> float | None:
        """The on-demand price this account pays: the list price less its discount."""
        price = self._ondemand.get(instance_type)
        if price is None:
            return None
        return price * (1 - self._discount(instance_type))

    def _discount(self, instance_type: str) -> float:
        if self._discounts_of is not self.settings:
            self._discounts, self._discounts_of = {}, self.settings
        found = self._discounts.get(instance_type)
        if found is None:
            found = self._discounts[instance_type] = self.settings.discount_for(instance_type)
        return found

    def spot_price(self, instance_type: str, zone: str) -> float | None:
        """The latest spot price of ``instance_type`` in ``zone`` (None: none known, no offering)."""
        entry = self._spot.get(instance_type, {}).get(zone)
        return entry[1] if entry else None

    def spot_types(self) -> int:
        return len(self._spot)

    # -- refreshes --------------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Both refreshes; each keeps its old prices when it fails (see ``errors``)."""
        if self.settings.use_pricing_api:
            await self.refresh_ondemand()
        await self.refresh_spot()

    async def refresh_ondemand(self) -> bool:
        """Read on-demand prices from the Pricing API; False (old prices kept) when it fails."""
        prices: dict[str, float] = {}
        try:
            for filters in ondemand_query(self.region):
                token: str | None = None
                while True:
                    request: dict[str, Any] = {
                        "ServiceCode": "AmazonEC2",
                        "Filters": filters,
                        "MaxResults": _PRICING_PAGE,
                    }
                    if token:
                        request["NextToken"] = token
                    page = await self._clients.call("pricing", "GetProducts", **request)
                    prices.update(parse_price_list(page.get("PriceList") or []))
                    token = page.get("NextToken")
                    if not token:
                        break
        except AwsError as exc:
            self.errors["ondemand"] = exc
            return False
        if not prices:
            self.errors["ondemand"] = AwsError("NoPrices", "GetProducts returned no prices")
            return False
        self._ondemand = prices
        self.ondemand_source = "pricing-api"
        self.generation += 1
        self.errors.pop("ondemand", None)
        return True

    async def refresh_spot(self) -> bool:
        """Read the spot prices in effect now; False (old prices kept) when the call fails."""
        latest: dict[str, dict[str, tuple[datetime, float]]] = {}
        request: dict[str, Any] = {
            "StartTime": self._clock.now(),
            "ProductDescriptions": list(LINUX_SPOT_PRODUCTS),
            "MaxResults": _SPOT_PAGE,
        }
        try:
            while True:
                page = await self._clients.call("ec2", "DescribeSpotPriceHistory", **request)
                for record in page.get("SpotPriceHistory") or []:
                    _keep_newest(latest, record)
                token = page.get("NextToken")
                if not token:
                    break
                request["NextToken"] = token
        except AwsError as exc:
            self.errors["spot"] = exc
            return False
        for name, zones in latest.items():
            self._spot.setdefault(name, {}).update(zones)
        self.generation += 1
        self.errors.pop("spot", None)
        return True


def _keep_newest(latest: dict[str, dict[str, tuple[datetime, float]]], record: Mapping[str, Any]) -> None:
    try:
        name, zone = str(record["InstanceType"]), str(record["AvailabilityZone"])
        price, stamp = float(record["SpotPrice"]), record["Timestamp"]
    except (KeyError, TypeError, ValueError):
        return  # a record we cannot read is skipped, as Karpenter's spotPage does
    if not isinstance(stamp, datetime) or price <= 0:
        return
    zones = latest.setdefault(name, {})
    if zone not in zones or zones[zone][0] < stamp:
        zones[zone] = (stamp, price)
