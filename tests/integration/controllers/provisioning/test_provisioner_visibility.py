"""What the provisioner makes visible: the NodeClaims it creates (a metric by NodePool, capacity type
and reason) and the NodePool whose requirements leave no instance type (a deduplicated Warning).

Sources: kubernetes-sigs/karpenter ``pkg/controllers/nodeclaim/lifecycle`` (``NodeClaimsCreatedTotal``
with ``reason`` and ``nodepool``), ``pkg/controllers/provisioning/scheduling/scheduler.go``
``NewScheduler`` and ``events.go`` ``NoCompatibleInstanceTypes`` (Warning on the NodePool, deduped
per NodePool UID for a minute).
"""

from __future__ import annotations

from test_prespin_split import fence, put_node, with_workload

from kubespot.observability.metrics import Metrics
from kubespot.scheduling.report import pod_story
from kubespot.sim.kubesim.testing import pod, until
from support.metrics_scrape import created
from support.provisioning_env import SMALL, Obj, nodepool, ready_pool, running


async def test_a_created_nodeclaim_is_counted_by_pool_capacity_type_and_reason() -> None:
    """provisioner.go CreateNodeClaims → NodeClaimsCreatedTotal{reason, nodepool}: pods pending for
    no node going away are "provisioned"; the capacity type is the claim's preferred one."""
    metrics = Metrics()
    async with running(metrics=metrics) as env:
        await env.create("api/v1/namespaces/default/pods", pod("web", requests=SMALL))
        (claim,) = await env.wait_claims(1)
        allowed = next(
            r["values"] for r in claim["spec"]["requirements"] if r["key"] == "karpenter.sh/capacity-type"
        )
        assert "spot" in allowed  # planned spot first: the cheaper
        await until(lambda: _true(bool(created(metrics))), within=1.0, interval=0.02)
        assert created(metrics) == {("general", "spot", "provisioned"): 1.0}


async def test_a_claim_the_capacity_split_pins_on_demand_is_counted_on_demand() -> None:
    """Review 15a #5. Core pkg/controllers/nodeclaim/lifecycle NodeClaimsCreatedTotal labels a
    claim by what it asks for; the capacity split (kubespot's, launching.md) narrows a claim planned
    spot to on-demand (onDemandBase=2), so the counter says on-demand, not the plan's spot."""
    metrics = Metrics()
    split = {"kubespot.io/capacity-split": "onDemandBase=2,onDemandPercentAboveBase=0"}
    async with running(metrics=metrics, annotations=split) as env:
        await env.create("api/v1/namespaces/default/pods", pod("web", requests=SMALL))
        (claim,) = await env.wait_claims(1)
        allowed = next(
            r["values"] for r in claim["spec"]["requirements"] if r["key"] == "karpenter.sh/capacity-type"
        )
        assert allowed == ["on-demand"]
        await until(lambda: _true(bool(created(metrics))), within=1.0, interval=0.02)
        assert created(metrics) == {("general", "on-demand", "provisioned"): 1.0}


async def test_a_nodepool_with_no_compatible_instance_type_gets_one_warning() -> None:
    """scheduler.go NewScheduler: a pool whose requirements filter out every available instance
    type is skipped with NoCompatibleInstanceTypes (Warning, "NodePool requirements filtered out
    all compatible available instance types"), deduplicated for a minute per NodePool UID: passes
    after the first publish nothing more."""
    async with running() as env:
        narrow = nodepool("narrow")
        narrow["spec"]["template"]["spec"]["requirements"].append(
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["no-such-type"]}
        )
        stored = await ready_pool(env, narrow)
        await env.create("api/v1/namespaces/default/pods", pod("web", requests=SMALL))
        await env.wait_claims(1)  # the general pool still serves the pod

        async def warned() -> list[Obj]:
            return await env.events("NoCompatibleInstanceTypes")

        (event,) = await until(warned, within=2.0, interval=0.02)
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "NodePool"
        assert event["involvedObject"]["name"] == "narrow"
        assert event["involvedObject"]["uid"] == stored["metadata"]["uid"]
        assert (
            event["message"] == "NodePool requirements filtered out all compatible available instance types"
        )
        passes = env.provisioner.passes
        await env.create("api/v1/namespaces/default/pods", pod("web-2", requests={"cpu": "3"}))
        await until(lambda: _true(env.provisioner.passes > passes), within=2.0, interval=0.02)
        (again,) = await env.events("NoCompatibleInstanceTypes")
        assert again.get("count", 1) == 1


async def test_the_plan_explains_the_offerings_the_launch_path_avoids() -> None:
    """Issue 14 §2: the provisioner plans with the unavailable-offerings cache (aws
    pkg/cache/unavailableofferings.go) and hands its marks to the plan's explanations: the pod's
    story names the marked pool, what marked it and for how long."""
    async with running() as env:
        env.unavailable.mark("spot", "small", "z1", "InsufficientInstanceCapacity")
        await env.create("api/v1/namespaces/default/pods", pod("web", requests=SMALL))
        await env.wait_claims(1)
        assert env.provisioner.last_plan is not None
        plan, avoided = env.provisioner.last_plan
        story = pod_story(plan, "default/web", avoided)
        assert story is not None
        assert "spot small in z1: unavailable (InsufficientInstanceCapacity) for another" in story


async def test_a_prespin_is_counted_and_told_on_the_replacement_claim() -> None:
    """launching.md §7 (kubespot's pre-spin) with Karpenter's replacement event
    (disruption/events/events.go Launching: Normal DisruptionLaunching "Launching NodeClaim: ..."):
    the claim made for a fenced node's pods is counted with reason prespin and names the node."""
    metrics = Metrics()
    async with running(doom=True, metrics=metrics) as env:
        await with_workload(env)
        await put_node(env, "spot-1", fence)
        (claim,) = await env.wait_claims(1, within=2.0)

        async def told() -> list[Obj]:
            return await env.events("DisruptionLaunching")

        (event,) = await until(told, within=2.0, interval=0.02)
        assert event["type"] == "Normal" and event["involvedObject"]["kind"] == "NodeClaim"
        assert event["involvedObject"]["name"] == claim["metadata"]["name"]
        assert (
            event["message"]
            == "Launching NodeClaim: Interruption, replacing node(s) spot-1 before their drain"
        )
        assert created(metrics) == {("general", "spot", "prespin"): 1.0}
        # Review 15a #7: kubectl describe (staging/src/k8s.io/kubectl/pkg/describe/describe.go
        # searchEvents) selects an object's events by name, namespace, kind and UID; Karpenter's
        # recorder always sets the UID (InvolvedObject: the NodeClaim).
        meta = claim["metadata"]
        selector = (
            f"involvedObject.name={meta['name']},involvedObject.namespace=,"
            f"involvedObject.kind=NodeClaim,involvedObject.uid={meta['uid']}"
        )
        async with env.http.get("/api/v1/events", params={"fieldSelector": selector}) as r:
            described = [e["reason"] for e in (await r.json())["items"]]
        assert "DisruptionLaunching" in described


async def _true(value: bool) -> bool:
    return value
