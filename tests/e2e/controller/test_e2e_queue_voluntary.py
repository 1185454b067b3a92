"""An Auto Scaling scale-in is voluntary: the instance waits in ``Terminating:Wait`` until the hook is
completed or times out (AWS: HeartbeatTimeout, extended by RecordLifecycleActionHeartbeat up to the
global timeout, min(48 h, 100 x HeartbeatTimeout); API reference, LifecycleHook). So the controller
invents no spot-like deadline for it: a PodDisruptionBudget that blocks an eviction is respected
(no delete at a deadline, whatever NODE_TERMINATION_GRACE_PERIOD says) and the action is completed
only once the budget lets the pods go. Over moto (the ``lifecycle`` extension) and kubesim.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from controller_world import ASG_GROUP, asg_controller_world, lifecycle_action, until_completed, workload

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import pdb

pytestmark = pytest.mark.slow


async def test_a_scale_in_respects_the_budget_to_the_end(aws: MotoServer, tmp_path: Path) -> None:
    budget = pdb("web", namespace="default", selector={"matchLabels": {"app": "web"}}, min_available=2)
    async with asg_controller_world(aws, workload("web", 2, grace=20), budget, tmp=tmp_path) as world:
        target = world.instances[0]
        # A short "grace period" for events without a deadline: a voluntary event must not use it.
        await world.start_controller(KUBESPOT_DRAIN_NODE_TERMINATION_GRACE_PERIOD="4")
        action = aws.start_lifecycle_action(ASG_GROUP, target.instance_id, decrement_desired_capacity=True)

        await world.until_phase(target.node_name, "draining", within=15)
        await asyncio.sleep(8)  # twice the would-be window: nothing may be forced meanwhile
        assert len(world.pods_on(target.node_name)) == 2, "a budget-blocked pod was removed"
        assert "deleted gracefully (pdb_deadline_action=delete)" not in world.log_text()
        current = lifecycle_action(aws, action.token)
        assert current.completed_at is None, "the hook was completed while the budget held the pods"
        state = world.state(target.node_name)
        assert state is not None and state["phase"] == "draining"
        # The deadline recorded is the hook's (300 s heartbeat timeout), not an invented one.
        assert "deadline" in state and state["deadline"] > state["since"]

        # The budget is relaxed: the pods go, and only then is the hook completed.
        budgets = world.kubesim.store.registry.lookup("policy", "v1", "poddisruptionbudgets")
        assert budgets is not None
        world.kubesim.store.delete(budgets, "default", "web")

        done = await until_completed(aws, action.token, within=40)
        assert not world.pods_on(target.node_name)
        assert done.result == "CONTINUE"
