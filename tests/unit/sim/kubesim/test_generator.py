"""The synthetic cluster generator: deterministic, internally consistent, realistic EKS labelling."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from kubespot.sim.kubesim import conventions
from kubespot.sim.kubesim.generator import (
    KIND_ORDER,
    PRIORITY_CLASSES,
    ClusterSpec,
    generate_cluster,
    iter_cluster,
)

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
Obj = dict[str, Any]


def parse_cpu(q: str) -> int:
    """Millicores."""
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


_MEM_UNITS = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "k": 1000, "M": 1000**2, "G": 1000**3}


def parse_mem(q: str) -> int:
    """Bytes."""
    for suffix, factor in _MEM_UNITS.items():
        if q.endswith(suffix):
            return int(q[: -len(suffix)]) * factor
    return int(q)


def pod_requests(pod: Obj) -> tuple[int, int]:
    cpu = mem = 0
    for c in pod["spec"]["containers"]:
        req = c.get("resources", {}).get("requests", {})
        cpu += parse_cpu(req.get("cpu", "0"))
        mem += parse_mem(req.get("memory", "0"))
    return cpu, mem


def by_kind(objects: list[Obj]) -> dict[str, list[Obj]]:
    out: dict[str, list[Obj]] = defaultdict(list)
    for o in objects:
        out[o["kind"]].append(o)
    return out


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


SPEC = ClusterSpec(nodes=24, pods_per_node=20, seed=7, blocking_pdb_fraction=0.1)


@pytest.fixture(scope="module")
def cluster() -> list[Obj]:
    return generate_cluster(SPEC, now=NOW)


@pytest.fixture(scope="module")
def kinds(cluster: list[Obj]) -> dict[str, list[Obj]]:
    return by_kind(cluster)


def test_same_seed_same_cluster_other_seed_other_cluster() -> None:
    spec = ClusterSpec(nodes=6, pods_per_node=10, seed=3)
    a = orjson.dumps(generate_cluster(spec, now=NOW))
    assert a == orjson.dumps(generate_cluster(spec, now=NOW))
    assert a == orjson.dumps(list(iter_cluster(spec, now=NOW)))
    other = ClusterSpec(nodes=6, pods_per_node=10, seed=4)
    assert a != orjson.dumps(generate_cluster(other, now=NOW))


def test_counts(kinds: dict[str, list[Obj]]) -> None:
    assert len(kinds["Node"]) == SPEC.nodes
    pods = kinds["Pod"]
    ds_pods = [
        p for p in pods if any(r["kind"] == "DaemonSet" for r in p["metadata"].get("ownerReferences", []))
    ]
    assert len(kinds["DaemonSet"]) == len(SPEC.daemonsets)
    assert len(ds_pods) == SPEC.nodes * len(SPEC.daemonsets)
    assert len(pods) - len(ds_pods) == SPEC.nodes * SPEC.pods_per_node
    assert len(kinds["StatefulSet"]) == 1
    assert len(kinds["Deployment"]) == len(kinds["ReplicaSet"]) >= 5
    assert kinds["PodDisruptionBudget"]
    assert set(kinds) == set(KIND_ORDER)


def test_insertion_order_and_namespaces(cluster: list[Obj], kinds: dict[str, list[Obj]]) -> None:
    ranks = [KIND_ORDER.index(o["kind"]) for o in cluster]
    assert ranks == sorted(ranks)
    namespaces = {ns["metadata"]["name"] for ns in kinds["Namespace"]}
    assert {"default", "kube-system"} <= namespaces
    assert len(namespaces) >= 2 + SPEC.app_namespaces
    for o in cluster:
        if o["kind"] in ("Namespace", "PriorityClass", "Node"):
            assert "namespace" not in o["metadata"]
        else:
            assert o["metadata"]["namespace"] in namespaces


def test_objects_are_complete(cluster: list[Obj]) -> None:
    uids = [o["metadata"]["uid"] for o in cluster]
    assert len(uids) == len(set(uids))
    keys = Counter((o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in cluster)
    assert keys.most_common(1)[0][1] == 1
    for o in cluster:
        assert o["apiVersion"] and o["kind"]
        meta = o["metadata"]
        assert re.fullmatch(
            r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", meta["uid"]
        )
        assert isinstance(meta["labels"], dict)
        assert isinstance(meta["annotations"], dict)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
        assert meta["creationTimestamp"] <= "2026-11-22T12:00:00Z"
        assert "resourceVersion" not in meta
        if o["kind"] == "PriorityClass":  # value and globalDefault, no spec or status
            assert isinstance(o["value"], int) and o["globalDefault"] is False
            continue
        assert isinstance(o["spec"], dict) and isinstance(o["status"], dict)
        if o["kind"] in ("Deployment", "ReplicaSet", "DaemonSet", "StatefulSet", "PodDisruptionBudget"):
            assert meta["generation"] == 1
            assert o["status"]["observedGeneration"] == 1


def test_every_owner_reference_points_at_an_existing_owner(cluster: list[Obj]) -> None:
    by_uid = {o["metadata"]["uid"]: o for o in cluster}
    owned = 0
    for o in cluster:
        for ref in o["metadata"].get("ownerReferences", []):
            owner = by_uid[ref["uid"]]
            assert owner["kind"] == ref["kind"]
            assert owner["metadata"]["name"] == ref["name"]
            assert owner["apiVersion"] == ref["apiVersion"]
            assert owner["metadata"].get("namespace") == o["metadata"]["namespace"]
            assert ref["controller"] is True
            owned += 1
    assert owned > 0


def test_bare_pods_have_no_owner(kinds: dict[str, list[Obj]]) -> None:
    bare = [p for p in kinds["Pod"] if "ownerReferences" not in p["metadata"]]
    assert len(bare) == SPEC.bare_pods


def test_replica_counts_match_pods(kinds: dict[str, list[Obj]]) -> None:
    pods_by_owner: Counter[str] = Counter()
    for p in kinds["Pod"]:
        for ref in p["metadata"].get("ownerReferences", []):
            pods_by_owner[ref["uid"]] += 1
    deployments = {d["metadata"]["uid"]: d for d in kinds["Deployment"]}
    for rs in kinds["ReplicaSet"]:
        n = rs["spec"]["replicas"]
        assert pods_by_owner[rs["metadata"]["uid"]] == n
        assert (
            rs["status"]["replicas"]
            == rs["status"]["readyReplicas"]
            == rs["status"]["availableReplicas"]
            == n
        )
        # What a ReplicaSet controller counts: pods in its namespace its selector matches.
        matching = [
            p
            for p in kinds["Pod"]
            if p["metadata"]["namespace"] == rs["metadata"]["namespace"]
            and selects(rs["spec"]["selector"], p["metadata"]["labels"])
        ]
        assert len(matching) == n
        deployment = deployments[rs["metadata"]["ownerReferences"][0]["uid"]]
        assert deployment["spec"]["replicas"] == n
        assert deployment["status"]["readyReplicas"] == deployment["status"]["availableReplicas"] == n
        template_hash = rs["metadata"]["labels"]["pod-template-hash"]
        assert rs["metadata"]["name"] == f"{deployment['metadata']['name']}-{template_hash}"
    for sts in kinds["StatefulSet"]:
        n = sts["spec"]["replicas"]
        names = sorted(
            p["metadata"]["name"]
            for p in kinds["Pod"]
            if p["metadata"].get("ownerReferences", [{}])[0].get("uid") == sts["metadata"]["uid"]
        )
        assert names == sorted(f"{sts['metadata']['name']}-{i}" for i in range(n))
        assert sts["status"]["readyReplicas"] == n
    for ds in kinds["DaemonSet"]:
        nodes = [
            p["spec"]["nodeName"]
            for p in kinds["Pod"]
            if p["metadata"].get("ownerReferences", [{}])[0].get("uid") == ds["metadata"]["uid"]
        ]
        assert sorted(nodes) == sorted(n["metadata"]["name"] for n in kinds["Node"])
        assert ds["status"]["desiredNumberScheduled"] == ds["status"]["numberReady"] == len(kinds["Node"])


def test_owned_pods_reflect_their_template(cluster: list[Obj]) -> None:
    by_uid = {o["metadata"]["uid"]: o for o in cluster}
    for p in cluster:
        if p["kind"] != "Pod" or "ownerReferences" not in p["metadata"]:
            continue
        owner = by_uid[p["metadata"]["ownerReferences"][0]["uid"]]
        template = owner["spec"]["template"]
        assert template["metadata"]["labels"].items() <= p["metadata"]["labels"].items()
        assert selects(owner["spec"]["selector"], p["metadata"]["labels"])
        assert template["metadata"].get("annotations", {}) == p["metadata"]["annotations"]
        for key, value in template["spec"].items():
            if key != "tolerations":
                assert p["spec"][key] == value, key
        for toleration in template["spec"].get("tolerations", []):
            assert toleration in p["spec"]["tolerations"]


def test_requests_fit_node_allocatable(kinds: dict[str, list[Obj]]) -> None:
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for p in kinds["Pod"]:
        cpu, mem = pod_requests(p)
        u = used[p["spec"]["nodeName"]]
        u[0] += cpu
        u[1] += mem
        u[2] += 1
    nodes = {n["metadata"]["name"]: n for n in kinds["Node"]}
    assert set(used) <= set(nodes)
    for name, (cpu, mem, count) in used.items():
        alloc = nodes[name]["status"]["allocatable"]
        assert cpu <= parse_cpu(alloc["cpu"]), name
        assert mem <= parse_mem(alloc["memory"]), name
        assert count <= int(alloc["pods"]), name
        cap = nodes[name]["status"]["capacity"]
        assert parse_cpu(alloc["cpu"]) < parse_cpu(cap["cpu"])
        assert parse_mem(alloc["memory"]) < parse_mem(cap["memory"])


def test_pods_respect_node_selectors(kinds: dict[str, list[Obj]]) -> None:
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kinds["Node"]}
    pinned = 0
    for p in kinds["Pod"]:
        selector = p["spec"].get("nodeSelector", {})
        assert selector.items() <= labels[p["spec"]["nodeName"]].items()
        pinned += bool(selector)
    assert pinned >= SPEC.statefulset_replicas


def test_node_labels_follow_eks_conventions(kinds: dict[str, list[Obj]]) -> None:
    spot = 0
    for n in kinds["Node"]:
        meta = n["metadata"]
        labels = meta["labels"]
        name = meta["name"]
        assert re.fullmatch(r"ip-10-\d+-\d+-\d+\.ec2\.internal", name)
        assert labels["kubernetes.io/hostname"] == name
        assert labels["kubernetes.io/os"] == "linux"
        assert labels["kubernetes.io/arch"] in ("amd64", "arm64")
        assert labels["kubernetes.io/arch"] == n["status"]["nodeInfo"]["architecture"]
        assert labels["topology.kubernetes.io/region"] == "us-east-1"
        zone = labels["topology.kubernetes.io/zone"]
        assert zone in SPEC.zones
        capacity = labels["karpenter.sh/capacity-type"]
        assert capacity in ("spot", "on-demand")
        is_spot = capacity == "spot"
        spot += is_spot
        assert labels["eks.amazonaws.com/capacityType"] == ("SPOT" if is_spot else "ON_DEMAND")
        assert (labels.get("lifecycle") == "Ec2Spot") == is_spot
        assert labels["node.kubernetes.io/lifecycle"] == ("spot" if is_spot else "on-demand")
        m = re.fullmatch(r"aws:///([a-z0-9-]+)/(i-[0-9a-f]{17})", n["spec"]["providerID"])
        assert m is not None
        assert m.group(1) == zone
        assert labels[conventions.INSTANCE_ID_LABEL] == m.group(2)
        assert labels["node.kubernetes.io/instance-type"]
        ip = name[3:].split(".")[0].replace("-", ".")
        addresses = {a["type"]: a["address"] for a in n["status"]["addresses"]}
        assert addresses == {"InternalIP": ip, "InternalDNS": name, "Hostname": name}
        conditions = {c["type"]: c["status"] for c in n["status"]["conditions"]}
        assert conditions == {
            "Ready": "True",
            "MemoryPressure": "False",
            "DiskPressure": "False",
            "PIDPressure": "False",
        }
        info = n["status"]["nodeInfo"]
        assert info["kubeletVersion"].startswith("v1.32.")
        assert info["operatingSystem"] == "linux"
        assert info["containerRuntimeVersion"].startswith("containerd://")
    assert spot == round(SPEC.nodes * SPEC.spot_fraction)
    instance_ids = [n["metadata"]["labels"][conventions.INSTANCE_ID_LABEL] for n in kinds["Node"]]
    assert len(set(instance_ids)) == len(instance_ids)


def test_pdbs_select_existing_pods_and_have_consistent_status(kinds: dict[str, list[Obj]]) -> None:
    blocking = 0
    for pdb in kinds["PodDisruptionBudget"]:
        matched = [
            p
            for p in kinds["Pod"]
            if p["metadata"]["namespace"] == pdb["metadata"]["namespace"]
            and selects(pdb["spec"]["selector"], p["metadata"]["labels"])
        ]
        assert matched, pdb["metadata"]["name"]
        status = pdb["status"]
        assert status["expectedPods"] == status["currentHealthy"] == len(matched)
        assert status["disruptionsAllowed"] == max(0, status["currentHealthy"] - status["desiredHealthy"])
        assert ("minAvailable" in pdb["spec"]) != ("maxUnavailable" in pdb["spec"])
        blocking += status["disruptionsAllowed"] == 0
        condition = status["conditions"][0]
        assert condition["type"] == "DisruptionAllowed"
        assert condition["status"] == ("True" if status["disruptionsAllowed"] else "False")
    rules = {
        (k, type(v))
        for pdb in kinds["PodDisruptionBudget"]
        for k, v in pdb["spec"].items()
        if k != "selector"
    }
    assert len(rules) >= 3  # a mix of minAvailable / maxUnavailable, integers and percentages
    assert blocking >= 1  # SPEC asks for some blocking budgets


def test_no_blocking_pdbs_by_default() -> None:
    objects = generate_cluster(ClusterSpec(nodes=10, pods_per_node=20, seed=1), now=NOW)
    assert all(o["status"]["disruptionsAllowed"] > 0 for o in objects if o["kind"] == "PodDisruptionBudget")


def test_pods_are_running_ready_and_bound(kinds: dict[str, list[Obj]]) -> None:
    node_ips = {n["metadata"]["name"]: n["status"]["addresses"][0]["address"] for n in kinds["Node"]}
    pod_ips: list[str] = []
    for p in kinds["Pod"]:
        spec, status = p["spec"], p["status"]
        assert status["phase"] == "Running"
        conditions = {c["type"]: c["status"] for c in status["conditions"]}
        for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
            assert conditions[t] == "True"
        assert status["hostIP"] == node_ips[spec["nodeName"]]
        assert sorted(c["name"] for c in spec["containers"]) == [
            c["name"] for c in status["containerStatuses"]
        ]
        for cs in status["containerStatuses"]:
            assert cs["ready"] and cs["started"] and "running" in cs["state"]
        assert status["qosClass"] in ("Guaranteed", "Burstable", "BestEffort")
        assert status["startTime"] and status["podIP"]
        assert spec["priority"] == PRIORITY_CLASSES.get(spec.get("priorityClassName", ""), 0)
        if spec.get("hostNetwork"):
            assert status["podIP"] == status["hostIP"]
        else:
            pod_ips.append(status["podIP"])
    assert len(pod_ips) == len(set(pod_ips))
    names = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in kinds["Pod"]]
    assert len(names) == len(set(names))


def test_daemonset_pods_carry_upstream_tolerations_and_node_affinity(kinds: dict[str, list[Obj]]) -> None:
    ds_pods = [
        p for p in kinds["Pod"] if p["metadata"].get("ownerReferences", [{}])[0].get("kind") == "DaemonSet"
    ]
    assert ds_pods
    for p in ds_pods:
        keys = {(t.get("key"), t.get("effect")) for t in p["spec"]["tolerations"]}
        assert {
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/disk-pressure", "NoSchedule"),
            ("node.kubernetes.io/memory-pressure", "NoSchedule"),
            ("node.kubernetes.io/pid-pressure", "NoSchedule"),
            ("node.kubernetes.io/unschedulable", "NoSchedule"),
        } <= keys
        terms = p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [p["spec"]["nodeName"]]
        assert p["spec"]["priorityClassName"] == "system-node-critical"
        assert p["metadata"]["namespace"] == "kube-system"


def test_pod_variety(kinds: dict[str, list[Obj]]) -> None:
    pods = kinds["Pod"]
    graces = {p["spec"]["terminationGracePeriodSeconds"] for p in pods}
    assert len(graces & {0, 10, 30, 60, 120}) >= 4
    classes = {p["spec"].get("priorityClassName") for p in pods}
    assert {"system-node-critical", "system-cluster-critical", None} <= classes
    assert classes & {"high-priority", "low-priority"}
    assert any("emptyDir" in v for p in pods for v in p["spec"].get("volumes", []))
    slow = [p for p in pods if conventions.SHUTDOWN_SECONDS in p["metadata"]["annotations"]]
    assert slow
    for p in slow:
        float(p["metadata"]["annotations"][conventions.SHUTDOWN_SECONDS])
    assert {p["status"]["qosClass"] for p in pods} == {"Guaranteed", "Burstable", "BestEffort"}
    coredns = [p for p in pods if p["metadata"]["labels"].get("k8s-app") == "kube-dns"]
    assert len(coredns) == 2
    assert all(p["spec"]["priority"] == 2_000_000_000 for p in coredns)


@pytest.mark.parametrize("spot_fraction", [0.0, 1.0])
def test_all_spot_or_all_on_demand(spot_fraction: float) -> None:
    objects = generate_cluster(ClusterSpec(nodes=5, pods_per_node=10, spot_fraction=spot_fraction), now=NOW)
    capacity = {o["metadata"]["labels"]["karpenter.sh/capacity-type"] for o in objects if o["kind"] == "Node"}
    assert capacity == {"spot" if spot_fraction else "on-demand"}


def test_other_regions_zones_and_daemonsets() -> None:
    spec = ClusterSpec(
        nodes=4,
        pods_per_node=5,
        zones=("eu-west-1a", "eu-west-1b"),
        daemonsets=("aws-node", "kube-proxy", "ebs-csi-node", "node-exporter"),
        max_pods=110,
    )
    kinds = by_kind(generate_cluster(spec, now=NOW))
    node = kinds["Node"][0]
    assert node["metadata"]["name"].endswith(".eu-west-1.compute.internal")
    assert node["metadata"]["labels"]["topology.kubernetes.io/region"] == "eu-west-1"
    assert node["status"]["allocatable"]["pods"] == "110"
    assert "monitoring" in {n["metadata"]["name"] for n in kinds["Namespace"]}
    assert len(kinds["Pod"]) == 4 * 4 + 4 * 5


def test_tiny_and_empty_workloads() -> None:
    kinds = by_kind(generate_cluster(ClusterSpec(nodes=1, pods_per_node=0), now=NOW))
    assert len(kinds["Node"]) == 1
    assert len(kinds["Pod"]) == 2  # only the DaemonSet pods
    kinds = by_kind(generate_cluster(ClusterSpec(nodes=1, pods_per_node=3), now=NOW))
    assert kinds["Pod"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"nodes": 0},
        {"pods_per_node": -1},
        {"spot_fraction": 1.5},
        {"zones": ()},
        {"zones": ("us-east-1a", "eu-west-1a")},
        {"zones": ("nowhere",)},
        {"daemonsets": ("not-a-daemonset",)},
        {"max_pods": 0},
    ],
)
def test_invalid_spec(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ClusterSpec(**kwargs)


def test_spec_that_cannot_fit_raises() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        generate_cluster(ClusterSpec(nodes=1, pods_per_node=2000), now=NOW)


@pytest.mark.slow
def test_large_cluster_counts() -> None:
    spec = ClusterSpec(nodes=5000, pods_per_node=20)
    counts = Counter(o["kind"] for o in generate_cluster(spec, now=NOW))
    assert counts["Node"] == 5000
    assert counts["Pod"] == 5000 * 20 + 5000 * len(spec.daemonsets)
    assert counts["Deployment"] == counts["ReplicaSet"] > 1000
