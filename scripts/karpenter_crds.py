#!/usr/bin/env python3
# ruff: noqa: E501  (CEL rules and regular expressions read best unbroken)
"""Writes the chart's Karpenter CRDs (deploy/helm/kubespot/crds/): NodePool and NodeClaim
(karpenter.sh/v1) and EC2NodeClass (karpenter.k8s.aws/v1), the superset of the fields Karpenter
v1.0 to v1.14 accept, with the CEL rules the API server can enforce.

The schemas are kubespot's own text, built from the facts in shared/reference/KARPENTER.md §1; the
restricted label keys come from ``kubespot.scheduling.api.restricted`` so the CRDs and the pure
validator cannot disagree. ``--check`` exits 1 when the committed files differ from what this writes
(tests/integration/deploy/test_helm_karpenter_crds.py runs it).

    PYTHONPATH=src .venv/bin/python scripts/karpenter_crds.py [--check]
"""

import sys
from pathlib import Path

import yaml

from kubespot.scheduling.api.restricted import AWS_WELL_KNOWN

OUT = Path(__file__).resolve().parents[1] / "deploy" / "helm" / "kubespot" / "crds"

QTY = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
QUALIFIED = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
DURATION_OR_NEVER = r"^(([0-9]+(s|m|h))+|Never)$"
DURATION = r"^([0-9]+(s|m|h))+$"
AWS_ALLOWED = sorted(k for k in AWS_WELL_KNOWN if k.startswith("karpenter.k8s.aws/"))


def s(desc=None, **kw):
    out = {"type": "string"}
    if desc:
        out["description"] = desc
    out.update(kw)
    return out


def quantity():
    return {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QTY,
        "x-kubernetes-int-or-string": True,
    }


def resource_list(desc):
    return {"type": "object", "description": desc, "additionalProperties": quantity()}


def dom(var):
    return f'{var}.find("^([^/]+)")'


def key_rules(var, each):
    """Label-key rules of v1.9+ (the superset); ``each``: wrap in self.all(x, ...)."""
    d = dom(var)
    rules = [
        (
            f'{var} != "karpenter.sh/nodepool"',
            'label "karpenter.sh/nodepool" is set by Karpenter, not by users',
        ),
        (f'{var} != "kubernetes.io/hostname"', 'label "kubernetes.io/hostname" is restricted'),
        (
            f'{var} == "karpenter.sh/capacity-type" || !({d} == "karpenter.sh" || {d}.endsWith(".karpenter.sh"))',
            'label domain "karpenter.sh" is restricted (except karpenter.sh/capacity-type)',
        ),
        (
            f'{var} in {AWS_ALLOWED!r} || !({d} == "karpenter.k8s.aws" || {d}.endsWith(".karpenter.k8s.aws"))'.replace(
                "'", '"'
            ),
            'label domain "karpenter.k8s.aws" is restricted (except the well-known instance labels)',
        ),
    ]
    return [{"rule": f"self.all(x, {r})" if each else r, "message": m} for r, m in rules]


def requirement(nodeclaim):
    rules = key_rules("self", False)
    if nodeclaim:
        rules = rules[1:]
        rules[1]["rule"] = (
            'self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !(self.find("^([^/]+)") == "karpenter.sh" || self.find("^([^/]+)").endsWith(".karpenter.sh"))'
        )
        rules[1]["message"] = (
            'label domain "karpenter.sh" is restricted (except karpenter.sh/capacity-type and karpenter.sh/nodepool)'
        )
    return {
        "type": "object",
        "description": "A node selector requirement with Karpenter's minValues.",
        "required": ["key", "operator"],
        "properties": {
            "key": s(
                "The label key.", maxLength=316, pattern=QUALIFIED, **{"x-kubernetes-validations": rules}
            ),
            "minValues": {
                "type": "integer",
                "minimum": 1,
                "maximum": 50,
                "description": "How many distinct values of this key a launch must keep open.",
            },
            "operator": s(
                "In, NotIn, Exists, DoesNotExist, Gt, Lt, and (v1.9+) Gte, Lte.",
                enum=["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"],
            ),
            "values": {
                "type": "array",
                "maxItems": 1000,
                "items": s(maxLength=63, pattern=LABEL_VALUE),
                "x-kubernetes-list-type": "atomic",
            },
        },
    }


REQUIREMENT_LIST_RULES = [
    {
        "rule": "self.all(x, x.operator == 'In' ? (has(x.values) && x.values.size() != 0) : true)",
        "message": "a requirement with operator In needs at least one value",
    },
    {
        "rule": "self.all(x, x.operator in ['Gt', 'Lt', 'Gte', 'Lte'] ? (has(x.values) && x.values.size() == 1 && x.values[0].matches('^[0-9]+$')) : true)",
        "message": "operators Gt, Lt, Gte and Lte need exactly one non-negative integer value",
    },
    {
        "rule": "self.all(x, (x.operator == 'In' && has(x.minValues)) ? (has(x.values) && x.values.size() >= x.minValues) : true)",
        "message": "an In requirement with minValues needs at least minValues values",
    },
]


def taint():
    return {
        "type": "object",
        "required": ["effect", "key"],
        "properties": {
            "effect": s(
                "NoSchedule, PreferNoSchedule or NoExecute.",
                enum=["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ),
            "key": s(minLength=1, maxLength=316, pattern=QUALIFIED),
            "timeAdded": s(format="date-time"),
            "value": s(maxLength=63, pattern=LABEL_VALUE),
        },
    }


def taints(desc):
    return {
        "type": "array",
        "description": desc,
        "maxItems": 100,
        "items": taint(),
        "x-kubernetes-list-type": "atomic",
    }


def nonempty(what):
    return s(**{"x-kubernetes-validations": [{"rule": "self != ''", "message": f"{what} may not be empty"}]})


def node_class_ref(immutable):
    ref = {
        "type": "object",
        "description": "The node class (group, kind, name) holding the cloud-specific settings.",
        "required": ["group", "kind", "name"],
        "properties": {
            "group": {**nonempty("group"), "pattern": "^[^/]*$", "maxLength": 253},
            "kind": {**nonempty("kind"), "maxLength": 63},
            "name": {**nonempty("name"), "maxLength": 253},
        },
    }
    if immutable:
        ref["x-kubernetes-validations"] = [
            {"rule": "self.group == oldSelf.group", "message": "nodeClassRef.group is immutable"},
            {"rule": "self.kind == oldSelf.kind", "message": "nodeClassRef.kind is immutable"},
        ]
    return ref


def claim_spec_props(nodeclaim):
    return {
        "expireAfter": s(
            "How long a node may live before it is replaced (a duration, or Never).",
            default="720h",
            pattern=DURATION_OR_NEVER,
        ),
        "nodeClassRef": node_class_ref(immutable=not nodeclaim),
        "requirements": {
            "type": "array",
            "description": "Constraints on the nodes' labels.",
            "maxItems": 100,
            "items": requirement(nodeclaim),
            "x-kubernetes-list-type": "atomic",
            "x-kubernetes-validations": REQUIREMENT_LIST_RULES,
        },
        "startupTaints": taints("Taints the node carries only while it starts; pods need not tolerate them."),
        "taints": taints("Taints every node gets; pods must tolerate them."),
        "terminationGracePeriod": s(
            "Longest wait for pods to leave once the node is being deleted.", pattern=DURATION
        ),
    }


def conditions():
    return {
        "type": "array",
        "description": "The object's status conditions.",
        "items": {
            "type": "object",
            "required": ["lastTransitionTime", "status", "type"],
            "properties": {
                "lastTransitionTime": s(format="date-time"),
                "message": s(maxLength=32768),
                "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
                "reason": s(maxLength=1024),
                "status": s(enum=["True", "False", "Unknown"]),
                "type": s(maxLength=316),
            },
        },
    }


def crd(group, plural, kind, columns, spec, status, short=(), spec_rules=None):
    names = {
        "categories": ["karpenter"],
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    if short:
        names["shortNames"] = list(short)
    if spec_rules:
        spec["x-kubernetes-validations"] = spec_rules
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{group}",
            "annotations": {"helm.sh/resource-policy": "keep"},
            "labels": {"app.kubernetes.io/part-of": "kubespot"},
        },
        "spec": {
            "group": group,
            "names": names,
            "scope": "Cluster",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": columns,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": f"{kind} ({group}/v1), served by kubespot's chart.",
                            "properties": {
                                "apiVersion": s(),
                                "kind": s(),
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                            "required": ["spec"],
                        }
                    },
                }
            ],
        },
    }


def col(name, path, typ="string", priority=None):
    c = {"name": name, "type": typ, "jsonPath": path}
    if priority:
        c["priority"] = priority
    return c


READY = '.status.conditions[?(@.type=="Ready")].status'
AGE = col("Age", ".metadata.creationTimestamp", "date")

nodepool_spec = {
    "type": "object",
    "description": "What nodes of this pool may be, how they are disrupted, and how much the pool may hold.",
    "required": ["template"],
    "properties": {
        "disruption": {
            "type": "object",
            "description": "When and how fast the pool's nodes may be consolidated or replaced.",
            "default": {"consolidateAfter": "0s"},
            "properties": {
                "budgets": {
                    "type": "array",
                    "maxItems": 50,
                    "default": [{"nodes": "10%"}],
                    "description": "How many nodes may be disrupted at once, optionally in cron windows (UTC).",
                    "items": {
                        "type": "object",
                        "required": ["nodes"],
                        "properties": {
                            "duration": s(
                                "How long each scheduled window lasts (hours and minutes).",
                                pattern=r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$",
                            ),
                            "nodes": s(
                                "A number of nodes or a percentage of the pool's nodes.",
                                default="10%",
                                pattern=r"^((100|[0-9]{1,2})%|[0-9]+)$",
                            ),
                            "reasons": {
                                "type": "array",
                                "maxItems": 50,
                                "description": "Unset: every reason.",
                                "items": s(enum=["Underutilized", "Empty", "Drifted"]),
                            },
                            "schedule": s(
                                "A 5-field cron expression or @daily-style macro, in UTC.",
                                pattern=r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$",
                            ),
                        },
                    },
                    "x-kubernetes-validations": [
                        {
                            "rule": "self.all(x, has(x.schedule) == has(x.duration))",
                            "message": "'schedule' and 'duration' must be set together",
                        }
                    ],
                },
                "consolidateAfter": s(
                    "How long a node must be empty or underused before it is consolidated; Never turns consolidation off.",
                    default="0s",
                    pattern=DURATION_OR_NEVER,
                ),
                "consolidationPolicy": s(
                    "Which nodes are candidates for consolidation.",
                    default="WhenEmptyOrUnderutilized",
                    enum=["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"],
                ),
            },
        },
        "limits": {
            **resource_list(
                "Most resources the pool's nodes may hold together (cpu, memory, nodes, extended resources)."
            ),
            "maxProperties": 100,
        },
        "replicas": {
            "type": "integer",
            "format": "int64",
            "minimum": 0,
            "description": "Static pools (v1.8): keep exactly this many nodes.",
        },
        "template": {
            "type": "object",
            "description": "The NodeClaims this pool creates.",
            "required": ["spec"],
            "properties": {
                "metadata": {
                    "type": "object",
                    "properties": {
                        "annotations": {"type": "object", "additionalProperties": s()},
                        "labels": {
                            "type": "object",
                            "maxProperties": 100,
                            "additionalProperties": s(maxLength=63, pattern=LABEL_VALUE),
                            "x-kubernetes-validations": key_rules("x", True),
                        },
                    },
                },
                "spec": {
                    "type": "object",
                    "required": ["nodeClassRef", "requirements"],
                    "properties": claim_spec_props(False),
                },
            },
        },
        "weight": {
            "type": "integer",
            "format": "int32",
            "minimum": 1,
            "maximum": 100,
            "description": "Higher weights are tried first; unset ranks as 0.",
        },
    },
}
nodepool_rules = [
    {
        "rule": "has(self.replicas) == has(oldSelf.replicas)",
        "message": "a NodePool cannot switch between static (replicas set) and dynamic provisioning",
    },
    {
        "rule": "!has(self.replicas) || !has(self.limits) || self.limits.all(k, k == 'nodes')",
        "message": "static NodePools support only limits.nodes",
    },
    {"rule": "!has(self.replicas) || !has(self.weight)", "message": "static NodePools do not support weight"},
]
nodepool_status = {
    "type": "object",
    "properties": {
        "conditions": conditions(),
        "nodeClassObservedGeneration": {"type": "integer", "format": "int64"},
        "nodes": {"type": "integer", "format": "int64"},
        "resources": resource_list("What the pool's nodes hold now."),
    },
}
nodepool = crd(
    "karpenter.sh",
    "nodepools",
    "NodePool",
    [
        col("NodeClass", ".spec.template.spec.nodeClassRef.name"),
        col("Nodes", ".status.nodes"),
        col("Ready", READY),
        AGE,
        col("Weight", ".spec.weight", "integer", 1),
        col("CPU", ".status.resources.cpu", priority=1),
        col("Memory", ".status.resources.memory", priority=1),
    ],
    nodepool_spec,
    nodepool_status,
    spec_rules=nodepool_rules,
)

claim_props = claim_spec_props(True)
claim_props["resources"] = {
    "type": "object",
    "properties": {"requests": resource_list("What the NodeClaim's pods need.")},
}
nodeclaim_spec = {"type": "object", "required": ["nodeClassRef", "requirements"], "properties": claim_props}
nodeclaim_status = {
    "type": "object",
    "properties": {
        "allocatable": resource_list("What pods may use on the node."),
        "capacity": resource_list("What the node has."),
        "conditions": conditions(),
        "imageID": s(),
        "lastPodEventTime": s(format="date-time"),
        "nodeName": s(),
        "providerID": s(),
    },
}
nodeclaim = crd(
    "karpenter.sh",
    "nodeclaims",
    "NodeClaim",
    [
        col("Type", ".metadata.labels.node\\.kubernetes\\.io/instance-type"),
        col("Capacity", ".metadata.labels.karpenter\\.sh/capacity-type"),
        col("Zone", ".metadata.labels.topology\\.kubernetes\\.io/zone"),
        col("Node", ".status.nodeName"),
        col("Ready", READY),
        AGE,
        col("ImageID", ".status.imageID", priority=1),
        col("ID", ".status.providerID", priority=1),
        col("NodePool", ".metadata.labels.karpenter\\.sh/nodepool", priority=1),
        col("NodeClass", ".spec.nodeClassRef.name", priority=1),
        col("Drifted", '.status.conditions[?(@.type=="Drifted")].status', priority=1),
    ],
    nodeclaim_spec,
    nodeclaim_status,
    spec_rules=[{"rule": "self == oldSelf", "message": "a NodeClaim's spec is immutable"}],
)

TAGS = {
    "type": "object",
    "maxProperties": 20,
    "additionalProperties": s(),
    "x-kubernetes-validations": [
        {
            "rule": "self.all(k, k != '' && self[k] != '')",
            "message": "empty tag keys or values are not supported",
        }
    ],
}


def terms(desc, fields, exclusive, id_pattern, extra=None):
    props = {}
    for f in fields:
        if f == "tags":
            props[f] = TAGS
        elif f == "id":
            props[f] = s(pattern=id_pattern)
        else:
            props[f] = s()
    if extra:
        props.update(extra)
    rules = [
        {
            "rule": f"self.all(x, {' || '.join(f'has(x.{f})' for f in fields if f != 'owner')})",
            "message": f"each term needs one of {', '.join(f for f in fields if f != 'owner')}",
        }
    ]
    for only in exclusive:
        others = " || ".join(f"has(x.{f})" for f in fields if f != only)
        rules.append(
            {
                "rule": f"!self.exists(x, has(x.{only}) && ({others}))",
                "message": f"'{only}' cannot be combined with other fields in a term",
            }
        )
    return {
        "type": "array",
        "description": desc,
        "minItems": 1,
        "maxItems": 30,
        "items": {"type": "object", "properties": props},
        "x-kubernetes-validations": rules,
    }


ami_terms = terms(
    "AMIs to use, by alias (family@version, alone), id, tags/name/owner or SSM parameter.",
    ["alias", "id", "name", "owner", "ssmParameter", "tags"],
    ["id", "alias"],
    "ami-[0-9a-z]+",
)
ami_terms["items"]["properties"]["alias"] = s(
    maxLength=30,
    **{
        "x-kubernetes-validations": [
            {"rule": "self.matches('^[a-zA-Z0-9]+@.+$')", "message": "an alias has the form family@version"},
            {
                "rule": "self.split('@')[0] in ['al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025']",
                "message": "alias family must be al2, al2023, bottlerocket, windows2019, windows2022 or windows2025",
            },
            {
                "rule": "self.split('@')[0].startsWith('windows') ? self.split('@')[1] == 'latest' : true",
                "message": "windows aliases only take version latest",
            },
        ]
    },
)
ami_terms["x-kubernetes-validations"].append(
    {
        "rule": "!(self.exists(x, has(x.alias)) && self.size() != 1)",
        "message": "an alias term must be the only amiSelectorTerm",
    }
)
# ``id`` rule: ownerless id alone; ``owner`` narrows name or tags and may sit with them.
ami_terms["x-kubernetes-validations"][1]["rule"] = (
    "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner) || has(x.ssmParameter)))"
)

RESERVED = {
    "type": "object",
    "additionalProperties": s(),
    "x-kubernetes-validations": [
        {
            "rule": "self.all(x, x in ['cpu', 'memory', 'ephemeral-storage', 'pid'])",
            "message": "only cpu, memory, ephemeral-storage and pid may be reserved",
        },
        {"rule": "self.all(x, !self[x].startsWith('-'))", "message": "reservations may not be negative"},
    ],
}
SIGNALS = "['memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available', 'imagefs.inodesFree', 'pid.available']"


def signals(desc):
    return {
        "type": "object",
        "description": desc,
        "additionalProperties": s(),
        "x-kubernetes-validations": [
            {"rule": f"self.all(x, x in {SIGNALS})", "message": f"signals must be among {SIGNALS}"}
        ],
    }


kubelet = {
    "type": "object",
    "description": "kubelet settings for the nodes (typed, as in Karpenter v1.0 to v1.14).",
    "properties": {
        "clusterDNS": {"type": "array", "items": s()},
        "cpuCFSQuota": {"type": "boolean"},
        "evictionHard": signals("Hard eviction thresholds."),
        "evictionMaxPodGracePeriod": {"type": "integer", "format": "int32"},
        "evictionSoft": signals("Soft eviction thresholds (each needs a grace period)."),
        "evictionSoftGracePeriod": signals("Grace periods of the soft thresholds."),
        "imageGCHighThresholdPercent": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 100},
        "imageGCLowThresholdPercent": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 100},
        "kubeReserved": RESERVED,
        "maxPods": {"type": "integer", "format": "int32", "minimum": 0},
        "podsPerCore": {"type": "integer", "format": "int32", "minimum": 0},
        "systemReserved": RESERVED,
    },
    "x-kubernetes-validations": [
        {
            "rule": "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ? self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent : true",
            "message": "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
        },
        {
            "rule": "has(self.evictionSoft) ? self.evictionSoft.all(e, has(self.evictionSoftGracePeriod) && e in self.evictionSoftGracePeriod) : true",
            "message": "every evictionSoft signal needs an evictionSoftGracePeriod",
        },
        {
            "rule": "has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, has(self.evictionSoft) && e in self.evictionSoft) : true",
            "message": "every evictionSoftGracePeriod signal needs an evictionSoft threshold",
        },
    ],
}
FAMILIES = ["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"]
family_rules = [
    {
        "rule": f"!has(self.amiFamily) || !has(self.amiSelectorTerms) || !self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.split('@')[0] == '{a}') || self.amiFamily in ['Custom', '{f}']",
        "message": f"with a {a} alias, amiFamily (if set) must be {f} or Custom",
    }
    for a, f in [
        ("al2", "AL2"),
        ("al2023", "AL2023"),
        ("bottlerocket", "Bottlerocket"),
        ("windows2019", "Windows2019"),
        ("windows2022", "Windows2022"),
        ("windows2025", "Windows2025"),
    ]
]
nodeclass_spec = {
    "type": "object",
    "description": "How kubespot launches EC2 instances for the NodePools that reference this class.",
    "required": ["amiSelectorTerms", "securityGroupSelectorTerms", "subnetSelectorTerms"],
    "properties": {
        "amiFamily": s(
            "The image family; optional with an alias (it is the alias's), required otherwise.", enum=FAMILIES
        ),
        "amiSelectorTerms": ami_terms,
        "associatePublicIPAddress": {"type": "boolean"},
        "blockDeviceMappings": {
            "type": "array",
            "maxItems": 50,
            "items": {
                "type": "object",
                "properties": {
                    "deviceName": s(),
                    "ebs": {
                        "type": "object",
                        "properties": {
                            "deleteOnTermination": {"type": "boolean"},
                            "encrypted": {"type": "boolean"},
                            "iops": {"type": "integer", "format": "int64"},
                            "kmsKeyID": s(),
                            "snapshotID": s(),
                            "throughput": {"type": "integer", "format": "int64"},
                            "volumeInitializationRate": {
                                "type": "integer",
                                "format": "int32",
                                "minimum": 100,
                                "maximum": 300,
                            },
                            "volumeSize": {
                                "anyOf": [{"type": "integer"}, {"type": "string"}],
                                "x-kubernetes-int-or-string": True,
                                "pattern": r"^[0-9]+(Gi|G|Ti|T)$",
                            },
                            "volumeType": s(enum=["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"]),
                        },
                        "x-kubernetes-validations": [
                            {
                                "rule": "has(self.snapshotID) || has(self.volumeSize)",
                                "message": "an EBS volume needs snapshotID or volumeSize",
                            }
                        ],
                    },
                    "rootVolume": {"type": "boolean"},
                },
            },
            "x-kubernetes-validations": [
                {
                    "rule": "self.filter(x, has(x.rootVolume) && x.rootVolume).size() <= 1",
                    "message": "at most one block device mapping may be the root volume",
                }
            ],
        },
        "context": s(),
        "detailedMonitoring": {"type": "boolean"},
        "instanceProfile": s(
            "An existing instance profile (exclusive with role).",
            **{
                "x-kubernetes-validations": [
                    {"rule": "self != ''", "message": "instanceProfile cannot be empty"}
                ]
            },
        ),
        "instanceStorePolicy": s(enum=["RAID0"]),
        "kubelet": kubelet,
        "metadataOptions": {
            "type": "object",
            "default": {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 1,
                "httpTokens": "required",
            },
            "properties": {
                "httpEndpoint": s(default="enabled", enum=["enabled", "disabled"]),
                "httpProtocolIPv6": s(default="disabled", enum=["enabled", "disabled"]),
                "httpPutResponseHopLimit": {
                    "type": "integer",
                    "format": "int64",
                    "default": 1,
                    "minimum": 1,
                    "maximum": 64,
                },
                "httpTokens": s(default="required", enum=["required", "optional"]),
            },
        },
        "role": s(
            "The IAM role whose instance profile kubespot manages (exclusive with instanceProfile).",
            **{"x-kubernetes-validations": [{"rule": "self != ''", "message": "role cannot be empty"}]},
        ),
        "securityGroupSelectorTerms": terms(
            "Security groups, by tags, id or name.", ["id", "name", "tags"], ["id", "name"], "sg-[0-9a-z]+"
        ),
        "subnetSelectorTerms": terms("Subnets, by tags or id.", ["id", "tags"], ["id"], "subnet-[0-9a-z]+"),
        "tags": {
            "type": "object",
            "additionalProperties": s(),
            "x-kubernetes-validations": [
                {"rule": "self.all(k, k != '')", "message": "empty tag keys are not supported"},
                {
                    "rule": "self.all(k, k != 'eks:eks-cluster-name')",
                    "message": "tag eks:eks-cluster-name is restricted",
                },
                {
                    "rule": "self.all(k, !k.startsWith('kubernetes.io/cluster'))",
                    "message": "tags kubernetes.io/cluster* are restricted",
                },
                {
                    "rule": "self.all(k, k != 'karpenter.sh/nodepool')",
                    "message": "tag karpenter.sh/nodepool is restricted",
                },
                {
                    "rule": "self.all(k, k != 'karpenter.sh/nodeclaim')",
                    "message": "tag karpenter.sh/nodeclaim is restricted",
                },
                {
                    "rule": "self.all(k, k != 'karpenter.k8s.aws/ec2nodeclass')",
                    "message": "tag karpenter.k8s.aws/ec2nodeclass is restricted",
                },
            ],
        },
        "userData": s("Merged with the generated bootstrap (all of it for amiFamily Custom)."),
        # Added after v1.0 (up to v1.14): read and stored, not used by kubespot yet.
        "capacityReservationSelectorTerms": {
            "type": "array",
            "maxItems": 30,
            "description": "On-demand capacity reservations to use (v1.3+).",
            "items": {
                "type": "object",
                "properties": {
                    "id": s(pattern="^cr-[0-9a-z]+$"),
                    "instanceMatchCriteria": s(enum=["open", "targeted"]),
                    "ownerID": s(pattern="^[0-9]{12}$"),
                    "tags": TAGS,
                },
            },
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))",
                    "message": "each term needs one of tags, id, instanceMatchCriteria",
                },
                {
                    "rule": "!self.exists(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))",
                    "message": "'id' cannot be combined with other fields in a term",
                },
            ],
        },
        "connectionTracking": {
            "type": "object",
            "properties": {
                "tcpEstablishedTimeout": {
                    "type": "integer",
                    "format": "int32",
                    "minimum": 60,
                    "maximum": 432000,
                },
                "udpStreamTimeout": {"type": "integer", "format": "int32", "minimum": 60, "maximum": 180},
                "udpTimeout": {"type": "integer", "format": "int32", "minimum": 30, "maximum": 60},
            },
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
                    "message": "set at least one connection tracking timeout",
                }
            ],
        },
        "cpuOptions": {
            "type": "object",
            "properties": {"nestedVirtualization": s(enum=["enabled", "disabled"])},
        },
        "ipPrefixCount": {"type": "integer", "format": "int32", "minimum": 0},
        "networkInterfaces": {
            "type": "array",
            "maxItems": 150,
            "items": {
                "type": "object",
                "required": ["deviceIndex", "interfaceType", "networkCardIndex"],
                "properties": {
                    "deviceIndex": {"type": "integer", "format": "int32", "minimum": 0},
                    "interfaceType": s(enum=["interface", "efa-only"]),
                    "networkCardIndex": {"type": "integer", "format": "int32", "minimum": 0},
                },
            },
        },
        "placementGroupSelector": {
            "type": "object",
            "properties": {"id": s(pattern="^pg-[0-9a-z]+$"), "name": s(minLength=1)},
            "x-kubernetes-validations": [
                {"rule": "has(self.name) != has(self.id)", "message": "set exactly one of name and id"}
            ],
        },
    },
    # Fields of releases after v1.14 are kept as written rather than pruned.
    "x-kubernetes-preserve-unknown-fields": True,
}
nodeclass_rules = [
    {
        "rule": "has(self.role) != has(self.instanceProfile)",
        "message": "set exactly one of role and instanceProfile",
    },
    {
        "rule": "has(self.amiFamily) || (has(self.amiSelectorTerms) && self.amiSelectorTerms.exists(x, has(x.alias)))",
        "message": "amiFamily is required when amiSelectorTerms has no alias",
    },
    *family_rules,
]
nodeclass_status = {
    "type": "object",
    "properties": {
        "amis": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "requirements"],
                "properties": {
                    "deprecated": {"type": "boolean"},
                    "id": s(),
                    "name": s(),
                    "requirements": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["key", "operator"],
                            "properties": {
                                "key": s(),
                                "minValues": {"type": "integer"},
                                "operator": s(),
                                "values": {"type": "array", "items": s()},
                            },
                        },
                    },
                },
            },
        },
        "capacityReservations": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "conditions": conditions(),
        "instanceProfile": s(),
        "securityGroups": {
            "type": "array",
            "items": {"type": "object", "required": ["id"], "properties": {"id": s(), "name": s()}},
        },
        "subnets": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "zone"],
                "properties": {"id": s(), "zone": s(), "zoneID": s()},
            },
        },
    },
}
nodeclass = crd(
    "karpenter.k8s.aws",
    "ec2nodeclasses",
    "EC2NodeClass",
    [
        col("Ready", READY),
        AGE,
        col("Role", ".spec.role", priority=1),
    ],
    nodeclass_spec,
    nodeclass_status,
    short=("ec2nc", "ec2ncs"),
    spec_rules=nodeclass_rules,
)

HEADER = (
    "# {kind} ({group}/v1) for kubespot: the superset of the fields Karpenter v1.0 to v1.14 accept, with\n"
    "# the validation rules the API server can enforce. Generated by scripts/karpenter_crds.py: edit that.\n"
    "# helm installs it from the chart's crds/ folder and never replaces a CRD that already exists (a\n"
    "# cluster running Karpenter keeps its own); `helm install --skip-crds` leaves it out (docs/helm.md).\n"
)


def documents() -> dict[str, str]:
    out = {}
    for obj in (nodepool, nodeclaim, nodeclass):
        group, plural, kind = (
            obj["spec"]["group"],
            obj["spec"]["names"]["plural"],
            obj["spec"]["names"]["kind"],
        )
        body = yaml.safe_dump(obj, sort_keys=False, width=120)
        out[f"{group}_{plural}.yaml"] = HEADER.format(kind=kind, group=group) + "---\n" + body
    return out


def main(argv: list[str]) -> int:
    docs = documents()
    if "--check" in argv:
        stale = [
            name
            for name, text in docs.items()
            if not (OUT / name).is_file() or (OUT / name).read_text() != text
        ]
        for name in stale:
            print(f"{OUT / name} is stale: run scripts/karpenter_crds.py", file=sys.stderr)
        return 1 if stale else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (OUT / name).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
