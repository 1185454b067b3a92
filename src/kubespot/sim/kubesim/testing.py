"""Test builders and helpers for kubesim.

For kubespot's own tests and for anyone testing a controller or client against kubesim. The builders
return plain JSON-shaped Kubernetes objects (with ``apiVersion`` and ``kind``) that can be POSTed to a
running ``KubeSim`` or loaded with ``KubeSim(objects=[...])``, so a test reads like the scenario it
checks::

    objects = [namespace("shop"), node("n1", ready=True), pod("web-0", namespace="shop", node="n1")]
    async with KubeSim(objects=objects) as sim:
        ...  # POST deployment("web", 3, namespace="shop") to sim.url, then await until(<rolled out>)

``until`` waits for an outcome; ``condition``, ``is_ready`` and ``is_terminating`` read objects the
way assertions need. Standard library only (no pytest), so this module ships in the package.

The predicates are written independently of kubesim's controllers on purpose: a test that judged
kubesim with kubesim's own logic would pass whatever that logic did.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

Obj = dict[str, Any]
T = TypeVar("T")

__all__ = [
    "condition",
    "deployment",
    "is_ready",
    "is_terminating",
    "namespace",
    "node",
    "owner_reference",
    "pdb",
    "pod",
    "replicaset",
    "until",
]


async def until(probe: Callable[[], Awaitable[T]], *, within: float = 8.0, interval: float = 0.05) -> T:
    """Await ``probe()`` every ``interval`` seconds until it returns something truthy, and return that.

    Raises ``AssertionError`` naming the last value once ``within`` seconds have passed, so a test
    waits for an outcome instead of sleeping for a guessed time.
    """
    deadline = time.monotonic() + within
    while True:
        result = await probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s (last: {result!r})")
        await asyncio.sleep(interval)


# -- builders ----------------------------------------------------------------------------------------
# kubesim adopts the objects it is given (the store fills them in and mutates them in place), so the
# builders copy every mapping they are passed rather than share the caller's.


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    taints: list[Obj] | None = None,
    unschedulable: bool = False,
    ready: bool | None = None,
) -> Obj:
    """A Node labelled with its hostname (as kubelets register), capacity and allocatable alike.

    Leave ``ready`` unset when kubesim's kubelet runs: it registers the node and posts Ready itself.
    Set it for nodes loaded into a ``KubeSim`` whose kubelet is off, which would never turn Ready.
    """
    spec: Obj = {}
    if taints:
        spec["taints"] = copy.deepcopy(taints)
    if unschedulable:
        spec["unschedulable"] = True
    resources = {"cpu": cpu, "memory": memory, "pods": pods}
    status: Obj = {"capacity": dict(resources), "allocatable": dict(resources)}
    if ready is not None:
        status["conditions"] = [_ready(ready)]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": status,
    }


def pod(
    name: str,
    *,
    namespace: str | None = "default",
    node: str | None = None,
    labels: Mapping[str, str] | None = None,
    owner: Mapping[str, Any] | None = None,
    grace: int | None = None,
    annotations: Mapping[str, str] | None = None,
    requests: Mapping[str, str] | None = None,
    phase: str | None = None,
    ready: bool | None = None,
    image: str = "nginx:1",
) -> Obj:
    """A Pod with one container named ``app``.

    ``namespace=None`` leaves the namespace to the request's URL (or ``default`` when loaded);
    ``node`` binds it as the scheduler would; ``owner`` is the owning object, referenced as its
    controller, so it needs its uid (as kubesim returned it, or set by hand to load both at once).
    ``phase`` and ``ready`` write a status, for pods loaded into a ``KubeSim`` whose kubelet is off
    (a running kubelet posts its own).
    """
    metadata: Obj = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owner is not None:
        metadata["ownerReferences"] = [owner_reference(owner)]
    spec: Obj = {"containers": [_container(image, requests)]}
    if node:
        spec["nodeName"] = node
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    obj: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    status: Obj = {}
    if phase is not None:
        status["phase"] = phase
    if ready is not None:
        status["conditions"] = [_ready(ready)]
    if status:
        obj["status"] = status
    return obj


def deployment(
    name: str,
    replicas: int,
    *,
    namespace: str | None = None,
    image: str = "nginx:1",
    labels: Mapping[str, str] | None = None,
    strategy: Mapping[str, Any] | None = None,
    requests: Mapping[str, str] | None = None,
    grace: int | None = None,
) -> Obj:
    """A Deployment selecting its pods by ``labels`` (default ``app: <name>``)."""
    obj = _workload("Deployment", name, replicas, namespace, image, labels, requests, grace)
    if strategy:
        obj["spec"]["strategy"] = copy.deepcopy(dict(strategy))
    return obj


def daemonset(
    name: str,
    *,
    namespace: str | None = "kube-system",
    image: str = "agent:1",
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Obj:
    """A DaemonSet (one pod per node) selecting its pods by ``labels`` (default ``app: <name>``);
    ``annotations`` go on the pod template (e.g. ``conventions.SHUTDOWN_SECONDS``)."""
    obj = _workload("DaemonSet", name, 0, namespace, image, labels, None, None)
    del obj["spec"]["replicas"]
    template = obj["spec"]["template"]
    if node_selector:
        template["spec"]["nodeSelector"] = dict(node_selector)
    if annotations:
        template["metadata"]["annotations"] = dict(annotations)
    return obj


def replicaset(
    name: str,
    replicas: int,
    *,
    namespace: str | None = None,
    image: str = "nginx:1",
    labels: Mapping[str, str] | None = None,
    owner: Mapping[str, Any] | None = None,
    requests: Mapping[str, str] | None = None,
    grace: int | None = None,
) -> Obj:
    """A ReplicaSet selecting its pods by ``labels`` (default ``app: <name>``); ``owner`` is the
    owning object (a Deployment), referenced as its controller."""
    obj = _workload("ReplicaSet", name, replicas, namespace, image, labels, requests, grace)
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [owner_reference(owner)]
    return obj


def pdb(
    name: str,
    *,
    namespace: str | None = None,
    selector: Mapping[str, Any] | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    unhealthy_pod_eviction_policy: str | None = None,
    status: Mapping[str, Any] | None = None,
) -> Obj:
    """A policy/v1 PodDisruptionBudget.

    ``selector`` is a LabelSelector (``{"matchLabels": {...}}``); without one the budget selects no
    pod, as upstream's does, while ``{}`` selects every pod of the namespace. ``status`` is for
    budgets loaded into a ``KubeSim`` before the disruption controller has computed one.
    """
    spec: Obj = {}
    if selector is not None:
        spec["selector"] = copy.deepcopy(dict(selector))
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if unhealthy_pod_eviction_policy is not None:
        spec["unhealthyPodEvictionPolicy"] = unhealthy_pod_eviction_policy
    obj: Obj = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(name, namespace),
        "spec": spec,
    }
    if status is not None:
        obj["status"] = copy.deepcopy(dict(status))
    return obj


def owner_reference(obj: Mapping[str, Any], *, controller: bool = True) -> Obj:
    """An ownerReference to ``obj`` (which needs ``apiVersion``, ``kind``, name and uid).

    As its controller by default, the way workload controllers mark what they own (blocking the
    owner's foreground deletion); ``controller=False`` gives a plain owner reference.
    """
    meta = obj["metadata"]
    ref: Obj = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
    }
    if controller:
        ref["controller"] = True
        ref["blockOwnerDeletion"] = True
    return ref


def _meta(name: str, namespace: str | None) -> Obj:
    return {"name": name} if namespace is None else {"name": name, "namespace": namespace}


def _container(image: str, requests: Mapping[str, str] | None) -> Obj:
    container: Obj = {"name": "app", "image": image}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    return container


def _ready(ready: bool) -> Obj:
    return {"type": "Ready", "status": "True" if ready else "False"}


def _workload(
    kind: str,
    name: str,
    replicas: int,
    namespace: str | None,
    image: str,
    labels: Mapping[str, str] | None,
    requests: Mapping[str, str] | None,
    grace: int | None,
) -> Obj:
    selected = dict(labels) if labels is not None else {"app": name}
    pod_spec: Obj = {"containers": [_container(image, requests)]}
    if grace is not None:
        pod_spec["terminationGracePeriodSeconds"] = grace
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": _meta(name, namespace),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selected},
            "template": {"metadata": {"labels": dict(selected)}, "spec": pod_spec},
        },
    }


# -- predicates --------------------------------------------------------------------------------------


def condition(obj: Mapping[str, Any] | None, type_: str) -> Obj | None:
    """The status condition of type ``type_`` (Ready, PodScheduled, ...); None when absent or no object."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return cond  # type: ignore[no-any-return]
    return None


def is_ready(pod: Mapping[str, Any]) -> bool:
    """The object's Ready condition is True (upstream ``IsPodReady``)."""
    cond = condition(pod, "Ready")
    return cond is not None and cond.get("status") == "True"


def is_terminating(obj: Mapping[str, Any]) -> bool:
    """Deletion has begun: a ``deletionTimestamp`` is set (graceful deletion or finalizers pending)."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))
