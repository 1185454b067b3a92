"""The Kubernetes version AMI aliases resolve at: pinned by settings, or the API server's, re-read.

Like aws/karpenter-provider-aws ``pkg/providers/version/version.go`` (``UpdateVersion``, ``Get``)
driven by ``pkg/controllers/providers/version/controller.go`` (every 5 minutes): a control plane
upgrade reaches the AMI aliases within ``REFRESH_INTERVAL``, not only after a restart. A read that
fails keeps the last version known (Karpenter's ``Get`` returns the stored one while the update
errors); only when none was ever read does the failure reach the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

from kubespot.model import Clock

__all__ = ["REFRESH_INTERVAL", "KubernetesVersion"]

log = logging.getLogger("kubespot.controller.provisioning")

#: Karpenter's version controller requeues every 5 minutes.
REFRESH_INTERVAL: Final = 300.0


class KubernetesVersion:
    """An awaitable ``major.minor``: the pinned one, else the server's, read at most every 5 min."""

    def __init__(self, read: Callable[[], Awaitable[str]], *, clock: Clock, pinned: str = "") -> None:
        self._read = read
        self._clock = clock
        self._pinned = pinned
        self._known: str | None = None
        self._read_at: float | None = None

    async def __call__(self) -> str:
        if self._pinned:
            return self._pinned
        now = self._clock.monotonic()
        if self._known is not None and self._read_at is not None and now - self._read_at < REFRESH_INTERVAL:
            return self._known
        try:
            version = await self._read()
        except Exception as err:
            if self._known is None:
                raise
            log.warning(
                "provisioning: cannot re-read the Kubernetes version, keeping %s: %s", self._known, err
            )
            return self._known
        if version != self._known:
            log.info("provisioning: Kubernetes version %s (was %s)", version, self._known or "unknown")
        self._known, self._read_at = version, now
        return version
