"""The resource types kubesim serves: built-in kinds plus those CustomResourceDefinitions add.

Discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/<group>/<version>`) are generated from this
registry, so what a client discovers is exactly what the server routes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
NO_COLLECTION_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One served resource (e.g. ``pods`` in core/v1)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    #: Subresource name -> kind of its request/response body.
    subresources: Mapping[str, str] = field(default_factory=dict)
    categories: tuple[str, ...] = ()
    #: CRD additionalPrinterColumns, used for Table output.
    printer_columns: tuple[Mapping[str, Any], ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @cached_property
    def key(self) -> tuple[str, str]:
        """Storage key: objects are shared across the versions of one group/resource."""
        return (self.group, self.plural)

    @property
    def qualified(self) -> str:
        """``pods`` or ``deployments.apps``: how upstream names a resource in Status messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _rt(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    sub: Mapping[str, str] | None = None,
    verbs: tuple[str, ...] = ALL_VERBS,
    categories: tuple[str, ...] = (),
) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, short, verbs, dict(sub or {}), categories)


_STATUS = {"status": "<self>"}

BUILTIN: tuple[ResourceType, ...] = (
    _rt(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        ("ns",),
        {"status": "<self>", "finalize": "<self>"},
        verbs=NO_COLLECTION_VERBS,
    ),
    _rt("", "v1", "nodes", "Node", False, ("no",), _STATUS),
    _rt(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        ("po",),
        {
            "status": "<self>",
            "eviction": "Eviction",
            "binding": "Binding",
            "log": "Pod",
            "ephemeralcontainers": "<self>",
        },
        categories=("all",),
    ),
    _rt("", "v1", "events", "Event", True, ("ev",)),
    _rt("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
    _rt("", "v1", "secrets", "Secret", True),
    _rt(
        "",
        "v1",
        "services",
        "Service",
        True,
        ("svc",),
        _STATUS,
        verbs=NO_COLLECTION_VERBS,
        categories=("all",),
    ),
    _rt("", "v1", "serviceaccounts", "ServiceAccount", True, ("sa",)),
    _rt("", "v1", "endpoints", "Endpoints", True, ("ep",)),
    # Stored as written: the scheduler reads them (volume topology) and binds WaitForFirstConsumer
    # claims where their pod goes; no PV controller or provisioner runs otherwise.
    _rt("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",), _STATUS),
    _rt("", "v1", "persistentvolumes", "PersistentVolume", False, ("pv",), _STATUS),
    _rt("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, ("sc",)),
    # Stored as written (no attach/detach controller runs): what a node's termination waits on
    # (Karpenter's awaitVolumeDetachment lists them by spec.nodeName).
    _rt("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, (), _STATUS),
    _rt(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        True,
        ("deploy",),
        {"status": "<self>", "scale": "Scale"},
        categories=("all",),
    ),
    _rt(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        True,
        ("rs",),
        {"status": "<self>", "scale": "Scale"},
        categories=("all",),
    ),
    _rt("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",), _STATUS, categories=("all",)),
    _rt(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        True,
        ("sts",),
        {"status": "<self>", "scale": "Scale"},
        categories=("all",),
    ),
    _rt("apps", "v1", "controllerrevisions", "ControllerRevision", True),
    _rt("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), _STATUS),
    _rt("coordination.k8s.io", "v1", "leases", "Lease", True),
    _rt("events.k8s.io", "v1", "events", "Event", True, ("ev",)),
    _rt("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",)),
    _rt(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ("crd", "crds"),
        _STATUS,
    ),
)


class Registry:
    """Resolves URL parts to resource types; CRDs register and unregister at runtime."""

    def __init__(self, types: Iterable[ResourceType] = BUILTIN) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._group_versions: dict[str, list[str]] = {}
        self._by_kind: dict[tuple[str, str], ResourceType | None] = {}
        self._by_key: dict[tuple[str, str], ResourceType] = {}
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._by_path[(rt.group, rt.version, rt.plural)] = rt
        self._by_kind.clear()
        self._by_key.setdefault(rt.key, rt)
        versions = self._group_versions.setdefault(rt.group, [])
        if rt.version not in versions:
            versions.append(rt.version)

    def remove_group_resource(self, group: str, plural: str) -> None:
        for key in [k for k in self._by_path if k[0] == group and k[2] == plural]:
            del self._by_path[key]
        self._by_kind.clear()
        self._by_key.pop((group, plural), None)
        still = {v for (g, v, _p) in self._by_path if g == group}
        if still:
            self._group_versions[group] = [v for v in self._group_versions[group] if v in still]
        else:
            self._group_versions.pop(group, None)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        cache_key = (api_version, kind)
        if cache_key not in self._by_kind:
            group, _, version = api_version.rpartition("/")
            found = [rt for rt in self.resources(group, version) if rt.kind == kind]
            self._by_kind[cache_key] = found[0] if found else None
        return self._by_kind[cache_key]

    def by_key(self, key: tuple[str, str]) -> ResourceType:
        """The (first registered version of the) resource stored under ``(group, plural)``."""
        return self._by_key[key]

    def resources(self, group: str, version: str) -> list[ResourceType]:
        return [rt for (g, v, _p), rt in self._by_path.items() if g == group and v == version]

    def versions(self, group: str) -> list[str]:
        return list(self._group_versions.get(group, []))

    def groups(self) -> list[str]:
        return [g for g in self._group_versions if g]

    def all_types(self) -> list[ResourceType]:
        return list(self._by_path.values())

    # -- discovery documents -------------------------------------------------------------------

    def api_versions(self) -> dict[str, Any]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        }

    def api_group_list(self) -> dict[str, Any]:
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [self.api_group(g) for g in self.groups()],
        }

    def api_group(self, group: str) -> dict[str, Any]:
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in self.versions(group)]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": versions,
            "preferredVersion": versions[0] if versions else {},
        }

    def resource_list(self, group: str, version: str) -> dict[str, Any]:
        entries: list[dict[str, Any]] = []
        for rt in self.resources(group, version):
            entry: dict[str, Any] = {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(rt.verbs),
            }
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            if rt.categories:
                entry["categories"] = list(rt.categories)
            entries.append(entry)
            for sub, sub_kind in rt.subresources.items():
                sub_entry: dict[str, Any] = {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind if sub_kind == "<self>" else sub_kind,
                    "verbs": _subresource_verbs(sub),
                }
                if sub_kind not in ("<self>",) and sub in ("eviction", "binding"):
                    sub_entry["group"] = "policy" if sub == "eviction" else ""
                    sub_entry["version"] = "v1"
                entries.append(sub_entry)
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": entries}


def _subresource_verbs(sub: str) -> list[str]:
    if sub in ("eviction", "binding"):
        return ["create"]
    if sub == "log":
        return ["get"]
    if sub == "finalize":
        return ["update"]
    return ["get", "patch", "update"]


def types_from_crd(crd: Mapping[str, Any]) -> list[ResourceType]:
    """The resource types an (established) CustomResourceDefinition serves, one per served version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = str(spec.get("group", ""))
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    out: list[ResourceType] = []
    for ver in spec.get("versions") or []:
        if not ver.get("served", True):
            continue
        subs: dict[str, str] = {}
        if "status" in (ver.get("subresources") or {}):
            subs["status"] = "<self>"
        if "scale" in (ver.get("subresources") or {}):
            subs["scale"] = "Scale"
        out.append(
            ResourceType(
                group=group,
                version=str(ver["name"]),
                plural=str(names["plural"]),
                kind=str(names["kind"]),
                namespaced=namespaced,
                short_names=tuple(names.get("shortNames") or ()),
                subresources=subs,
                categories=tuple(names.get("categories") or ()),
                printer_columns=tuple(ver.get("additionalPrinterColumns") or ()),
            )
        )
    return out
