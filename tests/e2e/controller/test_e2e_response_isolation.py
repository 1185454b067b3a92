"""Isolation by the real controller: once the spot notice's drain is over (the state says drained),
every interface of the instance is on the quarantine group alone, the groups it had are recorded,
and nothing was touched before the drain ended."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from controller_world import spot_warning, workload
from response_world import interface_groups, record, response_world

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


async def test_drained_instance_is_moved_to_the_quarantine_group(aws: MotoServer, tmp_path: Path) -> None:
    async with response_world(aws, workload("web", 2), tmp=tmp_path) as (world, net):
        target, other = world.instances
        before = interface_groups(aws, target.instance_id)
        assert set(map(frozenset, before.values())) == {frozenset({net.nodes_sg})}
        await world.start_controller(
            KUBESPOT_ISOLATION_ENABLED="true",
            KUBESPOT_ISOLATION_QUARANTINE_GROUP="e2e-quarantine",  # by name, looked up in the VPC
        )
        world.send(spot_warning(target.instance_id))

        async def isolated() -> dict[str, Any]:
            rec = record(world, target.node_name)
            return rec if rec and rec.get("finished") else {}

        rec = await until(isolated, within=30)
        state = world.state(target.node_name) or {}
        assert state["phase"] == "drained" and rec["event"] == state["event_id"]
        # After the drain: the isolation is later than the state's move to drained.
        assert datetime.fromisoformat(rec["isolation"]["at"]) >= datetime.fromisoformat(state["since"])
        assert rec["isolation"]["state"] == "done"
        assert rec["isolation"]["replaced"] == {eni: [net.nodes_sg] for eni in before}
        assert interface_groups(aws, target.instance_id) == {eni: {net.quarantine_sg} for eni in before}
        # The other node's instance keeps its groups.
        assert set(map(frozenset, interface_groups(aws, other.instance_id).values())) == {
            frozenset({net.nodes_sg})
        }
        assert world.node_events(target.node_name, "Isolated") == 1
        assert "loadbalancer" not in rec  # not enabled
