"""kubectl 1.32 (a client nobody here wrote) against kubesim: the verbs kubespot's users run.

Each test asserts on state observed through the API, not on kubectl's exit code alone.
"""

from __future__ import annotations

import json
import time
from typing import Any

from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.conventions import START_SECONDS

from .conftest import Cluster


def _node(cluster: Cluster, name: str) -> dict[str, Any]:
    out = cluster.kubectl("get", "node", name, "-o", "json").stdout
    return dict(json.loads(out))


def _first_node(cluster: Cluster) -> str:
    return str(cluster.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout)


def test_version_reports_the_simulated_server(cluster: Cluster) -> None:
    out = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    assert out["serverVersion"]["gitVersion"].startswith("v1.32")


def test_get_nodes_prints_server_side_table(cluster: Cluster) -> None:
    out = cluster.kubectl("get", "nodes").stdout.splitlines()
    assert out[0].split()[:5] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert len(out) == 1 + 4
    assert all(" Ready " in f" {line} " for line in out[1:])


def test_get_pods_all_namespaces_wide(cluster: Cluster) -> None:
    out = cluster.kubectl("get", "pods", "-A", "-o", "wide").stdout.splitlines()
    header = out[0].split()
    assert header[:3] == ["NAMESPACE", "NAME", "READY"]
    assert "NODE" in header and "IP" in header
    nodes = set(cluster.kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}").stdout.split())
    node_col = header.index("NODE")
    assert len(out) > 20
    assert {line.split()[node_col] for line in out[1:]} <= nodes


def test_get_pods_with_small_chunks_sees_every_pod(cluster: Cluster) -> None:
    """kubectl pages lists with `limit`/`continue`; a chunk size of 3 must still list every pod."""
    chunked = cluster.kubectl("get", "pods", "-A", "--chunk-size=3", "-o", "name").stdout.split()
    whole = cluster.kubectl("get", "pods", "-A", "--chunk-size=0", "-o", "name").stdout.split()
    assert sorted(chunked) == sorted(whole)
    assert len(whole) > 20


def test_cordon_and_uncordon(cluster: Cluster) -> None:
    node = _first_node(cluster)
    cluster.kubectl("cordon", node)
    assert _node(cluster, node)["spec"].get("unschedulable") is True
    assert "SchedulingDisabled" in cluster.kubectl("get", "node", node).stdout
    cluster.kubectl("uncordon", node)
    assert not _node(cluster, node)["spec"].get("unschedulable")


def test_taint_add_and_remove(cluster: Cluster) -> None:
    node = _first_node(cluster)
    cluster.kubectl("taint", "node", node, "kubespot.io/test=yes:NoSchedule")
    taints = _node(cluster, node)["spec"].get("taints", [])
    assert {"key": "kubespot.io/test", "value": "yes", "effect": "NoSchedule"} in taints
    cluster.kubectl("taint", "node", node, "kubespot.io/test:NoSchedule-")
    assert all(t["key"] != "kubespot.io/test" for t in _node(cluster, node)["spec"].get("taints", []))


def test_label_add_overwrite_and_remove(cluster: Cluster) -> None:
    node = _first_node(cluster)
    cluster.kubectl("label", "node", node, "kubespot.io/role=a")
    assert _node(cluster, node)["metadata"]["labels"]["kubespot.io/role"] == "a"
    cluster.kubectl("label", "node", node, "kubespot.io/role=b", "--overwrite")
    assert _node(cluster, node)["metadata"]["labels"]["kubespot.io/role"] == "b"
    cluster.kubectl("label", "node", node, "kubespot.io/role-")
    assert "kubespot.io/role" not in _node(cluster, node)["metadata"]["labels"]
    selected = cluster.kubectl(
        "get", "nodes", "-l", "karpenter.sh/capacity-type in (spot,on-demand)", "-o", "name"
    ).stdout.split()
    assert len(selected) == 4


def _pods_on(sim: KubeSim, node: str) -> list[dict[str, Any]]:
    return sim.store.pods_on_node(node)


def test_drain_waits_for_a_blocking_pdb_until_the_replacement_is_ready(cluster: Cluster) -> None:
    """`kubectl drain` evicts through policy/v1. Two replicas on the node with `minAvailable: 1`: the
    first eviction is allowed, the second answers 429 until the first one's replacement is Ready on
    another node (kubectl retries every 5 s), then it goes through and the drain completes.
    """
    node = _first_node(cluster)
    others = [n for n in cluster.kubectl("get", "nodes", "-o", "name").stdout.split() if not n.endswith(node)]
    for other in others:  # make the Deployment land on `node`
        cluster.kubectl("cordon", other)
    _create(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "drain-test"}})
    _create(
        cluster,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "drain-test"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    # A replacement Ready only after 2 s: the second eviction's budget retry (0.5 s
                    # after its conflict with the first, as upstream's) must still find it blocked.
                    "metadata": {"labels": {"app": "web"}, "annotations": {START_SECONDS: "2"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "web",
                                "image": "nginx",
                                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                            }
                        ],
                        "terminationGracePeriodSeconds": 5,
                    },
                },
            },
        },
    )
    _create(
        cluster,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "drain-test"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    _wait(lambda: _ready_pods(cluster, "drain-test") == 2, "two web pods ready")
    assert _web_nodes(cluster) == {node}
    for other in others:
        cluster.kubectl("uncordon", other)

    res = cluster.kubectl(
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--force",
        "--timeout=100s",
        timeout=130,
    )
    out = res.stdout + res.stderr
    assert f"node/{node} drained" in out
    # The budget really blocked once: kubectl reports the 429 it retried.
    assert "disruption budget" in out
    left = [
        p["metadata"]["name"]
        for p in _pods_on(cluster.sim, node)
        if not any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences", []))
    ]
    assert left == []
    assert _node(cluster, node)["spec"].get("unschedulable") is True
    _wait(lambda: _ready_pods(cluster, "drain-test") == 2, "web back to two ready pods")
    assert node not in _web_nodes(cluster)


def _create(cluster: Cluster, obj: dict[str, Any]) -> None:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(obj, fh)
    cluster.kubectl("create", "-f", fh.name, "--validate=false")


def _ready_pods(cluster: Cluster, ns: str) -> int:
    pods = json.loads(cluster.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)["items"]
    return sum(
        1
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        and any(
            c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", [])
        )
    )


def _web_nodes(cluster: Cluster) -> set[str]:
    pods = json.loads(cluster.kubectl("get", "pods", "-n", "drain-test", "-o", "json").stdout)["items"]
    return {p["spec"].get("nodeName", "") for p in pods if not p["metadata"].get("deletionTimestamp")}


def _wait(cond: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_typed_generators_send_protobuf_that_kubesim_decodes(cluster: Cluster) -> None:
    """kubectl's typed generators post protobuf bodies. Each object kubesim stores must equal what
    `--dry-run=client -o json` says kubectl meant to create (names, labels, data, type)."""
    generators = [
        (["namespace", "gen-test"], "namespace", None),
        (
            ["configmap", "cm", "--from-literal=a=1", "--from-literal=b=two", "-n", "gen-test"],
            "configmap",
            "gen-test",
        ),
        (["secret", "generic", "s", "--from-literal=token=abc", "-n", "gen-test"], "secret", "gen-test"),
        (["serviceaccount", "sa", "-n", "gen-test"], "serviceaccount", "gen-test"),
    ]
    for args, kind, ns in generators:
        intended = json.loads(cluster.kubectl("create", *args, "--dry-run=client", "-o", "json").stdout)
        cluster.kubectl("create", *args)
        name = intended["metadata"]["name"]
        where = ["-n", ns] if ns else []
        stored = json.loads(cluster.kubectl("get", kind, name, *where, "-o", "json").stdout)
        assert stored["metadata"]["name"] == name
        for field in ("data", "stringData"):
            assert stored.get(field) == intended.get(field), (kind, field)
        if kind == "secret":  # the API server defaults an empty type
            assert stored["type"] == (intended.get("type") or "Opaque")
        labels = (stored["metadata"].get("labels") or {}).items()
        assert labels >= (intended["metadata"].get("labels") or {}).items()
