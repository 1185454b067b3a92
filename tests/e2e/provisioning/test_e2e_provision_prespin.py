"""Pre-spin through the real queue path: EC2 reclaims the spot pool of a provisioned node (awssim's
``reclaim_spot``: an interruption warning on EventBridge, routed to the interruption queue), the
controller's queue processor fences and drains the node, and the provisioner, seeing the node
doomed, launches its replacement while the drain runs (docs/designs/launching.md §7); the evicted
pods' replacements land on the new node before the instance is terminated (the two-minute notice,
scaled 10x).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from support.kube_history import recording
from support.provision_e2e import E2E, NODECLAIMS, TEST_LABEL, Obj, label, pool, workload

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="package")]

TEST = "prespin"
PODS = f"/api/v1/namespaces/{TEST}/pods"
#: The reclaim takes back every spot instance of its pool: types no other test uses (none of
#: ``SHARED_TYPES``), so no other test's idle node is interrupted with this one's.
TYPES = ("m6i.xlarge", "c6i.xlarge")
#: The two-minute notice on a clock 10 times faster than the world's 25x: the controller's drain,
#: its pass and the node's boot are real work on a loaded 2-core machine (seen taking 4 s of a
#: 4.8 s notice); the handler itself always counts two real minutes from the warning.
NOTICE_S = 120.0 / 10


def _evicted(pod: Obj, kind: str) -> bool:
    """The pod's eviction: the drain's write that marks it terminating."""
    return kind == "MODIFIED" and bool(pod["metadata"].get("deletionTimestamp"))


async def test_a_spot_warning_gets_the_replacement_launched_during_the_drain(e2e: E2E) -> None:
    """kubernetes-sigs/karpenter ``pkg/controllers/provisioning/provisioner.go`` ``Schedule`` (the
    pods of nodes being deleted planned with the pending ones) and aws/karpenter-provider-aws
    ``pkg/controllers/interruption/controller.go`` ``Reconcile`` (a spot interruption warning from
    the queue → the node's claim deleted, its pods drained); kubespot plans from its own fence at
    once (docs/designs/launching.md §7, ``controllers/provisioning/doomed.py``)."""
    name = f"{TEST}-pool"
    await e2e.add_pools(pool(TEST, name, ["spot"], instance_types=TYPES))
    await e2e.namespace(TEST)
    await e2e.deploy(TEST, workload("app", TEST, 2, cpu="1500m", memory="2Gi"))

    async def running() -> list[Obj] | None:
        now = await e2e.bound(TEST, 2)
        return now if now and all(p["status"].get("phase") == "Running" for p in now) else None

    placed = await e2e.until(running, "2 pods Running", within=20)
    (first,) = await e2e.claims(TEST)
    old_node = first["status"]["nodeName"]
    assert {p["spec"]["nodeName"] for p in placed} == {old_node}
    zone = label(first, "topology.kubernetes.io/zone")
    itype = label(first, "node.kubernetes.io/instance-type")

    async with recording(e2e.world.api_url, PODS, NODECLAIMS) as history:
        warned = time.monotonic()
        # The warning goes out at once, the termination two (scaled) minutes later; the pool keeps
        # room for the replacement (else the provisioner's fallback, not pre-spin, is on trial).
        reclaim = await asyncio.to_thread(
            e2e.aws.reclaim_spot, zone, itype, delay_s=NOTICE_S, capacity_after=10
        )
        notice = reclaim.terminate_at - reclaim.warning_at

        async def moved() -> list[Obj] | None:
            now = await e2e.bound(TEST, 2)
            ok = now and all(p["spec"]["nodeName"] != old_node for p in now)
            return now if ok and all(p["status"].get("phase") == "Running" for p in now) else None

        landed = await e2e.until(moved, "the pods Running on another node", within=20)
        landed_after = time.monotonic() - warned

    new_claims = [
        e
        for e in history.of(NODECLAIMS)
        if e[1] == "ADDED"
        and e[2]["metadata"]["name"] != first["metadata"]["name"]
        and label(e[2], TEST_LABEL) == TEST
    ]
    assert len(new_claims) == 1, f"replacements: {[e[2]['metadata']['name'] for e in new_claims]}"
    created_rv, _, replacement = new_claims[0]
    pod_events = history.of(PODS)
    evicted = history.first(PODS, _evicted)
    gone = [rv for rv, kind, _ in pod_events if kind == "DELETED"]
    assert evicted is not None and gone, "the queue processor's drain evicted nothing"
    unschedulable = [
        rv
        for rv, _, pod in pod_events
        if any(
            c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in (pod.get("status") or {}).get("conditions") or []
        )
    ]
    order = f"claim rv {created_rv}, first eviction rv {evicted[0]}, first pod gone rv {min(gone)}, "
    order += f"first successor Unschedulable rv {min(unschedulable, default=None)}"
    # The drain starts right after the fence (node_handler ``_execute``) and the pass the fence
    # triggers reads the cluster first, so which of the claim, the first eviction and kube-scheduler's
    # verdict on the successors comes first is a race (the claim won most runs seen here); what
    # pre-spin promises is a pass started by the fence itself, at once ("window now", not an idle
    # window opened by the successors' Unschedulable), and a replacement that does not wait for the
    # evicted pods to be gone.
    assert created_rv < min(gone), f"the replacement came after the evicted pods were gone ({order})"
    messages = e2e.log_messages()
    made = next(
        i
        for i, m in enumerate(messages)
        if m.startswith(f"created nodeclaim {replacement['metadata']['name']}:")
    )
    summary = next(m for m in messages[made:] if m.startswith("provisioning: pass created"))
    assert "(window now " in summary, f"the replacement's pass was not the fence's: {summary} ({order})"
    prespin = f"provisioning: node {old_node} is going away; planning its pods now (pre-spin)"
    assert prespin in messages, e2e.log_tail()
    new_node = (await e2e.world.get(f"{NODECLAIMS}/{replacement['metadata']['name']}"))["status"]["nodeName"]
    assert {p["spec"]["nodeName"] for p in landed} == {new_node}
    assert landed_after < notice, (
        f"the pods ran again {landed_after:.1f}s after the warning (notice {notice:.1f}s)"
    )
