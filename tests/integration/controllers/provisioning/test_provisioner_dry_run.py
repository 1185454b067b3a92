"""The provisioner under ``node_actions.dry_run`` over HTTP (kubesim, ``FakeCloud``): pending pods are
batched and simulated as ever, and what would be created is said (log, a Normal ``DryRun`` event on
the NodePool, ``kubespot_nodeclaims_created_total{reason="dry_run"}``), but no NodeClaim is created
and no pod nominated.

Sources: aws/aws-node-termination-handler ``pkg/node/node.go`` (``CordonAndDrain``, ``Cordon``:
under ``DryRun`` the decision is logged, nothing is written) and its e2e dry-run twins
(``test/e2e/*-dry-run-test``: same scenario, asserting nothing changed); kubernetes-sigs/karpenter
``pkg/controllers/provisioning/provisioner.go`` ``Schedule`` (what is simulated) and
``CreateNodeClaims`` (what a dry run leaves out).
"""

from __future__ import annotations

from test_prespin_split import a_pass_after

from kubespot.observability.metrics import Metrics
from kubespot.sim.kubesim.testing import pod, until
from support.metrics_scrape import created
from support.provisioning_env import SMALL, running


async def test_a_dry_run_plans_and_says_what_it_would_create_but_creates_no_nodeclaim() -> None:
    """provisioner.go Schedule runs (the pass simulates the pending pods); CreateNodeClaims does not:
    no NodeClaim, no Nominated event; the decision (pods, types, capacity type, zone) is logged,
    told once on the NodePool as a Normal DryRun event and counted with reason dry_run, as NTH's
    dry run logs its cordon and drain instead of making them. Later passes (the pod is still
    pending) repeat neither the event nor the count within the events' timeout."""
    metrics = Metrics()
    async with running(metrics=metrics, dry_run=True) as env:
        for i in range(2):
            await env.create("api/v1/namespaces/default/pods", pod(f"web-{i}", requests=SMALL))

        async def told() -> list[dict[str, object]]:
            return await env.events("DryRun")

        (event,) = await until(told, within=5.0, interval=0.02)
        message = str(event["message"])
        assert message.startswith("Dry run: would create NodeClaim for 2 pods: nodepool general")
        assert "types small" in message and "capacity type spot" in message and "zones z1" in message
        assert event["type"] == "Normal"
        involved = event["involvedObject"]
        assert isinstance(involved, dict) and involved["kind"] == "NodePool"
        assert involved["name"] == "general"
        assert created(metrics) == {("general", "spot", "dry_run"): 1.0}
        await a_pass_after(env)
        await a_pass_after(env)
        last = env.provisioner.last_result
        assert last is not None and last.pending == 2 and not last.created
        assert last.would_create and last.would_create[0] == message.removeprefix("Dry run: ")
        assert await env.claims() == []
        assert await env.events("Nominated") == []
        assert len(await env.events("DryRun")) == 1
        assert created(metrics) == {("general", "spot", "dry_run"): 1.0}


async def test_without_dry_run_the_same_pods_get_a_nodeclaim_and_no_dry_run_event() -> None:
    """The twin: the same pods with the setting off (the default) get their NodeClaim
    (provisioner.go CreateNodeClaims) and no DryRun event."""
    async with running() as env:
        for i in range(2):
            await env.create("api/v1/namespaces/default/pods", pod(f"web-{i}", requests=SMALL))
        (claim,) = await env.wait_claims(1, within=5.0)
        assert claim["spec"]["resources"]["requests"]["pods"] == "2"
        assert await env.events("DryRun") == []
