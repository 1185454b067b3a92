"""The simulated kubelet over real HTTP: pod start, graceful termination, heartbeats.

Upstream behaviour relied on (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/):
- a bound pod runs once its containers start: phase Running, podIP/hostIP, Ready conditions True;
- on delete the API server sets deletionTimestamp/deletionGracePeriodSeconds, the kubelet sends
  SIGTERM, SIGKILLs after the grace period and confirms with a grace-0 delete; since 1.27 the pod
  first reaches a terminal phase; a second delete may only shorten the grace period;
- kubelets renew a Lease in kube-node-lease (leaseDurationSeconds 40) and post node conditions;
- cordoning (spec.unschedulable) never evicts running pods.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kubespot.sim.kubesim import conventions
from kubespot.sim.kubesim.store import parse_rfc3339
from kubespot.sim.kubesim.testing import node as node_body

SHUTDOWN = conventions.SHUTDOWN_SECONDS


async def test_bound_pod_runs_with_unique_ips_and_ready_conditions(cluster: Any) -> None:
    node = await cluster.create_node("n1")
    await cluster.create_pod("a", node_name="n1")
    await cluster.create_pod("b", node_name="n1")
    await cluster.until(lambda: cluster.phase("a") == "Running" and cluster.phase("b") == "Running")
    a = await cluster.call("GET", "/api/v1/namespaces/default/pods/a")
    b = cluster.pod("b")
    host_ip = next(
        x["address"] for x in cluster.node("n1")["status"]["addresses"] if x["type"] == "InternalIP"
    )
    assert node["metadata"]["name"] == "n1"
    assert a["status"]["hostIP"] == host_ip
    assert a["status"]["podIP"] and a["status"]["podIP"] != b["status"]["podIP"]
    assert a["status"]["startTime"]
    for type_ in ("Initialized", "ContainersReady", "Ready", "PodScheduled"):
        assert cluster.condition(a, type_) == "True", type_
    (cs,) = a["status"]["containerStatuses"]
    assert cs["ready"] is True and "running" in cs["state"] and cs["name"] == "app"


async def test_start_delay_annotation_is_honoured(cluster: Any) -> None:
    await cluster.create_node("n1")
    t0 = time.monotonic()
    await cluster.create_pod("slow", node_name="n1", annotations={conventions.START_SECONDS: "0.6"})
    await asyncio.sleep(0.2)
    assert cluster.phase("slow") == "Pending"  # never early
    await cluster.until(lambda: cluster.phase("slow") == "Running")
    assert time.monotonic() - t0 >= 0.55


async def test_pod_on_missing_node_stays_pending_until_the_node_exists(cluster: Any) -> None:
    await cluster.create_pod("orphan", node_name="later")
    await asyncio.sleep(0.4)
    assert cluster.phase("orphan") == "Pending"
    await cluster.create_node("later")
    await cluster.until(lambda: cluster.phase("orphan") == "Running")


async def test_graceful_delete_waits_for_shutdown_then_removes(cluster: Any) -> None:
    """SIGTERM handled in 0.5 s (< 30 s grace): exit 0, phase Succeeded, then removal."""
    await cluster.create_node("n1")
    await cluster.create_pod("web", node_name="n1", annotations={SHUTDOWN: "0.5"})
    await cluster.until(lambda: cluster.phase("web") == "Running")
    t0 = time.monotonic()
    deleted = await cluster.delete_pod("web")
    assert deleted["metadata"]["deletionTimestamp"]
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 30
    assert cluster.pod("web") is not None  # still there, terminating
    await cluster.until(lambda: cluster.pod("web") is None)
    gone = cluster.deleted_at("web")
    assert gone is not None and 0.45 <= gone - t0 < 5.0
    finals = [
        ev.obj for _t, ev in cluster.events if ev.type == "MODIFIED" and ev.obj["metadata"]["name"] == "web"
    ]
    last = finals[-1]
    assert last["status"]["phase"] == "Succeeded"
    assert cluster.condition(last, "Ready") == "False"
    assert last["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


async def test_grace_period_shorter_than_shutdown_kills(cluster: Any) -> None:
    """SIGKILL once the grace period is over, but never less than 2 s after SIGTERM
    (kuberuntime_container.go killContainer, ``minimumGracePeriodInSeconds``): exit 137."""
    await cluster.create_node("n1")
    await cluster.create_pod("stubborn", node_name="n1", annotations={SHUTDOWN: "60"})
    await cluster.until(lambda: cluster.phase("stubborn") == "Running")
    t0 = time.monotonic()
    await cluster.delete_pod("stubborn", grace=1)
    await asyncio.sleep(1.2)
    assert cluster.pod("stubborn") is not None  # grace 1, yet still given its 2 s
    await cluster.until(lambda: cluster.pod("stubborn") is None)
    assert 1.95 <= cluster.deleted_at("stubborn") - t0 < 6.0
    last = [
        ev.obj
        for _t, ev in cluster.events
        if ev.type == "MODIFIED" and ev.obj["metadata"]["name"] == "stubborn"
    ][-1]
    terminated = last["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 137 and terminated["reason"] == "Error"
    assert last["status"]["phase"] == "Failed"


async def test_shortened_grace_period_moves_the_deadline_earlier(cluster: Any) -> None:
    await cluster.create_node("n1")
    await cluster.create_pod("p", node_name="n1", annotations={SHUTDOWN: "60"})
    await cluster.create_pod("q", node_name="n1", annotations={SHUTDOWN: "60"})
    await cluster.until(lambda: cluster.phase("p") == "Running" and cluster.phase("q") == "Running")
    await cluster.delete_pod("p", grace=20)
    # A later, longer grace period must not extend it (the store keeps the shorter one).
    await cluster.delete_pod("q", grace=1)
    longer = await cluster.delete_pod("q", grace=30)
    assert longer["metadata"]["deletionGracePeriodSeconds"] == 1
    await asyncio.sleep(0.2)
    assert cluster.pod("p") is not None
    t0 = time.monotonic()
    again = await cluster.delete_pod("p", grace=1)
    assert again["metadata"]["deletionGracePeriodSeconds"] == 1
    await cluster.until(lambda: cluster.pod("p") is None and cluster.pod("q") is None, within=6.0)
    assert cluster.deleted_at("p") - t0 < 6.0


async def test_unstarted_pod_is_removed_at_once_on_delete(cluster: Any) -> None:
    await cluster.create_node("n1")
    await cluster.create_pod(
        "cold", node_name="n1", annotations={conventions.START_SECONDS: "30", SHUTDOWN: "30"}
    )
    await asyncio.sleep(0.1)
    await cluster.delete_pod("cold")
    await cluster.until(lambda: cluster.pod("cold") is None, within=3.0)


async def test_node_lease_and_status_heartbeats(cluster: Any) -> None:
    await cluster.create_node("n1")
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
    lease = None
    for _ in range(100):
        lease = await cluster.get_or_none(path)
        if lease:
            break
        await asyncio.sleep(0.05)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "n1"
    assert lease["spec"]["leaseDurationSeconds"] == 40
    assert lease["metadata"]["ownerReferences"][0]["kind"] == "Node"
    first = lease["spec"]["renewTime"]
    hb0 = cluster.condition(cluster.node("n1"), "Ready", "lastHeartbeatTime")
    await asyncio.sleep(1.3)
    renewed = await cluster.call("GET", path)
    assert renewed["spec"]["renewTime"] > first
    hb1 = cluster.condition(cluster.node("n1"), "Ready", "lastHeartbeatTime")
    assert parse_rfc3339(hb1) > parse_rfc3339(hb0)
    assert cluster.condition(cluster.node("n1"), "Ready") == "True"


async def test_cordoned_node_keeps_running_its_pods(cluster: Any) -> None:
    await cluster.create_node("n1")
    await cluster.create_pod("keep", node_name="n1")
    await cluster.until(lambda: cluster.phase("keep") == "Running")
    await cluster.patch("/api/v1/nodes/n1", {"spec": {"unschedulable": True}})
    await asyncio.sleep(0.5)
    pod = cluster.pod("keep")
    assert pod["status"]["phase"] == "Running" and not pod["metadata"].get("deletionTimestamp")
    assert cluster.condition(cluster.node("n1"), "Ready") == "True"


def _last_status(cluster: Any, name: str) -> Any:
    """The pod's last MODIFIED status: the terminal one the kubelet wrote before removing it."""
    return [
        ev.obj for _t, ev in cluster.events if ev.type == "MODIFIED" and ev.obj["metadata"]["name"] == name
    ][-1]["status"]


async def test_container_without_sigterm_handler_exits_143_and_the_pod_fails(cluster: Any) -> None:
    """A process without a SIGTERM handler dies of the signal (128 + 15); a deleted pod then ends
    Failed whatever its restartPolicy (pkg/kubelet/kubelet_pods.go getPhase, ``podIsTerminal``)."""
    await cluster.create_node("n1")
    await cluster.create_pod(
        "nohandler", node_name="n1", annotations={conventions.SIGTERM: "default", SHUTDOWN: "30"}
    )
    await cluster.until(lambda: cluster.phase("nohandler") == "Running")
    assert cluster.pod("nohandler")["spec"]["restartPolicy"] == "Always"
    t0 = time.monotonic()
    await cluster.delete_pod("nohandler")
    await cluster.until(lambda: cluster.pod("nohandler") is None)
    assert cluster.deleted_at("nohandler") - t0 < 0.5  # not the 30 s shutdown, not the grace period
    status = _last_status(cluster, "nohandler")
    terminated = status["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (143, "Error")
    assert status["phase"] == "Failed"


async def test_prestop_hook_delays_sigterm_and_each_container_reports_its_exit(cluster: Any) -> None:
    """kuberuntime_container.go killContainer: each container runs its preStop hook, then gets
    SIGTERM; the pod is removed once the last container exited (here 0.4 s hook + 0.3 s shutdown)."""
    await cluster.create_node("n1")
    annotations = {conventions.PRESTOP_SECONDS: "0.4", SHUTDOWN: "0.3"}
    await cluster.create_pod(
        "hooked",
        node_name="n1",
        annotations=annotations,
        restartPolicy="Never",
        containers=[
            {
                "name": "app",
                "image": "nginx:1.27",
                "lifecycle": {"preStop": {"exec": {"command": ["/bin/drain"]}}},
            },
            {"name": "sidecar", "image": "envoy:1.30"},
        ],
    )
    await cluster.until(lambda: cluster.phase("hooked") == "Running")
    t0 = time.monotonic()
    await cluster.delete_pod("hooked")
    await asyncio.sleep(0.5)
    assert cluster.pod("hooked") is not None  # the hooked container is still shutting down
    await cluster.until(lambda: cluster.pod("hooked") is None)
    assert 0.65 <= cluster.deleted_at("hooked") - t0 < 1.5
    status = _last_status(cluster, "hooked")
    finished = {
        cs["name"]: parse_rfc3339(cs["state"]["terminated"]["finishedAt"])
        for cs in status["containerStatuses"]
    }
    assert {cs["state"]["terminated"]["exitCode"] for cs in status["containerStatuses"]} == {0}
    assert finished["app"] >= finished["sidecar"]  # the sidecar had no hook: it exited first
    assert status["phase"] == "Succeeded"


async def test_sidecar_stops_after_the_app_and_does_not_decide_the_phase(cluster: Any) -> None:
    """kuberuntime_termination_order.go: a restartable init container gets SIGTERM only once the
    regular containers exited; its own exit is reported in initContainerStatuses and is not counted
    for the phase (kubelet_pods.go getPhase: "terminated restartable init containers are not taken
    into account")."""
    await cluster.create_node("n1")
    await cluster.create_pod(
        "meshed",
        node_name="n1",
        # The proxy has no SIGTERM handler: it dies of the signal (143) once its turn comes.
        annotations={SHUTDOWN: "0.3", f"{conventions.SIGTERM}.proxy": "default"},
        initContainers=[{"name": "proxy", "image": "envoy:1.30", "restartPolicy": "Always"}],
    )
    await cluster.until(lambda: cluster.phase("meshed") == "Running")
    t0 = time.monotonic()
    await cluster.delete_pod("meshed")
    await asyncio.sleep(0.15)
    assert cluster.pod("meshed") is not None  # the proxy did not get SIGTERM with the app
    await cluster.until(lambda: cluster.pod("meshed") is None)
    assert 0.28 <= cluster.deleted_at("meshed") - t0 < 1.5  # the app's 0.3 s, then the proxy at once
    status = _last_status(cluster, "meshed")
    (proxy,) = status["initContainerStatuses"]
    assert proxy["state"]["terminated"]["exitCode"] == 143
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert status["phase"] == "Succeeded"


async def test_ready_seconds_annotation_delays_a_new_nodes_ready(cluster: Any) -> None:
    """A Node annotated ``kubesim.kubespot.io/ready-seconds`` reports Ready False (``KubeletNotReady``,
    the CNI not up: pkg/kubelet/kubelet_node_status.go ``setNodeReadyCondition``) for that long
    instead of ``node_ready_seconds`` (0.05 s here): the node joiner tells kubesim its boot's timing."""
    body = node_body("slow")
    body["metadata"]["annotations"] = {conventions.READY_SECONDS: "0.6"}
    await cluster.call("POST", "/api/v1/nodes", body)
    created = time.monotonic()
    await asyncio.sleep(0.3)
    assert cluster.node_ready("slow") == "False"
    assert cluster.condition(cluster.node("slow"), "Ready", "reason") == "KubeletNotReady"
    await cluster.until(lambda: cluster.node_ready("slow") == "True", within=3.0)
    assert time.monotonic() - created >= 0.55
