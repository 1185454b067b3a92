"""The sandbox's sample cluster: nodes labelled the way EKS users label them, and the workloads on them.

Pure: builds JSON-shaped Kubernetes objects for ``KubeSim(objects=...)`` and for later creation,
from the node count and the time scale. What it holds, and why each piece is there:

- on-demand and spot nodes with ``karpenter.sh/capacity-type``, ``lifecycle: Ec2Spot`` (eksctl's
  label) on spot, instance type, zone and providerID ``aws:///<zone>/<instance-id>``; spot nodes
  carry eksctl's ``spotInstance=true:PreferNoSchedule`` taint;
- Deployments with PodDisruptionBudgets of each common shape (maxUnavailable 1, a percentage, an
  absolute minAvailable), so evictions meet 429s and wait for replacements;
- a workload with an emptyDir volume (its data dies with the pod; the drain must still move it);
- a workload that prefers spot (preferred node affinity on the capacity type plus the toleration);
- the agent's own DaemonSet (DaemonSet pods stay on a draining node);
- created later, once the scenario nodes are known: a bare pod (no controller recreates it) on the
  interrupted node, and for the failing demo a pod pinned there under a budget that never allows
  a disruption.

Pod shutdown times use kubesim's annotation and grace periods are compressed with the time scale.

The load-balancer scenario has its own, smaller cluster (``lb_objects``): identical spot nodes, the
load-balanced ``shop/web`` spread over them (spot only, two per node), ``shop/api`` beside it (not
behind the balancer: the drain need not hold it), the agent DaemonSet, and in the run with
deregistration the controller's Deployment on an on-demand node.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any

from kubespot.sim.kubesim import conventions
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import deployment, namespace, node, pdb, pod

from .timing import Timing

Obj = dict[str, Any]

CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
#: eksctl's suggested taint for spot node groups: soft, so on-demand fallback still works.
SPOT_TAINT = {"key": "spotInstance", "value": "true", "effect": "PreferNoSchedule"}
SANDBOX_LABEL = "sandbox.kubespot.io/part-of"

AGENT_NAMESPACE = "kube-system"
AGENT_DAEMONSET = "kubespot-agent"
ON_DEMAND_NODES = 2

_SPOT_TYPES = (("m5.xlarge", "4", "16Gi"), ("c5.xlarge", "4", "8Gi"), ("r5.xlarge", "4", "32Gi"))


@dataclass(frozen=True)
class NodeSpec:
    name: str
    instance_id: str
    instance_type: str
    zone: str
    spot: bool
    cpu: str
    memory: str

    @property
    def provider_id(self) -> str:
        return f"aws:///{self.zone}/{self.instance_id}"


@dataclass(frozen=True)
class WorkloadSpec:
    """One Deployment of the sample cluster, in real-world seconds (compressed when built)."""

    namespace: str
    name: str
    replicas: int
    grace: int
    shutdown: float
    cpu: str
    memory: str
    pdb_min_available: int | str | None = None
    pdb_max_unavailable: int | str | None = None
    empty_dir: bool = False
    prefers_spot: bool = False


def instance_id_for(name: str) -> str:
    """A stable 17-hex-digit EC2 instance id for a node name."""
    return "i-0" + hashlib.sha256(name.encode()).hexdigest()[:16]


def node_specs(spot_nodes: int, *, uniform: bool = False) -> list[NodeSpec]:
    """On-demand nodes, then spot nodes of mixed types (``uniform``: all of the first type)."""
    specs = [
        NodeSpec(f"od-node-{i}", instance_id_for(f"od-node-{i}"), "m5.large", ZONES[i % 3], False, "2", "8Gi")
        for i in range(1, ON_DEMAND_NODES + 1)
    ]
    for i in range(1, spot_nodes + 1):
        itype, cpu, mem = _SPOT_TYPES[0 if uniform else (i - 1) % len(_SPOT_TYPES)]
        name = f"spot-node-{i}"
        specs.append(NodeSpec(name, instance_id_for(name), itype, ZONES[(i - 1) % 3], True, cpu, mem))
    return specs


def workload_specs(spot_nodes: int) -> list[WorkloadSpec]:
    """The Deployments; replica counts grow with the cluster so every node gets a share."""
    n = max(spot_nodes, 3)
    return [
        WorkloadSpec("shop", "web", 2 * n, 30, 5.0, "250m", "256Mi", pdb_max_unavailable=1),
        WorkloadSpec("shop", "api", n + 2, 30, 10.0, "250m", "512Mi", pdb_min_available="80%"),
        WorkloadSpec("payments", "checkout", 3, 60, 20.0, "500m", "512Mi", pdb_min_available=2),
        WorkloadSpec("shop", "cache", 3, 30, 3.0, "250m", "1Gi", empty_dir=True),
        WorkloadSpec("batch", "render-worker", 2 * n, 120, 30.0, "500m", "1Gi", prefers_spot=True),
    ]


def build_objects(spot_nodes: int, timing: Timing) -> list[Obj]:
    """Namespaces, Nodes, Deployments, PDBs and the agent DaemonSet, in load order."""
    objects: list[Obj] = [namespace(ns) for ns in ("shop", "payments", "batch")]
    objects += [node_object(spec) for spec in node_specs(spot_nodes)]
    workloads = workload_specs(spot_nodes)
    objects += [deployment_object(w, timing) for w in workloads]
    objects += [p for w in workloads if (p := pdb_object(w)) is not None]
    objects.append(agent_daemonset())
    return objects


def node_object(spec: NodeSpec) -> Obj:
    labels = {
        CAPACITY_TYPE: "spot" if spec.spot else "on-demand",
        "lifecycle": "Ec2Spot" if spec.spot else "OnDemand",
        INSTANCE_TYPE: spec.instance_type,
        "beta.kubernetes.io/instance-type": spec.instance_type,
        ZONE: spec.zone,
        "topology.kubernetes.io/region": REGION,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        conventions.INSTANCE_ID_LABEL: spec.instance_id,
    }
    obj = node(
        spec.name,
        cpu=spec.cpu,
        memory=spec.memory,
        labels=labels,
        taints=[SPOT_TAINT] if spec.spot else None,
    )
    obj["spec"]["providerID"] = spec.provider_id
    return obj


def _pod_annotations(shutdown: float, timing: Timing) -> dict[str, str]:
    return {conventions.SHUTDOWN_SECONDS: f"{timing.s(shutdown):.3f}"}


def deployment_object(w: WorkloadSpec, timing: Timing) -> Obj:
    obj = deployment(
        w.name,
        w.replicas,
        namespace=w.namespace,
        labels={"app": w.name},
        requests={"cpu": w.cpu, "memory": w.memory},
        grace=timing.grace(w.grace),
    )
    obj["metadata"]["labels"] = {SANDBOX_LABEL: "sample", "app": w.name}
    template = obj["spec"]["template"]
    template["metadata"]["annotations"] = _pod_annotations(w.shutdown, timing)
    spec = template["spec"]
    if w.empty_dir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/var/cache/app"}]
    if w.prefers_spot:
        spec["tolerations"] = [{"key": "spotInstance", "operator": "Equal", "value": "true"}]
        spec["affinity"] = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [{"key": CAPACITY_TYPE, "operator": "In", "values": ["spot"]}]
                        },
                    }
                ]
            }
        }
    return obj


def pdb_object(w: WorkloadSpec) -> Obj | None:
    if w.pdb_min_available is None and w.pdb_max_unavailable is None:
        return None
    return pdb(
        w.name,
        namespace=w.namespace,
        selector={"matchLabels": {"app": w.name}},
        min_available=w.pdb_min_available,
        max_unavailable=w.pdb_max_unavailable,
    )


def agent_daemonset() -> Obj:
    """The agent's DaemonSet as the Helm chart would install it; its pods name the agent processes."""
    labels = {"app.kubernetes.io/name": AGENT_DAEMONSET}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": AGENT_DAEMONSET, "namespace": AGENT_NAMESPACE, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "hostNetwork": True,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "agent",
                            "image": "ghcr.io/kubespot/kubespot:0.1.0",
                            "args": ["agent"],
                            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


def bare_pod(node_name: str, timing: Timing) -> Obj:
    """A pod someone started by hand: nothing recreates it, so the drain deletes it for good."""
    obj = pod(
        "debug-shell",
        namespace="default",
        node=node_name,
        labels={"run": "debug-shell"},
        annotations=_pod_annotations(1.0, timing),
        grace=timing.grace(30),
        requests={"cpu": "100m", "memory": "64Mi"},
        image="nicolaka/netshoot:v0.13",
    )
    return obj


BLOCKING_NAMESPACE = "payments"
BLOCKING_NAME = "ledger"


def blocking_workload(node_name: str, timing: Timing) -> list[Obj]:
    """A Deployment pinned to ``node_name`` (as a local volume would pin it) under a PDB allowing no
    disruption: with pdb-deadline-action=keep the drain can never move it, so the deadline is missed."""
    w = WorkloadSpec(BLOCKING_NAMESPACE, BLOCKING_NAME, 1, 30, 2.0, "100m", "128Mi", pdb_min_available=1)
    dep = deployment_object(w, timing)
    dep["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node_name}
    budget = pdb_object(w)
    assert budget is not None
    return [dep, budget]


def copy_objects(objects: list[Obj]) -> list[Obj]:
    """kubesim adopts what it is given; keep the caller's copies untouched."""
    return copy.deepcopy(objects)


# -- the load-balancer scenario -------------------------------------------------------------------

#: The Deployment behind the simulated load balancer, and the port its pods' targets use.
LB_NAMESPACE = "shop"
LB_APP = "web"
LB_PORT = 8080
CONTROLLER_NAME = "kubespot-controller"


def lb_objects(spot_nodes: int, timing: Timing, *, controller: bool) -> list[Obj]:
    """The load-balancer scenario's cluster (see the module docstring), in load order.

    The spot nodes are identical so that the scheduler (LeastAllocated) spreads ``web`` evenly:
    every spot node carries two of its pods, and the two runs interrupt equivalent nodes.
    """
    objects: list[Obj] = [namespace(LB_NAMESPACE)]
    objects += [node_object(spec) for spec in node_specs(spot_nodes, uniform=True)]
    web = WorkloadSpec(LB_NAMESPACE, LB_APP, 2 * spot_nodes, 30, 5.0, "250m", "256Mi", pdb_max_unavailable=1)
    api = WorkloadSpec(LB_NAMESPACE, "api", spot_nodes, 30, 5.0, "250m", "512Mi")
    web_dep = deployment_object(web, timing)
    spec = web_dep["spec"]["template"]["spec"]
    # On spot only, as teams run their stateless front ends: the interruption is what is measured.
    spec["nodeSelector"] = {CAPACITY_TYPE: "spot"}
    spec["tolerations"] = [{"key": "spotInstance", "operator": "Equal", "value": "true"}]
    spec["containers"][0]["ports"] = [{"name": "http", "containerPort": LB_PORT}]
    objects += [web_dep, deployment_object(api, timing)]
    objects += [p for w in (web, api) if (p := pdb_object(w)) is not None]
    objects.append(agent_daemonset())
    if controller:
        objects.append(controller_deployment())
    return objects


def controller_deployment() -> Obj:
    """The controller as the Helm chart would install it (one replica, on-demand); its pod names the
    controller process, as the Downward API would."""
    obj = deployment(
        CONTROLLER_NAME,
        1,
        namespace=AGENT_NAMESPACE,
        labels={"app.kubernetes.io/name": CONTROLLER_NAME},
        requests={"cpu": "100m", "memory": "128Mi"},
        image="ghcr.io/kubespot/kubespot:0.1.0",
    )
    spec = obj["spec"]["template"]["spec"]
    spec["nodeSelector"] = {CAPACITY_TYPE: "on-demand"}
    spec["containers"][0]["args"] = ["controller"]
    return obj


def controller_config(t: Timing) -> ControllerConfig:
    """kubesim's controllers on the story's clock: upstream's node-lifecycle and PodGC timings (a
    vanished node Unknown after 50 s or ``--node-monitor-grace-period``, its pods collected 40-60 s
    after its Node is deleted, NoExecute tainting at 0.1 nodes/s) compressed like every other
    duration of the run."""
    d = ControllerConfig()
    return ControllerConfig(
        pod_start_seconds=t.pod_start,
        # The kubelets' heartbeats on the same clock, or the compressed grace would outrun them.
        lease_renew_seconds=t.s(d.lease_renew_seconds),
        node_status_seconds=t.s(d.node_status_seconds),
        node_monitor_grace_seconds=t.node_monitor_grace,
        pod_gc_check_seconds=t.s(d.pod_gc_check_seconds),
        pod_gc_quarantine_seconds=t.s(d.pod_gc_quarantine_seconds),
        node_eviction_rate=d.node_eviction_rate * t.scale,
        secondary_node_eviction_rate=d.secondary_node_eviction_rate * t.scale,
        node_ready_seconds=t.s(d.node_ready_seconds),
        cloud_node_init_seconds=t.s(d.cloud_node_init_seconds),
    )
