"""Pre-spin: which nodes are going away, and their pods planned for before the drain evicts them.

docs/designs/launching.md §7. Karpenter's provisioner adds the reschedulable pods of nodes marked
for deletion to the pending ones (kubernetes-sigs/karpenter ``pkg/controllers/provisioning/
provisioner.go`` ``Schedule``: ``nodes.Deleting().ReschedulablePods``; ``pkg/utils/pod``
``IsReschedulable``), so a replacement is planned while the node drains. kubespot counts a node as
*doomed* on the same grounds (its NodeClaim is being deleted) and also, when pre-spin is on, as soon
as kubespot's interruption fence that moves its pods is on it (``is_fenced``: the
``kubespot.io/interruption`` state annotation of a fence that drains, which the agent (IMDS mode)
and the queue processor write alike, or a ``kubespot.io/<kind>`` taint). Nothing in process is
shared with the handler: the fence on the Node is the message.

``doomed_nodes`` and ``without_doomed`` are pure; ``DoomWatch`` watches Nodes and NodeClaims and
closes the batcher's window at once (``trigger_now``) when a node turns doomed, so the launch goes
out within about a second of the fence rather than after the drain's first evictions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubespot.handling.policy import KUBESPOT_TAINT_PREFIX
from kubespot.kube import KubeError
from kubespot.kube.custom import CustomObjects
from kubespot.kube.informer import Informer
from kubespot.model import Clock, Kind
from kubespot.records.interruption import KNOWN_KINDS, STATE_ANNOTATION, Phase, StateError, decode

__all__ = ["DoomWatch", "Doomed", "doomed_nodes", "is_fenced", "is_reschedulable", "without_doomed"]

log = logging.getLogger("kubespot.controller.provisioning")

Obj = dict[str, Any]

#: The fence's taint keys: one per interruption kind (``handling.policy.plan_for``).
FENCE_TAINTS = frozenset(KUBESPOT_TAINT_PREFIX + kind for kind in KNOWN_KINDS)
_REBALANCE_TAINT = KUBESPOT_TAINT_PREFIX + Kind.REBALANCE_RECOMMENDATION.value
#: Kinds whose instance is gone soon whatever the handler does: a cordon-only fence of theirs
#: still dooms the node.
_GOES_ANYWAY = frozenset({Kind.SPOT_INTERRUPTION.value, Kind.STATE_CHANGE.value})
_TERMINAL = ("Succeeded", "Failed")
_MIRROR = "kubernetes.io/config.mirror"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name") or "")


def is_fenced(node: Mapping[str, Any]) -> bool:
    """kubespot's interruption fence is on ``node`` and its pods are leaving: the state kubespot
    wrote says the handler drains (``draining`` and after: ``handling.node_patches.fence_patch``
    records it with the fence when the plan drains), or the instance goes whatever the handler
    does (a spot interruption, a state change). A fence that only cordons (a rebalance
    recommendation without ``rebalance_draining``, ``cordon_only``) moves nothing: its pods stay
    put, so planning for them would keep a node of idle capacity (``handling.policy.plan_for``).
    A fence taint with no state kubespot can read (written by hand, or an older version) counts
    unless it is a rebalance recommendation's; a state kubespot cannot read is someone else's."""
    text = (_meta(node).get("annotations") or {}).get(STATE_ANNOTATION)
    try:
        state = decode(text)
    except StateError:
        state = None
    if state is not None:
        return state.phase is not Phase.FENCED or state.kind in _GOES_ANYWAY
    for taint in (node.get("spec") or {}).get("taints") or ():
        if isinstance(taint, Mapping) and taint.get("key") in FENCE_TAINTS - {_REBALANCE_TAINT}:
            return True
    return False


def _owned_by(meta: Mapping[str, Any], kind: str) -> bool:
    return any(
        ref.get("kind") == kind and ref.get("apiVersion") == "apps/v1"
        for ref in meta.get("ownerReferences") or ()
    )


def is_reschedulable(pod: Mapping[str, Any]) -> bool:
    """Karpenter's ``IsReschedulable``: a pod that needs a node elsewhere when its node goes:
    active (not finished, not terminating) or a StatefulSet's pod terminating (its controller
    re-creates it under the same name only once it is gone, so it is planned for already), and not
    a DaemonSet's (its own node's copy goes with the node) nor a static (mirror) pod."""
    meta = _meta(pod)
    if (pod.get("status") or {}).get("phase") in _TERMINAL:
        return False
    if meta.get("deletionTimestamp") and not _owned_by(meta, "StatefulSet"):
        return False
    if _MIRROR in (meta.get("annotations") or {}) or _owned_by(meta, "DaemonSet"):
        return False
    return not any(ref.get("kind") == "Node" for ref in meta.get("ownerReferences") or ())


#: Controllers whose pods ``is_reschedulable`` judges itself (a StatefulSet's terminating pod) or that
#: never replace a pod elsewhere (a DaemonSet's, a Node's mirror pod).
_NOT_REPLACED = ("DaemonSet", "Node", "StatefulSet")


def _controller_uid(meta: Mapping[str, Any]) -> str:
    """The uid of the pod's controller (the owner reference with ``controller: true``), or ""."""
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return str(ref.get("uid") or "")
    return ""


def _evicted_from(pod: Mapping[str, Any]) -> str:
    """The controller uid of a pod the drain has already evicted (terminating, not finished, not a
    static pod) and whose controller creates a replacement at once (a ReplicaSet, a Job...), or ""."""
    meta = _meta(pod)
    if not meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in _TERMINAL:
        return ""
    if _MIRROR in (meta.get("annotations") or {}):
        return ""
    refs = [r for r in meta.get("ownerReferences") or () if isinstance(r, Mapping) and r.get("controller")]
    if not refs or refs[0].get("kind") in _NOT_REPLACED:
        return ""
    return _controller_uid(meta)


def _waiting(pod: Mapping[str, Any]) -> bool:
    """Unbound, not terminating, not finished, not gated nor nominated by kube-scheduler's preemption:
    a pod still to be placed, whether kube-scheduler has judged it yet or not."""
    meta, spec, status = _meta(pod), pod.get("spec") or {}, pod.get("status") or {}
    return not (
        spec.get("nodeName")
        or spec.get("schedulingGates")
        or status.get("nominatedNodeName")
        or meta.get("deletionTimestamp")
        or status.get("phase") in _TERMINAL
    )


def _claim_nodes(claims: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Node name -> its NodeClaim (by ``status.nodeName``)."""
    out: dict[str, Mapping[str, Any]] = {}
    for claim in claims:
        node = str((claim.get("status") or {}).get("nodeName") or "")
        if node:
            out[node] = claim
    return out


def doomed_nodes(
    nodes: Iterable[Mapping[str, Any]], claims: Iterable[Obj], *, fence: bool = True
) -> set[str]:
    """Names of the nodes going away: being deleted, their NodeClaim being deleted, or (``fence``)
    fenced by kubespot's interruption handling."""
    by_node = _claim_nodes(claims)
    out: set[str] = set()
    for node in nodes:
        name = _name(node)
        claim = by_node.get(name)
        if (
            _meta(node).get("deletionTimestamp")
            or (claim is not None and _meta(claim).get("deletionTimestamp"))
            or (fence and is_fenced(node))
        ):
            out.add(name)
    return out


@dataclass
class Doomed:
    """A snapshot with its doomed nodes taken out (``without_doomed``)."""

    nodes: list[Obj]
    claims: list[Obj]
    pods: list[Obj]
    #: The reschedulable pods of doomed nodes, unbound (they are to be planned for).
    moving: list[Obj]
    names: set[str]
    #: UIDs of pods (in ``pods``) to plan for now although kube-scheduler may not have judged them
    #: yet: the replacements of pods the drain already evicted from a doomed node.
    held: set[str] = field(default_factory=set)


def without_doomed(
    nodes: Sequence[Obj], claims: Sequence[Obj], pods: Sequence[Obj], doomed: set[str]
) -> Doomed:
    """The snapshot as the simulation must see it: doomed nodes (and their NodeClaims) gone, so no
    pod is planned onto them and their claims are not taken for capacity still to come; their
    reschedulable pods unbound (``moving``), the others (DaemonSet, mirror, finished) dropped with
    their node.

    The drain starts right after the fence and a pass's lists take a while, so some pods may be
    terminating already (evicted) when the snapshot is read: Karpenter's ``IsReschedulable`` drops
    those but a StatefulSet's, which would lose pre-spin for the drain's first tier. kubespot plans
    each such pod whose controller replaces it (a ReplicaSet's, a Job's) through its replacement:
    an unbound pod of the same controller, planned now even before kube-scheduler marks it
    Unschedulable (``held``), or, while there is none yet, the evicted pod itself (``moving``)."""
    if not doomed:
        return Doomed(list(nodes), list(claims), list(pods), [], set())
    kept_pods: list[Obj] = []
    moving: list[Obj] = []
    #: Controller uid -> the pods of doomed nodes the drain already evicted (kube-scheduler has
    #: not necessarily judged their replacements yet, so neither list would plan for them).
    evicted: dict[str, list[Obj]] = {}
    for pod in pods:
        host = str((pod.get("spec") or {}).get("nodeName") or "")
        if host not in doomed:
            kept_pods.append(pod)
        elif is_reschedulable(pod):
            moving.append(_as_replacement(pod))
        elif owner := _evicted_from(pod):
            evicted.setdefault(owner, []).append(pod)
    held: set[str] = set()
    if evicted:
        # Each evicted pod is planned through its replacement once the controller has made it
        # (planned now, judged or not, so the claim holds it), else as the pod to come: never both.
        for pod in kept_pods:
            owner = _controller_uid(_meta(pod))
            if owner in evicted and evicted[owner] and _waiting(pod):
                evicted[owner].pop()
                held.add(str(_meta(pod).get("uid") or ""))
        moving.extend(_as_replacement(p) for waiting in evicted.values() for p in waiting)
    return Doomed(
        [n for n in nodes if _name(n) not in doomed],
        [c for c in claims if str((c.get("status") or {}).get("nodeName") or "") not in doomed],
        kept_pods,
        moving,
        set(doomed),
        held,
    )


def _as_replacement(pod: Obj) -> Obj:
    """``pod`` as the pod that will run elsewhere: unbound, and (a terminating one) as the one its
    controller makes, not the one being deleted."""
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    meta = {k: v for k, v in _meta(pod).items() if k != "deletionTimestamp"}
    return {**pod, "metadata": meta, "spec": spec}


class DoomWatch:
    """Calls ``on_doomed(node)`` once when a node turns doomed (listed first, then as it changes);
    a node that stops being doomed (a rebalance fence undone) may be doomed again later."""

    def __init__(
        self,
        nodes: CustomObjects | Informer,
        claims: CustomObjects | Informer,
        on_doomed: Callable[[str], None],
        *,
        clock: Clock,
        fence: bool = True,
        retry: float = 1.0,
    ) -> None:
        self._nodes = nodes
        self._claims = claims
        self._on_doomed = on_doomed
        self._clock = clock
        self._fence = fence
        self._retry = retry
        self._node_objs: dict[str, Obj] = {}
        self._claim_objs: dict[str, Obj] = {}
        #: Claim name -> its node's name, and node name -> its claim's (the index per-event judging
        #: reads; rebuilt by every full ``_judge``).
        self._node_of: dict[str, str] = {}
        self._claim_on: dict[str, str] = {}
        #: Names of the nodes doomed as last seen.
        self.doomed: set[str] = set()

    def _judge(self) -> None:
        """Judge every node again (after a LIST): O(nodes + claims), once per listing."""
        self._node_of = {
            name: str((c.get("status") or {}).get("nodeName") or "") for name, c in self._claim_objs.items()
        }
        self._claim_on = {node: name for name, node in self._node_of.items() if node}
        now = doomed_nodes(self._node_objs.values(), list(self._claim_objs.values()), fence=self._fence)
        for name in sorted(now - self.doomed):
            self._tell(name)
        self.doomed = now

    def _tell(self, name: str) -> None:
        log.info("provisioning: node %s is going away; planning its pods now (pre-spin)", name)
        self._on_doomed(name)

    def _judge_node(self, name: str) -> None:
        """Judge one node again, from its object and its claim's (O(1)): an informer hands every
        object of a re-list on, so judging the whole cluster per event would make a re-list
        quadratic (Karpenter's ``state/cluster.go`` ``UpdateNode``/``UpdateNodeClaim`` are
        constant work per event too)."""
        node = self._node_objs.get(name) if name else None
        if node is None:
            self.doomed.discard(name)
            return
        claim = self._claim_objs.get(self._claim_on.get(name, ""))
        if doomed_nodes((node,), () if claim is None else (claim,), fence=self._fence):
            if name not in self.doomed:
                self.doomed.add(name)
                self._tell(name)
        else:
            self.doomed.discard(name)

    def _changed(self, store: dict[str, Obj], op: str, obj: Obj) -> None:
        """One watched object changed: store it and judge the node(s) it concerns."""
        name = _name(obj)
        if op == "DELETED":
            store.pop(name, None)
        else:
            store[name] = obj
        if store is self._node_objs:
            self._judge_node(name)
            return
        # A claim: its node now and the node it named before (a claim's nodeName is set once, but
        # a DELETED or a re-created claim must not leave the index pointing at it).
        before = self._node_of.pop(name, "")
        if before and self._claim_on.get(before) == name:
            del self._claim_on[before]
        after = str((obj.get("status") or {}).get("nodeName") or "") if op != "DELETED" else ""
        if after:
            self._node_of[name] = after
            self._claim_on[after] = name
        for node in {before, after} - {""}:
            self._judge_node(node)

    async def _list(self, api: CustomObjects, what: str) -> Any:
        while True:
            try:
                return await api.list()
            except KubeError as err:
                log.warning("provisioning: cannot list %s (retrying): %s", what, err)
                await self._clock.sleep(self._retry)

    async def _follow(self, api: CustomObjects | Informer, store: dict[str, Obj], what: str) -> None:
        if isinstance(api, Informer):
            await self._follow_informer(api, store)
            return
        listing = await self._list(api, what)
        store.clear()
        store.update({_name(o): o for o in listing.items})
        self._judge()
        if not listing.served:
            return  # no NodeClaim CRD: nodes alone are judged
        async for op, obj, relisted in api.watch(listing.resource_version):
            if relisted is not None:
                if not relisted.served:
                    # A 404 is no deletion of every claim (reflector.go list): kept; the client
                    # lists again, and watches only from a served LIST's version.
                    continue
                store.clear()
                store.update({_name(o): o for o in relisted.items})
                self._judge()
            elif obj is not None:
                self._changed(store, op, obj)

    async def _follow_informer(self, api: Informer, store: dict[str, Obj]) -> None:
        """The same from an informer the provisioner reads too: its handlers run once its cache
        holds the change, so the pass a doomed node triggers sees it doomed."""

        def changed(op: str, obj: Obj) -> None:
            self._changed(store, op, obj)

        unsubscribe = api.subscribe(changed)
        try:
            await api.wait_synced()
            store.clear()
            store.update({_name(o): o for o in api.items()})
            self._judge()
            await asyncio.Event().wait()
        finally:
            unsubscribe()
            # A replica that stops leading keeps no copy of the cluster (the informer drops its own).
            store.clear()
            self.doomed.clear()

    async def run(self) -> None:
        """Follow Nodes and NodeClaims until cancelled (the adapter re-lists a broken watch)."""
        await asyncio.gather(
            self._follow(self._nodes, self._node_objs, "nodes"),
            self._follow(self._claims, self._claim_objs, "nodeclaims"),
        )
