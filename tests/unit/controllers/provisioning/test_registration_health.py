"""A NodePool's ``NodeRegistrationHealthy`` (``controllers.provisioning.registration_health`` and its
writer, the status loop).

Sources: kubernetes-sigs/karpenter ``pkg/state/nodepoolhealth/tracker.go`` (``Tracker.Status``:
4 outcomes, unhealthy at half the buffer's size failed; ``SetStatus``: a restart's hydration),
``pkg/controllers/nodeclaim/lifecycle/registration.go`` and ``liveness.go``
``updateNodePoolRegistrationHealth`` (``DryRun`` then ``Update``; the reasons),
``pkg/controllers/nodepool/registrationhealth/controller.go`` ``Reconcile`` (reset on a NodePool or
NodeClass change; ``nodeClassObservedGeneration``) and ``pkg/apis/v1/nodepool_status.go``
``StatusConditions`` (not a ``Ready`` dependent).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from test_status_loop_lifecycle import RESYNC, Api, Resolver, nodeclass, nodepool_obj, stop

from kubespot.config.provisioning import ProvisioningSettings
from kubespot.controllers.provisioning.registration_health import (
    NODE_REGISTRATION_HEALTHY,
    RegistrationHealth,
)
from kubespot.controllers.provisioning.status_loop import StatusLoop
from kubespot.scheduling.api.conditions import Condition
from support.clocks import ManualClock, settle

T0 = datetime(2026, 11, 1, tzinfo=UTC)
LAUNCHED = Condition("Launched", "True", "Launched")
NOT_LAUNCHED = Condition("Launched", "False", "LaunchFailed", "no subnet")


def _status(cond: Condition | None) -> dict[str, Any] | None:
    return None if cond is None else {"status": cond.status}


def test_two_failures_of_four_make_the_pool_unhealthy_and_three_successes_heal_it() -> None:
    """tracker.go ``Status`` counts failures against ``BufferSize`` (4) with ``ThresholdFalse``
    0.5; liveness.go sets False only when the buffer with the failure added is unhealthy, and
    registration.go True only when the buffer with the success added is healthy."""
    health = RegistrationHealth()
    current: dict[str, Any] | None = {"status": "Unknown"}
    # One failure of one: 1/4 < 0.5, healthy; but a failure never sets True: still Unknown.
    assert health.outcome("uid", False, current, LAUNCHED) is None
    change = health.outcome("uid", False, current, LAUNCHED)
    assert change == Condition(
        NODE_REGISTRATION_HEALTHY, "False", "RegistrationFailed", "Failed to register node"
    )
    current = _status(change)
    # [F, F, T] and [F, F, T, T]: two failures of four, still unhealthy.
    assert health.outcome("uid", True, current) is None
    assert health.outcome("uid", True, current) is None
    # The oldest failure drops out: [F, T, T, T] is healthy.
    change = health.outcome("uid", True, current)
    assert change == Condition(NODE_REGISTRATION_HEALTHY, "True", NODE_REGISTRATION_HEALTHY)
    # Already True: nothing to write.
    assert health.outcome("uid", True, _status(change)) is None


def test_a_claim_that_never_launched_lends_its_launch_reason() -> None:
    """liveness.go ``updateNodePoolRegistrationHealth``: a launch timeout makes the pool
    unhealthy with the claim's ``Launched`` reason and message."""
    health = RegistrationHealth()
    health.outcome("uid", False, None, NOT_LAUNCHED)
    change = health.outcome("uid", False, None, NOT_LAUNCHED)
    assert change == Condition(NODE_REGISTRATION_HEALTHY, "False", "LaunchFailed", "no subnet")


def test_a_restart_refills_the_buffer_from_the_condition() -> None:
    """registrationhealth/controller.go: an empty buffer (Karpenter restarted) is hydrated from
    the condition (False: two failures), so one success does not make an unhealthy pool healthy."""
    health = RegistrationHealth()
    assert health.outcome("uid", True, {"status": "False"}) is None  # [F, F, T]: 2/4 unhealthy
    fresh = RegistrationHealth()
    assert fresh.outcome("uid", True, {"status": "Unknown"}) is not None  # [T]: healthy


def test_a_change_of_the_pool_or_its_class_resets_the_condition() -> None:
    """registrationhealth/controller.go ``Reconcile``: missing, the class's generation not the
    observed one, or the condition observed at another pool generation → Unknown and the buffer
    emptied; a pool whose class is not found is left alone."""
    health = RegistrationHealth()
    cond = {"type": NODE_REGISTRATION_HEALTHY, "status": "False", "observedGeneration": 2}
    status = {"nodeClassObservedGeneration": 5, "conditions": [cond]}
    assert health.reconcile("uid", 2, status, 5) is None
    assert health.status("uid") == "Unhealthy"  # hydrated from the condition
    assert health.reconcile("uid", 2, status, None) is None  # class not found
    reset = health.reconcile("uid", 3, status, 5)  # the NodePool's spec changed
    assert reset is not None and (reset.status, reset.reason) == ("Unknown", "AwaitingReconciliation")
    assert health.status("uid") == "Unknown"
    assert health.reconcile("uid", 2, status, 6) is not None  # the class changed
    assert health.reconcile("uid", 2, {"conditions": []}, 5) is not None  # never set


async def test_the_status_loop_writes_registration_health_without_touching_ready() -> None:
    """The NodePool's one status writer: the claims' outcomes (registration.go / liveness.go
    ``updateNodePoolRegistrationHealth``) become ``NodeRegistrationHealthy``, which is not one of
    ``Ready``'s dependents (nodepool_status.go ``StatusConditions``); an outcome of a claim another
    NodePool of that name owned (another UID) is not counted; a spec change resets it."""
    clock = ManualClock(T0)
    pool = nodepool_obj()
    pool["metadata"]["uid"] = "pool-1"
    pools = Api([pool])
    loop = StatusLoop(
        nodeclasses=Api([nodeclass(1, 1)]),  # type: ignore[arg-type]
        nodepools=pools,  # type: ignore[arg-type]
        resolver=Resolver(),  # type: ignore[arg-type]
        settings=ProvisioningSettings(nodeclass_resync_interval=RESYNC),
        clock=clock,
    )
    task = asyncio.create_task(loop.run())

    def conds() -> dict[str, dict[str, Any]]:
        return {c["type"]: c for c in pools.puts[-1]["status"]["conditions"]}

    try:
        await settle()
        assert conds()[NODE_REGISTRATION_HEALTHY]["status"] == "Unknown"
        assert pools.puts[-1]["status"]["nodeClassObservedGeneration"] == 1
        assert conds()["Ready"]["status"] == "True"
        writes = len(pools.puts)
        loop.registration_outcome("general", "someone-else", False, LAUNCHED)
        loop.registration_outcome("general", "someone-else", False, LAUNCHED)
        await settle()
        assert len(pools.puts) == writes  # not this pool's claims
        loop.registration_outcome("general", "pool-1", False, LAUNCHED)
        loop.registration_outcome("general", "pool-1", False, LAUNCHED)
        await settle()
        health = conds()[NODE_REGISTRATION_HEALTHY]
        assert (health["status"], health["reason"]) == ("False", "RegistrationFailed")
        assert conds()["Ready"]["status"] == "True"  # still used for provisioning
        # The NodePool's spec changes (generation 2): the watch brings it, the condition resets.
        edited = {**pools.items[0], "metadata": {**pools.items[0]["metadata"], "generation": 2}}
        loop._changed("NodePool", "MODIFIED", edited)
        loop._wake.set()
        await settle()
        health = conds()[NODE_REGISTRATION_HEALTHY]
        assert (health["status"], health["observedGeneration"]) == ("Unknown", 2)
        assert loop.health.status("pool-1") == "Unknown"
    finally:
        await stop(task)
