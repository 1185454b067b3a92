"""What each resource's registry strategy does to an object the API creates (PrepareForCreate).

Upstream's create strategies throw away a status sent with a create for every kind with a status
subresource, so only controllers (through ``/status``) ever write one: pods start ``Pending`` with
their QoS class (pkg/registry/core/pod/strategy.go), namespaces ``Active``
(pkg/registry/core/namespace/strategy.go), workloads, budgets and services with the zero value of
their status type (pkg/registry/apps/*/strategy.go, pkg/registry/policy/poddisruptionbudget,
pkg/registry/core/service), CRDs (kubesim then marks them established) and custom resources with
none (apiextensions-apiserver pkg/registry/customresource). Nodes keep theirs:
a kubelet registers its node with its status (pkg/registry/core/node/strategy.go drops only
``spec.configSource`` and ``status.config``). Objects loaded at start-up (a dump, the generator) do
not go through here: they are stored as they were.
"""

from __future__ import annotations

from typing import Any

from .resources import ResourceType

Obj = dict[str, Any]

#: The zero status each strategy resets to, as it serializes: the fields without ``omitempty``
#: (k8s.io/api apps/v1, policy/v1 and core/v1 types.go) are there with their zero values.
ZERO_STATUS: dict[tuple[str, str], Obj] = {
    ("apps", "deployments"): {},
    ("apps", "replicasets"): {"replicas": 0},
    ("apps", "statefulsets"): {"replicas": 0, "availableReplicas": 0},
    ("apps", "daemonsets"): {
        "currentNumberScheduled": 0,
        "numberMisscheduled": 0,
        "desiredNumberScheduled": 0,
        "numberReady": 0,
    },
    ("policy", "poddisruptionbudgets"): {
        "disruptionsAllowed": 0,
        "currentHealthy": 0,
        "desiredHealthy": 0,
        "expectedPods": 0,
    },
    ("", "services"): {"loadBalancer": {}},
}

_POD = ("", "pods")
_NODE = ("", "nodes")
_NAMESPACE = ("", "namespaces")


def prepare_for_create(rt: ResourceType, obj: Obj, qos_class: str) -> None:
    """Reset what the client may not set on create; ``qos_class`` is the pod's (computed by the caller)."""
    if rt.key == _POD:
        status: Obj = {"phase": "Pending", "qosClass": qos_class}
        if (obj.get("spec") or {}).get("schedulingGates"):
            # applySchedulingGatedCondition: a gated pod says why it is not scheduled.
            status["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                }
            ]
        obj["status"] = status
    elif rt.key == _NODE:
        obj.get("spec", {}).pop("configSource", None)
        if isinstance(obj.get("status"), dict):
            obj["status"].pop("config", None)
    elif rt.key == _NAMESPACE:
        obj["status"] = {"phase": "Active"}
    elif rt.key in ZERO_STATUS:
        obj["status"] = dict(ZERO_STATUS[rt.key])
    elif rt.has_status:
        obj.pop("status", None)  # a custom resource's status goes (customresource strategy.go)
