"""``kubespot plan``: what the provisioner would launch for the pending pods, and what it costs.

Reads the cluster (nodes, NodeClaims, pods, DaemonSets, NodePools, EC2NodeClasses, and the
PersistentVolumeClaims, PersistentVolumes and StorageClasses that pin pods to zones) through the usual
Kubernetes settings and the instance types, offerings and prices through the EC2 and Pricing APIs
(the usual AWS settings, ``KUBESPOT_AWS_ENDPOINT_URL`` for a simulator), adds what ``-f`` files bring
(NodePools, EC2NodeClasses, DaemonSets, claims, volumes, classes, and Pods, Deployments,
ReplicaSets, StatefulSets and Jobs to add), runs the provisioner's scheduling simulation and
prints the plan. It writes nothing, to the cluster or to AWS. The instance types come through the
``CloudProvider`` (``aws.cloud.AwsCloud`` over the EC2 catalog), offered in the zones of each
EC2NodeClass's resolved subnets when its status has them (every zone otherwise). What the
controller's launch path avoids now (unavailable offerings, risky spot pools) comes from the status
ConfigMap the elected controller publishes (``--status-configmap``, ``cloud.avoided_status``):
``--why`` lists them, ``--output json`` gives them as ``avoided_offerings`` with
``avoided_offerings_source`` (the ConfigMap, its age, and why they are not known when it is absent
or stale).

Exit codes: 0 with a plan (unschedulable pods included: they are part of the answer), 1 when the
cluster, the catalog or a file cannot be read, 2 for bad settings.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

import orjson
import yaml

from .aws import AwsClients, AwsError
from .aws.catalog import Catalog
from .aws.cloud import AwsCloud
from .aws.resolved import ResolvedNodeClass
from .cloud import CloudProvider
from .cloud.avoided_status import DEFAULT_NAME, Published, read
from .config import loader
from .config.aws import AwsSettings
from .config.kube import KubeSettings
from .config.pricing import PricingSettings
from .kube import KubeError, connect
from .kube.custom import CustomObjects
from .model.clock import SystemClock
from .process.command import one_shot
from .scheduling.api.conditions import Condition
from .scheduling.cluster import workload_claims, workload_pods
from .scheduling.cluster_plan import plan_cluster, pools_to_plan
from .scheduling.pods import PodView
from .scheduling.report import plan_json, plan_text, pod_story, pod_story_json
from .scheduling.simulate import Plan
from .scheduling.volumes import MalformedVolume

Obj = dict[str, Any]

#: kind -> the API path the cluster serves it at.
CLUSTER_PATHS = {
    "Node": "api/v1/nodes",
    "Pod": "api/v1/pods",
    "DaemonSet": "apis/apps/v1/daemonsets",
    "NodePool": "apis/karpenter.sh/v1/nodepools",
    "NodeClaim": "apis/karpenter.sh/v1/nodeclaims",
    "EC2NodeClass": "apis/karpenter.k8s.aws/v1/ec2nodeclasses",
    "PersistentVolumeClaim": "api/v1/persistentvolumeclaims",
    "PersistentVolume": "api/v1/persistentvolumes",
    "StorageClass": "apis/storage.k8s.io/v1/storageclasses",
    "Namespace": "api/v1/namespaces",
}
_WORKLOADS = {"Pod", "Deployment", "ReplicaSet", "StatefulSet", "Job"}


@dataclasses.dataclass(frozen=True)
class PlanCommandSettings:
    """What ``kubespot plan`` is configured with: the cluster, AWS and the price settings."""

    kube: KubeSettings = dataclasses.field(default_factory=KubeSettings)
    aws: AwsSettings = dataclasses.field(default_factory=AwsSettings)
    pricing: PricingSettings = dataclasses.field(default_factory=PricingSettings)


class InputError(Exception):
    """A file that cannot be read or parsed."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        default=[],
        metavar="FILE",
        help="manifests to add (NodePools, EC2NodeClasses, DaemonSets, workloads); '-' reads stdin",
    )
    parser.add_argument("--output", "-o", choices=("text", "json"), default="text")
    parser.add_argument("--why", metavar="NAMESPACE/POD", help="where one pod goes, and why")
    parser.add_argument(
        "--no-cluster",
        action="store_true",
        help="plan from the files alone (no existing nodes or pods)",
    )
    parser.add_argument(
        "--status-configmap",
        metavar="NAMESPACE/NAME",
        default=f"kube-system/{DEFAULT_NAME}",
        help=(
            "the controller's status ConfigMap, where it publishes the offerings it avoids now "
            "(provisioning.status_configmap in the controller's namespace; default %(default)s)"
        ),
    )
    parser.add_argument("--config", help="settings file (YAML), as for the controller")
    parser.add_argument("--verbose", "-v", action="store_true")


def read_manifests(paths: Iterable[str], stdin: TextIO | None = None) -> list[Obj]:
    """Every object in ``paths`` (multi-document YAML or JSON; ``kind: List`` read item by item)."""
    out: list[Obj] = []
    for path in paths:
        try:
            text = (stdin or sys.stdin).read() if path == "-" else Path(path).read_text()
            docs = list(yaml.safe_load_all(text))
        except (OSError, yaml.YAMLError) as exc:
            raise InputError(f"{path}: {exc}") from exc
        for doc in docs:
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise InputError(f"{path}: expected Kubernetes objects, found {type(doc).__name__}")
            out.extend(doc.get("items") or [] if doc.get("kind") == "List" else [doc])
    return out


def _by_kind(objs: Iterable[Obj]) -> dict[str, list[Obj]]:
    kinds: dict[str, list[Obj]] = {}
    for obj in objs:
        kinds.setdefault(str(obj.get("kind") or ""), []).append(obj)
    return kinds


_NAMESPACED = {"Pod", "DaemonSet", "PersistentVolumeClaim"}


def _name(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name); a namespaced object without a namespace is in ``default``, as kubectl puts it."""
    meta = obj.get("metadata") or {}
    default = "default" if obj.get("kind") in _NAMESPACED else ""
    return str(meta.get("namespace") or default), str(meta.get("name") or "")


def _merged(cluster: list[Obj], added: list[Obj]) -> list[Obj]:
    """The cluster's objects with those of the files, a file's object replacing one of its name
    (and namespace)."""
    names = {_name(o) for o in added}
    return [o for o in cluster if _name(o) not in names] + added


def _readable(obj: Obj) -> None:
    """Raise ValueError naming ``obj`` when the simulation cannot read its pod spec."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    if obj.get("kind") == "DaemonSet":
        spec = ((spec.get("template") or {}).get("spec")) or {}
    try:
        PodView.of({"metadata": meta, "spec": spec})
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(
            f"{obj.get('kind')} {meta.get('namespace', 'default')}/{meta.get('name')}: {exc}"
        ) from exc


def subnet_zones(nodeclasses: Iterable[Obj]) -> dict[str, set[str]]:
    """The zones of each EC2NodeClass's resolved subnets (``status.subnets``, as the provisioning
    controller or Karpenter wrote it): its NodePools are offered capacity there only, as Karpenter's
    instance type provider offers it. A class without resolved subnets is left out (every zone)."""
    out: dict[str, set[str]] = {}
    for obj in nodeclasses:
        status = obj.get("status")
        subnets = status.get("subnets") if isinstance(status, Mapping) else None
        if not isinstance(subnets, list):
            continue
        zones = {str(s["zone"]) for s in subnets if isinstance(s, Mapping) and s.get("zone")}
        if zones:
            out[_name(obj)[1]] = zones
    return out


async def build_plan(
    objects: Mapping[str, list[Obj]], cloud: CloudProvider
) -> tuple[Plan, dict[str, Condition]]:
    """The plan for ``objects`` (by kind; workloads already expanded into pods) with the instance
    types ``cloud`` offers each NodePool (``AwsCloud``: the EC2 catalog; ``FakeCloud`` in tests):
    the provisioner's own flow (``scheduling.cluster_plan``), without its in-memory state."""
    todo = pools_to_plan(objects.get("NodePool", []), objects.get("EC2NodeClass", []))
    types = {pool.name: await cloud.instance_types(pool, nodeclass) for pool, nodeclass in todo.pools}
    plan, _ = plan_cluster(objects, [pool for pool, _ in todo.pools], types)
    return plan, todo.conditions


async def _cluster(settings: KubeSettings, status: str) -> tuple[dict[str, list[Obj]], Published]:
    """The cluster's objects, and what the controller's status ConfigMap ``status`` says it avoids."""
    kube = connect(settings)
    try:
        lists = await asyncio.gather(*(kube.list_objects(path) for path in CLUSTER_PATHS.values()))
        published = await _published(CustomObjects(kube, _configmaps(status)), status)
    finally:
        await kube.close()
    return dict(zip(CLUSTER_PATHS, lists, strict=True)), published


def _configmaps(where: str) -> str:
    namespace = where.partition("/")[0] if "/" in where else "kube-system"
    return f"api/v1/namespaces/{namespace}/configmaps"


async def _published(configmaps: CustomObjects, where: str) -> Published:
    """The offerings avoided now per the ConfigMap ``where`` (not known: why, in ``why_unknown``)."""
    name = where.rpartition("/")[2]
    try:
        obj = await configmaps.get(name)
    except KubeError as exc:
        return Published(None, None, f"cannot read the status ConfigMap {where}: {exc}")
    return read(obj, SystemClock().now(), where)


async def run(args: argparse.Namespace, *, out: TextIO, stdin: TextIO | None = None) -> int:
    settings = loader.load(PlanCommandSettings, namespace=args)
    try:
        added = _by_kind(read_manifests(args.filename, stdin))
    except InputError as exc:
        print(f"kubespot plan: {exc}", file=sys.stderr)
        return 1
    published = Published(None, None, "planned without the cluster (--no-cluster)")
    try:
        if args.no_cluster:
            cluster: dict[str, list[Obj]] = {}
        else:
            cluster, published = await _cluster(settings.kube, args.status_configmap)
    except KubeError as exc:
        print(f"kubespot plan: cannot read the cluster: {exc}", file=sys.stderr)
        return 1
    objects = {kind: _merged(cluster.get(kind, []), added.get(kind, [])) for kind in CLUSTER_PATHS}
    try:
        objects["Pod"] = objects["Pod"] + workload_pods(
            o for kind in _WORKLOADS - {"Pod"} for o in added.get(kind, [])
        )
        # A StatefulSet's claims the cluster does not have yet: its controller would create them.
        claims = objects["PersistentVolumeClaim"]
        have = {_name(c) for c in claims}
        for claim in workload_claims(added.get("StatefulSet", [])):
            if _name(claim) not in have:
                claims.append(claim)
        # Every pod and DaemonSet template read now: one that cannot be (a request "1Gb", a
        # selector term without a key) is named before the catalog is fetched, not a traceback.
        for obj in (*objects["Pod"], *objects["DaemonSet"]):
            _readable(obj)
    except (ValueError, TypeError, KeyError) as exc:
        print(f"kubespot plan: cannot plan for {exc}", file=sys.stderr)
        return 1
    async with AwsClients(settings.aws) as clients:
        if not clients.region:
            print("kubespot plan: no AWS region: set KUBESPOT_AWS_REGION or AWS_REGION", file=sys.stderr)
            return 1
        catalog = Catalog(clients, clients.region, settings.pricing)
        try:
            await catalog.refresh()
        except AwsError as exc:
            print(f"kubespot plan: cannot read the instance types: {exc}", file=sys.stderr)
            return 1
        if not catalog.infos():
            print("kubespot plan: the EC2 API offered no instance types", file=sys.stderr)
            return 1
        cloud = AwsCloud(catalog)
        for name, zones in subnet_zones(objects.get("EC2NodeClass", [])).items():
            cloud.set_resolved(name, ResolvedNodeClass.in_zones(zones))
        try:
            plan, conditions = await build_plan(objects, cloud)
        except MalformedVolume as exc:
            print(f"kubespot plan: cannot plan for {exc}", file=sys.stderr)
            return 1
    # The unavailable-offerings cache and the pool risk live in the controller's memory: what it
    # published in its status ConfigMap, when fresh; else the stories say they are not known.
    avoided = published.avoided
    if args.why:
        told = (
            _with_source(pod_story_json(plan, args.why, avoided), published, args.status_configmap)
            if args.output == "json"
            else pod_story(plan, args.why, avoided, not_known=published.why_unknown)
        )
        if told is None:
            print(f"kubespot plan: {args.why} is not a pending pod of this plan", file=sys.stderr)
            return 1
        text = told if isinstance(told, str) else orjson.dumps(told, option=orjson.OPT_INDENT_2).decode()
        out.write(text + "\n")
    elif args.output == "json":
        out.write(
            orjson.dumps(
                _with_source(plan_json(plan, conditions, avoided), published, args.status_configmap),
                option=orjson.OPT_INDENT_2,
            ).decode()
            + "\n"
        )
    else:
        out.write(plan_text(plan, conditions) + "\n")
    return 0


def _with_source(out: dict[str, Any] | None, published: Published, where: str) -> dict[str, Any] | None:
    """``avoided_offerings_source``: the ConfigMap read, its age in seconds (null: absent), and,
    when the offerings are not known, why."""
    if out is not None and "avoided_offerings" in out:
        age = None if published.age is None else round(published.age)
        source: dict[str, Any] = {"configmap": where, "age_seconds": age}
        if published.avoided is None:
            source["not_known"] = published.why_unknown
        out["avoided_offerings_source"] = source
    return out


def main(args: argparse.Namespace) -> int:
    return one_shot("plan", lambda: run(args, out=sys.stdout), verbose=args.verbose)
