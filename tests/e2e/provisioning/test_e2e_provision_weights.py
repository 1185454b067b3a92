"""NodePool weights end to end: of two NodePools that both fit, the heavier one is used; once its
limit is reached the lighter one takes the rest."""

from __future__ import annotations

import pytest

from support.provision_e2e import E2E, label, pool, workload

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="package")]

TEST = "weights"
TYPE = "m5.xlarge"  # 3 pods of 1 CPU each
REPLICAS = 6


async def test_the_heavier_pool_first_then_the_lighter_past_its_limit(e2e: E2E) -> None:
    """kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/scheduler.go
    ``NewScheduler`` (NodePools ordered by ``spec.weight``, heaviest first: a pod goes to the first
    whose template and remaining limits fit) and ``subtractMax`` (a pool at its limit is skipped);
    pkg/utils/nodepool/nodepool.go ``OrderByWeight`` (equal weights: name descending)."""
    # Equal weights are ordered by name, descending: the lighter pool's name comes first that way,
    # so a provisioner that ignores weights (review 15b #3) puts the pods on it and fails here.
    heavy, light = f"{TEST}-a-heavy", f"{TEST}-b-light"
    await e2e.add_pools(
        pool(TEST, heavy, ["spot", "on-demand"], instance_types=(TYPE,), cpu_limit="4", weight=50),
        pool(TEST, light, ["spot", "on-demand"], instance_types=(TYPE,), weight=10),
    )
    await e2e.namespace(TEST)
    await e2e.deploy(TEST, workload("web", TEST, REPLICAS, cpu="1"))

    pods = await e2e.until(lambda: e2e.bound(TEST, REPLICAS), f"{REPLICAS} pods bound", within=20)

    nodes = {n["metadata"]["name"]: n for n in await e2e.nodes(TEST)}
    per_pool: dict[str | None, int] = {}
    for p in pods:
        owner = label(nodes[p["spec"]["nodeName"]], "karpenter.sh/nodepool")
        per_pool[owner] = per_pool.get(owner, 0) + 1
    assert per_pool == {heavy: 3, light: 3}, f"{per_pool}\n{e2e.log_tail()}"
    claims = await e2e.claims(TEST)
    by_pool = sorted(label(c, "karpenter.sh/nodepool") or "" for c in claims)
    assert by_pool == sorted([heavy, light]), by_pool
    assert len(e2e.instances(heavy)) == 1, "the heavy pool went past its 4-CPU limit"
