"""Custom resources as JSON (NodePools, EC2NodeClasses, NodeClaims): list, watch, create, get,
merge patches, deletes and status writes.

For the provisioning and NodeClaim controllers, which read Karpenter's API objects, write their
status and metadata (finalizers, labels), and delete them; the NodeClaim controller also reads and
patches Nodes through it (``api/v1/nodes``), whose finalizers and owner references the typed node
views leave out; the provisioning controller keeps its status ConfigMap through it (a namespace's
``api/v1/namespaces/NS/configmaps``, replaced whole with a PUT).
Calls go through ``KubeClient`` (rate limit, retries, error hook). A status write is a PUT of the
object to its ``/status`` subresource carrying the ``resourceVersion`` that was read, so a write
based on a stale read fails with 409 instead of undoing someone's change (the optimistic lock
Karpenter's status patches take, ``client.MergeFromWithOptimisticLock``); the caller reads again.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from .client import MERGE_PATCH, KubeClient, KubeError

__all__ = ["CustomObjects", "ObjectList"]

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ObjectList:
    """Every object of a resource and the version a watch continues from."""

    items: tuple[Obj, ...]
    resource_version: str
    #: False when the server does not serve the resource (its CRD is not installed).
    served: bool = True


class CustomObjects:
    """One cluster-scoped custom resource (``apis/karpenter.sh/v1/nodepools``)."""

    def __init__(self, kube: KubeClient, path: str) -> None:
        self._kube = kube
        self.path = path.strip("/")

    async def list(self) -> ObjectList:
        """Every object, read in pages (404, the CRD not installed: none)."""
        listed = await self._kube.list_versioned(self.path)
        if listed is None:
            return ObjectList((), "", served=False)
        items, version = listed
        return ObjectList(tuple(items), version)

    async def watch(self, resource_version: str) -> AsyncIterator[tuple[str, Obj | None, ObjectList | None]]:
        """(ADDED/MODIFIED/DELETED, object, None) per change; ("RESYNC", None, listing) after a broken
        watch was listed again (see ``KubeClient._watch``)."""
        async for op, obj, listing in self._kube._watch(
            self.path, self.path, {}, dict, self.list, resource_version
        ):
            yield op, obj, listing

    async def create(self, obj: Obj) -> Obj:
        """POST ``obj`` (``metadata.generateName`` lets the server name it); the object stored.
        Only 429 (refused before any work) is retried here: a 5xx may come after the object was
        stored, and a retried create of a ``generateName`` would make a second one; the caller
        decides (the provisioner re-plans in its next pass, which sees what was stored)."""
        send = functools.partial(
            self._kube._send, "POST", self.path, body=obj, content_type="application/json"
        )
        stored: Obj = orjson.loads(await self._kube.call(f"create {self.path}", send, retry=frozenset({429})))
        return stored

    async def replace_status(self, obj: Obj) -> Obj:
        """PUT ``obj`` (with the ``resourceVersion`` read) to its status subresource; the object
        stored. ``KubeError`` 409 when it changed since, 404 when it is gone."""
        name = (obj.get("metadata") or {}).get("name") or ""
        send = functools.partial(
            self._kube._send, "PUT", f"{self.path}/{name}/status", body=obj, content_type="application/json"
        )
        stored: Obj = orjson.loads(await self._kube.call(f"update {self.path}/{name}/status", send))
        return stored

    async def replace(self, obj: Obj) -> Obj:
        """PUT ``obj`` (an update carrying the ``resourceVersion`` read); the object stored.
        ``KubeError`` 409 when it changed since, 404 when it is gone."""
        name = (obj.get("metadata") or {}).get("name") or ""
        send = functools.partial(
            self._kube._send, "PUT", f"{self.path}/{name}", body=obj, content_type="application/json"
        )
        stored: Obj = orjson.loads(await self._kube.call(f"update {self.path}/{name}", send))
        return stored

    async def get(self, name: str) -> Obj | None:
        """The object, or None when it does not exist."""
        send = functools.partial(self._kube._send, "GET", f"{self.path}/{name}")
        try:
            body = await self._kube.call(f"get {self.path}/{name}", send)
        except KubeError as err:
            if err.code == 404:
                return None
            raise
        obj: Obj = orjson.loads(body)
        return obj

    async def patch(self, name: str, patch: Obj, *, subresource: str = "") -> Obj:
        """A JSON merge patch (RFC 7386); the object stored. A ``metadata.resourceVersion`` in the
        patch makes it conditional (409 when the object changed since), as Karpenter's patches
        ``MergeFromWithOptimisticLock`` are; lists (finalizers, taints) are replaced whole, so a
        patch changing one should carry the version it was computed from."""
        path = f"{self.path}/{name}" + (f"/{subresource}" if subresource else "")
        send = functools.partial(self._kube._send, "PATCH", path, body=patch, content_type=MERGE_PATCH)
        stored: Obj = orjson.loads(await self._kube.call(f"patch {path}", send))
        return stored

    async def delete(self, name: str) -> bool:
        """Delete it (its finalizers hold it, with a ``deletionTimestamp``, until they are removed);
        False when it was already gone."""
        send = functools.partial(self._kube._send, "DELETE", f"{self.path}/{name}")
        try:
            await self._kube.call(f"delete {self.path}/{name}", send)
        except KubeError as err:
            if err.code == 404:
                return False
            raise
        return True

    async def server_version(self) -> str:
        """The API server's Kubernetes version as ``major.minor`` (``/version``: ``1.32``)."""
        send = functools.partial(self._kube._send, "GET", "version")
        data = orjson.loads(await self._kube.call("get version", send))
        major = str(data.get("major") or "").rstrip("+")
        minor = str(data.get("minor") or "").rstrip("+")
        return f"{major}.{minor}"
