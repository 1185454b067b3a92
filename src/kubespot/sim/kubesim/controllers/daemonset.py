"""DaemonSet controller: one pod per eligible node.

A node is eligible when the pod's nodeSelector and required node affinity match it and every
NoSchedule/NoExecute taint is tolerated; a running pod stays while its NoExecute taints are tolerated
(upstream ``NodeShouldRunDaemonPod``). The pod template gets upstream's automatic tolerations
(not-ready/unreachable NoExecute; disk/memory/pid-pressure and unschedulable NoSchedule;
network-unavailable for hostNetwork), so cordoned nodes still run daemon pods. Pods are created with
upstream's required affinity ``matchFields metadata.name In [node]`` and also bound directly
(``spec.nodeName``), so they land even when no scheduler runs.

Work is split so no event costs O(cluster): a node event reconciles that one node for every
DaemonSet; a DaemonSet change reconciles all nodes for that DaemonSet; statuses are recomputed
debounced from a per-DaemonSet node->pods index. Node heartbeats (status-only changes) are ignored.

Revisions: the ``controller-revision-hash`` label of the pods marks the template they came from.
ControllerRevision objects are not written; the current revision is remembered in memory (on first
sight, the label most of the DaemonSet's pods carry, so a generated cluster is not rolled). A
template change rolls pods node by node within ``maxUnavailable`` (RollingUpdate) or waits for
deletions (OnDelete).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..store import NODE_KEY, POD_KEY, Obj, ObjKey, Store, WatchEvent
from . import Controller, ControllerConfig
from .replicaset import (
    OwnerIndex,
    WorkQueue,
    available_in,
    controller_uid,
    create_generated,
    delete_quietly,
    int_or_percent,
    is_finished,
    is_ready,
    is_terminating,
    owner_name,
    pod_from_template,
    template_hash,
    write_status,
)

DS_KEY = ("apps", "daemonsets")
REVISION_LABEL = "controller-revision-hash"
GENERATION_LABEL = "pod-template-generation"

AUTO_TOLERATIONS: tuple[tuple[str, str], ...] = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)
NETWORK_UNAVAILABLE = ("node.kubernetes.io/network-unavailable", "NoSchedule")


def daemon_tolerations(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pod's tolerations plus the ones upstream's DaemonSet controller adds."""
    out = [dict(t) for t in pod_spec.get("tolerations") or ()]
    wanted = list(AUTO_TOLERATIONS)
    if pod_spec.get("hostNetwork"):
        wanted.append(NETWORK_UNAVAILABLE)
    for key, effect in wanted:
        if not any(t.get("key") == key and t.get("effect") == effect for t in out):
            out.append({"key": key, "operator": "Exists", "effect": effect})
    return out


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    effect = toleration.get("effect")
    if effect and effect != taint.get("effect"):
        return False
    op = toleration.get("operator", "Equal")
    key = toleration.get("key")
    if not key:
        return bool(op == "Exists")
    if key != taint.get("key"):
        return False
    return bool(op == "Exists" or toleration.get("value", "") == taint.get("value", ""))


def _expr_matches(expr: Mapping[str, Any], value: str | None) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or ()]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            a, b = int(value), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def node_selector_term_matches(term: Mapping[str, Any], node: Obj) -> bool:
    labels = node["metadata"].get("labels") or {}
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches nothing, as upstream
    for expr in exprs:
        if not _expr_matches(expr, labels.get(str(expr.get("key")))):
            return False
    for expr in fields:
        value = node["metadata"]["name"] if expr.get("key") == "metadata.name" else None
        if not _expr_matches(expr, value):
            return False
    return True


def node_eligibility(
    pod_spec: Mapping[str, Any], tolerations: list[dict[str, Any]], node: Obj
) -> tuple[bool, bool]:
    """(should run, should continue running) for a daemon pod with ``pod_spec`` on ``node``."""
    if is_terminating(node):
        return False, False
    labels = node["metadata"].get("labels") or {}
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False, False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is not None:
        terms = required.get("nodeSelectorTerms") or []
        if not any(node_selector_term_matches(t, node) for t in terms):
            return False, False
    run = keep = True
    for taint in (node.get("spec") or {}).get("taints") or ():
        effect = taint.get("effect")
        if effect not in ("NoSchedule", "NoExecute"):
            continue
        if any(tolerates(t, taint) for t in tolerations):
            continue
        run = False
        if effect == "NoExecute":
            keep = False
    return run, keep


def _target_node(pod: Obj) -> str | None:
    """The node a daemon pod is for: its nodeName, or the node its matchFields affinity names."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or ():
        for f in term.get("matchFields") or ():
            if f.get("key") == "metadata.name" and f.get("operator") == "In" and f.get("values"):
                return str(f["values"][0])
    return None


def _node_affinity(spec: Obj, node: str) -> None:
    """Upstream ``ReplaceDaemonSetPodNodeNameNodeAffinity``: pin the pod to ``node`` by field."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    affinity = spec.setdefault("affinity", {})
    na = affinity.setdefault("nodeAffinity", {})
    na["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [term]}


class DaemonSetController(Controller):
    name = "daemonset"

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.ds_rt = self.rt("apps", "v1", "daemonsets")
        self.pod_rt = self.rt("", "v1", "pods")
        self.node_rt = self.rt("", "v1", "nodes")
        self.pods = OwnerIndex("DaemonSet")
        #: DaemonSet uid -> (hash of the template last seen, revision label of current pods).
        self.revisions: dict[str, tuple[str, str]] = {}
        #: Node name -> keys of DaemonSet-owned pods targeting it.
        self.node_pods: dict[str, set[ObjKey]] = {}
        self.full = WorkQueue[ObjKey]("daemonset", self.sync)
        self.nodes = WorkQueue[str]("daemonset-node", self.sync_node)
        self.status = WorkQueue[ObjKey]("daemonset-status", self.sync_status, batch_delay=0.02)

    def start(self) -> None:
        super().start()
        for pod in self.store.iter_objects(self.pod_rt):
            self.pods.apply("ADDED", pod, None)
            if owner_name(pod, "DaemonSet"):
                node = _target_node(pod)
                if node:
                    self.node_pods.setdefault(node, set()).add(
                        (pod["metadata"]["namespace"], pod["metadata"]["name"])
                    )
        for ds in self.store.iter_objects(self.ds_rt):
            self.full.add((ds["metadata"]["namespace"], ds["metadata"]["name"]))
        self.spawn(self.full.run())
        self.spawn(self.nodes.run())
        self.spawn(self.status.run())

    def on_event(self, ev: WatchEvent) -> None:
        if ev.rkey == POD_KEY:
            before, after = self.pods.apply(ev.type, ev.obj, ev.old)
            if before is None and after is None:
                return
            self._index_node(ev)
            ns = ev.obj["metadata"].get("namespace", "")
            for obj in (ev.old, ev.obj):
                name = owner_name(obj, "DaemonSet")
                if name:
                    self.status.add((ns, name))
            if ev.type == "DELETED" or is_terminating(ev.obj) or is_finished(ev.obj):
                node = _target_node(ev.obj)
                if node:
                    self.nodes.add(node)
        elif ev.rkey == NODE_KEY:
            old = ev.old
            if (
                ev.type == "MODIFIED"
                and old is not None
                and (
                    old["metadata"].get("labels") == ev.obj["metadata"].get("labels")
                    and old.get("spec") == ev.obj.get("spec")
                    and bool(old["metadata"].get("deletionTimestamp"))
                    == bool(ev.obj["metadata"].get("deletionTimestamp"))
                )
            ):
                return
            self.nodes.add(ev.obj["metadata"]["name"])
        elif ev.rkey == DS_KEY:
            meta = ev.obj["metadata"]
            if ev.type == "DELETED":
                self.revisions.pop(meta["uid"], None)
            else:
                self.full.add((meta["namespace"], meta["name"]))

    def _index_node(self, ev: WatchEvent) -> None:
        meta = ev.obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        before = _target_node(ev.old) if ev.old is not None and ev.type != "ADDED" else None
        after = _target_node(ev.obj) if ev.type != "DELETED" and owner_name(ev.obj, "DaemonSet") else None
        if ev.type == "DELETED":
            before = _target_node(ev.obj)
        if before and before != after:
            bucket = self.node_pods.get(before)
            if bucket is not None:
                bucket.discard(key)
                if not bucket:
                    del self.node_pods[before]
        if after:
            self.node_pods.setdefault(after, set()).add(key)

    # -- revisions --------------------------------------------------------------------------------

    def _revision(self, ds: Obj, pods: list[Obj]) -> str:
        uid = ds["metadata"]["uid"]
        h = template_hash((ds.get("spec") or {}).get("template"))
        known = self.revisions.get(uid)
        if known is not None and known[0] == h:
            return known[1]
        if known is None:
            labels = Counter((p["metadata"].get("labels") or {}).get(REVISION_LABEL) for p in pods)
            labels.pop(None, None)
            rev = labels.most_common(1)[0][0] if labels else h
        else:
            rev = h
        self.revisions[uid] = (h, str(rev))
        return str(rev)

    # -- reconcile --------------------------------------------------------------------------------

    def _by_node(self, ds: Obj) -> tuple[list[Obj], dict[str, list[Obj]]]:
        pods = self.pods.objects(self.store, self.pod_rt, ds["metadata"]["uid"])
        by_node: dict[str, list[Obj]] = {}
        for p in pods:
            node = _target_node(p)
            if node:
                by_node.setdefault(node, []).append(p)
        return pods, by_node

    def sync(self, key: ObjKey) -> None:
        ds = self.store.find(self.ds_rt, *key)
        if ds is None or is_terminating(ds):
            return
        pods, by_node = self._by_node(ds)
        rev = self._revision(ds, pods)
        seen: set[str] = set()
        for node in self.store.iter_objects(self.node_rt):
            name = node["metadata"]["name"]
            seen.add(name)
            self._reconcile(ds, rev, node, by_node.get(name, []))
        for name, node_pods in by_node.items():
            if name not in seen:
                self._reconcile(ds, rev, None, node_pods)
        self.status.add(key)

    def sync_node(self, node_name: str) -> None:
        node = self.store.find(self.node_rt, None, node_name)
        on_node = [p for k in self.node_pods.get(node_name, ()) if (p := self.store.find(self.pod_rt, *k))]
        for ds in list(self.store.iter_objects(self.ds_rt)):
            if is_terminating(ds):
                continue
            uid = ds["metadata"]["uid"]
            owned = self.pods.objects(self.store, self.pod_rt, uid) if uid not in self.revisions else []
            rev = self._revision(ds, owned)
            pods = [p for p in on_node if controller_uid(p) == uid]
            self._reconcile(ds, rev, node, pods)
            self.status.add((ds["metadata"]["namespace"], ds["metadata"]["name"]))

    def _reconcile(self, ds: Obj, rev: str, node: Obj | None, pods: list[Obj]) -> None:
        ns = ds["metadata"]["namespace"]
        template = (ds.get("spec") or {}).get("template") or {}
        pod_spec = template.get("spec") or {}
        run, keep = (
            (False, False) if node is None else node_eligibility(pod_spec, daemon_tolerations(pod_spec), node)
        )
        live = [p for p in pods if not is_terminating(p)]
        for p in live:
            if (p.get("status") or {}).get("phase") == "Failed":
                delete_quietly(self.store, self.pod_rt, ns, p["metadata"]["name"])
        live = [p for p in live if (p.get("status") or {}).get("phase") != "Failed"]
        if not keep:
            for p in live:
                delete_quietly(self.store, self.pod_rt, ns, p["metadata"]["name"])
            return
        if len(live) > 1:
            # Keep the oldest daemon pod on a node, as upstream does with duplicates.
            live.sort(key=lambda p: str(p["metadata"].get("creationTimestamp", "")))
            for p in live[1:]:
                delete_quietly(self.store, self.pod_rt, ns, p["metadata"]["name"])
            return
        if live or not run or node is None or len(pods) > len(live):
            return  # running already, not wanted here, or an old pod is still terminating
        self._create(ds, rev, node["metadata"]["name"])

    def _create(self, ds: Obj, rev: str, node: str) -> None:
        spec = ds.get("spec") or {}
        pod = pod_from_template(ds, spec.get("template"))
        meta = pod["metadata"]
        meta["generateName"] = f"{ds['metadata']['name']}-"
        meta["labels"][REVISION_LABEL] = rev
        ann = ds["metadata"].get("annotations") or {}
        meta["labels"][GENERATION_LABEL] = str(
            ann.get("deprecated.daemonset.template.generation", ds["metadata"].get("generation", 1))
        )
        pspec = pod["spec"]
        pspec["tolerations"] = daemon_tolerations(pspec)
        _node_affinity(pspec, node)
        pspec["nodeName"] = node
        create_generated(self.store, self.pod_rt, pod)

    # -- status and rolling update ----------------------------------------------------------------

    def sync_status(self, key: ObjKey) -> None:
        ds = self.store.find(self.ds_rt, *key)
        if ds is None:
            return
        spec = ds.get("spec") or {}
        pod_spec = (spec.get("template") or {}).get("spec") or {}
        tolerations = daemon_tolerations(pod_spec)
        pods, by_node = self._by_node(ds)
        rev = self._revision(ds, pods)
        min_ready = int(spec.get("minReadySeconds", 0))
        now = self.store.clock()
        desired = current = misscheduled = ready = available = updated = 0
        recheck: float | None = None
        outdated: list[Obj] = []
        for node in self.store.iter_objects(self.node_rt):
            run, _keep = node_eligibility(pod_spec, tolerations, node)
            live = [p for p in by_node.get(node["metadata"]["name"], ()) if not is_terminating(p)]
            if run:
                desired += 1
            if not live:
                continue
            if not run:
                misscheduled += 1
                continue
            current += 1
            pod = live[0]
            is_updated = (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) == rev
            updated += 1 if is_updated else 0
            left = available_in(pod, min_ready, now)
            if left is not None:
                ready += 1
                if left <= 0:
                    available += 1
                else:
                    recheck = left if recheck is None else min(recheck, left)
            if not is_updated:
                outdated.append(pod)
        status = {
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": current,
            "numberMisscheduled": misscheduled,
            "numberReady": ready,
            "numberAvailable": available,
            "updatedNumberScheduled": updated,
            "observedGeneration": ds["metadata"].get("generation", 1),
        }
        unavailable = desired - available
        if unavailable > 0:
            status["numberUnavailable"] = unavailable
        write_status(
            self.store, self.ds_rt, ds, status, drop=() if unavailable > 0 else ("numberUnavailable",)
        )
        if recheck is not None:
            self.status.add_after(key, recheck + 0.01)
        strategy = spec.get("updateStrategy") or {}
        if outdated and strategy.get("type", "RollingUpdate") == "RollingUpdate":
            max_unavailable = max(
                1,
                int_or_percent(
                    (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1), desired, round_up=True
                ),
            )
            # Pods being replaced count as unavailable (their nodes lack an available pod).
            budget = max_unavailable - unavailable
            outdated.sort(key=lambda p: (is_ready(p), str(p["metadata"].get("creationTimestamp", ""))))
            for p in outdated:
                if budget <= 0 and is_ready(p):
                    break
                delete_quietly(self.store, self.pod_rt, key[0], p["metadata"]["name"])
                if is_ready(p):
                    budget -= 1
