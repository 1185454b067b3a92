"""The provisioning world tells AWS's and Kubernetes' story compressed (``SCALE``), and its parts
agree on the one clock: awssim terminates a warned spot instance two minutes scaled after the
interruption warning, the controller's queue processor drains towards that same moment (the
warning's time plus ``queue.interruption_notice``, which the world sets to the compressed notice),
and the node joiner keeps the terminated instance's Node through kube-controller-manager's node
monitor grace, compressed the same way, before it goes Unknown.

The test keeps to an instance type no other test of the package uses (its reclaim takes the pool).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kubespot.records.interruption import STATE_ANNOTATION, NodeState, decode
from kubespot.sandbox import provision_world as pw
from kubespot.sandbox.timing import NODE_MONITOR_GRACE_SECONDS, SPOT_NOTICE_SECONDS
from support.provision_e2e import E2E, SCALE, Obj, condition, label, pool, workload

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="package")]

TEST = "scaled-world"
TYPE = "c6a.xlarge"


async def test_the_drain_deadline_and_the_node_lifetime_follow_the_scaled_termination(e2e: E2E) -> None:
    """EC2 User Guide, "Spot Instance interruption notices": the instance is interrupted two minutes
    after the warning, whose EventBridge event carries only its ``time``; the queue processor's
    deadline is that time plus the notice (controllers/interruption/sqs/parsers.py ``_spot``), and in
    the compressed world the notice is compressed like the market's (awssim extensions/reclaims.py
    ``reclaim``: 120 s times the market's time scale), so the fence's deadline is the instance's
    real end, not two real minutes later. Then pkg/controller/nodelifecycle ``tryUpdateNodeHealth``:
    the terminated instance's Node turns Ready Unknown only ``--node-monitor-grace-period`` (50 s,
    compressed) after its kubelet's last heartbeat (the joiner and kubesim's node lifecycle
    controller both on that grace)."""
    notice = SPOT_NOTICE_SECONDS / SCALE
    grace = NODE_MONITOR_GRACE_SECONDS / SCALE
    assert e2e.world.joiner is not None and e2e.world.joiner.config.node_monitor_grace == grace
    await e2e.add_pools(pool(TEST, f"{TEST}-pool", ["spot"], instance_types=(TYPE,)))
    await e2e.namespace(TEST)
    await e2e.deploy(TEST, workload("app", TEST, 1, cpu="1"))
    (placed,) = await e2e.until(lambda: e2e.bound(TEST, 1), "the pod bound", within=20)
    name = placed["spec"]["nodeName"]
    (claim,) = await e2e.claims(TEST)
    zone = str(label(claim, "topology.kubernetes.io/zone"))
    reclaim = await asyncio.to_thread(e2e.aws.reclaim_spot, zone, TYPE, capacity_after=10)
    assert reclaim.terminate_at - reclaim.warning_at == pytest.approx(notice)

    async def node() -> Obj | None:
        try:
            return await e2e.world.get(f"/api/v1/nodes/{name}")
        except pw.WorldError:
            return None

    async def fence() -> NodeState | None:
        found = await node()
        state = decode(((found or {}).get("metadata") or {}).get("annotations", {}).get(STATE_ANNOTATION))
        return state if state is not None and state.kind == "spot-itn" else None

    state = await e2e.until(fence, "the queue processor's spot-itn fence on the node", within=notice)
    assert state.deadline is not None
    # The warning's time is whole seconds on EventBridge: the deadline is at most a second early.
    assert reclaim.terminate_at - 1.01 <= state.deadline.timestamp() <= reclaim.terminate_at + 0.01, (
        f"deadline {state.deadline.isoformat()} for an instance terminated at {reclaim.terminate_at:.2f}"
    )

    # The instance ends; its Node is judged only once the (compressed) grace has passed since the
    # kubelet's last heartbeat, which came at most a lease renewal (10 s, compressed) before.
    not_ready_at: float | None = None
    while time.time() < reclaim.terminate_at + grace + 3.0:
        found = await node()
        if found is None or found["metadata"].get("deletionTimestamp") or condition(found, "Ready") != "True":
            not_ready_at = time.time()
            break
        await asyncio.sleep(0.05)
    assert not_ready_at is not None, f"the Node of the terminated instance stayed Ready\n{e2e.log_tail()}"
    assert not_ready_at >= reclaim.terminate_at + grace - 10.0 / SCALE - 0.05, (
        f"the Node went {not_ready_at - reclaim.terminate_at:.2f}s after its instance, before the "
        f"{grace:.2f}s grace"
    )
