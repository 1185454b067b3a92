"""Isolation by the real controller: once the spot notice's drain is over (the state says drained),
every interface of the instance is on the quarantine group alone, the groups it had are recorded,
and nothing was touched before the drain ended."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from controller_world import MANAGED_TAG, ControllerWorld, spot_warning, workload
from response_world import (
    STATE,
    Phase,
    agent_state,
    finished_record,
    interface_groups,
    record,
    response_world,
)

from kubespot.config.kube import KubeSettings
from kubespot.kube import connect
from kubespot.records.actions import ACTIONS_ANNOTATION, ActionsRecord
from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

ISOLATE = {
    "KUBESPOT_ISOLATION_ENABLED": "true",
    "KUBESPOT_ISOLATION_QUARANTINE_GROUP": "e2e-quarantine",
}


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
        await world.assert_node_events(target.node_name, "Isolated", 1)
        assert "loadbalancer" not in rec  # not enabled


async def _annotate(world: ControllerWorld, node_name: str, notes: dict[str, str]) -> None:
    """Write annotations as an agent can (any Node: the agents' RBAC patches Nodes)."""
    kube = connect(KubeSettings(kubeconfig=str(world.kubesim.kubeconfig_path)))
    try:
        await kube.set_annotations(node_name, notes)
    finally:
        await kube.close()


async def test_an_instance_named_in_annotations_is_not_isolated(aws: MotoServer, tmp_path: Path) -> None:
    """Issue 10: the instance comes from the Node's providerID. A state and an actions record an
    agent wrote naming another (managed) instance isolate the node's own instance, not that one."""
    async with response_world(aws, tmp=tmp_path) as (world, net):
        target, other = world.instances
        now = datetime.now(tz=UTC)
        forged = ActionsRecord(
            event="spot-itn-e2e-agent",
            runner="ip-agent/1",
            at=now - timedelta(hours=1),  # stale: any runner takes it over at once
            kind="spot-itn",
            instance=other.instance_id,
            source="imds",
        )
        state = agent_state(
            "spot-itn-e2e-agent",
            other.instance_id,
            Phase.DRAINED,
            since=now,
            deadline=now + timedelta(minutes=2),
        )
        await _annotate(world, target.node_name, {STATE: state, ACTIONS_ANNOTATION: forged.encode()})
        await world.start_controller(**ISOLATE)

        rec = await finished_record(world, target.node_name)
        assert rec["isolation"]["state"] == "done"
        assert set(map(frozenset, interface_groups(aws, target.instance_id).values())) == {
            frozenset({net.quarantine_sg})
        }
        assert set(map(frozenset, interface_groups(aws, other.instance_id).values())) == {
            frozenset({net.nodes_sg})
        }


async def test_an_instance_without_the_managed_tag_is_not_isolated(aws: MotoServer, tmp_path: Path) -> None:
    """Issue 10: isolation requires the managed tag on the instance (as the IAM policy does)."""
    async with response_world(aws, tmp=tmp_path) as (world, net):
        target, _ = world.instances
        aws.client("ec2").delete_tags(Resources=[target.instance_id], Tags=[{"Key": MANAGED_TAG}])
        now = datetime.now(tz=UTC)
        state = agent_state(
            "spot-itn-e2e-agent",
            target.instance_id,
            Phase.DRAINED,
            since=now,
            deadline=now + timedelta(minutes=2),
        )
        await _annotate(world, target.node_name, {STATE: state})
        await world.start_controller(**ISOLATE)

        rec = await finished_record(world, target.node_name)
        assert rec["isolation"]["state"] == "skipped"
        assert MANAGED_TAG in rec["isolation"]["error"]
        assert set(map(frozenset, interface_groups(aws, target.instance_id).values())) == {
            frozenset({net.nodes_sg})
        }
        await world.assert_node_events(target.node_name, "IsolationSkipped", 1)
