"""The cloud controller manager's node controller, for nodes whose kubelet runs with an external cloud.

A kubelet started with ``--cloud-provider=external`` (kubesim: the Node annotation
``conventions.CLOUD_PROVIDER_ANNOTATION: external``) registers its Node with the taint
``node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule`` (pkg/kubelet/kubelet_node_status.go
``initialNode``). The cloud provider's node controller
(staging/src/k8s.io/cloud-provider/controllers/node/node_controller.go ``syncNode``) then asks the
cloud about the instance and, in one update, sets ``spec.providerID`` when empty, the
``node.kubernetes.io/instance-type``, ``topology.kubernetes.io/zone`` and ``topology.kubernetes.io/region``
labels (and their deprecated beta twins) where missing, and removes the taint.

The cloud's answer here comes from what the Node already says (its instance-id label, a zone label,
an ``aws:///zone/instance`` providerID) or stable made-up values (an EC2-like instance id derived from
the name, us-east-1a, m5.large), after ``ControllerConfig.cloud_node_init_seconds`` (the cloud API call).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

from .. import conventions, errors
from ..store import NODE_KEY, Obj, Store, WatchEvent
from . import Controller, ControllerConfig

log = logging.getLogger("kubespot.sim.kubesim.cloudnode")

UNINITIALIZED_TAINT_KEY = "node.cloudprovider.kubernetes.io/uninitialized"
UNINITIALIZED_TAINT = {"key": UNINITIALIZED_TAINT_KEY, "value": "true", "effect": "NoSchedule"}
DEFAULT_ZONE = "us-east-1a"
DEFAULT_INSTANCE_TYPE = "m5.large"


def external_cloud(node: Obj) -> bool:
    annotations = node["metadata"].get("annotations") or {}
    return annotations.get(conventions.CLOUD_PROVIDER_ANNOTATION) == "external"


def uninitialized(node: Obj) -> bool:
    return any(t.get("key") == UNINITIALIZED_TAINT_KEY for t in (node.get("spec") or {}).get("taints") or [])


def _instance(node: Obj) -> tuple[str, str, str]:
    """(instance id, zone, instance type) as the simulated cloud reports them."""
    labels = node["metadata"].get("labels") or {}
    provider = str((node.get("spec") or {}).get("providerID") or "")
    parts = provider.removeprefix("aws:///").split("/") if provider.startswith("aws:///") else []
    name = node["metadata"]["name"]
    instance = labels.get(conventions.INSTANCE_ID_LABEL) or (parts[1] if len(parts) == 2 else "")
    if not instance:
        instance = "i-0" + hashlib.sha256(name.encode()).hexdigest()[:16]
    zone = labels.get("topology.kubernetes.io/zone") or (parts[0] if len(parts) == 2 else "") or DEFAULT_ZONE
    kind = labels.get("node.kubernetes.io/instance-type") or DEFAULT_INSTANCE_TYPE
    return instance, zone, kind


def initialize(node: Obj) -> None:
    """``syncNode``'s update of an uninitialized node, in place."""
    instance, zone, kind = _instance(node)
    region = zone[:-1] if zone[-1:].isalpha() else zone
    spec = node.setdefault("spec", {})
    if not spec.get("providerID"):
        spec["providerID"] = f"aws:///{zone}/{instance}"
    labels = node["metadata"].setdefault("labels", {})
    for key, value in (
        ("node.kubernetes.io/instance-type", kind),
        ("beta.kubernetes.io/instance-type", kind),
        ("topology.kubernetes.io/zone", zone),
        ("failure-domain.beta.kubernetes.io/zone", zone),
        ("topology.kubernetes.io/region", region),
        ("failure-domain.beta.kubernetes.io/region", region),
    ):
        labels.setdefault(key, value)
    kept = [t for t in spec.get("taints") or [] if t.get("key") != UNINITIALIZED_TAINT_KEY]
    if kept:
        spec["taints"] = kept
    else:
        spec.pop("taints", None)


class CloudNodeController(Controller):
    """See the module docstring."""

    name = "cloudnode"
    watches = (NODE_KEY,)

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.node_rt = self.rt("", "v1", "nodes")
        self._pending: set[str] = set()

    def start(self) -> None:
        super().start()
        for node in self.store.iter_objects(self.node_rt):
            self._note(node)

    def on_event(self, ev: WatchEvent) -> None:
        if ev.type != "DELETED":
            self._note(ev.obj)

    def _note(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        if uninitialized(node) and name not in self._pending:
            self._pending.add(name)
            self.spawn(self._initialize(name))

    async def _initialize(self, name: str) -> None:
        try:
            await asyncio.sleep(self.config.cloud_node_init_seconds)
            node = self.store.find(self.node_rt, None, name)
            if node is not None and uninitialized(node):
                self.store.mutate(self.node_rt, None, name, initialize)
        except errors.ApiError as exc:
            log.debug("cloudnode: initializing %s failed: %s", name, exc.message)
        finally:
            self._pending.discard(name)
