"""The official `kubernetes` Python client (a client nobody here wrote) against kubesim.

It is synchronous, so kubesim runs in a background thread (``ThreadedKubeSim``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from .conftest import Cluster


@pytest.fixture
def api(cluster: Cluster) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    yield api_client
    api_client.close()


def test_list_nodes_and_pods_with_selectors(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    nodes = core.list_node().items
    assert len(nodes) == 4
    spot = core.list_node(label_selector="karpenter.sh/capacity-type=spot").items
    assert all(n.metadata.labels["karpenter.sh/capacity-type"] == "spot" for n in spot)
    node = nodes[0].metadata.name
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    assert pods and all(p.spec.node_name == node for p in pods)
    with pytest.raises(ApiException) as bad:
        core.list_pod_for_all_namespaces(field_selector="spec.bogus=1")
    assert bad.value.status == 400


def test_watch_streams_a_patch(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    listing = core.list_node()
    node = listing.items[0].metadata.name
    seen: list[tuple[str, str]] = []

    def consume() -> None:
        w = watch.Watch()
        for ev in w.stream(
            core.list_node, resource_version=listing.metadata.resource_version, timeout_seconds=10
        ):
            labels = ev["object"].metadata.labels or {}
            seen.append((ev["type"], labels.get("kubespot.io/watched", "")))
            if labels.get("kubespot.io/watched") == "yes":
                w.stop()

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(0.3)
    core.patch_node(node, {"metadata": {"labels": {"kubespot.io/watched": "yes"}}})
    t.join(timeout=15)
    assert ("MODIFIED", "yes") in seen


def test_patch_conflict_on_stale_resource_version(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    node = core.list_node().items[0]
    body = {
        "metadata": {
            "resourceVersion": node.metadata.resource_version,
            "annotations": {"kubespot.io/cas": "1"},
        }
    }
    core.patch_node(node.metadata.name, body)
    with pytest.raises(ApiException) as stale:
        core.patch_node(node.metadata.name, body)  # same resourceVersion again: now stale
    assert stale.value.status == 409


def test_evict_201_then_429_when_the_budget_is_spent(api: client.ApiClient, cluster: Cluster) -> None:
    core = client.CoreV1Api(api)
    policy = client.PolicyV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="evict")))
    for i in range(2):
        core.create_namespaced_pod(
            "evict",
            client.V1Pod(
                metadata=client.V1ObjectMeta(name=f"p{i}", labels={"app": "e"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
            ),
        )
    policy.create_namespaced_pod_disruption_budget(
        "evict",
        client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name="e"),
            spec=client.V1PodDisruptionBudgetSpec(
                min_available=1, selector=client.V1LabelSelector(match_labels={"app": "e"})
            ),
        ),
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pdb = policy.read_namespaced_pod_disruption_budget("e", "evict")
        if pdb.status and pdb.status.disruptions_allowed == 1:
            break
        time.sleep(0.2)
    assert pdb.status.disruptions_allowed == 1
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name="p0", namespace="evict"))
    core.create_namespaced_pod_eviction("p0", "evict", body)
    with pytest.raises(ApiException) as blocked:
        core.create_namespaced_pod_eviction(
            "p1", "evict", client.V1Eviction(metadata=client.V1ObjectMeta(name="p1", namespace="evict"))
        )
    assert blocked.value.status == 429
    assert "disruption budget" in blocked.value.body


def test_leases_create_and_renew_with_optimistic_concurrency(api: client.ApiClient) -> None:
    coord = client.CoordinationV1Api(api)
    lease = coord.create_namespaced_lease(
        "kube-system",
        client.V1Lease(
            metadata=client.V1ObjectMeta(name="kubespot-controller"),
            spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15),
        ),
    )
    lease.spec.holder_identity = "b"
    renewed = coord.replace_namespaced_lease("kubespot-controller", "kube-system", lease)
    assert renewed.spec.holder_identity == "b"
    lease.spec.holder_identity = "c"  # still carries the old resourceVersion
    with pytest.raises(ApiException) as conflict:
        coord.replace_namespaced_lease("kubespot-controller", "kube-system", lease)
    assert conflict.value.status == 409
    assert coord.read_namespaced_lease("kubespot-controller", "kube-system").spec.holder_identity == "b"
