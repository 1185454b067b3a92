"""Fallback end to end: the spot market is dry (every spot pool full), CreateFleet answers
insufficient capacity, the provisioner falls back to on-demand and the pods run there.

Only the spot pools of ``FALLBACK_TYPES`` are emptied, and this test's NodePool allows only those
types: the other tests of the shared world keep a full market.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator

import pytest

from support.provision_e2e import E2E, FALLBACK_TYPES, label, pool, workload

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="package")]

TEST = "fallback"
REPLICAS = 4
#: Real seconds from the last refused spot call to the on-demand launch call: the claim's deletion,
#: the batcher's window closed at once (``watch_claims``), one pass and its CreateFleet. Measured
#: 0.8 s (2.7 s with the machine's two cores busy); the slow path, pods planned again only at the
#: provisioner's 10 s re-trigger of pods still pending, would take over 10 s. The bound is wide for
#: a loaded machine; the cause (the deletion closed the window) is asserted from the log besides.
FALLBACK_WITHIN = 9.0
#: The provisioner's log lines that show the cause (``Provisioner._released`` and its pass summary).
GONE = re.compile(r"provisioning: nodeclaim (\S+) is gone \(insufficient capacity")
PASS = re.compile(r"provisioning: pass created ([1-9]\d*) nodeclaims .*\(window (\w+) ")


@pytest.fixture
async def spot_exhausted(e2e: E2E) -> AsyncIterator[None]:
    """No room left in the spot pools of ``FALLBACK_TYPES`` (in every zone), restored afterwards."""
    for t in FALLBACK_TYPES:
        await asyncio.to_thread(e2e.aws.set_pool_capacity, 0, capacity_type="spot", instance_type=t)
    try:
        yield
    finally:
        for t in FALLBACK_TYPES:
            await asyncio.to_thread(e2e.aws.set_pool_capacity, None, capacity_type="spot", instance_type=t)


@pytest.mark.usefixtures("spot_exhausted")
async def test_spot_exhausted_falls_back_to_on_demand(e2e: E2E) -> None:
    """aws/karpenter-provider-aws pkg/providers/instance/instance.go ``launchInstance`` (CreateFleet's
    ``Errors`` → ``updateUnavailableOfferingsCache``: each insufficient-capacity pool marked in
    pkg/cache/unavailableofferings.go) and ``getCapacityType`` (on-demand once no spot offering is
    available); kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/launch.go
    ``launchNodeClaim`` (``InsufficientCapacityError``: Warning event, the NodeClaim deleted) and
    pkg/controllers/provisioning/provisioner.go (its pods planned again without the marked
    offerings)."""
    name = f"{TEST}-pool"
    await e2e.add_pools(pool(TEST, name, ["spot", "on-demand"], instance_types=FALLBACK_TYPES))
    await e2e.namespace(TEST)
    started = time.time()
    await e2e.deploy(TEST, workload("web", TEST, REPLICAS, cpu="500m"))
    pods = await e2e.until(lambda: e2e.bound(TEST, REPLICAS), f"{REPLICAS} pods bound", within=20)

    # The outcome: every pod runs on an on-demand node of the pool.
    nodes = {n["metadata"]["name"]: n for n in await e2e.nodes(TEST)}
    used = {p["spec"]["nodeName"] for p in pods}
    assert used <= set(nodes)
    assert {label(nodes[n], "karpenter.sh/capacity-type") for n in used} == {"on-demand"}

    # The mechanism, from EC2's side: spot asked first and refused on every override, then an
    # on-demand call that launched, and never a spot instance.
    # This pool's calls only: another test's claim (in the shared world) may launch meanwhile.
    calls = [
        c
        for c in e2e.fleet_calls(started)
        if {p["InstanceType"] for p in c["Request"]["Pools"]} <= set(FALLBACK_TYPES)
    ]
    refused = [c for c in calls if c["Request"]["DefaultTargetCapacityType"] == "spot"]
    launched = [c for c in calls if c["Launched"]]
    assert refused, calls
    assert calls[0] is refused[0], "the first launch did not try spot"
    for call in refused:
        assert not call["Launched"]
        codes = {e["ErrorCode"] for e in call["Errors"]}
        assert codes <= {"InsufficientInstanceCapacity", "UnfulfillableCapacity"} and codes, call
        assert len(call["Errors"]) == call["Request"]["Overrides"], "every spot pool answered no"
    assert launched and all(c["Request"]["DefaultTargetCapacityType"] == "on-demand" for c in launched)
    assert all(e["CapacityType"] == "on-demand" for c in launched for e in c["Launched"])
    assert launched[0]["Request"]["OnDemandAllocationStrategy"] == "lowest-price"
    first_launch = launched[0]
    last_refusal = max((c for c in refused if c["End"] <= first_launch["Start"]), key=lambda c: c["End"])
    fallback = first_launch["Start"] - last_refusal["End"]
    events = await e2e.events("default", "InsufficientCapacityError")
    refused_claims = {o["name"] for o in (e["involvedObject"] for e in events) if o["kind"] == "NodeClaim"}
    print(f"fallback: last refused spot call → on-demand launch call {fallback:.3f} s")
    assert 0 <= fallback <= FALLBACK_WITHIN, f"fallback took {fallback:.3f} s\n{e2e.log_tail()}"
    # The cause, whatever the machine's load: the refused claim's deletion released its pods and
    # closed the batcher's window at once ("now"), not the pending pods' 10 s re-trigger ("idle").
    messages = e2e.log_messages()
    gone = [i for i, m in enumerate(messages) if (g := GONE.match(m)) and g.group(1) in refused_claims]
    assert gone, e2e.log_tail()
    replanned = [PASS.match(m) for m in messages[gone[0] :]]
    closes = [m.group(2) for m in replanned if m is not None]
    assert closes and closes[0] == "now", f"re-plan window closed by {closes[:1]}\n{e2e.log_tail()}"

    # The product says so: a Warning event on the refused claim, and its metrics.
    assert any(e["involvedObject"]["kind"] == "NodeClaim" for e in events), events
    assert await e2e.metric("kubespot_launch_failures_total", capacity_type="spot") >= len(refused)
    assert await e2e.metric("kubespot_launch_fallbacks_total", kind="ice_replan") >= 1
    assert await e2e.metric("kubespot_ice_to_launch_seconds_count", capacity_type="on-demand") >= 1
    # The marked offerings are the spot pools, read at scrape time.
    assert await e2e.metric("kubespot_unavailable_offerings", capacity_type="spot") > 0
