"""coordination.k8s.io/v1 Leases: read, create and compare-and-set them, for leader election.

A Lease is the lock client-go's leader election uses. Its spec records who holds it
(``holderIdentity``), for how long a holder promises to renew (``leaseDurationSeconds``), when it
was taken (``acquireTime``) and last renewed (``renewTime``, MicroTime) and how often it changed
hands (``leaseTransitions``). Writes are PUTs carrying the ``resourceVersion`` that was read, so of
two replicas writing after the same read exactly one succeeds and the other gets a 409.

Calls go through ``KubeClient.call`` (rate limit, retries, error hook) with priority over ordinary
calls: a renewal queued behind a burst of evictions would cost the leader its lease in exactly the
moment the cluster is busiest.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from .client import KubeClient, KubeError
from .priority import fencing
from .retry import TRANSIENT_STATUSES

__all__ = ["LeaseRecord", "LeaseView", "Leases"]


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """A Lease's spec, as leader election reads and writes it."""

    #: Who holds the lease; "" when nobody does (released), so anyone may take it at once.
    holder: str = ""
    #: How long candidates wait after they last saw the record change before they may take it.
    duration_seconds: int = 0
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    #: How many times the lease changed hands.
    transitions: int = 0


@dataclass(frozen=True, slots=True)
class LeaseView:
    """A Lease as read, with the resourceVersion an update must carry."""

    namespace: str
    name: str
    resource_version: str
    record: LeaseRecord
    # The object as the server sent it: an update changes its spec only, so labels, annotations
    # and fields this code does not know survive a renewal.
    source: Any = field(default=None, repr=False, compare=False)


def _view(lease: Lease) -> LeaseView:
    meta = lease.metadata or ObjectMeta()
    spec = lease.spec or LeaseSpec()
    return LeaseView(
        namespace=meta.namespace or "",
        name=meta.name or "",
        resource_version=meta.resourceVersion or "",
        record=LeaseRecord(
            holder=spec.holderIdentity or "",
            duration_seconds=int(spec.leaseDurationSeconds or 0),
            acquire_time=spec.acquireTime,
            renew_time=spec.renewTime,
            transitions=int(spec.leaseTransitions or 0),
        ),
        source=lease,
    )


def _spec(record: LeaseRecord, base: LeaseSpec | None = None) -> LeaseSpec:
    spec = copy.deepcopy(base) if base is not None else LeaseSpec()
    # Written as client-go writes it: an empty holder is sent as "", not left out.
    spec.holderIdentity = record.holder
    spec.leaseDurationSeconds = record.duration_seconds
    spec.acquireTime = record.acquire_time
    spec.renewTime = record.renew_time
    spec.leaseTransitions = record.transitions
    return spec


class Leases:
    """Lease reads and writes through ``kube``'s rate limit and retries."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    async def get(self, namespace: str, name: str) -> LeaseView | None:
        """The lease, or None when it does not exist."""
        try:
            with fencing():
                lease = await self._kube.call(
                    "get lease", lambda: self._kube.api.get(Lease, name, namespace=namespace)
                )
        except KubeError as err:
            if err.code == 404:
                return None
            raise
        return _view(lease)

    async def create(self, namespace: str, name: str, record: LeaseRecord) -> LeaseView:
        """Create the lease holding ``record``; ``KubeError`` 409 when it exists already."""
        body = Lease(metadata=ObjectMeta(name=name, namespace=namespace), spec=_spec(record))
        with fencing():
            created = await self._kube.call(
                "create lease",
                lambda: self._kube.api.create(body),
                retry=TRANSIENT_STATUSES,
            )
        return _view(created)

    async def update(self, current: LeaseView, record: LeaseRecord) -> LeaseView:
        """Replace the spec of the lease read as ``current`` by ``record``, compare-and-set: a
        ``KubeError`` 409 means somebody wrote it since ``current`` was read."""
        source = current.source if isinstance(current.source, Lease) else None
        meta = copy.deepcopy(source.metadata) if source is not None and source.metadata else ObjectMeta()
        meta.name, meta.namespace = current.name, current.namespace
        meta.resourceVersion = current.resource_version
        body = Lease(metadata=meta, spec=_spec(record, source.spec if source is not None else None))
        with fencing():
            updated = await self._kube.call(
                "update lease",
                lambda: self._kube.api.replace(body, current.name, namespace=current.namespace),
                retry=TRANSIENT_STATUSES,
            )
        return _view(updated)
