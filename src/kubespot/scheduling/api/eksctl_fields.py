"""The shapes eksctl's node group fields must have, and the check that drops a field of the wrong shape
with a warning naming the group and the field, so the converter never writes what it cannot read.

eksctl reads a ClusterConfig into Go structs (``pkg/apis/eksctl.io/v1alpha5/types.go``
``NodeGroupBase``, ``NodeGroup``, ``ManagedNodeGroup``, ``NodeGroupInstancesDistribution``,
``InstanceSelector``, ``VolumeMapping``, ``NodeGroupTaint``): a string where an integer belongs
(``maxInstanceLifetime: "604800"``), a boolean for ``maxSize``, a list of strings for ``taints``
fail its load. The converter warns instead, leaves the field out (as if unset, so eksctl's default
applies) and goes on: one bad field does not lose the rest of the file. Taint effects are checked as eksctl's
``validateTaints`` does (NoSchedule, PreferNoSchedule, NoExecute). Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Obj = dict[str, Any]
Warn = Callable[[str, str, str], None]
#: A shape: what the value must be (for the warning) and the test.
Shape = tuple[str, Callable[[Any], bool]]

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _whole(low: int) -> Shape:
    # bool is an int in Python; YAML's true is no number of nodes.
    return (
        f"a whole number >= {low}",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low,
    )


STRING: Shape = ("a string", lambda v: isinstance(v, str))
BOOL: Shape = ("true or false", lambda v: isinstance(v, bool))
STRINGS: Shape = ("a list of strings", lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v))
MAPPING: Shape = ("a mapping", lambda v: isinstance(v, Mapping))
LIST: Shape = ("a list", lambda v: isinstance(v, list))
NUMBER: Shape = (
    "a number",
    lambda v: isinstance(v, int | float) and not isinstance(v, bool),
)
PERCENT: Shape = (
    "a whole number from 0 to 100",
    lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 100,
)
#: ``memory: 32`` (GiB) or ``memory: 16GiB``.
MEMORY: Shape = (
    "a size such as 16 or 16GiB",
    lambda v: (
        (isinstance(v, str) and bool(v.strip())) or (isinstance(v, int) and not isinstance(v, bool) and v > 0)
    ),
)

#: eksctl's volume fields (the node group's own, and each of ``additionalVolumes``).
VOLUME: dict[str, Shape] = {
    "volumeName": STRING,
    "volumeSize": _whole(1),
    "volumeType": STRING,
    "volumeEncrypted": BOOL,
    "volumeKmsKeyID": STRING,
    "volumeIOPS": _whole(1),
    "volumeThroughput": _whole(1),
    "snapshotID": STRING,
}

NODE_GROUP: dict[str, Shape] = {
    **{k: v for k, v in VOLUME.items() if k != "snapshotID"},
    "name": STRING,
    "amiFamily": STRING,
    "ami": STRING,
    "instanceType": STRING,
    "instanceTypes": STRINGS,
    "instancesDistribution": MAPPING,
    "instanceSelector": MAPPING,
    "spot": BOOL,
    "availabilityZones": STRINGS,
    "subnets": STRINGS,
    "privateNetworking": BOOL,
    "maxSize": _whole(0),
    "labels": MAPPING,
    "taints": ("a list of taints or a mapping", lambda v: isinstance(v, list | Mapping)),
    "tags": MAPPING,
    "iam": MAPPING,
    "securityGroups": MAPPING,
    "maxPodsPerNode": _whole(1),
    "kubeletExtraConfig": MAPPING,
    "clusterDNS": STRING,
    "additionalVolumes": LIST,
    "preBootstrapCommands": STRINGS,
    "disableIMDSv1": BOOL,
    "disablePodIMDS": BOOL,
    "enableDetailedMonitoring": BOOL,
    "maxInstanceLifetime": _whole(1),
}

DISTRIBUTION: dict[str, Shape] = {
    "instanceTypes": STRINGS,
    "onDemandBaseCapacity": _whole(0),
    "onDemandPercentageAboveBaseCapacity": PERCENT,
    "maxPrice": NUMBER,
    "spotInstancePools": _whole(1),
    "spotAllocationStrategy": STRING,
    "capacityRebalance": BOOL,
}

SELECTOR: dict[str, Shape] = {
    "vCPUs": _whole(0),
    "memory": MEMORY,
    "gpus": _whole(0),
    "neuron_devices": _whole(0),
    "cpuArchitecture": STRING,
    "allow": STRING,
    "deny": STRING,
}

SECURITY_GROUPS: dict[str, Shape] = {"attachIDs": STRINGS, "withShared": BOOL, "withLocal": BOOL}

IAM: dict[str, Shape] = {
    "instanceProfileARN": STRING,
    "instanceRoleARN": STRING,
    "instanceRoleName": STRING,
    "attachPolicyARNs": STRINGS,
}

#: What the converter does instead when the field is left out (said in the warning).
_INSTEAD = {
    "maxInstanceLifetime": "nodes never expire",
    "maxSize": "no node limit",
    "volumeSize": "80 GiB",
    "instanceType": "eksctl's default m5.large",
    "amiFamily": "eksctl's default AmazonLinux2023",
    "onDemandPercentageAboveBaseCapacity": "100, every node on-demand",
    "onDemandBaseCapacity": "0",
}


def checked(who: str, prefix: str, obj: Mapping[str, Any], shapes: Mapping[str, Shape], warn: Warn) -> Obj:
    """``obj`` without the fields of ``shapes`` whose value has the wrong shape, each one warned
    about as ``who: <prefix><field>``; fields not in ``shapes`` are kept as they are. A ``null``
    value is an unset field (YAML's ``key:``), left out without a warning."""
    out: Obj = {}
    for key, value in obj.items():
        shape = shapes.get(str(key))
        if value is None and shape is not None:
            continue
        if shape is not None and not shape[1](value):
            instead = _INSTEAD.get(str(key))
            warn(
                who,
                f"{prefix}{key}",
                f"{_shown(value)} is not {shape[0]}; ignored" + (f" ({instead})" if instead else ""),
            )
            continue
        out[str(key)] = value
    return out


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def scalar_map(who: str, field: str, value: Mapping[str, Any], warn: Warn) -> dict[str, str]:
    """``labels`` / ``tags``: string keys to scalar values (as text); a list or mapping as a value
    is warned about and left out."""
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, list | Mapping) or item is None:
            warn(who, f"{field}.{key}", f"{_shown(item)} is not a string; ignored")
            continue
        out[str(key)] = str(item).lower() if isinstance(item, bool) else str(item)
    return out


def taints(who: str, value: Any, warn: Warn) -> list[Obj]:
    """eksctl's taints, in either form (``types.go`` ``taintsWrapper``): a list of ``{key, value,
    effect}``, or the older mapping ``key: value:Effect`` (``key: :Effect`` without a value). An
    entry without a key or with an effect eksctl refuses is warned about and left out."""
    raw: list[tuple[str, Any, Any, Any]] = []  # (where, key, value, effect)
    if isinstance(value, Mapping):
        for key, text in value.items():
            head, sep, effect = str(text).rpartition(":")
            raw.append((f"taints.{key}", key, head if sep else "", effect))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if not isinstance(item, Mapping):
                warn(who, f"taints[{i}]", f"{_shown(item)} is not a taint (key, value, effect); ignored")
                continue
            raw.append((f"taints[{i}]", item.get("key"), item.get("value"), item.get("effect")))
    out: list[Obj] = []
    for where, key, taint_value, effect in raw:
        if not isinstance(key, str) or not key:
            warn(who, where, "a taint without a key; ignored")
        elif effect not in TAINT_EFFECTS:
            warn(who, where, f"effect {_shown(effect)} is not one of {', '.join(TAINT_EFFECTS)}; ignored")
        elif taint_value is not None and not isinstance(taint_value, str | int | float):
            warn(who, where, f"value {_shown(taint_value)} is not a string; ignored")
        else:
            taint: Obj = {"key": key, "effect": effect}
            if taint_value not in (None, ""):
                taint["value"] = str(taint_value)
            out.append(taint)
    return out


def additional_volumes(who: str, value: list[Any], warn: Warn) -> list[Obj]:
    """``additionalVolumes``: each a mapping naming its device (``volumeName``, which eksctl
    requires); other entries are warned about and left out, their fields checked as the group's."""
    out: list[Obj] = []
    for i, item in enumerate(value):
        where = f"additionalVolumes[{i}]"
        if not isinstance(item, Mapping):
            warn(who, where, f"{_shown(item)} is not a volume; ignored")
            continue
        volume = checked(who, f"{where}.", item, VOLUME, warn)
        if not volume.get("volumeName"):
            warn(who, where, "a volume without a volumeName (its device name); ignored")
            continue
        out.append(volume)
    return out
