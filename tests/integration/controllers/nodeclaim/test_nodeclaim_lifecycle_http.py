"""The NodeClaim controller over HTTP: kubesim serving the chart's CRDs (its kubelet posting Node
readiness and killing evicted pods, its scheduler off), a ``FakeCloud`` launching
(``nodeclaim_world``).

Each test names the kubernetes-sigs/karpenter (core) or aws/karpenter-provider-aws (aws) function
it follows.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from nodeclaim_world import (
    CLAIM,
    FAST,
    Env,
    Obj,
    conditions,
    gone,
    is_,
    nodeclaim,
    ready_claim,
    record_claims,
    running,
)

from kubespot.config.drain import DrainSettings
from kubespot.config.launch import LaunchSettings
from kubespot.controllers.nodeclaim.objects import NODECLAIMS
from kubespot.observability.metrics import Metrics
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.sim.kubesim.controllers.kubelet import kubelet_of
from kubespot.sim.kubesim.testing import pdb as pdb_body
from kubespot.sim.kubesim.testing import pod as pod_body
from kubespot.sim.kubesim.testing import until
from support.metrics_scrape import value


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with running() as e:
        yield e


async def test_a_claim_launches_registers_initializes_and_turns_ready(env: Env) -> None:
    """core lifecycle/controller.go Reconcile (finalizer before launch), launch.go
    PopulateNodeClaimDetails, registration.go Reconcile/syncNode, initialization.go Reconcile."""
    await env.create_claim()
    claim = await env.until(CLAIM, is_("Launched", "True"))
    assert claim is not None
    assert claim["metadata"]["finalizers"] == ["karpenter.sh/termination"]
    status = claim["status"]
    (instance,) = env.cloud.launched.values()
    assert status["providerID"] == instance.provider_id
    assert status["capacity"] == {"cpu": "2", "memory": "8192Mi", "pods": "110"}
    labels = claim["metadata"]["labels"]
    assert labels["node.kubernetes.io/instance-type"] == "m5.large" and labels["team"] == "a"
    assert labels["karpenter.sh/capacity-type"] == "spot"
    # The next reconcile (the launch's result is written first) looks for the Node.
    claim = await env.until(
        CLAIM, lambda o: conditions(o).get("Registered", {}).get("reason") == "NodeNotFound"
    )
    assert conditions(claim)["Ready"]["status"] == "Unknown"
    # The node joins (as kubelet registers: the unregistered taint, its own labels).
    await env.create_node("ip-10-0-0-1", status["providerID"])
    claim = await env.until(CLAIM, is_("Ready", "True"))
    assert claim is not None
    assert claim["status"]["nodeName"] == "ip-10-0-0-1"
    assert {t: c["status"] for t, c in conditions(claim).items()} == {
        "Launched": "True",
        "Registered": "True",
        "Initialized": "True",
        "Ready": "True",
    }
    node = await env.get("/api/v1/nodes/ip-10-0-0-1")
    assert node is not None
    assert node["metadata"]["finalizers"] == ["karpenter.sh/termination"]
    (owner,) = node["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "NodeClaim",
        "general-abc",
        claim["metadata"]["uid"],
    )
    node_labels = node["metadata"]["labels"]
    assert (
        node_labels["karpenter.sh/registered"] == "true" and node_labels["karpenter.sh/initialized"] == "true"
    )
    assert node_labels["team"] == "a" and node_labels["node.kubernetes.io/instance-type"] == "m5.large"
    assert all(t["key"] != "karpenter.sh/unregistered" for t in node["spec"].get("taints") or [])
    assert len(env.cloud.create_calls) == 1


async def test_startup_taints_hold_initialization_until_removed(env: Env) -> None:
    """core initialization.go Reconcile (StartupTaintsRemoved) and registration.go syncNode (the
    startup taints merged into the Node)."""
    await env.create_claim(startupTaints=[{"key": "cni.io/not-ready", "effect": "NoSchedule"}])
    claim = await env.until(CLAIM, is_("Launched", "True"))
    assert claim is not None
    await env.create_node("ip-10-0-0-1", claim["status"]["providerID"])
    claim = await env.until(
        CLAIM, lambda o: conditions(o).get("Initialized", {}).get("reason") == "StartupTaintsExist"
    )
    node = await env.get("/api/v1/nodes/ip-10-0-0-1")
    assert node is not None
    assert {"key": "cni.io/not-ready", "effect": "NoSchedule"} in node["spec"]["taints"]
    # The CNI is up: its agent removes the taint.
    await env.call("PATCH", "/api/v1/nodes/ip-10-0-0-1", {"spec": {"taints": []}})
    await env.until(CLAIM, is_("Initialized", "True"))


async def test_deleting_a_claim_drains_its_node_then_terminates_the_instance(env: Env) -> None:
    """core lifecycle/controller.go finalize (Node first, then CloudProvider.Delete until
    NodeClaimNotFound with InstanceTerminating=True, the finalizer removed last), the drain by
    kubespot's engine where Karpenter's node termination controller drains."""
    _, node = await ready_claim(env)
    await env.call(
        "POST", "/api/v1/namespaces/default/pods", pod_body("web", namespace=None, node=node, grace=0)
    )
    await env.until(
        "/api/v1/namespaces/default/pods/web", lambda p: (p or {}).get("status", {}).get("phase") == "Running"
    )
    seen: list[Obj] = []

    def record(ev: Any) -> None:
        if ev.obj.get("kind") == "NodeClaim" or ev.obj.get("metadata", {}).get("name") == node:
            seen.append(ev.obj)

    env.sim.store.add_listener(record)
    await env.call("DELETE", CLAIM)
    await env.until(CLAIM, gone)
    assert await env.get("/api/v1/nodes/" + node) is None
    assert await env.get("/api/v1/namespaces/default/pods/web") is None
    assert env.cloud.launched == {}
    # The order: the Node cordoned, then gone, then the instance terminating, then the claim.
    cordoned = next(i for i, o in enumerate(seen) if o.get("spec", {}).get("unschedulable"))
    terminating = next(i for i, o in enumerate(seen) if is_("InstanceTerminating", "True")(o))
    assert cordoned < terminating
    assert all(o.get("kind") == "NodeClaim" for o in seen[terminating:])


async def test_a_pod_disruption_budget_holds_the_termination_until_it_allows(env: Env) -> None:
    """core lifecycle/controller.go finalize waits for the Node (node/termination awaitDrain:
    evictions respect PodDisruptionBudgets); the instance is not terminated meanwhile. Karpenter
    waits for ever without a terminationGracePeriod; kubespot holds at most drain.voluntary_timeout
    (1 h here) and then terminates (docs/designs/launching.md §4): this test only covers the hold."""
    _, node = await ready_claim(env)
    labels = {"app": "db"}
    await env.call(
        "POST",
        "/api/v1/namespaces/default/pods",
        pod_body("db", namespace=None, node=node, labels=labels, grace=0),
    )
    await env.until(
        "/api/v1/namespaces/default/pods/db", lambda p: (p or {}).get("status", {}).get("phase") == "Running"
    )
    budget = pdb_body("db", namespace="default", selector={"matchLabels": labels}, min_available=1)
    await env.call("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", budget)
    await env.until(
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets/db",
        lambda b: (b or {}).get("status", {}).get("currentHealthy") == 1,
    )
    await env.call("DELETE", CLAIM)
    await env.until(f"/api/v1/nodes/{node}", lambda n: bool((n or {}).get("spec", {}).get("unschedulable")))
    await asyncio.sleep(0.5)  # evictions refused meanwhile (429), retried with backoff
    assert await env.get("/api/v1/namespaces/default/pods/db") is not None
    assert await env.get(CLAIM) is not None and len(env.cloud.launched) == 1
    await env.call("DELETE", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/db")
    await env.until(CLAIM, gone)
    assert await env.get("/api/v1/namespaces/default/pods/db") is None
    assert env.cloud.launched == {}


async def test_a_termination_grace_period_is_stamped_and_announced(env: Env) -> None:
    """core lifecycle/controller.go ensureTerminationGracePeriodTerminationTimeAnnotation and
    node/termination/terminator/events NodeClaimTerminationGracePeriodExpiring."""
    versions = record_claims(env)
    await env.create_claim(terminationGracePeriod="30s")
    claim = await env.until(CLAIM, is_("Launched", "True"))
    assert claim is not None
    await env.call("DELETE", CLAIM)
    await env.until(CLAIM, gone)
    stamped = {
        o["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"]
        for o in versions
        if "karpenter.sh/nodeclaim-termination-timestamp" in (o["metadata"].get("annotations") or {})
    }
    (stamp,) = stamped
    deleted = next(
        o["metadata"]["deletionTimestamp"] for o in versions if o["metadata"].get("deletionTimestamp")
    )
    assert datetime.fromisoformat(stamp) - datetime.fromisoformat(deleted) == timedelta(seconds=30)
    events = await env.call("GET", "/api/v1/namespaces/default/events")
    (event,) = [e for e in events["items"] if e["reason"] == "TerminationGracePeriodExpiring"]
    assert event["message"] == f"All pods will be deleted by {stamp}" and event["type"] == "Warning"


async def test_deleting_the_node_deletes_its_claim_which_drains_it(env: Env) -> None:
    """core node/termination/controller.go finalize (a deleted Node held by the termination
    finalizer deletes its NodeClaim and is drained) and lifecycle/controller.go finalize."""
    _, node = await ready_claim(env)
    await env.call(
        "POST", "/api/v1/namespaces/default/pods", pod_body("web", namespace=None, node=node, grace=0)
    )
    await env.until(
        "/api/v1/namespaces/default/pods/web", lambda p: (p or {}).get("status", {}).get("phase") == "Running"
    )
    await env.call("DELETE", f"/api/v1/nodes/{node}")
    await env.until(CLAIM, gone)
    assert await env.get(f"/api/v1/nodes/{node}") is None
    assert await env.get("/api/v1/namespaces/default/pods/web") is None
    assert env.cloud.launched == {}


async def test_claims_of_another_cloud_provider_are_left_alone(env: Env) -> None:
    """core utils/nodeclaim IsManaged: only claims whose nodeClassRef this provider serves."""
    other = nodeclaim("azure-claim")
    other["spec"]["nodeClassRef"] = {
        "group": "karpenter.azure.com",
        "kind": "AKSNodeClass",
        "name": "default",
    }
    await env.call("POST", f"/{NODECLAIMS}", other)
    await env.create_claim()
    await env.until(CLAIM, is_("Launched", "True"))
    untouched = await env.get(f"/{NODECLAIMS}/azure-claim")
    assert untouched is not None and not untouched["metadata"].get("finalizers")
    assert env.cloud.create_calls == ["general-abc"]


async def test_insufficient_capacity_deletes_the_claim_with_a_warning_event(env: Env) -> None:
    """core launch.go launchNodeClaim (IsInsufficientCapacityError: event, delete) and events.go
    InsufficientCapacityErrorEvent; the pools marked by the cloud (aws instance.go
    updateUnavailableOfferingsCache)."""
    for ct in ("spot", "on-demand"):
        for zone in ("z1", "z2"):
            env.cloud.capacity[(ct, "m5.large", zone)] = 0
    await env.create_claim()
    await env.until(CLAIM, gone)
    assert env.cloud.launched == {}
    assert len(env.unavailable) == 2  # the spot pools tried (on-demand was not: spot is preferred)
    events = await env.call("GET", "/api/v1/namespaces/default/events")
    (event,) = [e for e in events["items"] if e["reason"] == "InsufficientCapacityError"]
    assert event["type"] == "Warning"
    assert (
        event["involvedObject"]["kind"] == "NodeClaim"
        and event["involvedObject"]["apiVersion"] == "karpenter.sh/v1"
    )
    assert event["message"].startswith(
        "NodeClaim general-abc event: every pool of general-abc is out of capacity"
    )


async def test_a_create_error_is_written_to_launched_and_retried(env: Env) -> None:
    """core launch.go launchNodeClaim (CreateError: Launched Unknown with its reason and message,
    the error returned so the rate limiter retries)."""
    versions = record_claims(env)
    env.cloud.fail_create = 1
    await env.create_claim()
    await env.until(CLAIM, is_("Launched", "True"))
    failed = [conditions(o)["Launched"] for o in versions if is_("Launched", "Unknown")(o)]
    assert failed[-1]["reason"] == "LaunchFailed"
    assert failed[-1]["message"] == "injected failure for general-abc"
    assert len(env.cloud.launched) == 1 and env.loop.errors.get("launch") == 1


async def test_a_claim_deleted_before_launch_loses_its_finalizer_at_once(env: Env) -> None:
    """core lifecycle/controller.go finalize: no providerID, no Registered: the finalizer goes."""
    env.cloud.fail_create = 1000
    await env.create_claim()
    await env.until(CLAIM, lambda o: bool(o and o["metadata"].get("finalizers")))
    await env.call("DELETE", CLAIM)
    await env.until(CLAIM, gone)
    assert env.cloud.launched == {}


async def test_registration_timeout_deletes_the_claim_and_its_instance() -> None:
    """core liveness.go Reconcile (registration_timeout) then finalize (CloudProvider.Delete)."""
    metrics = Metrics()
    async with running(LaunchSettings(registration_timeout=1.0), metrics=metrics) as env:
        await env.create_claim()
        # Not polled for Launched: on a busy machine the second the claim lives can pass between
        # two looks. What remains says it all: one launch, the timeout counted, the instance gone.
        await env.until(CLAIM, gone, within=15.0)
        assert env.cloud.create_calls == ["general-abc"]
        assert value(metrics, "kubespot_nodeclaim_timeouts_total", kind="registration_timeout") == 1
        assert env.cloud.launched == {}


async def test_gc_terminates_an_instance_without_claim_and_deletes_its_node() -> None:
    """aws garbagecollection/controller.go Reconcile/garbageCollect: launched > 30 s ago (here
    0.2 s), no NodeClaim: terminated, its Node deleted."""
    async with running(gc_min_age=0.2) as env:
        ghost = await env.cloud.create(NodeClaimSpec(name="ghost"))
        await env.create_node("ip-10-0-9-9", ghost.provider_id, taints=[])
        await env.call(
            "PATCH", "/api/v1/nodes/ip-10-0-9-9", {"metadata": {"finalizers": ["karpenter.sh/termination"]}}
        )
        await env.until("/api/v1/nodes/ip-10-0-9-9", gone)
        assert env.cloud.launched == {}


async def test_gc_deletes_a_registered_claim_whose_instance_is_gone(env: Env) -> None:
    """core garbagecollection/controller.go Reconcile: Registered, the cloud lists no instance and
    the Node is not Ready (here gone) → the claim deleted, then finalized."""
    _, node = await ready_claim(env)
    env.cloud.launched.clear()  # reclaimed behind our back
    await env.call("PATCH", f"/api/v1/nodes/{node}", {"metadata": {"finalizers": None}})
    await env.call("DELETE", f"/api/v1/nodes/{node}")
    await env.until(CLAIM, gone)


async def test_a_restart_finds_the_instance_again_instead_of_launching_twice(env: Env) -> None:
    """Deliberate difference (docs/designs/launching.md §3): Karpenter's launch.go keeps its
    result in memory only (and aws garbagecollection/controller.go would terminate the instance);
    here a launch whose status write was lost is found again after a restart in the cloud's list
    of instances tagged with the claim's name (state rebuilt from the API and the cloud)."""
    rule = env.sim.faults.add(verb="update", path="nodeclaims/.*/status", error_code=500, error_rate=1.0)
    await env.create_claim()
    await env.until(CLAIM, lambda o: bool(o and o["metadata"].get("finalizers")))

    async def launched() -> int:
        return len(env.cloud.launched)

    assert await until(launched, within=3.0) == 1
    await env.stop_loop()  # the operator dies between the launch and its status write
    calls = len(env.cloud.create_calls)
    env.sim.faults.remove(rule.id)
    env.start_loop()
    claim = await env.until(CLAIM, is_("Launched", "True"))
    assert claim is not None
    (instance,) = env.cloud.launched.values()
    assert claim["status"]["providerID"] == instance.provider_id
    # Found through cloud.list at start: no second launch call at all.
    assert len(env.cloud.create_calls) == calls


async def test_api_errors_are_retried_and_never_stop_the_loop(env: Env) -> None:
    """core lifecycle/controller.go Register (per-object exponential rate limiter): a failing
    reconcile is retried; kubespot logs it and goes on, and retries a conflict at once on a copy
    read again (as its node writes do, KubeClient.update_node)."""
    # A conflict on the finalizer's patch: settled at once on a re-read copy, without the backoff.
    env.sim.faults.add(verb="patch", path="nodeclaims", error_code=409, error_rate=1.0, remaining=1)
    await env.create_claim("first")
    await env.until(f"/{NODECLAIMS}/first", is_("Launched", "True"))
    assert env.loop.errors == {"conflict-reread": 1}
    # Server errors past the client's own retries (5 attempts): logged, retried with backoff.
    env.sim.faults.add(verb="patch", path="nodeclaims", error_code=500, error_rate=1.0, remaining=5)
    await env.create_claim()
    await env.until(CLAIM, is_("Launched", "True"), within=6.0)
    assert env.loop.errors.get("api-500") == 1
    assert not env.tasks[0].done()


def test_fast_config_is_sub_second() -> None:
    """The fixture's timings stay well under the 2 s budget of a test (ground rules)."""
    assert max(FAST.node_ready_seconds, FAST.pod_start_seconds) < 0.1
    assert dataclasses.replace(FAST).scheduler is False


async def test_a_launch_that_keeps_failing_times_out_and_the_claim_is_deleted() -> None:
    """core lifecycle/controller.go Reconcile (liveness runs although launch returned an error,
    multierr.Append) and liveness.go Reconcile (not launched LaunchTimeout after Launched's
    lastTransitionTime: deleteNodeClaimForTimeout "launch_timeout")."""
    async with running(LaunchSettings(launch_timeout=1.5, registration_timeout=60.0)) as env:
        env.cloud.fail_create = 10**6
        started = asyncio.get_running_loop().time()
        await env.create_claim()
        # Not waiting to see Launched=Unknown: under load the claim may be gone before a poll.
        await env.until(CLAIM, gone, within=4.0)
        waited = asyncio.get_running_loop().time() - started
        # lastTransitionTime has whole seconds (metav1.Time): the timeout may end up to 1 s early.
        assert waited >= 1.5 - 1.0, "deleted by the launch timeout, not at once"
        assert env.cloud.launched == {} and env.loop.errors.get("launch", 0) >= 1


async def test_a_reclaimed_spot_node_is_not_drained_and_goes_at_once() -> None:
    """core node/termination/controller.go finalize (the Node NotReady and CloudProvider.Get
    NodeClaimNotFound: removeFinalizer without a drain), core garbagecollection/controller.go
    Reconcile (the claim deleted), then kubernetes pkg/controller/podgc/gc_controller.go
    gcOrphaned for the pods of the vanished Node. The drain's voluntary_timeout is 1 h here."""
    async with running(node_monitor_grace_seconds=0.5) as env:
        claim, node = await ready_claim(env)
        pod = pod_body("db-0", namespace=None, node=node, grace=30)
        await env.call("POST", "/api/v1/namespaces/default/pods", pod)
        await env.until(
            "/api/v1/namespaces/default/pods/db-0",
            lambda p: (p or {}).get("status", {}).get("phase") == "Running",
        )
        env.cloud.launched.pop(claim["status"]["providerID"])
        kubelet_of(env.sim.controllers).stop_node(node)
        await env.until(CLAIM, gone, within=4.0)
        await env.until(f"/api/v1/nodes/{node}", gone, within=1.0)
        await env.until("/api/v1/namespaces/default/pods/db-0", gone, within=2.0)


async def test_a_deleting_node_without_claim_or_instance_loses_its_finalizer() -> None:
    """core node/termination/controller.go finalize (a Node with the termination finalizer is
    finalized without a NodeClaim: its instance gone, removeFinalizer)."""
    async with running(gc_min_age=0.2) as env:
        await env.create_node("ip-10-0-7-7", "aws:///z1/i-vanished", taints=[])
        finalizer = {"metadata": {"finalizers": ["karpenter.sh/termination"]}}
        await env.call("PATCH", "/api/v1/nodes/ip-10-0-7-7", finalizer)
        await env.call("DELETE", "/api/v1/nodes/ip-10-0-7-7")
        await env.until("/api/v1/nodes/ip-10-0-7-7", gone, within=2.0)


async def test_drain_settings_that_refuse_do_not_stop_the_termination_drain() -> None:
    """core node/termination/terminator/terminator.go Drain (emptyDir pods are evicted like any
    other; evictions respect PodDisruptionBudgets) and node/termination/controller.go finalize
    (the instance is kept while the drain goes on). Settings that make kubectl-style drains refuse
    (DELETE_LOCAL_DATA=false) do not apply to a NodeClaim's termination (docs/controller.md)."""
    strict = DrainSettings(delete_local_data=False, retry_backoff_base=0.05, retry_backoff_cap=0.2)
    async with running(drain=strict) as env:
        _, node = await ready_claim(env)
        labels = {"app": "web"}
        cache = pod_body("cache", namespace=None, node=node, grace=0)
        cache["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        for body in (pod_body("web", namespace=None, node=node, labels=labels, grace=0), cache):
            await env.call("POST", "/api/v1/namespaces/default/pods", body)
        for pod in ("web", "cache"):
            await env.until(
                f"/api/v1/namespaces/default/pods/{pod}",
                lambda p: (p or {}).get("status", {}).get("phase") == "Running",
            )
        budget = pdb_body("web", namespace="default", selector={"matchLabels": labels}, min_available=1)
        await env.call("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", budget)
        await env.until(
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web",
            lambda b: (b or {}).get("status", {}).get("currentHealthy") == 1,
        )
        await env.call("DELETE", CLAIM)
        await env.until("/api/v1/namespaces/default/pods/cache", gone)  # evicted, not refused
        await asyncio.sleep(0.3)
        assert await env.get("/api/v1/namespaces/default/pods/web") is not None  # its budget holds
        assert len(env.cloud.launched) == 1  # not terminated as if drained
        await env.call("DELETE", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web")
        await env.until(CLAIM, gone)
        assert env.cloud.launched == {}


def _attachment(name: str, node: str, pv: str | None) -> Obj:
    source = {"persistentVolumeName": pv} if pv else {"inlineVolumeSpec": {}}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node, "source": source},
    }


async def test_the_instance_waits_for_the_nodes_volumes_to_detach(env: Env) -> None:
    """core node/termination/controller.go finalize awaitVolumeDetachment (VolumeAttachments with
    the Node's spec.nodeName, pkg/utils/node GetVolumeAttachments; those without a
    persistentVolumeName dropped, filterVolumeAttachments) before awaitInstanceTermination. No
    attach/detach controller runs in kubesim: the attachment is deleted by hand."""
    _, node = await ready_claim(env)
    attachments = "/apis/storage.k8s.io/v1/volumeattachments"
    await env.call("POST", attachments, _attachment("csi-db", node, "pv-db"))
    await env.call("POST", attachments, _attachment("csi-inline", node, None))
    await env.call("POST", attachments, _attachment("csi-other", "ip-10-9-9-9", "pv-other"))
    await env.call("DELETE", CLAIM)
    await env.until(f"/api/v1/nodes/{node}", gone)  # drained and released first
    await asyncio.sleep(0.4)
    assert len(env.cloud.launched) == 1 and await env.get(CLAIM) is not None
    await env.call("DELETE", f"{attachments}/csi-db")  # the attach/detach controller detached it
    await env.until(CLAIM, gone, within=3.0)
    assert env.cloud.launched == {}


async def test_volumes_still_attached_at_the_termination_time_do_not_hold_the_instance(env: Env) -> None:
    """core node/termination/controller.go awaitVolumeDetachment: once the termination grace
    period has elapsed (hasTerminationGracePeriodElapsed) the instance is terminated anyway."""
    await env.create_claim(terminationGracePeriod="1s")
    claim = await env.until(CLAIM, is_("Launched", "True"))
    assert claim is not None
    await env.create_node("ip-10-0-0-1", claim["status"]["providerID"])
    await env.until(CLAIM, is_("Ready", "True"))
    await env.call(
        "POST", "/apis/storage.k8s.io/v1/volumeattachments", _attachment("csi-db", "ip-10-0-0-1", "pv-db")
    )
    await env.call("DELETE", CLAIM)
    # Held at most until deletionTimestamp (whole seconds) + 1 s, not drain.voluntary_timeout (1 h).
    await env.until(CLAIM, gone, within=3.0)
    assert env.cloud.launched == {}
    assert await env.get("/apis/storage.k8s.io/v1/volumeattachments/csi-db") is not None


OWNED = {
    "ownerReferences": [
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "general", "uid": "pool-uid"}
    ]
}


async def _owned_claim(env: Env) -> list[Any]:
    """A claim of NodePool ``general`` (owner reference with its UID); the outcomes the loop
    reports for its pool's registration health."""
    seen: list[Any] = []
    env.loop.on_registration = seen.append
    body = nodeclaim("general-abc")
    body["metadata"].update(OWNED)
    await env.call("POST", f"/{NODECLAIMS}", body)
    return seen


async def test_a_registration_is_reported_to_the_nodepools_health(env: Env) -> None:
    """core registration.go Reconcile → updateNodePoolRegistrationHealth (the NodePool the claim is
    labelled with and owned by learns a success, once)."""
    seen = await _owned_claim(env)
    claim = await env.until(CLAIM, is_("Launched", "True"))
    assert claim is not None and not seen
    await env.create_node("ip-10-0-0-1", claim["status"]["providerID"])
    await env.until(CLAIM, is_("Ready", "True"))
    assert [(o.pool, o.pool_uid, o.registered) for o in seen] == [("general", "pool-uid", True)]


async def test_a_registration_timeout_is_reported_as_a_failure_to_register() -> None:
    """core liveness.go Reconcile → updateNodePoolRegistrationHealth before the deletion: a
    failure, with the claim's Launched condition (True: the pool's reason is RegistrationFailed)."""
    async with running(LaunchSettings(registration_timeout=1.0)) as env:
        seen = await _owned_claim(env)
        await env.until(CLAIM, gone, within=15.0)
        assert seen, "the timeout was not reported"
        assert {(o.pool, o.pool_uid, o.registered) for o in seen} == {("general", "pool-uid", False)}
        assert seen[0].launched is not None and seen[0].launched.status == "True"


async def test_gc_under_dry_run_only_says_what_it_would_terminate(caplog: pytest.LogCaptureFixture) -> None:
    """aws garbagecollection/controller.go garbageCollect decides as in the test above, but under
    ``node_actions.dry_run`` (aws-node-termination-handler pkg/node/node.go: a dry run logs the
    decision and writes nothing) the orphan is only logged: still running, its Node still there."""
    caplog.set_level("INFO", logger="kubespot.controller.nodeclaim")
    async with running(gc_min_age=0.2) as env:
        env.gc.dry_run = True
        ghost = await env.cloud.create(NodeClaimSpec(name="ghost"))
        await env.create_node("ip-10-0-9-9", ghost.provider_id, taints=[])

        async def said() -> bool:
            return any(
                "dry-run: nodeclaim garbage collection would terminate" in r.message for r in caplog.records
            )

        await until(said, within=5.0, interval=0.05)
        passes = env.gc.passes
        await until(lambda: _passes_after(env, passes + 2), within=5.0, interval=0.05)
        assert ghost.provider_id in {c.provider_id for c in env.cloud.launched.values()}
        assert await env.get("/api/v1/nodes/ip-10-0-9-9") is not None


async def _passes_after(env: Env, n: int) -> bool:
    return env.gc.passes >= n
