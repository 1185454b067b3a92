"""Registration timeout end to end: an instance whose kubelet never registers (its EC2NodeClass's
user data gives the kubelet a node label it refuses to start with) is given up after the
registration timeout: its NodeClaim deleted, its instance terminated, its pods given a new claim.

The joiner plays the kubelet's start-up check (k8s cmd/kubelet/app/options/options.go
``ValidateKubeletFlags``: a ``--node-labels`` label in the ``kubernetes.io`` domain the kubelet may
not set is fatal, so no Node registers), docs/simulators/joiner.md.
"""

from __future__ import annotations

import time

import pytest
import yaml

from kubespot.sandbox.provision_world import nodeclass
from support.provision_e2e import E2E, NODECLASSES, REGISTRATION_TIMEOUT, Obj, condition, pool, workload

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="package")]

TEST = "registration"
#: A NodeConfig part the user added to the EC2NodeClass: nodeadm hands its flags to the kubelet.
BROKEN_USER_DATA = yaml.safe_dump(
    {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"kubelet": {"flags": ["--node-labels=kubernetes.io/e2e-broken=true"]}},
    }
)


async def test_a_node_that_never_registers_is_given_up_and_replaced(e2e: E2E) -> None:
    """kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/liveness.go ``Reconcile``
    (a NodeClaim not ``Registered`` within the registration TTL after its condition was set is
    deleted) and termination.go / aws pkg/cloudprovider/cloudprovider.go ``Delete`` (its instance
    terminated); provisioning/provisioner.go (its pods planned again onto a new NodeClaim).
    Through the operator's wiring (review 15b test gap), the pool's ``NodeRegistrationHealthy``:
    liveness.go ``updateNodePoolRegistrationHealth`` (False, reason ``RegistrationFailed``, for a
    claim that launched, once the last-4 buffer of pkg/state/nodepoolhealth/tracker.go holds 2
    failures: not after the first), and pkg/apis/v1/nodepool_status.go ``StatusConditions`` (not a
    ``Ready`` dependent: the pool stays Ready)."""
    classname, name = f"{TEST}-broken", f"{TEST}-pool"
    await e2e.world.create(NODECLASSES, nodeclass(classname, user_data=BROKEN_USER_DATA))
    await e2e.add_pools(pool(TEST, name, ["on-demand"], node_class=classname))
    await e2e.namespace(TEST)
    started = time.monotonic()
    await e2e.deploy(TEST, workload("web", TEST, 2, cpu="500m"))

    async def launched() -> Obj | None:
        claims = [c for c in await e2e.claims(TEST) if condition(c, "Launched") == "True"]
        return claims[0] if claims else None

    first = await e2e.until(launched, "a NodeClaim launched", within=10)
    first_name = first["metadata"]["name"]
    instance_id = str(first["status"]["providerID"]).rsplit("/", 1)[1]

    async def replaced() -> list[Obj] | None:
        claims = await e2e.claims(TEST)
        names = {c["metadata"]["name"] for c in claims}
        return claims if first_name not in names and claims else None

    what = f"{first_name} deleted and a new claim made"
    claims = await e2e.until(replaced, what, within=REGISTRATION_TIMEOUT + 10)
    waited = time.monotonic() - started
    # The timeout runs from the Registered condition's lastTransitionTime, a metav1.Time in whole
    # seconds (apimachinery pkg/apis/meta/v1/time.go MarshalJSON, RFC 3339 without fractions), so
    # it may fire up to a second before TIMEOUT real seconds have passed, as Karpenter's does.
    assert waited >= REGISTRATION_TIMEOUT - 1.0, f"given up after {waited:.1f} s, before the timeout"
    assert all(condition(c, "Registered") != "True" for c in claims)

    async def terminated() -> bool:
        (instance,) = [i for i in e2e.instances(name) if i["InstanceId"] == instance_id]
        return instance["State"]["Name"] in ("shutting-down", "terminated")

    await e2e.until(terminated, f"instance {instance_id} terminated", within=10)
    # The kubelet never came up, so no Node ever existed for it.
    assert not await e2e.nodes(TEST)
    # Given up for the registration timeout, not for any other reason.
    assert f"nodeclaim {first_name}: deleting (registration_timeout)" in e2e.log_messages(), e2e.log_tail()
    assert await e2e.metric("kubespot_nodeclaim_timeouts_total", kind="registration_timeout") >= 1

    # One failure of the last four: not unhealthy yet. The replacement never registers either:
    # two of four, so the pool is reported unhealthy, and it stays Ready (still used).
    health = condition(await e2e.nodepool(name), "NodeRegistrationHealthy")
    assert health != "False", f"unhealthy after one failure\n{e2e.log_tail()}"

    async def unhealthy() -> Obj | None:
        got = await e2e.nodepool(name)
        return got if condition(got, "NodeRegistrationHealthy") == "False" else None

    nodepool = await e2e.until(unhealthy, "NodeRegistrationHealthy False", within=REGISTRATION_TIMEOUT + 15)
    (health_condition,) = [
        c for c in nodepool["status"]["conditions"] if c["type"] == "NodeRegistrationHealthy"
    ]
    assert health_condition["reason"] == "RegistrationFailed", health_condition
    assert health_condition["message"] == "Failed to register node", health_condition
    assert condition(nodepool, "Ready") == "True", nodepool["status"]

    # The pods' third claim launches now: let its CreateFleet go out within this test, so the next
    # tests of the shared world see no launch of this pool (its timeout later only terminates it).
    earlier = {first_name} | {c["metadata"]["name"] for c in claims}

    async def third_launched() -> bool:
        return any(
            c["metadata"]["name"] not in earlier and condition(c, "Launched") == "True"
            for c in await e2e.claims(TEST)
        )

    await e2e.until(third_launched, "the third NodeClaim launched", within=10)
