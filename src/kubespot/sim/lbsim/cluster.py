"""The load balancer simulator's view of the cluster: pods and nodes, kept by watches over HTTP.

Owns the answer to "would this target answer a request now?". The view is built the way any
client builds one (a watch with ``sendInitialEvents``, resumed from the last resourceVersion,
re-listed after 410 Gone), against kubesim or any API server, so the simulator sees what the API
shows and nothing the simulator's process happens to know.

The serving model, per target type:

- **ip target**: the pod whose ``status.podIP`` is the target's address. It answers while it is
  ``Running``, has no ``deletionTimestamp`` and its node is up. A pod being deleted is taken to have
  received SIGTERM at once and to refuse new connections from then on (an application that stops
  accepting on SIGTERM; one with a preStop sleep would keep answering: not modelled).
- **instance target**: the node whose ``spec.providerID`` ends with the instance id. It answers while
  the node is up and, when the target group names the pods behind it (namespace + labels), one of
  those pods on that node is Running, Ready and not terminating (``externalTrafficPolicy: Local``);
  without a selector a live node is enough.
- A node is **up** while its Node object exists, its Ready condition is True, and the harness has not
  marked its instance down (``mark_node_down``: an instance the harness terminated before the Node
  object is deleted).

``api_visible=True`` asks the same question as the AWS Load Balancer Controller would from the API
alone: the harness's down marks are not visible to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import orjson

__all__ = ["EXCLUDE_LABEL", "ClusterView", "Reason"]

log = logging.getLogger("kubespot.sim.lbsim.cluster")

Obj = dict[str, Any]
PodKey = tuple[str, str]  # (namespace, name)

#: Nodes with this label are left out of load balancers (the AWS Load Balancer Controller and the
#: cloud controller both honour it).
EXCLUDE_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"


class Reason:
    """Why a target does not answer (the failure reasons the simulator counts)."""

    NO_TARGET = "no-target"  # the load balancer had nothing to route to (HTTP 503)
    NO_POD = "no-pod"  # no pod has the target's IP (deleted, or never existed)
    POD_TERMINATING = "pod-terminating"  # deletionTimestamp set: SIGTERM, new connections refused
    POD_NOT_RUNNING = "pod-not-running"
    NODE_GONE = "node-gone"  # no Node for the instance (deleted)
    NODE_DOWN = "node-down"  # Node not Ready, or its instance marked down by the harness
    NO_READY_POD = "no-ready-pod-on-node"  # instance target: nothing of the backend on that node


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _ready(obj: Mapping[str, Any]) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _ips(pod: Mapping[str, Any]) -> set[str]:
    status = pod.get("status") or {}
    ips = {str(entry.get("ip")) for entry in status.get("podIPs") or () if entry.get("ip")}
    if status.get("podIP"):
        ips.add(str(status["podIP"]))
    return ips


def instance_id_of(node: Mapping[str, Any]) -> str | None:
    """The EC2 instance id in ``spec.providerID`` (``aws:///<zone>/<instance-id>``), if any."""
    provider_id = str((node.get("spec") or {}).get("providerID") or "")
    if not provider_id.startswith("aws://"):
        return None
    last = provider_id.rstrip("/").rsplit("/", 1)[-1]
    return last or None


class ClusterView:
    """Pods and nodes of one cluster, from watches on ``url``; see the module docstring."""

    def __init__(self, url: str, *, token: str | None = None) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self.pods: dict[PodKey, Obj] = {}
        self.nodes: dict[str, Obj] = {}
        self._pods_by_ip: dict[str, set[PodKey]] = {}
        self._pods_by_node: dict[str, set[PodKey]] = {}
        self._node_by_instance: dict[str, str] = {}
        self._down: set[str] = set()
        self._session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._synced: dict[str, asyncio.Event] = {}
        #: Watch connections that failed and were retried (for diagnostics).
        self.watch_errors = 0
        #: Called (synchronously) after every applied change; the balancer uses it to notice at once.
        self.on_change: Callable[[], None] | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self, *, sync_within_s: float = 30.0) -> None:
        """Start the pod and node watches and wait until both delivered the current objects."""
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        self._session = aiohttp.ClientSession(
            self.url,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=None),
        )
        for path, apply in (("/api/v1/nodes", self._apply_node), ("/api/v1/pods", self._apply_pod)):
            self._synced[path] = asyncio.Event()
            self._tasks.append(asyncio.create_task(self._watch(path, apply), name=f"lbsim watch {path}"))
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in self._synced.values())), sync_within_s)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- harness knowledge -------------------------------------------------------------------------

    def mark_node_down(self, node: str) -> None:
        """The node's instance is gone (terminated) even if the Node object is still there."""
        self._down.add(node)

    def mark_node_up(self, node: str) -> None:
        self._down.discard(node)

    # -- the serving model -------------------------------------------------------------------------

    def node_problem(self, name: str | None, *, api_visible: bool = False) -> str | None:
        """None when the node is up, else the reason (see the module docstring)."""
        node = self.nodes.get(name or "")
        if node is None:
            return Reason.NODE_GONE
        if not _ready(node) or (not api_visible and name in self._down):
            return Reason.NODE_DOWN
        return None

    def pod_problem(self, pod: Obj, *, need_ready: bool = False, api_visible: bool = False) -> str | None:
        """None when the pod answers, else the reason."""
        if _meta(pod).get("deletionTimestamp"):
            return Reason.POD_TERMINATING
        if (pod.get("status") or {}).get("phase") != "Running" or (need_ready and not _ready(pod)):
            return Reason.POD_NOT_RUNNING
        problem = self.node_problem((pod.get("spec") or {}).get("nodeName"), api_visible=api_visible)
        return None if problem is None else Reason.NODE_DOWN

    def ip_target_problem(self, ip: str, *, api_visible: bool = False) -> str | None:
        """None when some pod with this IP answers; else the most telling reason it does not."""
        keys = self._pods_by_ip.get(ip)
        if not keys:
            return Reason.NO_POD
        reasons = []
        for key in keys:
            problem = self.pod_problem(self.pods[key], api_visible=api_visible)
            if problem is None:
                return None
            reasons.append(problem)
        # A terminating pod explains a failure better than, say, a completed one sharing its IP.
        return min(reasons, key=lambda r: r != Reason.POD_TERMINATING)

    def instance_target_problem(
        self,
        instance_id: str,
        *,
        namespace: str | None = None,
        selector: Mapping[str, str] | None = None,
        api_visible: bool = False,
    ) -> str | None:
        """None when the instance's node is up and (with a selector) serves a ready backend pod."""
        node = self._node_by_instance.get(instance_id)
        problem = self.node_problem(node, api_visible=api_visible)
        if problem is not None or node is None:
            return problem or Reason.NODE_GONE
        if selector is None:
            return None
        for key in self._pods_by_node.get(node, ()):
            pod = self.pods[key]
            if namespace is not None and key[0] != namespace:
                continue
            labels = _meta(pod).get("labels") or {}
            if all(labels.get(k) == v for k, v in selector.items()) and (
                self.pod_problem(pod, need_ready=True, api_visible=api_visible) is None
            ):
                return None
        return Reason.NO_READY_POD

    def node_of_instance(self, instance_id: str) -> Obj | None:
        name = self._node_by_instance.get(instance_id)
        return None if name is None else self.nodes.get(name)

    def pods_with_ip(self, ip: str) -> list[Obj]:
        return [self.pods[k] for k in self._pods_by_ip.get(ip, ())]

    # -- applying watch events ---------------------------------------------------------------------

    def _apply_pod(self, kind: str, pod: Obj) -> None:
        meta = _meta(pod)
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        old = self.pods.pop(key, None)
        if old is not None:
            # The stored object is exactly what was indexed, so its own fields find the entries.
            for ip in _ips(old):
                self._discard(self._pods_by_ip, ip, key)
            node = (old.get("spec") or {}).get("nodeName")
            if node:
                self._discard(self._pods_by_node, str(node), key)
        if kind != "DELETED":
            self.pods[key] = pod
            for ip in _ips(pod):
                self._pods_by_ip.setdefault(ip, set()).add(key)
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                self._pods_by_node.setdefault(str(node), set()).add(key)

    @staticmethod
    def _discard(index: dict[str, set[PodKey]], at: str, key: PodKey) -> None:
        keys = index.get(at)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del index[at]

    def _apply_node(self, kind: str, node: Obj) -> None:
        name = str(_meta(node).get("name") or "")
        old = self.nodes.pop(name, None)
        if old is not None:
            instance = instance_id_of(old)
            if instance is not None and self._node_by_instance.get(instance) == name:
                del self._node_by_instance[instance]
        if kind != "DELETED":
            self.nodes[name] = node
            instance = instance_id_of(node)
            if instance is not None:
                self._node_by_instance[instance] = name

    # -- the watch loop ----------------------------------------------------------------------------

    async def _watch(self, path: str, apply: Callable[[str, Obj], None]) -> None:
        assert self._session is not None
        rv: str | None = None
        while True:
            params = {"watch": "1", "allowWatchBookmarks": "true"}
            # Keys seen since a (re)list began; what the list did not mention is gone.
            listing: set[str] | None = None
            if rv is None:
                params["sendInitialEvents"] = "true"
                params["resourceVersionMatch"] = "NotOlderThan"
                listing = set()
            else:
                params["resourceVersion"] = rv
            try:
                async with self._session.get(path, params=params) as resp:
                    if resp.status == 410:
                        rv = None
                        continue
                    resp.raise_for_status()
                    # Lines are split by hand: aiohttp's readline caps a line at 64 KiB.
                    buffer = b""
                    reconnect = False
                    async for chunk in resp.content.iter_any():
                        buffer += chunk
                        *lines, buffer = buffer.split(b"\n")
                        for line in lines:
                            if line.strip():
                                rv, listing, reconnect = self._handle(path, line, rv, listing, apply)
                                if reconnect:
                                    break
                        if reconnect:
                            break
            except asyncio.CancelledError:
                raise
            except (aiohttp.ClientError, orjson.JSONDecodeError, TimeoutError) as err:
                self.watch_errors += 1
                log.debug("lbsim watch %s: %s; reconnecting", path, err)
                await asyncio.sleep(0.2)

    def _handle(
        self,
        path: str,
        line: bytes,
        rv: str | None,
        listing: set[str] | None,
        apply: Callable[[str, Obj], None],
    ) -> tuple[str | None, set[str] | None, bool]:
        """Apply one watch line; returns the new resourceVersion, listing state, and "reconnect"."""
        event = orjson.loads(line)
        kind, obj = str(event.get("type")), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                return None, None, True
            return rv, listing, True
        rv = str(_meta(obj).get("resourceVersion") or rv or "") or None
        if kind == "BOOKMARK":
            if listing is not None and (_meta(obj).get("annotations") or {}).get("k8s.io/initial-events-end"):
                self._forget_unlisted(path, listing)
                listing = None
                self._synced[path].set()
            return rv, listing, False
        if listing is not None:
            meta = _meta(obj)
            listing.add(f"{meta.get('namespace') or ''}/{meta.get('name') or ''}")
        apply(kind, obj)
        if self.on_change is not None:
            self.on_change()
        return rv, listing, False

    def _forget_unlisted(self, path: str, listed: set[str]) -> None:
        if path.endswith("/pods"):
            for key, pod in list(self.pods.items()):
                if f"{key[0]}/{key[1]}" not in listed:
                    self._apply_pod("DELETED", pod)
        else:
            for name, node in list(self.nodes.items()):
                if f"/{name}" not in listed:
                    self._apply_node("DELETED", node)
