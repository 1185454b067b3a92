"""The Node a booting instance's kubelet registers, and the status writes that follow.

``registration`` follows k8s pkg/kubelet/kubelet_node_status.go ``initialNode`` (Kubernetes 1.32):
the labels the kubelet sets itself (``kubernetes.io/hostname``, ``kubernetes.io/os``,
``kubernetes.io/arch`` and the ``beta.kubernetes.io`` os/arch twins), then its ``--node-labels``
over them, its ``--register-with-taints``, ``spec.providerID`` (nodeadm and Bottlerocket configure
``aws:///<zone>/<instance-id>``), the ``volumes.kubernetes.io/controller-managed-attach-detach``
annotation, and the status ``setNodeStatus`` fills before the create (capacity, allocatable,
addresses, node info, conditions with Ready False until the CNI is up).

Since 1.31 no cloud provider runs in the kubelet: on EKS the instance-type, zone and region labels
(and their beta twins) come from the AWS cloud controller manager's node controller
(staging/src/k8s.io/cloud-provider/controllers/node/node_controller.go ``syncNode``) moments after
registration. The joiner knows those facts from EC2 and writes them in the registration itself,
so the Node never shows the ``node.cloudprovider.kubernetes.io/uninitialized`` window. Pure.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

from .capacity import InstanceTypeFacts, resources
from .ec2 import Instance
from .userdata import BootConfig

Obj = dict[str, Any]

#: kubesim's Node annotation (conventions.READY_SECONDS): seconds its simulated kubelet reports
#: Ready False after registration, so its heartbeats agree with the joiner's ``ready_delay``.
KUBESIM_READY_SECONDS = "kubesim.kubespot.io/ready-seconds"
#: kubesim's Node label naming the instance (conventions.INSTANCE_ID_LABEL), as its generator sets.
KUBESIM_INSTANCE_ID = "kubesim.kubespot.io/instance-id"

#: The cloud node lifecycle controller's taint on a Node whose instance is shut down
#: (staging/src/k8s.io/cloud-provider/controllers/nodelifecycle ``ShutdownTaint``; the key is
#: cloud-provider/api ``TaintNodeShutdown``): no value, no timeAdded.
SHUTDOWN_TAINT: dict[str, str] = {"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}

NOT_READY_REASON = "KubeletNotReady"
NOT_READY_MESSAGE = (
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
    "message:Network plugin returns error: cni plugin not initialized"
)
_OS_IMAGES = {
    "AL2023": "Amazon Linux 2023",
    "AL2": "Amazon Linux 2",
    "Bottlerocket": "Bottlerocket OS 1.32.0",
}
_PRESSURE = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
)


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_name(instance: Instance) -> str:
    """EKS names a node after its private DNS name (``--hostname-override``)."""
    return instance.private_dns or instance.id


def provider_id(instance: Instance) -> str:
    return f"aws:///{instance.zone}/{instance.id}"


def region_of(zone: str) -> str:
    return zone[:-1] if zone[-1:].isalpha() else zone


def condition(type_: str, status: str, reason: str, message: str, now: float) -> Obj:
    at = rfc3339(now)
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": at,
        "lastTransitionTime": at,
    }


def registration(
    instance: Instance,
    facts: InstanceTypeFacts,
    boot: BootConfig,
    *,
    now: float,
    ready_delay: float,
    volume_gib: int | None = None,
) -> Obj:
    """The Node object the kubelet creates when it registers (``volume_gib``: the size of the volume
    its filesystem is on, for ``ephemeral-storage``)."""
    name = node_name(instance)
    zone, region = instance.zone, region_of(instance.zone)
    labels = {
        # initialNode's own labels
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": facts.arch,
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": facts.arch,
        # the cloud node controller's (see the module docstring)
        "node.kubernetes.io/instance-type": instance.type,
        "beta.kubernetes.io/instance-type": instance.type,
        "topology.kubernetes.io/zone": zone,
        "failure-domain.beta.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": region,
        "failure-domain.beta.kubernetes.io/region": region,
        KUBESIM_INSTANCE_ID: instance.id,
    }
    labels.update(boot.labels)  # --node-labels win over the defaults (initialNode)
    capacity, allocatable = resources(facts, boot.max_pods, volume_gib)
    spec: Obj = {"providerID": provider_id(instance)}
    if boot.taints:
        spec["taints"] = [dict(t) for t in boot.taints]
    seed = hashlib.sha256(instance.id.encode()).hexdigest()
    addresses = [{"type": "InternalIP", "address": instance.private_ip}] if instance.private_ip else []
    addresses += [{"type": "InternalDNS", "address": name}, {"type": "Hostname", "address": name}]
    conditions = [condition(t, "False", reason, message, now) for t, reason, message in _PRESSURE]
    conditions.append(condition("Ready", "False", NOT_READY_REASON, NOT_READY_MESSAGE, now))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                KUBESIM_READY_SECONDS: f"{ready_delay:g}",
            },
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "addresses": addresses,
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": facts.arch,
                "operatingSystem": "linux",
                "osImage": _OS_IMAGES.get(boot.family, "Amazon Linux 2023"),
                "kernelVersion": "6.1.0",
                "containerRuntimeVersion": "containerd://1.7.0",
                "kubeletVersion": "v1.32.0-eks",
                "kubeProxyVersion": "v1.32.0-eks",
                "machineID": seed[:32],
                "systemUUID": str(uuid.UUID(seed[:32])),
                "bootID": str(uuid.uuid4()),
            },
        },
    }


def not_ready_patch(now: float) -> Obj:
    """A restarted kubelet's first status: up, the CNI not yet (as at registration)."""
    return {"status": {"conditions": [condition("Ready", "False", NOT_READY_REASON, NOT_READY_MESSAGE, now)]}}


def ready_patch(now: float) -> Obj:
    """The kubelet's status once the CNI is up (strategic merge: conditions merge by type)."""
    return {
        "status": {
            "conditions": [condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", now)]
        }
    }


def gone_patch(now: float) -> Obj:
    """What the node lifecycle controller writes once the kubelet stops posting (pkg/controller/
    nodelifecycle ``tryUpdateNodeHealth``), written at once for an instance shutting down."""
    return {
        "status": {
            "conditions": [
                condition(
                    "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", now
                )
            ]
        }
    }
