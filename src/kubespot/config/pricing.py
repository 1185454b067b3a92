"""How the capacity catalog prices instances: refresh interval, the Pricing API, account discounts.

Read by ``kubespot.aws.pricing`` and ``kubespot.aws.catalog`` (issue 13, decision 2 of
docs/designs/provisioning.md). The discounts are kubespot's answer to what Karpenter's users ask for
(aws/karpenter-provider-aws #2259): Savings Plans and Reserved Instances make some on-demand
capacity cheaper for this account, so "cheapest" must be computed with those prices.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import setting
from .loader import InvalidSetting


@dataclass(frozen=True, slots=True, kw_only=True)
class PricingSettings:
    """Prices of the instance type catalog: where they come from, how often, and this account's discounts."""

    refresh_interval: float = setting(
        43200.0,
        doc=(
            "How often on-demand and spot prices, instance types and offerings are read again. "
            "12 hours is what Karpenter does; prices move slowly (spot at most a few times a day) and "
            "a failed refresh keeps the last prices."
        ),
        env="KUBESPOT_PRICING_REFRESH_INTERVAL",
        unit="seconds",
    )
    use_pricing_api: bool = setting(
        True,
        doc=(
            "Read on-demand prices from the AWS Pricing API (GetProducts). Off: the price table "
            "shipped with kubespot only, e.g. in an isolated VPC without a Pricing endpoint, as "
            "Karpenter does there."
        ),
        env="KUBESPOT_PRICING_USE_PRICING_API",
    )
    ondemand_discounts: tuple[tuple[str, str], ...] = setting(
        (),
        doc=(
            "This account's discount off on-demand prices (Savings Plans, Reserved Instances), as a "
            "fraction per instance family or per instance type: `m5=0.28,c6i.2xlarge=0.4`. A type's "
            "own entry wins over its family's. Applied before any comparison, so spot is not chosen "
            "where a discounted on-demand offering is cheaper. Empty: list prices."
        ),
        env="KUBESPOT_PRICING_ONDEMAND_DISCOUNTS",
    )

    def __post_init__(self) -> None:
        if not self.refresh_interval > 0:
            raise InvalidSetting("refresh_interval", "must be positive")
        for key, value in self.ondemand_discounts:
            try:
                fraction = float(value)
            except ValueError:
                raise InvalidSetting("ondemand_discounts", f"{key}: {value!r} is not a number") from None
            if not 0 <= fraction < 1:
                raise InvalidSetting("ondemand_discounts", f"{key}: {value} must be in [0, 1)")

    def discount_for(self, instance_type: str) -> float:
        """The fraction off on-demand for ``instance_type``: its own entry, else its family's, else 0."""
        discounts = dict(self.ondemand_discounts)
        if instance_type in discounts:
            return float(discounts[instance_type])
        return float(discounts.get(instance_type.split(".", 1)[0], 0.0))
