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
    WorkQueue,
    available_in,
    controller_ref,
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
    watches = (POD_KEY, NODE_KEY, DS_KEY)

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.ds_rt = self.rt("apps", "v1", "daemonsets")
        self.pod_rt = self.rt("", "v1", "pods")
        self.node_rt = self.rt("", "v1", "nodes")
        #: DaemonSet uid -> node name -> keys of its pods targeting that node.
        self.ds_pods: dict[str, dict[str, set[ObjKey]]] = {}
        #: DaemonSet uid -> nodes that should run its pod (set by a full sync, kept by node syncs).
        self.eligible: dict[str, set[str]] = {}
        #: DaemonSet uid -> (hash of the template last seen, revision label of current pods).
        self.revisions: dict[str, tuple[str, str]] = {}
        self.full = WorkQueue[ObjKey]("daemonset", self.sync)
        self.nodes = WorkQueue[str]("daemonset-node", self.sync_node)
        # Status is O(nodes) per DaemonSet: batch a little longer so a drain's pod churn coalesces.
        self.status = WorkQueue[ObjKey]("daemonset-status", self.sync_status, batch_delay=0.2)

    def start(self) -> None:
        super().start()
        for pod in self.store.iter_objects(self.pod_rt):
            self._index_pod(pod, None, "ADDED")
        for ds in self.store.iter_objects(self.ds_rt):
            self.full.add((ds["metadata"]["namespace"], ds["metadata"]["name"]))
        self.spawn(self.full.run(self.pacer))
        self.spawn(self.nodes.run(self.pacer))
        self.spawn(self.status.run(self.pacer))

    def on_event(self, ev: WatchEvent) -> None:
        if ev.rkey == POD_KEY:
            if not self._index_pod(ev.obj, ev.old, ev.type):
                return
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
                and old["metadata"].get("labels") == ev.obj["metadata"].get("labels")
                and old.get("spec") == ev.obj.get("spec")
                and bool(old["metadata"].get("deletionTimestamp"))
                == bool(ev.obj["metadata"].get("deletionTimestamp"))
            ):
                return  # a heartbeat: nothing that decides where daemon pods run changed
            self.nodes.add(ev.obj["metadata"]["name"])
        elif ev.rkey == DS_KEY:
            meta = ev.obj["metadata"]
            if ev.type == "DELETED":
                self.revisions.pop(meta["uid"], None)
                self.eligible.pop(meta["uid"], None)
            elif ev.type == "ADDED" or ev.old is None or ev.old.get("spec") != ev.obj.get("spec"):
                self.full.add((meta["namespace"], meta["name"]))

    def _entry(self, pod: Obj | None) -> tuple[str, str] | None:
        ref = controller_ref(pod)
        if pod is None or ref is None or ref.get("kind") != "DaemonSet" or not ref.get("uid"):
            return None
        node = _target_node(pod)
        return (str(ref["uid"]), node) if node else None

    def _index_pod(self, pod: Obj, old: Obj | None, type_: str) -> bool:
        """Update the DaemonSet/node index; False when the pod is no DaemonSet's (before or after)."""
        meta = pod["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        before = self._entry(pod if type_ == "DELETED" else old) if type_ != "ADDED" else None
        after = self._entry(pod) if type_ != "DELETED" else None
        if before is None and after is None:
            return False
        if before is not None and before != after:
            by_node = self.ds_pods.get(before[0], {})
            bucket = by_node.get(before[1])
            if bucket is not None:
                bucket.discard(key)
                if not bucket:
                    del by_node[before[1]]
        if after is not None:
            self.ds_pods.setdefault(after[0], {}).setdefault(after[1], set()).add(key)
        return True

    def _pods_on(self, uid: str, node: str) -> list[Obj]:
        keys = self.ds_pods.get(uid, {}).get(node, ())
        return [p for k in keys if (p := self.store.find(self.pod_rt, *k)) is not None]

    # -- revisions --------------------------------------------------------------------------------

    def _revision(self, ds: Obj) -> str:
        uid = ds["metadata"]["uid"]
        h = template_hash((ds.get("spec") or {}).get("template"))
        known = self.revisions.get(uid)
        if known is not None and known[0] == h:
            return known[1]
        if known is None:
            labels: Counter[str] = Counter()
            for node in list(self.ds_pods.get(uid, {})):
                for p in self._pods_on(uid, node):
                    label = (p["metadata"].get("labels") or {}).get(REVISION_LABEL)
                    if label:
                        labels[str(label)] += 1
            rev = labels.most_common(1)[0][0] if labels else h
        else:
            rev = h
        self.revisions[uid] = (h, rev)
        return rev

    # -- reconcile --------------------------------------------------------------------------------

    def sync(self, key: ObjKey) -> None:
        ds = self.store.find(self.ds_rt, *key)
        if ds is None or is_terminating(ds):
            return
        uid = ds["metadata"]["uid"]
        rev = self._revision(ds)
        pod_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        tolerations = daemon_tolerations(pod_spec)
        eligible: set[str] = set()
        seen: set[str] = set()
        for node in self.store.iter_objects(self.node_rt):
            name = node["metadata"]["name"]
            seen.add(name)
            run, keep = node_eligibility(pod_spec, tolerations, node)
            if run:
                eligible.add(name)
            self._reconcile(ds, rev, name, run, keep, self._pods_on(uid, name))
        self.eligible[uid] = eligible
        for name in [n for n in self.ds_pods.get(uid, {}) if n not in seen]:
            self._reconcile(ds, rev, name, False, False, self._pods_on(uid, name))
        self.status.add(key)

    def sync_node(self, node_name: str) -> None:
        node = self.store.find(self.node_rt, None, node_name)
        for ds in list(self.store.iter_objects(self.ds_rt)):
            uid = ds["metadata"]["uid"]
            if is_terminating(ds) or uid not in self.eligible:
                continue  # a full sync is pending for a DaemonSet not seen yet
            pod_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
            run, keep = (False, False)
            if node is not None:
                run, keep = node_eligibility(pod_spec, daemon_tolerations(pod_spec), node)
            if run:
                self.eligible[uid].add(node_name)
            else:
                self.eligible[uid].discard(node_name)
            self._reconcile(ds, self._revision(ds), node_name, run, keep, self._pods_on(uid, node_name))
            self.status.add((ds["metadata"]["namespace"], ds["metadata"]["name"]))

    def _reconcile(self, ds: Obj, rev: str, node: str, run: bool, keep: bool, pods: list[Obj]) -> None:
        ns = ds["metadata"]["namespace"]
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
        if live or not run or len(pods) > len(live):
            return  # running already, not wanted here, or an old pod is still terminating
        self._create(ds, rev, node)

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
        uid = ds["metadata"]["uid"]
        eligible = self.eligible.get(uid)
        if eligible is None:
            return  # the pending full sync queues the status
        spec = ds.get("spec") or {}
        rev = self._revision(ds)
        min_ready = int(spec.get("minReadySeconds", 0))
        now = self.store.clock()
        current = misscheduled = ready = available = updated = 0
        recheck: float | None = None
        outdated: list[Obj] = []
        for node in list(self.ds_pods.get(uid, {})):
            live = [p for p in self._pods_on(uid, node) if not is_terminating(p)]
            if not live:
                continue
            if node not in eligible:
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
        desired = len(eligible)
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
