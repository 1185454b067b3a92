"""A burst of interruptions while the Kubernetes API answers node patches and evictions with
409, 429 and 500 some of the time (kubesim fault injection): every node is still fenced and drained,
and every message deleted."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_world import controller_world, spot_warning, workload

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

FAULTS = [
    "verb=patch,resource=nodes,rate=0.3,code=409,count=40",
    "verb=patch,resource=nodes,rate=0.3,code=429,count=40",
    "verb=patch,resource=nodes,rate=0.3,code=500,count=40",
    "verb=create,resource=pods/eviction,rate=0.3,code=429,count=40",
    "verb=create,resource=pods/eviction,rate=0.3,code=500,count=40",
]


async def test_burst_under_api_errors_fences_and_drains_every_node(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 6), tmp=tmp_path, instances=5) as world:
        hit, spares = world.instances[:3], world.instances[3:]
        assert world.pods_on(hit[0].node_name)
        for rule in FAULTS:
            world.kubesim.faults.add(rule)
        await world.start_controller()
        for k, inst in enumerate(hit):
            world.send(spot_warning(inst.instance_id, event_id=f"e2e-burst-{k}"))

        async def all_done() -> bool:
            return world.queue_depth() == 0 and all(
                (world.state(i.node_name) or {}).get("phase") == "drained" for i in hit
            )

        await until(all_done, within=40)
        assert world.kubesim.faults.injected > 0, "no fault was injected"
        for inst in hit:
            assert world.fenced(inst.node_name), inst.node_name
            assert not world.pods_on(inst.node_name), inst.node_name
        for inst in spares:
            assert not world.fenced(inst.node_name)
