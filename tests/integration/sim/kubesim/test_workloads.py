"""Workload controllers (ReplicaSet, Deployment, DaemonSet, StatefulSet) driven over real HTTP.

The scheduler and kubelet run with fast timings, so pods are bound and turn Ready within a fraction
of a second; assertions wait for outcomes rather than timing them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from kubespot.sim.kubesim import conventions, testing
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.store import WatchEvent
from kubespot.sim.kubesim.testing import deployment, is_ready, is_terminating, node, until

Obj = dict[str, Any]
NS = "default"
FAST = ControllerConfig(
    pod_start_seconds=0.05, lease_renew_seconds=5.0, node_status_seconds=30.0, node_ready_seconds=0.05
)
MERGE = {"Content-Type": "application/merge-patch+json"}
DEPLOYS = f"/apis/apps/v1/namespaces/{NS}/deployments"
SMALL = {"cpu": "10m"}


class Api:
    def __init__(self, sim: KubeSim, http: aiohttp.ClientSession) -> None:
        self.sim, self.http = sim, http

    async def call(self, method: str, path: str, body: Any = None, *, merge: bool = False) -> Obj:
        r = await self.http.request(method, path, json=body, headers=MERGE if merge else None)
        data: Obj = await r.json()
        assert r.status < 300, (method, path, r.status, data)
        return data

    async def get(self, path: str) -> Obj:
        return await self.call("GET", path)

    async def pods(self, selector: str) -> list[Obj]:
        data = await self.get(f"/api/v1/namespaces/{NS}/pods?labelSelector={selector}")
        return list(data["items"])

    async def add_node(
        self, name: str, *, unschedulable: bool = False, labels: dict[str, str] | None = None
    ) -> None:
        # The node lifecycle controller adds the cordon's taint (and removes the not-ready one).
        await self.call("POST", "/api/v1/nodes", node(name, labels=labels, unschedulable=unschedulable))


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    async with KubeSim(controllers=FAST) as sim, aiohttp.ClientSession(sim.url) as http:
        a = Api(sim, http)
        for i in range(3):
            await a.add_node(f"node-{i}")
        yield a


def active(pods: list[Obj]) -> list[Obj]:
    return [p for p in pods if not is_terminating(p)]


async def rollout_done(api: Api, name: str, replicas: int) -> Obj | None:
    d = await api.get(f"{DEPLOYS}/{name}")
    st = d.get("status") or {}
    done = (
        st.get("observedGeneration") == d["metadata"]["generation"]
        and st.get("updatedReplicas") == replicas
        and st.get("replicas") == replicas
        and st.get("availableReplicas") == replicas
    )
    return d if done else None


async def test_deployment_creates_replicaset_and_ready_pods(api: Api) -> None:
    await api.call("POST", DEPLOYS, deployment("web", 3, requests=SMALL))
    d = await until(lambda: rollout_done(api, "web", 3))
    conds = {c["type"]: c for c in d["status"]["conditions"]}
    assert conds["Available"]["status"] == "True"
    assert conds["Progressing"]["reason"] == "NewReplicaSetAvailable"
    rses = (await api.get(f"/apis/apps/v1/namespaces/{NS}/replicasets"))["items"]
    assert len(rses) == 1
    rs = rses[0]
    h = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{h}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": h}
    assert rs["metadata"]["ownerReferences"][0]["uid"] == d["metadata"]["uid"]
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert rs["status"]["readyReplicas"] == 3
    pods = await api.pods("app=web")
    assert len(pods) == 3
    for p in pods:
        assert p["metadata"]["name"].startswith(f"web-{h}-")
        assert p["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
        assert p["spec"]["nodeName"].startswith("node-")
        assert is_ready(p)


async def test_deleted_pod_is_replaced_while_it_terminates(api: Api) -> None:
    await api.call("POST", DEPLOYS, deployment("web", 3, requests=SMALL))
    await until(lambda: rollout_done(api, "web", 3))
    victim = (await api.pods("app=web"))[0]["metadata"]["name"]
    added: list[str] = []
    api.sim.store.add_listener(
        lambda ev: (
            added.append(ev.obj["metadata"]["name"])
            if ev.type == "ADDED" and ev.rkey == ("", "pods")
            else None
        )
    )
    await api.call("DELETE", f"/api/v1/namespaces/{NS}/pods/{victim}")

    async def replaced() -> bool:
        pods = await api.pods("app=web")
        names = {p["metadata"]["name"] for p in active(pods)}
        return len(names) == 3 and victim not in names and all(is_ready(p) for p in active(pods))

    await until(replaced)
    assert len(added) == 1  # exactly one replacement, created as the eviction started
    await until(lambda: rollout_done(api, "web", 3))


async def test_scale_up_and_down(api: Api) -> None:
    await api.call("POST", DEPLOYS, deployment("web", 2, requests=SMALL))
    await until(lambda: rollout_done(api, "web", 2))
    await api.call("PATCH", f"{DEPLOYS}/web", {"spec": {"replicas": 5}}, merge=True)
    await until(lambda: rollout_done(api, "web", 5))
    await api.call(
        "PUT",
        f"{DEPLOYS}/web/scale",
        {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"replicas": 1},
        },
    )
    await until(lambda: rollout_done(api, "web", 1))

    async def one_left() -> bool:
        return len(active(await api.pods("app=web"))) == 1

    await until(one_left)


async def test_rolling_update_to_a_new_template(api: Api) -> None:
    await api.call("POST", DEPLOYS, deployment("web", 4, requests=SMALL))
    await until(lambda: rollout_done(api, "web", 4))
    old_rs = (await api.get(f"/apis/apps/v1/namespaces/{NS}/replicasets"))["items"][0]["metadata"]["name"]
    seen_available: list[int] = []

    def watch(ev: WatchEvent) -> None:
        if ev.rkey == ("apps", "deployments") and ev.obj["metadata"]["name"] == "web":
            seen_available.append(int((ev.obj.get("status") or {}).get("availableReplicas", 0)))

    api.sim.store.add_listener(watch)
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}}
    await api.call("PATCH", f"{DEPLOYS}/web", patch, merge=True)
    d = await until(lambda: rollout_done(api, "web", 4), within=15)
    rses = {
        rs["metadata"]["name"]: rs
        for rs in (await api.get(f"/apis/apps/v1/namespaces/{NS}/replicasets"))["items"]
    }
    assert len(rses) == 2
    assert rses[old_rs]["spec"]["replicas"] == 0
    (new_name,) = [n for n in rses if n != old_rs]
    assert rses[new_name]["spec"]["replicas"] == 4
    assert rses[new_name]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    pods = active(await api.pods("app=web"))
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {"nginx:2"}
    # maxUnavailable 25% of 4 = 1: availability never dropped below 3 during the rollout.
    assert min(seen_available) >= 3


async def test_recreate_strategy(api: Api) -> None:
    await api.call("POST", DEPLOYS, deployment("web", 2, requests=SMALL, strategy={"type": "Recreate"}))
    await until(lambda: rollout_done(api, "web", 2))
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}}
    await api.call("PATCH", f"{DEPLOYS}/web", patch, merge=True)
    await until(lambda: rollout_done(api, "web", 2), within=15)
    assert {p["spec"]["containers"][0]["image"] for p in active(await api.pods("app=web"))} == {"nginx:2"}


async def test_generated_cluster_starts_without_creating_anything() -> None:
    """A consistent generated cluster: the controllers find nothing to create or delete."""
    async with KubeSim(nodes=30, pods_per_node=8, seed=11, controllers=FAST) as sim:
        events: list[tuple[str, tuple[str, str], str]] = []
        sim.store.add_listener(lambda ev: events.append((ev.type, ev.rkey, ev.obj["metadata"]["name"])))
        assert sim.loaded > 30 * 8
        await asyncio.sleep(1.5)
        watched = {("", "pods"), ("apps", "replicasets"), ("apps", "deployments"), ("apps", "statefulsets")}
        created = [e for e in events if e[0] == "ADDED" and e[1] in watched]
        assert created == []
        deleted = [e for e in events if e[1] == ("", "pods") and e[0] == "DELETED"]
        assert deleted == []
        pod_rt = sim.store.registry.lookup("", "v1", "pods")
        assert pod_rt is not None
        assert not any(p["metadata"].get("deletionTimestamp") for p in sim.store.iter_objects(pod_rt))


def daemonset(name: str, node_selector: dict[str, str] | None = None) -> Obj:
    return testing.daemonset(name, namespace=None, node_selector=node_selector)


async def test_daemonset_runs_on_every_node_including_new_and_cordoned(api: Api) -> None:
    dss = f"/apis/apps/v1/namespaces/{NS}/daemonsets"
    await api.call("POST", dss, daemonset("agent"))

    async def settled(n: int) -> Obj | None:
        ds = await api.get(f"{dss}/agent")
        st = ds.get("status") or {}
        want = {
            "desiredNumberScheduled": n,
            "currentNumberScheduled": n,
            "numberReady": n,
            "numberAvailable": n,
            "updatedNumberScheduled": n,
        }
        ok = all(st.get(k) == v for k, v in want.items()) and st.get("observedGeneration") == 1
        return ds if ok else None

    await until(lambda: settled(3))
    pods = active(await api.pods("app=agent"))
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["node-0", "node-1", "node-2"]
    tolerations = {(t["key"], t["effect"]) for t in pods[0]["spec"]["tolerations"]}
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in tolerations
    assert ("node.kubernetes.io/not-ready", "NoExecute") in tolerations
    term = pods[0]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [pods[0]["spec"]["nodeName"]]

    await api.add_node("node-3")
    await api.add_node("node-cordoned", unschedulable=True)
    await until(lambda: settled(5))
    nodes = sorted(p["spec"]["nodeName"] for p in active(await api.pods("app=agent")))
    assert nodes == ["node-0", "node-1", "node-2", "node-3", "node-cordoned"]

    # A taint the pod does not tolerate (NoExecute) removes it; deleting a node removes its pod.
    await api.call(
        "PATCH",
        "/api/v1/nodes/node-3",
        {"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoExecute"}]}},
        merge=True,
    )
    await api.call("DELETE", "/api/v1/nodes/node-cordoned")

    async def shrunk() -> bool:
        return sorted(p["spec"]["nodeName"] for p in active(await api.pods("app=agent"))) == [
            "node-0",
            "node-1",
            "node-2",
        ]

    await until(shrunk)
    await until(lambda: settled(3))


async def test_daemonset_node_selector(api: Api) -> None:
    dss = f"/apis/apps/v1/namespaces/{NS}/daemonsets"
    await api.call("POST", dss, daemonset("gpu", node_selector={"gpu": "true"}))
    await api.add_node("gpu-node", labels={"gpu": "true"})

    async def placed() -> list[str] | None:
        nodes = sorted(p["spec"]["nodeName"] for p in active(await api.pods("app=gpu")))
        return nodes if nodes else None

    assert await until(placed) == ["gpu-node"]
    await api.call("PATCH", "/api/v1/nodes/node-1", {"metadata": {"labels": {"gpu": "true"}}}, merge=True)

    async def both() -> bool:
        return sorted(p["spec"]["nodeName"] for p in active(await api.pods("app=gpu"))) == [
            "gpu-node",
            "node-1",
        ]

    await until(both)


def statefulset(name: str, replicas: int, policy: str = "OrderedReady") -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": policy,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "db:1"}]},
            },
        },
    }


async def test_statefulset_ordered_creation_and_same_name_recreate(api: Api) -> None:
    sts_path = f"/apis/apps/v1/namespaces/{NS}/statefulsets"
    order: list[tuple[str, bool]] = []
    pod_rt = api.sim.store.registry.lookup("", "v1", "pods")
    assert pod_rt is not None

    def watch(ev: WatchEvent) -> None:
        if ev.type == "ADDED" and ev.rkey == ("", "pods") and ev.obj["metadata"]["name"].startswith("db-"):
            prev = int(ev.obj["metadata"]["name"].rsplit("-", 1)[1]) - 1
            prev_pod = api.sim.store.find(pod_rt, NS, f"db-{prev}") if prev >= 0 else None
            order.append(
                (ev.obj["metadata"]["name"], prev < 0 or (prev_pod is not None and is_ready(prev_pod)))
            )

    api.sim.store.add_listener(watch)
    await api.call("POST", sts_path, statefulset("db", 3))

    async def all_ready() -> Obj | None:
        sts = await api.get(f"{sts_path}/db")
        st = sts.get("status") or {}
        return sts if st.get("readyReplicas") == 3 and st.get("currentReplicas") == 3 else None

    sts = await until(all_ready)
    assert sts["status"]["replicas"] == 3 and sts["status"]["availableReplicas"] == 3
    # Ordinals in order, each created only once its predecessor was Ready.
    assert order == [("db-0", True), ("db-1", True), ("db-2", True)]
    pod = await api.get(f"/api/v1/namespaces/{NS}/pods/db-1")
    assert pod["spec"]["hostname"] == "db-1" and pod["spec"]["subdomain"] == "db"
    assert pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "db-1"
    old_uid = pod["metadata"]["uid"]

    await api.call("DELETE", f"/api/v1/namespaces/{NS}/pods/db-1")

    async def recreated() -> bool:
        p = api.sim.store.find(pod_rt, NS, "db-1")
        return p is not None and p["metadata"]["uid"] != old_uid and is_ready(p)

    await until(recreated)
    await until(all_ready)

    # Scale down removes the highest ordinal first, one at a time.
    deletions: list[str] = []
    api.sim.store.add_listener(
        lambda ev: (
            deletions.append(ev.obj["metadata"]["name"])
            if ev.rkey == ("", "pods")
            and ev.type == "MODIFIED"
            and ev.obj["metadata"].get("deletionTimestamp")
            and not (ev.old or {}).get("metadata", {}).get("deletionTimestamp")
            else None
        )
    )
    await api.call("PATCH", f"{sts_path}/db", {"spec": {"replicas": 1}}, merge=True)

    async def one_left() -> bool:
        names = {p["metadata"]["name"] for p in await api.pods("app=db")}
        return names == {"db-0"}

    await until(one_left)
    assert deletions == ["db-2", "db-1"]


async def test_statefulset_parallel_creates_all_at_once(api: Api) -> None:
    sts_path = f"/apis/apps/v1/namespaces/{NS}/statefulsets"
    body = statefulset("cache", 3, policy="Parallel")
    # Pods that take long to start: OrderedReady would create only cache-0 in the meantime.
    body["spec"]["template"]["metadata"]["annotations"] = {conventions.START_SECONDS: "30"}
    await api.call("POST", sts_path, body)
    pod_rt = api.sim.store.registry.lookup("", "v1", "pods")
    assert pod_rt is not None

    async def created() -> bool:
        return all(api.sim.store.find(pod_rt, NS, f"cache-{i}") is not None for i in range(3))

    await until(created, within=2)


async def test_daemonset_rolls_to_a_new_template(api: Api) -> None:
    dss = f"/apis/apps/v1/namespaces/{NS}/daemonsets"
    await api.call("POST", dss, daemonset("agent"))

    async def images() -> set[str] | None:
        pods = active(await api.pods("app=agent"))
        if len(pods) != 3 or not all(is_ready(p) for p in pods):
            return None
        return {p["spec"]["containers"][0]["image"] for p in pods}

    assert await until(images) == {"agent:1"}
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "agent:2"}]}}}}
    await api.call("PATCH", f"{dss}/agent", patch, merge=True)

    async def rolled() -> bool:
        ds = await api.get(f"{dss}/agent")
        return await images() == {"agent:2"} and ds["status"].get("updatedNumberScheduled") == 3

    await until(rolled, within=15)
