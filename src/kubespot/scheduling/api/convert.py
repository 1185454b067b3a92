"""Karpenter's old API names to v1: ``Provisioner`` (karpenter.sh/v1alpha5), ``AWSNodeTemplate``
(karpenter.k8s.aws/v1alpha1) and the v1beta1 ``NodePool`` / ``EC2NodeClass`` become v1 NodePools and
EC2NodeClasses, with one warning per field that has no v1 equivalent.

The mapping follows Karpenter's upgrade guides (aws/karpenter-provider-aws
``website/content/en/v1.0/upgrading/v1beta1-migration.md`` and ``v1-migration.md``) and what the old
versions did when a field was unset, so a converted pool behaves as the old one did:

- v1alpha5 defaulted requirements (``kubernetes.io/os In [linux]``, ``kubernetes.io/arch In [amd64]``,
  ``karpenter.sh/capacity-type In [on-demand]``, and c/m/r generation > 2 when no instance type,
  family, category or generation was required; v0.31 ``pkg/apis/v1alpha5/provisioner.go``); v1 does
  not, so they are written out.
- Without ``ttlSecondsAfterEmpty`` or ``consolidation.enabled`` a Provisioner never removed nodes
  (``consolidateAfter: Never``); without ``ttlSecondsUntilExpired`` nodes never expired
  (``expireAfter: Never``, where v1 would default to 720h).
- Before v1 the instance metadata hop limit defaulted to 2 (v1: 1); it is written out when unset.
- AMIs: without a selector the family's latest EKS-optimised image was used (v1: an alias
  ``family@latest``); v1alpha1 selectors split comma-separated ``aws::ids``/``aws::name``/``aws::owners``
  into one term per combination (v0.31 ``pkg/utils/nodeclass/nodeclass.go``).
- The kubelet block moves from the pool to the EC2NodeClass it references (v1); an inline
  ``provider`` becomes an EC2NodeClass named after the Provisioner.

An eksctl ``ClusterConfig`` (``eksctl.io/v1alpha5``) becomes one NodePool per node group and one
EC2NodeClass per distinct node configuration (``convert_eksctl``).

Objects of other kinds, and v1 objects, pass through unchanged; a ``List`` (``kubectl get -o yaml``)
is read item by item. Pure: documents in, documents out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...model.capacity import InstanceTypeInfo
from ..labels import ARCH, CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL, OS

Obj = dict[str, Any]
NODECLASS_GROUP = "karpenter.k8s.aws"
OLD_HOP_LIMIT = 2
_CATEGORY = "karpenter.k8s.aws/instance-category"
_FAMILY = "karpenter.k8s.aws/instance-family"
_GENERATION = "karpenter.k8s.aws/instance-generation"
_ALIASES = {
    "AL2": "al2",
    "AL2023": "al2023",
    "Bottlerocket": "bottlerocket",
    "Windows2019": "windows2019",
    "Windows2022": "windows2022",
    "Windows2025": "windows2025",
}
#: The typed kubelet fields of the v1 EC2NodeClass (KubeletConfiguration's names).
KUBELET_FIELDS = (
    "clusterDNS",
    "maxPods",
    "podsPerCore",
    "systemReserved",
    "kubeReserved",
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionMaxPodGracePeriod",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "cpuCFSQuota",
)
_V1_TEMPLATE_SPEC = (
    "requirements",
    "taints",
    "startupTaints",
    "nodeClassRef",
    "expireAfter",
    "terminationGracePeriod",
)
_NODECLASS_SAME = (
    "userData",
    "tags",
    "blockDeviceMappings",
    "detailedMonitoring",
    "associatePublicIPAddress",
    "instanceStorePolicy",
    "context",
    "role",
    "instanceProfile",
)


@dataclass(frozen=True, slots=True)
class Conversion:
    documents: tuple[Obj, ...]
    #: One line per field without a v1 equivalent: ``Kind/name: field: what happened``.
    warnings: tuple[str, ...]


def duration(seconds: int) -> str:
    """``2592000`` → ``720h``; ``90`` → ``1m30s`` (Karpenter's duration form)."""
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    text = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s else "")
    return text or "0s"


def _split(value: Any) -> list[str]:
    return [part.strip() for part in str(value).split(",") if part.strip()]


def _mapping(value: Any) -> Obj:
    return dict(value) if isinstance(value, Mapping) else {}


class _Converter:
    def __init__(self, sizes: Mapping[str, InstanceTypeInfo] | None = None) -> None:
        self.sizes = sizes
        self.out: list[Obj] = []
        self.warnings: list[str] = []
        #: EC2NodeClass name → the converted document (to receive a pool's kubelet block).
        self.classes: dict[str, Obj] = {}
        #: EC2NodeClass name → (pool that brought it, kubelet block).
        self.kubelets: dict[str, tuple[str, Obj]] = {}

    def warn(self, who: str, field: str, message: str) -> None:
        self.warnings.append(f"{who}: {field}: {message}")

    # --- dispatch -------------------------------------------------------------------------------

    def add(self, doc: Any) -> None:
        if not isinstance(doc, Mapping):
            return
        api, kind = str(doc.get("apiVersion") or ""), str(doc.get("kind") or "")
        if kind.endswith("List") and isinstance(doc.get("items"), list):
            # ``kubectl get provisioners,awsnodetemplates -o yaml`` prints one List.
            for item in doc["items"]:
                self.add(item)
            return
        if (api, kind) == ("karpenter.sh/v1alpha5", "Provisioner"):
            self.provisioner(doc)
        elif (api, kind) == ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate"):
            self.out.append(self.nodeclass(doc, _mapping(doc.get("spec")), old=True))
        elif (api, kind) == ("karpenter.sh/v1beta1", "NodePool"):
            self.nodepool_v1beta1(doc)
        elif (api, kind) == ("karpenter.k8s.aws/v1beta1", "EC2NodeClass"):
            self.out.append(self.nodeclass(doc, _mapping(doc.get("spec")), old=False))
        elif (api, kind) == ("eksctl.io/v1alpha5", "ClusterConfig"):
            # Imported here: the eksctl module reuses this one's helpers.
            from .convert_eksctl import convert_cluster_config

            for converted in convert_cluster_config(doc, self.warn, self.sizes):
                self.out.append(converted)
                if converted["kind"] == "EC2NodeClass":
                    self.classes[_name(converted)] = converted
        elif kind in ("Machine", "NodeClaim") and api in ("karpenter.sh/v1alpha5", "karpenter.sh/v1beta1"):
            self.warn(f"{kind}/{_name(doc)}", "(object)", "created by Karpenter, not by users; not converted")
        else:
            self.out.append(copy.deepcopy(dict(doc)))
            if (api, kind) == ("karpenter.k8s.aws/v1", "EC2NodeClass"):
                self.classes[_name(doc)] = self.out[-1]

    def finish(self) -> Conversion:
        for cls, (pool, kubelet) in self.kubelets.items():
            target = self.classes.get(cls)
            if target is None:
                self.warn(
                    f"NodePool/{pool}",
                    "kubelet",
                    f"moves to EC2NodeClass {cls} in v1, which is not in the input; add spec.kubelet there",
                )
                continue
            spec = target.setdefault("spec", {})
            if "kubelet" in spec and spec["kubelet"] != kubelet:
                self.warn(
                    f"NodePool/{pool}",
                    "kubelet",
                    f"EC2NodeClass {cls} already has a different kubelet block; kept it",
                )
            else:
                spec["kubelet"] = kubelet
        return Conversion(tuple(self.out), tuple(self.warnings))

    # --- pools ----------------------------------------------------------------------------------

    def provisioner(self, doc: Mapping[str, Any]) -> None:
        name = _name(doc)
        who = f"Provisioner/{name}"
        spec = _mapping(doc.get("spec"))
        meta: Obj = {}
        for key in ("labels", "annotations"):
            if spec.get(key):
                meta[key] = dict(spec[key])
        if NODEPOOL in meta.get("labels", {}) or "karpenter.sh/provisioner-name" in meta.get("labels", {}):
            self.warn(
                who,
                "labels",
                "karpenter.sh/provisioner-name is karpenter.sh/nodepool in v1, set by Karpenter; dropped",
            )
            for key in (NODEPOOL, "karpenter.sh/provisioner-name"):
                meta.get("labels", {}).pop(key, None)
        requirements = [dict(r) for r in spec.get("requirements") or [] if isinstance(r, Mapping)]
        kept = [r for r in requirements if r.get("key") != "karpenter.sh/provisioner-name"]
        if len(kept) != len(requirements):
            self.warn(
                who, "requirements", "karpenter.sh/provisioner-name has no v1 equivalent in a pool; dropped"
            )
        requirements = kept + _v1alpha5_defaults(kept)
        tspec: Obj = {"requirements": requirements}
        for key in ("taints", "startupTaints"):
            if spec.get(key):
                tspec[key] = [dict(t) for t in spec[key]]
        class_name = self.node_class_of(who, name, spec)
        tspec["nodeClassRef"] = {"group": NODECLASS_GROUP, "kind": "EC2NodeClass", "name": class_name}
        ttl_expired = spec.get("ttlSecondsUntilExpired")
        tspec["expireAfter"] = duration(int(ttl_expired)) if isinstance(ttl_expired, int) else "Never"
        kubelet = _mapping(spec.get("kubeletConfiguration"))
        if kubelet:
            self.move_kubelet(who, name, class_name, kubelet)
        pool: Obj = {"template": {"spec": tspec}}
        if meta:
            pool["template"] = {"metadata": meta, "spec": tspec}
        pool["disruption"] = self.provisioner_disruption(who, spec)
        limits = _mapping(_mapping(spec.get("limits")).get("resources"))
        if limits:
            pool["limits"] = limits
        if spec.get("weight") is not None:
            pool["weight"] = spec["weight"]
        known = {
            "labels", "annotations", "requirements", "taints", "startupTaints", "provider", "providerRef",
            "ttlSecondsUntilExpired", "ttlSecondsAfterEmpty", "consolidation", "kubeletConfiguration",
            "limits", "weight",
        }  # fmt: skip
        for key in spec:
            if key not in known:
                self.warn(who, f"spec.{key}", "has no v1 equivalent; dropped")
        self.out.append(_v1_nodepool(name, doc, pool))
        if isinstance(spec.get("provider"), Mapping):
            generated = {
                "apiVersion": "karpenter.k8s.aws/v1alpha1",
                "kind": "AWSNodeTemplate",
                "metadata": {"name": class_name},
            }
            self.out.append(
                self.nodeclass(generated, _mapping(spec["provider"]), old=True, who=f"{who} spec.provider")
            )

    def node_class_of(self, who: str, name: str, spec: Mapping[str, Any]) -> str:
        ref = spec.get("providerRef")
        if isinstance(spec.get("provider"), Mapping):
            if isinstance(ref, Mapping):
                self.warn(
                    who, "spec.providerRef", "set together with spec.provider; the inline provider wins"
                )
            return name
        if isinstance(ref, Mapping) and ref.get("name"):
            return str(ref["name"])
        self.warn(
            who,
            "spec.providerRef",
            "missing: v1 NodePools need a nodeClassRef; pointing at EC2NodeClass 'default'",
        )
        return "default"

    def provisioner_disruption(self, who: str, spec: Mapping[str, Any]) -> Obj:
        empty = spec.get("ttlSecondsAfterEmpty")
        enabled = _mapping(spec.get("consolidation")).get("enabled") is True
        if enabled:
            if empty is not None:
                self.warn(
                    who,
                    "spec.ttlSecondsAfterEmpty",
                    "ignored: consolidation.enabled also removes empty nodes",
                )
            return {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
        if isinstance(empty, int):
            return {"consolidationPolicy": "WhenEmpty", "consolidateAfter": duration(empty)}
        # A Provisioner without either never removed nodes for emptiness or utilisation.
        return {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "Never"}

    def nodepool_v1beta1(self, doc: Mapping[str, Any]) -> None:
        name = _name(doc)
        who = f"NodePool/{name}"
        spec = dict(_mapping(doc.get("spec")))
        template = dict(_mapping(spec.get("template")))
        tspec = dict(_mapping(template.get("spec")))
        ref = _mapping(tspec.get("nodeClassRef"))
        class_name = str(ref.get("name") or "default")
        tspec["nodeClassRef"] = {
            "group": NODECLASS_GROUP,
            "kind": str(ref.get("kind") or "EC2NodeClass"),
            "name": class_name,
        }
        kubelet = _mapping(tspec.pop("kubelet", None))
        if kubelet:
            self.move_kubelet(who, name, class_name, kubelet)
        if tspec.pop("resources", None) is not None:
            self.warn(
                who, "spec.template.spec.resources", "has no v1 equivalent (Karpenter ignored it); dropped"
            )
        for key in [k for k in tspec if k not in _V1_TEMPLATE_SPEC]:
            self.warn(who, f"spec.template.spec.{key}", "has no v1 equivalent; dropped")
            del tspec[key]
        for key in [k for k in spec if k not in ("template", "disruption", "limits", "weight")]:
            self.warn(who, f"spec.{key}", "has no v1 equivalent; dropped")
            del spec[key]
        disruption = dict(_mapping(spec.get("disruption")))
        if "expireAfter" in disruption:
            tspec["expireAfter"] = disruption.pop("expireAfter")
        if disruption.get("consolidationPolicy", "WhenUnderutilized") == "WhenUnderutilized":
            disruption["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
            # v1beta1 refused consolidateAfter with WhenUnderutilized; Karpenter waited 15 s at runtime.
            disruption.setdefault("consolidateAfter", "0s")
        template["spec"] = tspec
        spec["template"] = template
        spec["disruption"] = disruption
        self.out.append(_v1_nodepool(name, doc, spec))

    def move_kubelet(self, who: str, pool: str, class_name: str, kubelet: Obj) -> None:
        moved = {k: v for k, v in kubelet.items() if k in KUBELET_FIELDS}
        for key in kubelet:
            if key not in KUBELET_FIELDS:
                self.warn(
                    who, f"kubelet.{key}", "has no v1 equivalent (containerd is the only runtime); dropped"
                )
        previous = self.kubelets.get(class_name)
        if previous is not None and previous[1] != moved:
            self.warn(
                who,
                "kubelet",
                f"differs from NodePool {previous[0]}'s, and both use EC2NodeClass {class_name}; "
                f"kept {previous[0]}'s: give this pool its own EC2NodeClass",
            )
            return
        if moved:
            self.kubelets[class_name] = (pool, moved)

    # --- node classes ---------------------------------------------------------------------------

    def nodeclass(self, doc: Mapping[str, Any], spec: Obj, *, old: bool, who: str | None = None) -> Obj:
        name = _name(doc)
        who = who or f"{doc.get('kind')}/{name}"
        out: Obj = {}
        family = spec.get("amiFamily", "AL2" if old else None)
        ubuntu = family == "Ubuntu"
        if ubuntu:
            self.warn(
                who,
                "amiFamily",
                "Ubuntu was removed in v1.0; using Custom: supply amiSelectorTerms and userData",
            )
            family = "Custom"
        if old:
            out["subnetSelectorTerms"] = self.terms(
                who, "subnetSelector", spec.get("subnetSelector"), ami=False
            )
            out["securityGroupSelectorTerms"] = self.terms(
                who, "securityGroupSelector", spec.get("securityGroupSelector"), ami=False
            )
            ami_terms = self.terms(who, "amiSelector", spec.get("amiSelector"), ami=True)
        else:
            out["subnetSelectorTerms"] = list(spec.get("subnetSelectorTerms") or [])
            out["securityGroupSelectorTerms"] = list(spec.get("securityGroupSelectorTerms") or [])
            ami_terms = list(spec.get("amiSelectorTerms") or [])
        if not ami_terms:
            alias = _ALIASES.get(str(family))
            if alias is None and not ubuntu:  # the Ubuntu warning already asks for them
                self.warn(
                    who, "amiSelectorTerms", f"amiFamily {family} needs amiSelectorTerms in v1; add them"
                )
            else:
                ami_terms = [{"alias": f"{alias}@latest"}]
        if family is not None:
            out["amiFamily"] = family
        out["amiSelectorTerms"] = ami_terms
        for key in _NODECLASS_SAME:
            if key in spec:
                out[key] = spec[key]
        if old and "role" not in out and "instanceProfile" not in out:
            self.warn(
                who,
                "instanceProfile",
                "unset: it came from the global aws.defaultInstanceProfile setting, which v1 does not have; "
                "set spec.role or spec.instanceProfile",
            )
        metadata = dict(_mapping(spec.get("metadataOptions")))
        metadata.setdefault("httpPutResponseHopLimit", OLD_HOP_LIMIT)
        out["metadataOptions"] = metadata
        if spec.get("launchTemplate") is not None:
            self.warn(who, "launchTemplate", "unmanaged launch templates were removed in v1beta1; dropped")
        if not old and "kubelet" in spec:
            out["kubelet"] = spec["kubelet"]
        handled = {
            "amiFamily", "subnetSelector", "securityGroupSelector", "amiSelector", "subnetSelectorTerms",
            "securityGroupSelectorTerms", "amiSelectorTerms", "metadataOptions", "launchTemplate", "kubelet",
            *_NODECLASS_SAME,
        }  # fmt: skip
        for key in spec:
            if key not in handled:
                self.warn(who, f"spec.{key}", "has no v1 equivalent; dropped")
        result: Obj = {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": _metadata(name, doc),
            "spec": out,
        }
        self.classes[name] = result
        return result

    def terms(self, who: str, field: str, selector: Any, *, ami: bool) -> list[Obj]:
        """A v1alpha1 selector map as v1 terms: ``aws::ids`` (or ``aws-ids``), and for AMIs
        ``aws::name`` / ``aws::owners``, comma-separated, become one term per combination."""
        if not isinstance(selector, Mapping) or not selector:
            return []
        ids, names, owners, tags = [""], [""], [""], {}
        for key, value in selector.items():
            if key in ("aws::ids", "aws-ids"):
                ids = _split(value)
            elif ami and key == "aws::name":
                names = _split(value)
            elif ami and key == "aws::owners":
                owners = _split(value)
            else:
                tags[str(key)] = str(value)
        if ids != [""] and (tags or names != [""] or owners != [""]):
            # v1 terms select by id alone; the old selector required both.
            self.warn(who, field, "ids are selected alone in v1: the other keys next to aws::ids are dropped")
            return [{"id": i} for i in ids]
        if ids != [""]:
            return [{"id": i} for i in ids]
        out: list[Obj] = []
        for owner in owners:
            for name in names:
                term: Obj = {}
                if tags:
                    term["tags"] = dict(tags)
                if name:
                    term["name"] = name
                if owner:
                    term["owner"] = owner
                out.append(term)
        return out


def _v1alpha5_defaults(requirements: list[Obj]) -> list[Obj]:
    """The requirements a v1alpha5 webhook added when a Provisioner left these keys out."""
    keys = {str(r.get("key")) for r in requirements}
    out: list[Obj] = []
    for key, value in ((OS, "linux"), (ARCH, "amd64"), (CAPACITY_TYPE, "on-demand")):
        if key not in keys:
            out.append({"key": key, "operator": "In", "values": [value]})
    if not keys & {INSTANCE_TYPE, _FAMILY, _CATEGORY, _GENERATION}:
        out.append({"key": _CATEGORY, "operator": "In", "values": ["c", "m", "r"]})
        out.append({"key": _GENERATION, "operator": "Gt", "values": ["2"]})
    return out


def _name(doc: Mapping[str, Any]) -> str:
    return str(_mapping(doc.get("metadata")).get("name") or "")


def _metadata(name: str, doc: Mapping[str, Any]) -> Obj:
    """The object's name, labels and annotations (server-set fields dropped)."""
    meta = _mapping(doc.get("metadata"))
    out: Obj = {"name": name}
    for key in ("labels", "annotations"):
        if meta.get(key):
            out[key] = dict(meta[key])
    return out


def _v1_nodepool(name: str, doc: Mapping[str, Any], spec: Obj) -> Obj:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": _metadata(name, doc),
        "spec": spec,
    }


def convert(documents: Iterable[Any], *, sizes: Mapping[str, InstanceTypeInfo] | None = None) -> Conversion:
    """Every document converted to v1 where it is an old Karpenter kind or an eksctl ClusterConfig, in
    input order (an inline provider's EC2NodeClass right after its NodePool). ``sizes`` (instance
    type → EC2's facts) lets eksctl node groups' ``maxSize`` become cpu and memory limits too."""
    converter = _Converter(sizes)
    for doc in documents:
        converter.add(doc)
    return converter.finish()
