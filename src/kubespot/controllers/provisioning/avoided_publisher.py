"""The elected controller's status ConfigMap: the offerings its launch path avoids now (the
unavailable-offerings marks with what marked them and when they end, the riskiest spot pools with
their scores), so ``kubespot plan --why`` can explain them (format: ``cloud.avoided_status``).

As Cluster Autoscaler's ``cluster-autoscaler-status`` (written by the leader into its own
namespace, created when absent, updated otherwise): a task of its own on the leader, reading the
in-memory cache and risk store only, so the provisioner never waits on it. Every ``interval``
seconds it compares what it would write with what it last wrote and writes on change, and at least
every ``heartbeat`` seconds (the age tells a reader whether anyone keeps it); what it compares
keeps the last written end times and scores unless they moved meaningfully (``entries``), so a
mark's wobbling seconds left or a decaying score do not rewrite it every tick. A failed write is
logged and tried again on the next tick; a 409 (someone else wrote) reads the ConfigMap again.
Bounded as the ``kubespot_pool_risk`` metric is: at most ``POOL_RISK_SERIES`` risky pools, and at
most ``MAX_MARKS`` marks (the longest left first).
"""

from __future__ import annotations

import logging
from typing import Any

from kubespot.cloud import UnavailableOfferings
from kubespot.cloud.avoided import avoided_offerings
from kubespot.cloud.avoided_status import HEARTBEAT_SECONDS, configmap, entries
from kubespot.cloud.pool_risk import PoolRisk
from kubespot.kube import KubeError
from kubespot.kube.custom import CustomObjects
from kubespot.model import Clock
from kubespot.observability.metrics import POOL_RISK_SERIES

__all__ = ["MAX_MARKS", "AvoidedPublisher"]

log = logging.getLogger("kubespot.controller.provisioning")

#: Marks written at most (a ConfigMap holds 1 MiB; a storm marks a few hundred pools at most).
MAX_MARKS = 500


class AvoidedPublisher:
    """Keeps the status ConfigMap ``name`` in ``configmaps`` (one namespace's) up to date."""

    def __init__(
        self,
        configmaps: CustomObjects,
        name: str,
        namespace: str,
        *,
        unavailable: UnavailableOfferings | None,
        risk: PoolRisk | None,
        clock: Clock,
        interval: float = 5.0,
        heartbeat: float = HEARTBEAT_SECONDS,
    ) -> None:
        self._api = configmaps
        self.name, self.namespace = name, namespace
        self._unavailable, self._risk = unavailable, risk
        self._clock = clock
        self.interval, self.heartbeat = interval, heartbeat
        self._written: list[dict[str, Any]] | None = None
        self._written_at = 0.0
        self._stored: dict[str, Any] | None = None
        #: Writes that succeeded (tests and debugging).
        self.writes = 0

    async def run(self) -> None:
        try:
            while True:
                try:
                    await self.publish()
                except Exception as err:  # never fatal: the explanations wait, provisioning does not
                    if isinstance(err, KubeError) and err.code in (404, 409):
                        self._stored = None  # read it again next time
                    log.warning("provisioning: writing the status ConfigMap %s failed: %s", self.where, err)
                await self._clock.sleep(self.interval)
        finally:
            # The next leadership starts from what the API holds.
            self._written, self._stored = None, None

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def publish(self) -> bool:
        """Write the ConfigMap if what is avoided changed or the heartbeat is due; True if written."""
        avoided = avoided_offerings(
            self._unavailable, self._risk, limit=MAX_MARKS + POOL_RISK_SERIES, risk_limit=POOL_RISK_SERIES
        )
        now = self._clock.now()
        data = entries(avoided, now, self._written)
        mono = self._clock.monotonic()
        if data == self._written and mono - self._written_at < self.heartbeat:
            return False
        body = configmap(self.name, self.namespace, data, now)
        if self._stored is None:
            self._stored = await self._api.get(self.name)
        created = None
        if self._stored is None:
            try:
                created = await self._api.create(body)
            except KubeError as err:
                if err.code != 409:
                    raise
                self._stored = await self._api.get(self.name)  # made meanwhile: updated below
        if created is not None:
            self._stored = created
        else:
            version = ((self._stored or {}).get("metadata") or {}).get("resourceVersion", "")
            body["metadata"]["resourceVersion"] = version
            self._stored = await self._api.replace(body)
        self._written, self._written_at = data, mono
        self.writes += 1
        return True
