"""The operator's list of controllers (``kubespot.operator.controllers``): which controllers the
settings switch on, which runnables each brings, and which of them run on the leader only.

The parts are stand-ins: building a controller makes no call (its runnables do, once started)."""

from __future__ import annotations

from datetime import UTC, datetime
from unittest.mock import MagicMock

from kubespot.cloud.signals import capacity_signals
from kubespot.config import loader
from kubespot.config.controller import ControllerSettings
from kubespot.config.launch import LaunchSettings
from kubespot.controllers.provisioning.controller import Provisioning
from kubespot.model.clock import SystemClock
from kubespot.observability.metrics import Metrics
from kubespot.operator.controllers import CONTROLLERS, Shared, new_controllers

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/kubespot"
#: The queue, node clean-up and isolation all switched on: every controller has its runnables.
EVERYTHING_ON = {
    "KUBESPOT_QUEUE_URL": QUEUE,
    "KUBESPOT_NODE_CLEANUP_ENABLED": "true",
    "KUBESPOT_ISOLATION_ENABLED": "true",
    "KUBESPOT_ISOLATION_QUARANTINE_GROUP": "sg-0123456789abcdef0",
    "KUBESPOT_PROVISIONING_ENABLED": "true",
}


def shared(**env: str) -> Shared:
    return Shared(
        settings=loader.load(ControllerSettings, env=env),
        clock=SystemClock(),
        metrics=Metrics(),
        kube=MagicMock(),
        aws=MagicMock(),
        instances=MagicMock(),
        nodes=MagicMock(),
        recorder=None,
        notifier=None,
        http_calls=None,
        identity="replica-1",
        capacity=capacity_signals(LaunchSettings(), SystemClock()),
    )


def wired(**env: str) -> dict[str, list[tuple[str, bool]]]:
    return {c.name: [(r.name, r.leader_only) for r in c.runnables] for c in new_controllers(shared(**env))}


def test_the_queue_path_runs_on_every_replica_and_the_duties_on_the_leader() -> None:
    assert wired(KUBESPOT_QUEUE_URL=QUEUE) == {
        "interruption": [("queue-consumer", False), ("node-handlers", False), ("scheduled-changes", False)],
        "housekeeping": [("managed-instances", True)],
    }


def test_response_actions_and_node_cleanup_are_leader_duties_when_switched_on() -> None:
    got = wired(**EVERYTHING_ON)
    assert got["housekeeping"] == [("managed-instances", True), ("node-cleanup", True)]
    assert got["response"] == [("response-actions", True)]


def test_without_a_queue_no_interruption_controller_runs() -> None:
    got = wired(KUBESPOT_ISOLATION_ENABLED="true", KUBESPOT_ISOLATION_QUARANTINE_GROUP="sg-0123456789abcdef0")
    assert "interruption" not in got and "response" in got


def test_runnable_names_are_unique_across_controllers() -> None:
    """They name the operator's tasks and the leader's duties (and /healthz's "stopped: …")."""
    got = wired(**EVERYTHING_ON)
    names = [n for runnables in got.values() for n, _ in runnables]
    assert len(names) == len(set(names)) == 17
    assert len(CONTROLLERS) == 5


def test_provisioning_runs_on_the_leader_alone_and_only_when_switched_on() -> None:
    """Karpenter's nodeclass/nodepool status controllers and its catalog refreshes run in the
    elected pod only (kubernetes-sigs/karpenter pkg/operator/operator.go builds its
    controller-runtime manager with leader election, whose controllers run on the leader)."""
    assert "provisioning" not in wired(KUBESPOT_QUEUE_URL=QUEUE)
    got = wired(KUBESPOT_PROVISIONING_ENABLED="true")
    assert got["provisioning"] == [
        ("nodeclass-nodepool-status", True),
        ("catalog-refresh", True),
        # Issue 14: the provisioner is Karpenter's singleton (provisioner.go, leader-elected).
        ("provisioner", True),
        ("pending-pods", True),
        ("nodeclaim-deletions", True),
        ("nodepool-counter", True),
        # Pre-spin: a node fenced or deleted starts a pass at once (launching.md §7).
        ("doomed-nodes", True),
        # What the launch path avoids, in the status ConfigMap (review 15a #6): the leader's.
        ("status-configmap", True),
        # The informers the passes read (issue 14: reads from watches), stopped with the lease.
        ("informers", True),
    ]
    assert "interruption" not in got
    (provisioning,) = [
        c for c in new_controllers(shared(KUBESPOT_PROVISIONING_ENABLED="true")) if c.name == "provisioning"
    ]
    checks = provisioning.checks(datetime.now(tz=UTC))
    # Not the leader yet: neither loop has started, so neither check fails.
    assert [(c.name, c.ok) for c in checks] == [
        ("provisioning", True),
        ("catalog", True),
        ("provisioner", True),
        ("informers", True),
    ]


def test_the_status_configmap_goes_to_the_controllers_own_namespace() -> None:
    """Review 15a #6, as Cluster Autoscaler's cluster-autoscaler-status (its own namespace, its
    name a flag): the pod's namespace (not the Lease's, which may be moved), the setting's name."""
    env = {
        "KUBESPOT_PROVISIONING_ENABLED": "true",
        "KUBESPOT_POD_NAMESPACE": "karpenter",
        "KUBESPOT_LEADER_ELECTION_NAMESPACE": "ops",
        "KUBESPOT_PROVISIONING_STATUS_CONFIGMAP": "mine",
    }
    (provisioning,) = [c for c in new_controllers(shared(**env)) if c.name == "provisioning"]
    parts = provisioning.parts["provisioning"]
    assert isinstance(parts, Provisioning) and parts.publisher is not None
    assert parts.publisher.where == "karpenter/mine"


def test_the_provisioner_plans_around_the_process_wide_unavailable_offerings() -> None:
    """docs/designs/launching.md §2: one UnavailableOfferings per process; the pools the
    interruption handler marks (Shared.capacity) are the ones the provisioner's simulations leave
    out (aws/karpenter-provider-aws pkg/cache/unavailableofferings.go: one cache, shared)."""
    parts_in = shared(KUBESPOT_PROVISIONING_ENABLED="true")
    (provisioning,) = [c for c in new_controllers(parts_in) if c.name == "provisioning"]
    parts = provisioning.parts["provisioning"]
    assert parts.unavailable is parts_in.capacity.unavailable  # type: ignore[attr-defined]
    assert parts.provisioner._unavailable is parts_in.capacity.unavailable  # type: ignore[attr-defined]
    # The launches mark that same cache (and order spot pools by the same risk).
    assert parts.cloud.unavailable is parts_in.capacity.unavailable  # type: ignore[attr-defined]
    assert parts.cloud.risk is parts_in.capacity.risk  # type: ignore[attr-defined]


def test_learn_from_interruptions_off_shares_nothing() -> None:
    """launch.learn_from_interruptions (docs/designs/launching.md §2, §7): on, the queue handler
    tells the process's CapacitySignals and the provisioner counts fenced nodes as going away; off,
    the handler tells nothing and only deleted nodes count (Karpenter's own ``Schedule``:
    kubernetes-sigs/karpenter pkg/controllers/provisioning/provisioner.go), as Karpenter and NTH
    run side by side."""
    for flag, learns in (("true", True), ("false", False)):
        parts_in = shared(**EVERYTHING_ON, KUBESPOT_LAUNCH_LEARN_FROM_INTERRUPTIONS=flag)
        by_name = {c.name: c for c in new_controllers(parts_in)}
        handler = by_name["interruption"].parts["handler"]
        assert (handler._capacity is parts_in.capacity) is learns  # type: ignore[attr-defined]
        assert (handler._capacity is None) is not learns  # type: ignore[attr-defined]
        parts = by_name["provisioning"].parts["provisioning"]
        assert parts.provisioner.prespin is learns  # type: ignore[attr-defined]
        assert parts.doom._fence is learns  # type: ignore[attr-defined]


def test_the_nodeclaim_lifecycle_runs_on_the_leader_with_provisioning_through_its_cloud() -> None:
    """Karpenter's nodeclaim lifecycle and garbage collection controllers run in the elected pod
    (kubernetes-sigs/karpenter pkg/controllers/controllers.go NewControllers, one manager with
    leader election); kubespot switches them on with provisioning and launches through the
    provisioning controller's one cloud provider (docs/designs/launching.md §2)."""
    assert "nodeclaim" not in wired(KUBESPOT_QUEUE_URL=QUEUE)
    got = wired(KUBESPOT_PROVISIONING_ENABLED="true")
    assert got["nodeclaim"] == [("nodeclaim-lifecycle", True), ("nodeclaim-garbage-collection", True)]
    controllers = {c.name: c for c in new_controllers(shared(KUBESPOT_PROVISIONING_ENABLED="true"))}
    cloud = controllers["provisioning"].parts["provisioning"].cloud  # type: ignore[attr-defined]
    parts = controllers["nodeclaim"].parts["nodeclaim"]
    assert parts.gc._cloud is cloud  # type: ignore[attr-defined]
    checks = controllers["nodeclaim"].checks(datetime.now(tz=UTC))
    assert [(c.name, c.ok) for c in checks] == [("nodeclaim", True), ("nodeclaim-gc", True)]


async def test_provisioning_without_a_region_stops_the_start_up() -> None:
    """The catalog and the selector terms are per region (Karpenter reads it from its settings)."""
    parts = shared(KUBESPOT_PROVISIONING_ENABLED="true")
    parts.aws.region = None
    (provisioning,) = [c for c in new_controllers(parts) if c.name == "provisioning"]
    assert provisioning.problems is not None
    assert "no AWS region" in (await provisioning.problems())[0]


def test_the_queue_check_fails_while_a_message_is_held_past_its_bound() -> None:
    (interruption, *_) = new_controllers(shared(KUBESPOT_QUEUE_URL=QUEUE))
    handler = interruption.parts["handler"]
    now = datetime(2026, 11, 25, tzinfo=UTC)
    (check,) = interruption.checks(now)
    assert check.name == "queue" and check.ok
    handler.overdue = lambda: ["msg-1 (node ip-10-0-0-1, 75s past)"]  # type: ignore[attr-defined]
    (check,) = interruption.checks(now)
    assert not check.ok and "1 held past their bound: msg-1" in check.detail


def test_the_controllers_metrics_are_wired_to_the_process_state() -> None:
    """Issue 14 §2: with provisioning on, the operator's one ``Metrics`` exports the NodeClaims by
    phase, the process-wide unavailable offerings and the pool risk (what the interruption handler
    marks, ``Shared.capacity``), read at scrape time."""
    s = shared(**EVERYTHING_ON)
    new_controllers(s)
    s.capacity.unavailable.mark("spot", "m5.large", "us-east-1a", "InsufficientInstanceCapacity")
    s.capacity.risk.interruption_warning("m5.large", "us-east-1a")
    body = s.metrics.render()[0].decode()
    assert 'kubespot_unavailable_offerings{capacity_type="spot"} 1.0' in body
    assert 'kubespot_pool_risk{instance_type="m5.large",zone="us-east-1a"} 0.99' in body  # decaying
    assert 'kubespot_nodeclaims{phase="pending"} 0.0' in body


def test_every_reader_of_nodes_and_nodeclaims_shares_the_process_informers() -> None:
    """kubernetes-sigs/karpenter pkg/operator/operator.go: one controller-runtime manager whose
    cache every controller reads. The provisioner, the NodePool counter, the status loop (NodePools,
    EC2NodeClasses, a deleting class's NodeClaims), the NodeClaim lifecycle loop and its garbage
    collector all read the one ``Informers`` the operator builds: one cache per resource path."""
    from kubespot.controllers.nodeclaim.controller import NodeClaims
    from kubespot.kube.informer import Informers

    parts_in = shared(KUBESPOT_PROVISIONING_ENABLED="true")
    built = {c.name: c for c in new_controllers(parts_in)}
    informers = parts_in.built["informers"]
    assert isinstance(informers, Informers)
    provisioning = built["provisioning"].parts["provisioning"]
    assert isinstance(provisioning, Provisioning) and provisioning.informers is informers
    nodes, claims = informers.get("api/v1/nodes"), informers.get("apis/karpenter.sh/v1/nodeclaims")
    counter = provisioning.counter
    assert counter is not None and (counter._nodes, counter._claims) == (nodes, claims)
    status = provisioning.status
    assert status._cache is not None
    assert status._cache["NodePool"] is informers.get("apis/karpenter.sh/v1/nodepools")
    assert status._cache["EC2NodeClass"] is informers.get("apis/karpenter.k8s.aws/v1/ec2nodeclasses")
    assert status._termination is not None and status._termination._claims is claims
    nodeclaims = built["nodeclaim"].parts["nodeclaim"]
    assert isinstance(nodeclaims, NodeClaims)
    assert nodeclaims.loop.informers is informers
    assert nodeclaims.loop._cache == {"NodeClaim": claims, "Node": nodes}
    assert nodeclaims.gc._cache == (claims, nodes)
