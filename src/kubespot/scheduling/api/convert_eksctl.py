"""eksctl ``ClusterConfig`` files (``eksctl.io/v1alpha5``) to Karpenter v1: every node group, self-managed
(``nodeGroups``) or managed (``managedNodeGroups``), becomes a NodePool named after it, and every distinct
node configuration one EC2NodeClass (named after the first group that uses it, shared by the others).

Field meanings are eksctl's (``pkg/apis/eksctl.io/v1alpha5/types.go``, ``defaults.go``; the launch
template's metadata options from ``pkg/cfn/builder/nodegroup.go`` ``makeMetadataOptions``), so a pool
launches what its group launched:

- instance types stay as written (``node.kubernetes.io/instance-type In``), with a warning that
  Karpenter-style pools do better with a wider choice; an ASG ``instancesDistribution`` gives both
  capacity types and its on-demand base and percentage as the ``kubespot.io/capacity-split`` annotation
  (docs/designs/launching.md §6; eksctl's defaults: base 0, percentage 100, i.e. all on-demand);
- ``maxSize`` is the pool's ``limits.nodes`` (exact, in nodes as the ASG counts; Karpenter counts
  nodes from v1.11, core PR #2526), and, when the types' sizes are given, ``cpu`` and ``memory``
  limits of ``maxSize`` times the largest type, an estimate (older Karpenter releases ignore ``nodes``);
- the root volume keeps eksctl's default (80 GiB gp3), where Karpenter's own default is 20 GiB;
- IMDS: tokens required unless ``disableIMDSv1: false``, hop limit 2 unless ``disablePodIMDS`` (eksctl's
  launch template), where Karpenter's default hop limit is 1;
- nodes never expire (``expireAfter: Never``) unless ``maxInstanceLifetime`` says otherwise, as an ASG
  keeps its instances;
- an ``instanceSelector`` and instance types are alternatives in eksctl (``validation.go``:
  ``instanceType`` must be unset or ``mixed`` with a selector; ``pkg/eks/nodegroup_service.go``
  ``ExpandInstanceSelectorOptions`` fills the types from the selector, and listed types must equal
  them): a selector without listed types pins no instance type; its criteria become Karpenter's
  labels (vCPUs, memory, GPU and Neuron device counts, 0 meaning none, and the CPU architecture,
  x86_64 unless given, as eksctl's ``expandInstanceSelector``).

Every field without an equivalent is one warning naming the group and the field; so is every field
of the wrong shape (``eksctl_fields``), which is left out, and a pool that would still not validate
is not written. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from ...model.capacity import InstanceTypeInfo
from ..labels import CAPACITY_TYPE, INSTANCE_TYPE, ON_DEMAND, OS, SPOT, ZONE
from . import eksctl_fields as fields
from .convert import KUBELET_FIELDS, duration
from .load import load

Obj = dict[str, Any]
#: ``warn(who, field, message)``: the converter's warning sink.
Warn = Callable[[str, str, str], None]

API_VERSION = "eksctl.io/v1alpha5"
SPLIT_ANNOTATION = "kubespot.io/capacity-split"
DEFAULT_INSTANCE_TYPE = "m5.large"  # eksctl's DefaultNodeType
DEFAULT_VOLUME_SIZE = 80  # GiB, eksctl's DefaultNodeVolumeSize
DEFAULT_VOLUME_TYPE = "gp3"
DEFAULT_FAMILY = "AmazonLinux2023"  # eksctl's DefaultNodeImageFamily

#: eksctl AMI family → (EC2NodeClass amiFamily, alias family or None for Custom, OS).
_FAMILIES: dict[str, tuple[str, str | None, str]] = {
    "AmazonLinux2": ("AL2", "al2", "linux"),
    "AmazonLinux2023": ("AL2023", "al2023", "linux"),
    "Bottlerocket": ("Bottlerocket", "bottlerocket", "linux"),
    "WindowsServer2019CoreContainer": ("Windows2019", "windows2019", "windows"),
    "WindowsServer2022CoreContainer": ("Windows2022", "windows2022", "windows"),
    "WindowsServer2025CoreContainer": ("Windows2025", "windows2025", "windows"),
}
#: Root device per EC2NodeClass family (Karpenter's defaults); Bottlerocket's data volume is the
#: second device, which eksctl's ``volumeSize`` sizes (``defaults.go`` ``bottlerocketDataDisk``), after
#: a 4 GiB OS volume (Karpenter's Bottlerocket default).
_ROOT_DEVICE = {"Windows2019": "/dev/sda1", "Windows2022": "/dev/sda1", "Windows2025": "/dev/sda1"}
#: Tags Karpenter refuses on an EC2NodeClass (it sets them itself), by prefix.
_RESTRICTED_TAGS = (
    "kubernetes.io/cluster/",
    "eks:eks-cluster-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
)
#: eksctl's instance selector default architecture (``nodegroup_service.go`` ``defaultCPUArch``).
_SELECTOR_ARCH = "x86_64"
_ARCHES = {"x86_64": "amd64", "amd64": "amd64", "arm64": "arm64"}
GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
ACCELERATOR_COUNT = "karpenter.k8s.aws/instance-accelerator-count"
#: amazon-ec2-instance-selector ``bytequantity``: a number and an optional unit, GiB by default,
#: decimal and binary units read alike.
_MEMORY = re.compile(r"^\s*([0-9]+(?:\.[0-9]{0,3})?)\s*(mib|gib|tib|mb|gb|tb|m|g|t)?\s*$", re.IGNORECASE)
_MIB_PER = {"m": 1, "g": 1024, "t": 1024 * 1024}
_POD_TARGETS = "register pods (AWS Load Balancer Controller, IP targets) instead of instances"
#: Fields with no equivalent, and why (the rest get a generic message).
_NO_EQUIVALENT = {
    "minSize": "no minimum: nodes are launched for pending pods only; keep a small node group for a floor",
    "desiredCapacity": "nodes are launched for pending pods, not to a count",
    "ssh": "an EC2NodeClass has no key pair: use SSM Session Manager, or add the key in userData",
    "updateConfig": "node replacement follows the NodePool's disruption budgets (spec.disruption.budgets)",
    "asgSuspendProcesses": "there is no Auto Scaling group",
    "asgMetricsCollection": "there is no Auto Scaling group",
    "propagateASGTags": "there is no Auto Scaling group: labels and taints are on the NodePool",
    "overrideBootstrapCommand": "the bootstrap is generated per AMI family; put extra steps in userData",
    "containerRuntime": "containerd is the only runtime",
    "targetGroupARNs": _POD_TARGETS,
    "classicLoadBalancerNames": _POD_TARGETS,
    "launchTemplate": "an EC2NodeClass generates its launch template: move its settings there",
    "releaseVersion": "pin the AMI with an alias version (amiSelectorTerms: alias: al2023@vYYYYMMDD)",
    "instancePrefix": "instance names are not set",
    "instanceName": "instance names are not set",
    "bottlerocket": "Bottlerocket settings go into userData as TOML; not converted",
    "placement": "placement groups are not used",
    "efaEnabled": "EFA interfaces are not configured",
    "capacityReservation": "capacity reservations are not used",
    "instanceMarketOptions": "capacity type comes from karpenter.sh/capacity-type",
    "outpostARN": "Outposts are not supported",
    "localZones": "local zones are not selected; add their subnets to subnetSelectorTerms",
    "enclaveEnabled": "Nitro Enclaves are not configured",
    "cpuCredits": "burstable credit mode is not set",
    "nodeRepairConfig": "node auto repair is not done",
    "ebsOptimized": "not set per pool (current instance types are EBS-optimised by default)",
}
_HANDLED = {
    "name", "amiFamily", "ami", "instanceType", "instanceTypes", "instancesDistribution", "spot",
    "availabilityZones", "subnets", "privateNetworking", "maxSize", "labels", "taints", "tags", "iam",
    "securityGroups", "maxPodsPerNode", "kubeletExtraConfig", "clusterDNS", "volumeSize", "volumeType",
    "volumeName", "volumeEncrypted", "volumeKmsKeyID", "volumeIOPS", "volumeThroughput",
    "additionalVolumes", "preBootstrapCommands", "disableIMDSv1", "disablePodIMDS",
    "enableDetailedMonitoring", "maxInstanceLifetime", "instanceSelector",
}  # fmt: skip


def is_cluster_config(doc: Mapping[str, Any]) -> bool:
    return doc.get("apiVersion") == API_VERSION and doc.get("kind") == "ClusterConfig"


def _mapping(value: Any) -> Obj:
    return dict(value) if isinstance(value, Mapping) else {}


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _tail(arn: str) -> str:
    """``arn:aws:iam::1:instance-profile/path/name`` → ``name`` (Karpenter takes names)."""
    return arn.rsplit("/", 1)[-1]


def has_selector(selector: Mapping[str, Any]) -> bool:
    """eksctl's ``InstanceSelector.IsZero`` negated: ``gpus``, ``neuron_devices``, ``allow`` and
    ``deny`` are pointers, so a 0 there is set; ``vCPUs``, ``memory`` and ``cpuArchitecture`` count
    when not zero."""
    return any(selector.get(k) for k in ("vCPUs", "memory", "cpuArchitecture")) or any(
        selector.get(k) is not None for k in ("gpus", "neuron_devices", "allow", "deny")
    )


def memory_mib(text: Any) -> int | None:
    """``32`` / ``"32"`` / ``"16GiB"`` / ``"512Mi"`` (the instance selector's sizes) in MiB."""
    match = _MEMORY.match(str(text))
    if match is None:
        return None
    unit = (match.group(2) or "g")[0].lower()
    return round(float(match.group(1)) * _MIB_PER[unit])


class _ClusterConfig:
    """One ClusterConfig's conversion: its node groups in order, the node classes met so far."""

    def __init__(self, doc: Mapping[str, Any], warn: Warn, sizes: Mapping[str, InstanceTypeInfo]) -> None:
        self.sizes = sizes
        self.cluster = str(_mapping(doc.get("metadata")).get("name") or "")
        self.warn = warn
        self.vpc_subnets = _mapping(_mapping(doc.get("vpc")).get("subnets"))
        for where, value in [
            ("metadata", doc.get("metadata")),
            ("vpc", doc.get("vpc")),
            ("vpc.subnets", _mapping(doc.get("vpc")).get("subnets")),
            *[(f"vpc.subnets.{k}", self.vpc_subnets.get(k)) for k in ("private", "public")],
        ]:
            if value is not None and not isinstance(value, Mapping):
                warn(f"ClusterConfig/{self.cluster}", where, "is not a mapping; ignored")
        self.out: list[Obj] = []
        #: EC2NodeClass spec (as canonical JSON) → its name.
        self.classes: dict[str, str] = {}
        self.names: set[str] = set()

    def convert(self, doc: Mapping[str, Any]) -> list[Obj]:
        for section in doc:  # in file order
            if section not in ("nodeGroups", "managedNodeGroups"):
                continue
            managed = section == "managedNodeGroups"
            groups = doc.get(section) or []
            if not isinstance(groups, list):
                self.warn(f"ClusterConfig/{self.cluster}", section, "is not a list of node groups; ignored")
                continue
            for i, group in enumerate(groups):
                name = group.get("name") if isinstance(group, Mapping) else None
                if not isinstance(group, Mapping) or not isinstance(name, str) or not name:
                    self.warn(f"{section}[{i}]", "name", "a node group needs a name; not converted")
                elif name in self.names:
                    self.warn(
                        f"{section}/{name}", "name", "a node group of that name came before; not converted"
                    )
                else:
                    self.names.add(name)
                    self.group(f"{section}/{name}", dict(group), managed=managed)
        if not self.out and not self.names:
            self.warn(f"ClusterConfig/{self.cluster}", "nodeGroups", "no node groups: nothing to convert")
        return self.out

    # --- one node group -------------------------------------------------------------------------

    def shaped(self, who: str, ng: Obj) -> Obj:
        """``ng`` with every field of the wrong shape left out (and warned about), nested ones too."""
        ng = fields.checked(who, "", ng, fields.NODE_GROUP, self.warn)
        for field, shapes in (
            ("instancesDistribution", fields.DISTRIBUTION),
            ("instanceSelector", fields.SELECTOR),
            ("securityGroups", fields.SECURITY_GROUPS),
            ("iam", fields.IAM),
        ):
            if field in ng:
                ng[field] = fields.checked(who, f"{field}.", ng[field], shapes, self.warn)
        for field in ("labels", "tags"):
            if field in ng:
                ng[field] = fields.scalar_map(who, field, ng[field], self.warn)
        if "additionalVolumes" in ng:
            ng["additionalVolumes"] = fields.additional_volumes(who, ng["additionalVolumes"], self.warn)
        return ng

    def group(self, who: str, ng: Obj, *, managed: bool) -> None:
        ng = self.shaped(who, ng)
        name = str(ng.get("name") or "")
        family, alias, os_name = self.family(who, ng)
        requirements, annotations = self.capacity(who, ng, managed=managed)
        types = next((list(r["values"]) for r in requirements if r["key"] == INSTANCE_TYPE), [])
        if os_name == "windows":
            requirements.append({"key": OS, "operator": "In", "values": ["windows"]})
        zones = _strings(ng.get("availabilityZones"))
        if zones:
            requirements.append({"key": ZONE, "operator": "In", "values": zones})
        requirements += self.selector_requirements(who, _mapping(ng.get("instanceSelector")))
        tspec: Obj = {"requirements": requirements}
        taints = fields.taints(who, ng.get("taints"), self.warn)
        if taints:
            tspec["taints"] = taints
        nodeclass = self.nodeclass(who, ng, family, alias, zones)
        class_name = self.class_name(name, nodeclass)
        tspec["nodeClassRef"] = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class_name}
        lifetime = ng.get("maxInstanceLifetime")
        tspec["expireAfter"] = duration(int(lifetime)) if isinstance(lifetime, int) else "Never"
        template: Obj = {"spec": tspec}
        labels = dict(_mapping(ng.get("labels")))
        if labels:
            template = {"metadata": {"labels": labels}, "spec": tspec}
        spec: Obj = {
            "template": template,
            # Cluster Autoscaler's default --scale-down-unneeded-time: nodes that are not needed
            # go after 10 minutes, as before the move.
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "10m"},
        }
        if isinstance(ng.get("maxSize"), int):
            spec["limits"] = {"nodes": str(ng["maxSize"]), **self.size_limits(who, ng["maxSize"], types)}
        meta: Obj = {"name": name}
        if annotations:
            meta["annotations"] = annotations
        pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": meta, "spec": spec}
        written = [d["metadata"]["name"] for d in self.out if d["kind"] == "EC2NodeClass"]
        new_class = None
        if class_name not in written:
            new_class = {
                "apiVersion": "karpenter.k8s.aws/v1",
                "kind": "EC2NodeClass",
                "metadata": {"name": class_name},
                "spec": nodeclass,
            }
        # The last guard: what eksctl accepted may still be what Karpenter refuses (a label key, a
        # taint key); such a pool is said and left out rather than written invalid.
        for obj in [pool] if new_class is None else [pool, new_class]:
            result = load(obj)
            if not result.valid:
                message = result.condition.message if result.condition else "invalid"
                kind = obj["kind"]
                self.warn(
                    who, "(node group)", f"the converted {kind} does not validate ({message}); not written"
                )
                return
        self.out.append(pool)
        if new_class is not None:
            self.out.append(new_class)
        for key in ng:
            if key in _HANDLED:
                continue
            if key in _NO_EQUIVALENT:
                self.warn(who, key, f"has no equivalent; dropped ({_NO_EQUIVALENT[key]})")
            else:
                self.warn(who, key, "has no equivalent; dropped")

    def size_limits(self, who: str, max_size: int, types: list[str]) -> dict[str, str]:
        """``maxSize`` nodes of the group's largest type (by vCPUs and by memory, apart), as the
        ``cpu`` and ``memory`` limits; nothing unless every type's size is known."""
        known = [self.sizes[t] for t in types if t in self.sizes]
        if not known or len(known) != len(types):
            return {}
        cpu = max_size * max(t.vcpus for t in known)
        memory = max_size * max(t.memory_mib for t in known)
        self.warn(
            who,
            "maxSize",
            f"limits cpu {cpu} and memory {_mebibytes(memory)} are an estimate ({max_size} of the "
            "largest type); limits.nodes is exact",
        )
        return {"cpu": str(cpu), "memory": _mebibytes(memory)}

    def class_name(self, group: str, nodeclass: Obj) -> str:
        key = json.dumps(nodeclass, sort_keys=True)
        return self.classes.setdefault(key, group)

    def family(self, who: str, ng: Obj) -> tuple[str, str | None, str]:
        eksctl = str(ng.get("amiFamily") or "")
        if not eksctl:
            self.warn(
                who,
                "amiFamily",
                f"unset: eksctl's default is {DEFAULT_FAMILY} (older eksctl releases: AmazonLinux2); "
                "using AL2023: check your nodes' AMI",
            )
            eksctl = DEFAULT_FAMILY
        known = _FAMILIES.get(eksctl)
        if known is None:
            self.warn(
                who,
                "amiFamily",
                f"{eksctl} has no Karpenter family: Custom; add amiSelectorTerms and a bootstrap userData",
            )
            return "Custom", None, "linux"
        return known

    # --- capacity -------------------------------------------------------------------------------

    def capacity(self, who: str, ng: Obj, *, managed: bool) -> tuple[list[Obj], dict[str, str]]:
        """Instance types and capacity types as requirements, and the split annotation if any."""
        annotations: dict[str, str] = {}
        dist = _mapping(ng.get("instancesDistribution"))
        selector = has_selector(_mapping(ng.get("instanceSelector")))
        single = str(ng.get("instanceType") or "")
        if selector and single and single != "mixed":
            # validation.go: "cannot set instanceType when instanceSelector is specified" (managed),
            # "instanceType should be "mixed" or unset when using the instance selector feature".
            self.warn(
                who,
                "instanceType",
                "eksctl refuses it beside instanceSelector; ignored (the selector decides)",
            )
            single = ""
        if managed:
            types = _strings(ng.get("instanceTypes"))
            if not types and not selector:
                types = [single or DEFAULT_INSTANCE_TYPE]
            capacity = [SPOT] if ng.get("spot") is True else [ON_DEMAND]
        elif dist:
            types = _strings(dist.get("instanceTypes"))
            base = dist.get("onDemandBaseCapacity", 0)
            percent = dist.get("onDemandPercentageAboveBaseCapacity", 100)  # the ASG's defaults
            if percent == 100:
                capacity = [ON_DEMAND]
            elif percent == 0 and base == 0:
                capacity = [SPOT]
            else:
                capacity = [SPOT, ON_DEMAND]
                annotations[SPLIT_ANNOTATION] = f"onDemandBase={base},onDemandPercentAboveBase={percent}"
            self.distribution_warnings(who, dist)
        else:
            types = [] if selector else [DEFAULT_INSTANCE_TYPE if single in ("", "mixed") else single]
            capacity = [ON_DEMAND]
        if not types and not selector:
            types = [DEFAULT_INSTANCE_TYPE]
        requirements = [{"key": CAPACITY_TYPE, "operator": "In", "values": capacity}]
        if types:
            requirements.insert(0, {"key": INSTANCE_TYPE, "operator": "In", "values": types})
            self.warn(
                who,
                "instanceTypes",
                f"kept as written ({', '.join(types)}); a Karpenter-style pool does better with a wide "
                "choice: consider karpenter.k8s.aws/instance-category and instance-cpu requirements instead",
            )
        return requirements, annotations

    def distribution_warnings(self, who: str, dist: Obj) -> None:
        field = "instancesDistribution"
        if "maxPrice" in dist:
            self.warn(
                who,
                f"{field}.maxPrice",
                "has no equivalent; dropped (spot costs the market price, at most the on-demand price)",
            )
        if "spotInstancePools" in dist:
            self.warn(
                who,
                f"{field}.spotInstancePools",
                "has no equivalent; dropped (every allowed pool is a candidate)",
            )
        if "spotAllocationStrategy" in dist:
            self.warn(
                who,
                f"{field}.spotAllocationStrategy",
                "has no equivalent; dropped (spot launches use price-capacity-optimized)",
            )
        if dist.get("capacityRebalance"):
            self.warn(
                who,
                f"{field}.capacityRebalance",
                "has no equivalent; dropped (kubespot's interruption handling acts on rebalance signals)",
            )

    def selector_requirements(self, who: str, selector: Obj) -> list[Obj]:
        """eksctl's instance selector as Karpenter's labels: ``vCPUs`` and ``memory`` exact (the
        selector's ranges have equal bounds), ``gpus`` / ``neuron_devices`` exact or, at 0, types
        without any (Karpenter leaves those labels off such types, ``DoesNotExist`` matches them),
        the architecture (x86_64 unless given). ``allow`` / ``deny`` (name patterns) cannot be said."""
        if not has_selector(selector):
            return []
        out: list[Obj] = []
        if selector.get("vCPUs"):
            values = [str(selector["vCPUs"])]
            out.append({"key": "karpenter.k8s.aws/instance-cpu", "operator": "In", "values": values})
        if selector.get("memory"):
            mib = memory_mib(selector["memory"])
            if mib:
                out.append(
                    {"key": "karpenter.k8s.aws/instance-memory", "operator": "In", "values": [str(mib)]}
                )
            else:
                self.warn(who, "instanceSelector.memory", f"{selector['memory']!r} is not a size; ignored")
        for field, key in (("gpus", GPU_COUNT), ("neuron_devices", ACCELERATOR_COUNT)):
            count = selector.get(field)
            if count == 0:
                out.append({"key": key, "operator": "DoesNotExist"})
            elif count is not None:
                out.append({"key": key, "operator": "In", "values": [str(count)]})
        arch = str(selector.get("cpuArchitecture") or _SELECTOR_ARCH)
        out.append({"key": "kubernetes.io/arch", "operator": "In", "values": [_ARCHES.get(arch, arch)]})
        for field in ("allow", "deny"):
            if selector.get(field) is not None:
                self.warn(
                    who,
                    f"instanceSelector.{field}",
                    "not converted (a pattern over type names): add instance-family or instance-type "
                    "requirements",
                )
        return out

    # --- the node class -------------------------------------------------------------------------

    def nodeclass(self, who: str, ng: Obj, family: str, alias: str | None, zones: list[str]) -> Obj:
        spec: Obj = {"amiFamily": family}
        ami = str(ng.get("ami") or "")
        if ami.startswith("ami-"):
            spec["amiSelectorTerms"] = [{"id": ami}]
        elif alias is not None:
            spec["amiSelectorTerms"] = [{"alias": f"{alias}@latest"}]
            del spec["amiFamily"]  # the alias names the family
        else:
            spec["amiSelectorTerms"] = []
        spec["subnetSelectorTerms"] = self.subnets(who, ng, zones)
        spec["securityGroupSelectorTerms"] = self.security_groups(who, _mapping(ng.get("securityGroups")))
        spec.update(self.identity(who, _mapping(ng.get("iam"))))
        kubelet = self.kubelet(who, ng)
        if kubelet:
            spec["kubelet"] = kubelet
        spec["blockDeviceMappings"] = self.volumes(ng, family)
        tokens = (
            "optional"
            if ng.get("disableIMDSv1") is False and ng.get("disablePodIMDS") is not True
            else "required"
        )
        spec["metadataOptions"] = {
            "httpTokens": tokens,
            "httpPutResponseHopLimit": 1 if ng.get("disablePodIMDS") is True else 2,
        }
        if ng.get("enableDetailedMonitoring") is True:
            spec["detailedMonitoring"] = True
        tags = self.tags(who, _mapping(ng.get("tags")))
        if tags:
            spec["tags"] = tags
        user_data = self.user_data(who, _strings(ng.get("preBootstrapCommands")), family)
        if user_data:
            spec["userData"] = user_data
        return spec

    def subnets(self, who: str, ng: Obj, zones: list[str]) -> list[Obj]:
        """The group's subnets by id (names looked up in the config's ``vpc.subnets``), else the
        cluster's private (``privateNetworking``) or public subnets, else eksctl's subnet tags."""
        topology = "private" if ng.get("privateNetworking") is True else "public"
        ids: list[str] = []
        for ref in _strings(ng.get("subnets")):
            found = ref if ref.startswith("subnet-") else self.subnet_id(ref)
            if found:
                ids.append(found)
            else:
                self.warn(who, "subnets", f"{ref} has no id in vpc.subnets; left out")
        if not ids and not ng.get("subnets"):
            for key, subnet in _mapping(self.vpc_subnets.get(topology)).items():
                subnet = _mapping(subnet)
                zone = str(subnet.get("az") or key)
                if subnet.get("id") and (not zones or zone in zones):
                    ids.append(str(subnet["id"]))
        if ids:
            return [{"id": i} for i in dict.fromkeys(ids)]
        role = "kubernetes.io/role/internal-elb" if topology == "private" else "kubernetes.io/role/elb"
        self.warn(
            who,
            "subnets",
            f"no subnet ids in the file: selecting the {topology} subnets eksctl created for the cluster "
            f"by their tags (alpha.eksctl.io/cluster-name, {role}); check them",
        )
        return [{"tags": {"alpha.eksctl.io/cluster-name": self.cluster, role: "1"}}]

    def subnet_id(self, ref: str) -> str:
        for topology in ("private", "public"):
            subnet = _mapping(_mapping(self.vpc_subnets.get(topology)).get(ref))
            if subnet.get("id"):
                return str(subnet["id"])
        return ""

    def security_groups(self, who: str, groups: Obj) -> list[Obj]:
        terms: list[Obj] = [{"id": i} for i in _strings(groups.get("attachIDs"))]
        if groups.get("withShared") is not False or groups.get("withLocal") is not False or not terms:
            # eksctl's shared and per-group security groups exist for its own stacks; the cluster
            # security group EKS creates (and tags) lets nodes and the control plane talk.
            terms.append({"tags": {"aws:eks:cluster-name": self.cluster}})
        return terms

    def identity(self, who: str, iam: Obj) -> Obj:
        for field in (
            "attachPolicyARNs",
            "attachPolicy",
            "withAddonPolicies",
            "instanceRolePermissionsBoundary",
        ):
            if iam.get(field):
                self.warn(who, f"iam.{field}", "not converted: attach these to the node role yourself")
        if iam.get("instanceProfileARN"):
            return {"instanceProfile": _tail(str(iam["instanceProfileARN"]))}
        if iam.get("instanceRoleARN"):
            return {"role": _tail(str(iam["instanceRoleARN"]))}
        if iam.get("instanceRoleName"):
            return {"role": str(iam["instanceRoleName"])}
        placeholder = f"KarpenterNodeRole-{self.cluster}"
        self.warn(
            who,
            "iam",
            f"eksctl created this group's role; using {placeholder}: set spec.role to the role the new "
            "nodes should use (it must be allowed to join the cluster)",
        )
        return {"role": placeholder}

    def kubelet(self, who: str, ng: Obj) -> Obj:
        out: Obj = {}
        for key, value in _mapping(ng.get("kubeletExtraConfig")).items():
            if key in KUBELET_FIELDS:
                out[key] = value
            else:
                self.warn(
                    who,
                    f"kubeletExtraConfig.{key}",
                    "the v1 EC2NodeClass kubelet block has no such field; dropped",
                )
        if ng.get("clusterDNS"):
            out["clusterDNS"] = [str(ng["clusterDNS"])]
        if isinstance(ng.get("maxPodsPerNode"), int) and ng["maxPodsPerNode"] > 0:
            out["maxPods"] = ng["maxPodsPerNode"]
        return out

    def volumes(self, ng: Obj, family: str) -> list[Obj]:
        if family == "Bottlerocket":
            data = self.volume(str(ng.get("volumeName") or "/dev/xvdb"), ng)
            mappings = [self.volume("/dev/xvda", {"volumeSize": 4}), data]
        else:
            mappings = [self.volume(str(ng.get("volumeName") or _ROOT_DEVICE.get(family, "/dev/xvda")), ng)]
        for extra in ng.get("additionalVolumes") or []:
            extra = _mapping(extra)
            volume = self.volume(str(extra["volumeName"]), extra)
            if extra.get("snapshotID"):
                volume["ebs"]["snapshotID"] = str(extra["snapshotID"])
            mappings.append(volume)
        return mappings

    def volume(self, device: str, values: Obj) -> Obj:
        """One EBS mapping from eksctl's volume fields (``volumeSize`` in GiB, 80 by default)."""
        size = values["volumeSize"] if isinstance(values.get("volumeSize"), int) else DEFAULT_VOLUME_SIZE
        ebs: Obj = {
            "volumeSize": f"{size}Gi",
            "volumeType": str(values.get("volumeType") or DEFAULT_VOLUME_TYPE),
        }
        for source, target in (
            ("volumeIOPS", "iops"),
            ("volumeThroughput", "throughput"),
            ("volumeEncrypted", "encrypted"),
            ("volumeKmsKeyID", "kmsKeyID"),
        ):
            if values.get(source) is not None:
                ebs[target] = values[source]
        ebs["deleteOnTermination"] = True
        return {"deviceName": device, "ebs": ebs}

    def tags(self, who: str, tags: Obj) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in tags.items():
            key = str(key)
            if key.startswith(_RESTRICTED_TAGS):
                self.warn(who, f"tags.{key}", "Karpenter sets this tag itself and refuses it; dropped")
            elif key.startswith("k8s.io/cluster-autoscaler/"):
                self.warn(who, f"tags.{key}", "a Cluster Autoscaler tag, meaningless without it; dropped")
            else:
                out[key] = str(value)
        return out

    def user_data(self, who: str, commands: list[str], family: str) -> str:
        if not commands:
            return ""
        if family in ("AL2", "AL2023"):
            # A plain shell script: Karpenter runs it as its own part before the generated bootstrap.
            return "#!/bin/bash\n" + "\n".join(commands) + "\n"
        self.warn(
            who,
            "preBootstrapCommands",
            f"not converted for {family}: write them in that family's userData format",
        )
        return ""


def _mebibytes(mib: int) -> str:
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def instance_types_of(doc: Mapping[str, Any]) -> set[str]:
    """Every instance type a ClusterConfig's node groups name (the default when they name none)."""
    out: set[str] = set()
    for section in ("nodeGroups", "managedNodeGroups"):
        groups = doc.get(section)
        for group in groups if isinstance(groups, list) else []:
            group = _mapping(group)
            named = _strings(group.get("instanceTypes")) + _strings(
                _mapping(group.get("instancesDistribution")).get("instanceTypes")
            )
            if not named and has_selector(_mapping(group.get("instanceSelector"))):
                continue  # the selector's types, which are not named
            single = group.get("instanceType")
            single = single if isinstance(single, str) else ""
            out.update(named or [single if single and single != "mixed" else DEFAULT_INSTANCE_TYPE])
    return out


def convert_cluster_config(
    doc: Mapping[str, Any], warn: Warn, sizes: Mapping[str, InstanceTypeInfo] | None = None
) -> list[Obj]:
    """The NodePools and EC2NodeClasses of one ClusterConfig's node groups, in file order (each
    EC2NodeClass right after the first NodePool that uses it). ``sizes`` (instance type → EC2's
    facts) adds estimated ``cpu`` / ``memory`` limits."""
    return _ClusterConfig(doc, warn, sizes or {}).convert(doc)
