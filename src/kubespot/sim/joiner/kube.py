"""The joiner's writes to the Kubernetes API (aiohttp, over the wire): Nodes and their status.

Every call has a deadline; an answer the joiner does not expect is ``KubeError`` (with the HTTP
status, 0 for a transport failure or timeout) for the loop to log and retry next tick.
"""

from __future__ import annotations

from typing import Any

import aiohttp

Obj = dict[str, Any]
_STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
_MERGE = {"Content-Type": "application/merge-patch+json"}


class KubeError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


class KubeWriter:
    """Create, patch the status of, taint and delete Nodes; stop kubesim's simulated kubelet of one."""

    def __init__(self, base_url: str, *, timeout: float = 5.0, token: str = "joiner") -> None:
        self._base = base_url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._headers = {"Authorization": f"Bearer {token}"}
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> KubeWriter:
        self._session = aiohttp.ClientSession(timeout=self._timeout, headers=self._headers)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(
        self, method: str, path: str, body: Obj | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Obj]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout, headers=self._headers)
        try:
            async with self._session.request(method, self._base + path, json=body, headers=headers) as r:
                try:
                    data = await r.json(content_type=None)
                except ValueError:
                    data = {"message": (await r.text())[:200]}
                return r.status, data if isinstance(data, dict) else {}
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise KubeError(0, f"{method} {path}: {type(exc).__name__}: {exc}") from None

    @staticmethod
    def _fail(status: int, data: Obj, what: str) -> KubeError:
        return KubeError(status, f"{what}: {data.get('message') or data.get('reason') or 'no message'}")

    async def create_node(self, node: Obj) -> bool:
        """POST the Node; False when one of that name exists already."""
        status, data = await self._call("POST", "/api/v1/nodes", node)
        if status == 409:
            return False
        if status >= 300:
            raise self._fail(status, data, f"create node {node['metadata']['name']}")
        return True

    async def patch_status(self, name: str, patch: Obj) -> bool:
        """Strategic-merge ``patch`` into the Node's status; False when the Node is gone."""
        status, data = await self._call("PATCH", f"/api/v1/nodes/{name}/status", patch, _STRATEGIC)
        if status == 404:
            return False
        if status >= 300:
            raise self._fail(status, data, f"patch status of node {name}")
        return True

    async def node_exists(self, name: str) -> bool:
        """GET the Node: True while it exists."""
        status, data = await self._call("GET", f"/api/v1/nodes/{name}")
        if status == 404:
            return False
        if status >= 300:
            raise self._fail(status, data, f"get node {name}")
        return True

    async def ready_statuses(self) -> dict[str, str]:
        """Every Node's Ready condition status by name, from one LIST (``MonitorNodes`` reads its
        informer's lister, not one GET per Node); "Unknown" for a Node without one, as
        cloud-provider defaults it. A Node not in the map is gone."""
        status, data = await self._call("GET", "/api/v1/nodes")
        if status >= 300:
            raise self._fail(status, data, "list nodes")
        return {
            str((node.get("metadata") or {}).get("name")): _ready_of(node)
            for node in data.get("items") or []
            if isinstance(node, dict)
        }

    async def set_taint(self, name: str, taint: dict[str, str], *, present: bool) -> bool:
        """Add (or update the value of) ``taint``, or remove it, matching on key and effect as
        cloud-provider's ``AddOrUpdateTaintOnNode`` / ``RemoveTaintOffNode`` do; False when the
        Node is gone. ``spec.taints`` is one list others write too (Karpenter, the node lifecycle
        controller), so the write carries the resourceVersion read: a conflict is a ``KubeError``,
        tried again next poll."""
        status, node = await self._call("GET", f"/api/v1/nodes/{name}")
        if status == 404:
            return False
        if status >= 300:
            raise self._fail(status, node, f"get node {name}")
        taints = list((node.get("spec") or {}).get("taints") or [])
        same = [t for t in taints if (t.get("key"), t.get("effect")) == (taint["key"], taint["effect"])]
        if (present and any(t.get("value") == taint.get("value") for t in same)) or not (present or same):
            return True
        kept = [t for t in taints if t not in same]
        wanted = [*kept, dict(taint)] if present else kept
        version = (node.get("metadata") or {}).get("resourceVersion")
        patch: Obj = {"metadata": {"resourceVersion": version}, "spec": {"taints": wanted or None}}
        status, data = await self._call("PATCH", f"/api/v1/nodes/{name}", patch, _MERGE)
        if status == 404:
            return False
        if status >= 300:
            raise self._fail(status, data, f"{'add' if present else 'remove'} taint {taint['key']} on {name}")
        return True

    async def delete_node(self, name: str) -> bool:
        """DELETE the Node; True once it is gone, False while finalizers hold it (the answer is then
        the Node itself, marked for deletion, instead of a ``Status``)."""
        status, data = await self._call("DELETE", f"/api/v1/nodes/{name}")
        if status == 404:
            return True
        if status >= 300:
            raise self._fail(status, data, f"delete node {name}")
        return data.get("kind") != "Node"

    async def set_kubelet(self, name: str, *, running: bool) -> None:
        """kubesim's ``PUT /kubesim/v1/nodes/<name>/kubelet``: ``running=False`` when the instance's
        kubelet is gone (heartbeats stop); ``running=True`` once its Node is deleted, so a later
        machine given the same name (EC2 reuses private IPs) boots a live kubelet. Best effort: an
        API server that is not kubesim, or one without its kubelet controller, answers 404 or 409,
        which changes nothing here."""
        status, data = await self._call("PUT", f"/kubesim/v1/nodes/{name}/kubelet", {"running": running})
        if status >= 500:
            raise self._fail(status, data, f"set kubelet of {name} running={running}")


def _ready_of(node: Obj) -> str:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return str(cond.get("status") or "Unknown")
    return "Unknown"
