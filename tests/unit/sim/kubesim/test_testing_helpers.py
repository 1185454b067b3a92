"""kubespot.sim.kubesim.testing: the builders make objects kubesim accepts, ``until`` waits and fails."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.store import Store
from kubespot.sim.kubesim.testing import (
    condition,
    deployment,
    is_ready,
    is_terminating,
    namespace,
    node,
    owner_reference,
    pdb,
    pod,
    replicaset,
    until,
)

Obj = dict[str, Any]
QUIET = ControllerConfig(scheduler=False, kubelet=False, workloads=False)


def scenario() -> list[Obj]:
    d = deployment("web", 2, namespace="shop", requests={"cpu": "100m"}, strategy={"type": "Recreate"})
    d["metadata"]["uid"] = "d-uid"
    rs = replicaset("web-1", 2, namespace="shop", labels={"app": "web"}, owner=d)
    rs["metadata"]["uid"] = "rs-uid"
    return [
        namespace("shop"),
        node("n1", labels={"zone": "a"}, taints=[{"key": "k", "effect": "NoSchedule"}], ready=True),
        node("n2", cpu="8", unschedulable=True),
        d,
        rs,
        pod(
            "web-1-a",
            namespace="shop",
            node="n1",
            labels={"app": "web"},
            owner=rs,
            phase="Running",
            ready=True,
        ),
        pod("bare", namespace="shop", grace=5, annotations={"a": "1"}, requests={"memory": "64Mi"}),
        pdb("web", namespace="shop", selector={"matchLabels": {"app": "web"}}, min_available=1),
    ]


def test_builders_are_accepted_by_the_store_by_their_api_version_and_kind() -> None:
    store = Store()
    assert store.load(scenario()) == 8  # load finds each type from apiVersion/kind alone
    nodes = store.registry.lookup("", "v1", "nodes")
    pods = store.registry.lookup("", "v1", "pods")
    assert nodes is not None and pods is not None
    n1 = store.get(nodes, None, "n1")
    assert n1["metadata"]["labels"] == {"kubernetes.io/hostname": "n1", "zone": "a"}
    assert n1["status"]["allocatable"] == {"cpu": "4", "memory": "16Gi", "pods": "110"}
    assert is_ready(n1)
    assert store.get(nodes, None, "n2")["spec"]["unschedulable"] is True
    owned = store.get(pods, "shop", "web-1-a")
    assert owned["metadata"]["ownerReferences"][0]["uid"] == "rs-uid"
    assert is_ready(owned) and owned["status"]["phase"] == "Running"
    bare = store.get(pods, "shop", "bare")
    assert bare["spec"]["terminationGracePeriodSeconds"] == 5
    assert bare["spec"]["containers"][0]["resources"] == {"requests": {"memory": "64Mi"}}


@pytest.mark.parametrize("obj", scenario()[3:], ids=lambda o: str(o["kind"]))
def test_each_builder_creates_through_the_registry(obj: Obj) -> None:
    store = Store()
    store.load([namespace("shop")])
    group, _, version = obj["apiVersion"].rpartition("/")
    rt = store.registry.by_kind(obj["apiVersion"], obj["kind"])
    assert rt is not None
    assert store.registry.lookup(group, version, rt.plural) is rt
    created = store.create(rt, obj)
    assert created["metadata"]["namespace"] == "shop" and created["metadata"]["uid"]


async def test_kubesim_serves_a_cluster_built_from_them() -> None:
    async with KubeSim(objects=scenario(), controllers=QUIET) as sim:
        pdbs = sim.store.registry.lookup("policy", "v1", "poddisruptionbudgets")
        assert pdbs is not None
        assert sim.store.get(pdbs, "shop", "web")["spec"]["minAvailable"] == 1


def test_workloads_select_their_own_template() -> None:
    d = deployment("api", 3, image="api:2", grace=10)
    assert d["spec"]["selector"] == {"matchLabels": {"app": "api"}}
    assert d["spec"]["template"]["metadata"]["labels"] == {"app": "api"}
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "api:2"
    assert d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 10
    assert "namespace" not in d["metadata"]


def test_pdb_keeps_zero_and_omits_what_is_unset() -> None:
    assert pdb("freeze", max_unavailable=0)["spec"] == {"maxUnavailable": 0}
    assert pdb("all", selector={})["spec"] == {"selector": {}}
    rule = pdb("p", min_available="50%", unhealthy_pod_eviction_policy="AlwaysAllow", status={"x": 1})
    assert rule["spec"] == {"minAvailable": "50%", "unhealthyPodEvictionPolicy": "AlwaysAllow"}
    assert rule["status"] == {"x": 1}


def test_builders_never_share_the_callers_dicts() -> None:
    labels = {"app": "web"}
    taints = [{"key": "k", "effect": "NoSchedule"}]
    selector = {"matchLabels": {"app": "web"}}
    built = [pod("p", labels=labels), node("n", labels=labels, taints=taints), pdb("b", selector=selector)]
    built[0]["metadata"]["labels"]["x"] = "1"
    built[1]["spec"]["taints"][0]["value"] = "v"
    built[2]["spec"]["selector"]["matchLabels"]["x"] = "1"
    assert labels == {"app": "web"}
    assert taints == [{"key": "k", "effect": "NoSchedule"}]
    assert selector == {"matchLabels": {"app": "web"}}


def test_owner_reference_controller_or_plain() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "uid": "u"}}
    assert owner_reference(cm) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "a",
        "uid": "u",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert owner_reference(cm, controller=False) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "a",
        "uid": "u",
    }


def test_predicates() -> None:
    running = pod("p", phase="Running", ready=True)
    assert condition(running, "Ready") == {"type": "Ready", "status": "True"}
    assert condition(running, "PodScheduled") is None
    assert condition(None, "Ready") is None
    assert is_ready(running)
    assert not is_ready(pod("q", ready=False)) and not is_ready(pod("r"))
    assert not is_terminating(running)
    running["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert is_terminating(running)


async def test_until_returns_the_first_truthy_value() -> None:
    calls: list[int] = []

    async def probe() -> list[int] | None:
        calls.append(1)
        return list(calls) if len(calls) >= 3 else None

    assert await until(probe, interval=0.001) == [1, 1, 1]


async def test_until_fails_with_the_last_value_after_the_deadline() -> None:
    async def probe() -> str:
        return ""

    t0 = time.monotonic()
    with pytest.raises(AssertionError, match=r"within 0\.1s \(last: ''\)"):
        await until(probe, within=0.1, interval=0.01)
    assert 0.1 <= time.monotonic() - t0 < 2.0
