"""Classic Load Balancers: which ones an instance is registered with, and deregistration from them.

DescribeLoadBalancers returns every Classic Load Balancer with its instances (400 a page), so the
reverse index costs ceil(N/400) calls per rebuild, with the same TTL and shared rebuild as the ELBv2
index (``kubespot.aws.snapshot``). Classic load balancers hold instances only (no IP targets) and
report no "draining" state: after DeregisterInstancesFromLoadBalancer, connection draining (when
enabled on the load balancer) lets requests in flight finish, so callers wait their settle time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from kubespot.aws.elbv2 import (
    DEFAULT_TTL,
    MISS_REFRESH_AFTER,
    PAGE_SIZE,
    RETRY_AFTER,
    DeregisterOutcome,
    merge_outcomes,
)
from kubespot.aws.session import AwsClients, AwsError
from kubespot.aws.snapshot import Snapshot
from kubespot.model import Clock

__all__ = ["ClassicLoadBalancers", "ClassicRegistration"]

_log = logging.getLogger(__name__)

#: The load balancer was deleted, or the instance is not (any more) registered with it.
_LB_GONE: Final = "LoadBalancerNotFound"
_INSTANCE_GONE: Final = "InvalidInstance"
#: Deregistrations sent at once (one call per load balancer).
_CONCURRENCY: Final = 8


@dataclass(frozen=True, order=True)
class ClassicRegistration:
    """One instance registered with one Classic Load Balancer."""

    load_balancer_name: str
    instance_id: str


class ClassicLoadBalancers:
    """The Classic Load Balancers an instance is registered with, and its deregistration."""

    def __init__(
        self,
        clients: AwsClients,
        *,
        ttl: float = DEFAULT_TTL,
        miss_refresh_after: float = MISS_REFRESH_AFTER,
        retry_after: float = RETRY_AFTER,
        clock: Clock | None = None,
    ) -> None:
        self._clients = clients
        self._miss_refresh_after = miss_refresh_after
        self._limit = asyncio.Semaphore(_CONCURRENCY)
        self._snapshot: Snapshot[Mapping[str, tuple[ClassicRegistration, ...]]] = Snapshot(
            self._build, ttl=ttl, retry_after=retry_after, name="elb-instances", clock=clock
        )

    @property
    def refreshes(self) -> int:
        """Index rebuilds started so far (failed ones included)."""
        return self._snapshot.builds

    async def lookup(self, instance_ids: Iterable[str]) -> dict[str, tuple[ClassicRegistration, ...]]:
        """Registrations of each of ``instance_ids`` that has any (same freshness rules as ELBv2)."""
        ids = list(dict.fromkeys(instance_ids))
        if not ids:
            return {}
        index = await self._snapshot.get()
        if any(i not in index for i in ids):
            age = self._snapshot.age
            if age is not None and age > self._miss_refresh_after:
                index = await self._snapshot.get(max_age=self._miss_refresh_after)
        return {i: index[i] for i in ids if i in index}

    async def refresh(self) -> None:
        """Rebuild the index now (joining a rebuild under way)."""
        self._snapshot.invalidate()
        await self._snapshot.get()

    def invalidate(self) -> None:
        """Make the next lookup rebuild the index."""
        self._snapshot.invalidate()

    async def deregister(
        self, registrations: Iterable[ClassicRegistration]
    ) -> DeregisterOutcome[ClassicRegistration]:
        """One DeregisterInstancesFromLoadBalancer per load balancer, concurrently.

        A load balancer or registration that no longer exists counts as ``gone``. Never raises for
        AWS errors: they are in ``failed``.
        """
        by_lb: dict[str, list[ClassicRegistration]] = {}
        for reg in dict.fromkeys(registrations):
            by_lb.setdefault(reg.load_balancer_name, []).append(reg)
        return merge_outcomes(await asyncio.gather(*(self._deregister(n, r) for n, r in by_lb.items())))

    async def _deregister(
        self, name: str, regs: list[ClassicRegistration]
    ) -> DeregisterOutcome[ClassicRegistration]:
        try:
            async with self._limit:
                await self._clients.call(
                    "elb",
                    "DeregisterInstancesFromLoadBalancer",
                    LoadBalancerName=name,
                    Instances=[{"InstanceId": r.instance_id} for r in regs],
                )
        except AwsError as exc:
            if exc.code == _LB_GONE:
                _log.debug("classic load balancer %s is gone; nothing to deregister", name)
                return DeregisterOutcome(gone=tuple(regs))
            if exc.code == _INSTANCE_GONE:
                if len(regs) == 1:
                    _log.debug("%s is not registered with %s: already gone", regs[0].instance_id, name)
                    return DeregisterOutcome(gone=tuple(regs))
                # The error does not say which instance; ask for each on its own.
                return merge_outcomes([await self._deregister(name, [r]) for r in regs])
            return DeregisterOutcome(failed=MappingProxyType(dict.fromkeys(regs, exc)))
        return DeregisterOutcome(deregistered=tuple(regs))

    async def _build(
        self, previous: Mapping[str, tuple[ClassicRegistration, ...]] | None
    ) -> Mapping[str, tuple[ClassicRegistration, ...]]:
        index: dict[str, list[ClassicRegistration]] = {}
        marker: str | None = None
        while True:
            answer = await self._clients.call(
                "elb", "DescribeLoadBalancers", PageSize=PAGE_SIZE, **({"Marker": marker} if marker else {})
            )
            for lb in answer.get("LoadBalancerDescriptions") or []:
                name = str(lb.get("LoadBalancerName") or "")
                for instance in lb.get("Instances") or []:
                    instance_id = str(instance.get("InstanceId") or "")
                    if name and instance_id:
                        index.setdefault(instance_id, []).append(ClassicRegistration(name, instance_id))
            marker = answer.get("NextMarker") or None
            if not marker:
                return MappingProxyType({k: tuple(v) for k, v in index.items()})
