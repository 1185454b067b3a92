"""The instance type catalog and its prices kept fresh on the elected replica.

``aws.catalog.Catalog.refresh`` reads types, zonal offerings, on-demand and spot prices; a part
that fails keeps what was known and leaves its error in ``errors``. This loop refreshes every
``pricing.refresh_interval`` (12 h: Karpenter refreshes its instance types and its on-demand and
spot prices every 12 hours, and prices move slowly) and, when a part failed, retries sooner with
``model.backoff.full_jitter`` (``provisioning.retry_base`` doubling to ``retry_cap``), logging the
failed calls with their error. ``last_success`` (the last refresh without errors) and
``first_attempt`` (when this replica began refreshing; a retry does not move it, and it is cleared
when the loop stops, the lease lost) are what /healthz checks.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import datetime

from kubespot.aws.catalog import Catalog
from kubespot.config.provisioning import ProvisioningSettings
from kubespot.model import Clock
from kubespot.model.backoff import full_jitter

__all__ = ["CatalogRefresh"]

log = logging.getLogger("kubespot.controller.provisioning")


class CatalogRefresh:
    """Runs ``catalog.refresh()`` on schedule, sooner after a failure."""

    def __init__(
        self,
        catalog: Catalog,
        settings: ProvisioningSettings,
        *,
        clock: Clock,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.catalog = catalog
        self._settings = settings
        self._clock = clock
        self._rng = rng
        self.last_success: datetime | None = None
        self.last_attempt: datetime | None = None
        #: The first attempt since the loop (re)started; None while it does not run here.
        self.first_attempt: datetime | None = None
        self.failures = 0

    def errors(self) -> dict[str, str]:
        """The calls whose last attempt failed, by part (types, offerings, on-demand, spot)."""
        found = {**self.catalog.errors, **self.catalog.prices.errors}
        return {part: str(err) for part, err in found.items()}

    async def refresh_once(self) -> bool:
        """One refresh; True when every part answered."""
        self.last_attempt = self._clock.now()
        if self.first_attempt is None:
            self.first_attempt = self.last_attempt
        await self.catalog.refresh()
        errors = self.errors()
        if errors:
            self.failures += 1
            for part, err in sorted(errors.items()):
                log.warning(
                    "catalog refresh (attempt %d): %s failed, keeping what was known: %s",
                    self.failures,
                    part,
                    err,
                )
            return False
        self.failures = 0
        self.last_success = self._clock.now()
        log.info(
            "catalog refreshed: %d instance types, %d zones, on-demand prices from %s",
            len(self.catalog.infos()),
            len(self.catalog.zones()),
            self.catalog.prices.ondemand_source,
        )
        return True

    async def run(self) -> None:
        try:
            while True:
                if await self.refresh_once():
                    wait = self.catalog.settings.refresh_interval
                else:
                    s = self._settings
                    wait = max(
                        s.retry_base / 10,
                        full_jitter(self.failures - 1, base=s.retry_base, cap=s.retry_cap, rng=self._rng),
                    )
                await self._clock.sleep(wait)
        finally:
            # Not refreshing here any more (the lease lost): /healthz holds, as on any standby.
            self.first_attempt = self.last_attempt = None
