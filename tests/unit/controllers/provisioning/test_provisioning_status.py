"""EC2NodeClass and NodePool status, pure: what Karpenter writes for each resolution outcome.

Sources: awslabs/operatorpkg ``status/condition_set.go`` (``Set``, ``recomputeRootCondition``),
aws/karpenter-provider-aws ``pkg/controllers/nodeclass/{subnet,securitygroup,ami,instanceprofile}.go``
``Reconcile``, kubernetes-sigs/karpenter ``pkg/controllers/nodepool/readiness/controller.go``
``Reconcile`` / ``setReadyCondition``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from kubespot.aws.amis import AmiInfo
from kubespot.aws.security_groups import SecurityGroupInfo
from kubespot.aws.subnets import SubnetInfo
from kubespot.controllers.provisioning.conditions import merge_conditions
from kubespot.controllers.provisioning.nodeclass_status import Resolution, nodeclass_status
from kubespot.controllers.provisioning.nodepool_status import nodeclass_ready, nodepool_status
from kubespot.scheduling.api.conditions import Condition, validation_condition
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec, SelectorTerm

T0 = datetime(2026, 11, 1, tzinfo=UTC)
VALID = validation_condition([])
SPEC = EC2NodeClassSpec(
    name="default",
    security_group_selector_terms=(SelectorTerm(tags={"k": "v"}),),
    instance_profile="KarpenterNodeProfile",
)
SUBNET = SubnetInfo("subnet-1", "us-east-1a", "use1-az1", 100)
GROUP = SecurityGroupInfo("sg-1", "nodes")
AMI = AmiInfo(
    "ami-1", "al2023", "2026-07-01T00:00:00.000Z", False, (("kubernetes.io/arch", "In", ("amd64",)),)
)
GOOD = Resolution([SUBNET], [GROUP], [AMI])


def _conds(status: dict[str, object]) -> dict[str, dict[str, object]]:
    return {c["type"]: c for c in status["conditions"]}  # type: ignore[attr-defined, index]


def test_resolved_class_is_ready_with_karpenters_status_fields() -> None:
    """All parts found: subnets {id, zone, zoneID}, securityGroups {id, name}, amis {id, name,
    requirements}, instanceProfile copied from the spec, every condition True, Ready True (the
    reconcilers' SetTrue; recomputeRootCondition)."""
    status = nodeclass_status(None, SPEC, VALID, GOOD, generation=1, now=T0)
    assert status["subnets"] == [{"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az1"}]
    assert status["securityGroups"] == [{"id": "sg-1", "name": "nodes"}]
    assert status["amis"] == [
        {
            "id": "ami-1",
            "name": "al2023",
            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
        }
    ]
    assert status["instanceProfile"] == "KarpenterNodeProfile"
    conds = _conds(status)
    # operatorpkg's order: by lastTransitionTime (stable: in the order they were set), Ready last.
    assert list(conds)[-1] == "Ready"
    assert list(conds) == [
        "ValidationSucceeded",
        "SubnetsReady",
        "SecurityGroupsReady",
        "AMIsReady",
        "InstanceProfileReady",
        "Ready",
    ]
    assert {t: c["status"] for t, c in conds.items()} == {
        "AMIsReady": "True",
        "InstanceProfileReady": "True",
        "Ready": "True",
        "SecurityGroupsReady": "True",
        "SubnetsReady": "True",
        "ValidationSucceeded": "True",
    }
    assert all(
        c["observedGeneration"] == 1 and c["lastTransitionTime"] == "2026-11-01T00:00:00Z"
        for c in conds.values()
    )


def test_nothing_found_gives_karpenters_reasons_and_unhealthy_dependents() -> None:
    """subnet.go SubnetsNotFound, securitygroup.go SecurityGroupsNotFound, ami.go AMINotFound with
    their messages; Ready False UnhealthyDependents listing them; the lists are removed."""
    old = nodeclass_status(None, SPEC, VALID, GOOD, generation=1, now=T0)
    status = nodeclass_status(
        old, SPEC, VALID, Resolution([], [], []), generation=1, now=T0 + timedelta(minutes=5)
    )
    conds = _conds(status)
    assert (conds["SubnetsReady"]["reason"], conds["SubnetsReady"]["message"]) == (
        "SubnetsNotFound",
        "SubnetSelector did not match any Subnets",
    )
    assert (conds["SecurityGroupsReady"]["reason"], conds["SecurityGroupsReady"]["message"]) == (
        "SecurityGroupsNotFound",
        "SecurityGroupSelector did not match any SecurityGroups",
    )
    assert (conds["AMIsReady"]["reason"], conds["AMIsReady"]["message"]) == (
        "AMINotFound",
        "AMISelector did not match any AMIs",
    )
    assert conds["Ready"]["status"] == "False" and conds["Ready"]["reason"] == "UnhealthyDependents"
    assert set(conds["Ready"]["message"].split(", ")) == {
        "AMIsReady=False",
        "SubnetsReady=False",
        "SecurityGroupsReady=False",
    }  # type: ignore[union-attr]
    assert "subnets" not in status and "securityGroups" not in status and "amis" not in status


def test_a_failed_part_keeps_its_last_good_status() -> None:
    """A part that failed (None) leaves its list and condition as they were, timestamps included."""
    old = nodeclass_status(None, SPEC, VALID, GOOD, generation=1, now=T0)
    status = nodeclass_status(
        old, SPEC, VALID, Resolution(None, [GROUP], None), generation=1, now=T0 + timedelta(hours=1)
    )
    assert status == old


def test_transition_time_moves_only_on_change() -> None:
    """condition_set.go Set: an unchanged condition keeps its lastTransitionTime; a changed one gets now."""
    old = merge_conditions(None, [Condition("A", "True", "A")], dependents=("A",), generation=1, now=T0)
    same = merge_conditions(
        old, [Condition("A", "True", "A")], dependents=("A",), generation=1, now=T0 + timedelta(hours=1)
    )
    assert same == old
    later = T0 + timedelta(hours=2)
    changed = merge_conditions(
        old, [Condition("A", "False", "Broken", "x")], dependents=("A",), generation=1, now=later
    )
    by = {c["type"]: c for c in changed}
    assert by["A"]["lastTransitionTime"] == "2026-11-01T02:00:00Z"
    assert (by["Ready"]["status"], by["Ready"]["reason"], by["Ready"]["message"]) == (
        "False",
        "UnhealthyDependents",
        "A=False",
    )


def test_unknown_dependent_makes_ready_unknown_reconciling() -> None:
    """A role whose instance profile was not made (no cluster name, or IAM failed with no earlier
    profile): InstanceProfileReady Unknown and Ready Unknown ReconcilingDependents, never True."""
    spec = EC2NodeClassSpec(
        name="r", security_group_selector_terms=SPEC.security_group_selector_terms, role="KarpenterNodeRole"
    )
    conds = _conds(nodeclass_status(None, spec, VALID, GOOD, generation=1, now=T0))
    assert conds["InstanceProfileReady"]["status"] == "Unknown"
    assert conds["InstanceProfileReady"]["reason"] == "InstanceProfileNotCreated"
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("Unknown", "ReconcilingDependents")


def test_invalid_class_only_validation_changes() -> None:
    """An invalid class is not resolved: ValidationSucceeded False with its reason, Ready False."""
    bad = Condition(
        "ValidationSucceeded",
        "False",
        "NodeClassValidationFailed",
        "spec.subnetSelectorTerms: cannot be empty",
    )
    conds = _conds(nodeclass_status(None, SPEC, bad, None, generation=3, now=T0))
    assert conds["ValidationSucceeded"]["reason"] == "NodeClassValidationFailed"
    assert conds["Ready"]["status"] == "False" and "ValidationSucceeded=False" in str(
        conds["Ready"]["message"]
    )
    # Not resolved, so never looked at: Unknown as operatorpkg's For leaves a dependent.
    assert (conds["SubnetsReady"]["status"], conds["SubnetsReady"]["reason"]) == (
        "Unknown",
        "AwaitingReconciliation",
    )


def test_unsupported_alias_is_a_false_condition() -> None:
    """ami.go: an AL2 alias on 1.33+ sets AMIsReady False with reason UnsupportedAlias."""
    res = Resolution([SUBNET], [GROUP], None, unsupported_alias="AL2 aliases are no longer supported")
    conds = _conds(nodeclass_status(None, SPEC, VALID, res, generation=1, now=T0))
    assert (conds["AMIsReady"]["status"], conds["AMIsReady"]["reason"]) == ("False", "UnsupportedAlias")


def _class(
    ready: str | None, reason: str = "", message: str = "", deleting: bool = False
) -> dict[str, object]:
    meta: dict[str, object] = {"name": "c"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-01T00:00:00Z"
    conds = (
        [] if ready is None else [{"type": "Ready", "status": ready, "reason": reason, "message": message}]
    )
    return {"metadata": meta, "status": {"conditions": conds}}


def test_nodeclass_ready_follows_readiness_controller() -> None:
    """readiness/controller.go: NotFound, Terminating, ReadinessUnknown, the class's own reason, True."""
    assert nodeclass_ready(None).reason == "NodeClassNotFound"
    assert nodeclass_ready(None).message == "NodeClass not found on cluster"
    assert nodeclass_ready(_class("True", deleting=True)).reason == "NodeClassTerminating"
    assert nodeclass_ready(_class(None)).reason == "NodeClassReadinessUnknown"
    assert nodeclass_ready(_class("Unknown")).message == "Node Class Readiness Unknown"
    failed = nodeclass_ready(_class("False", "UnhealthyDependents", "SubnetsReady=False"))
    assert (failed.status, failed.reason, failed.message) == (
        "False",
        "UnhealthyDependents",
        "SubnetsReady=False",
    )
    assert nodeclass_ready(_class("True")).is_true


def test_nodepool_ready_needs_validation_and_class() -> None:
    """nodepool_status.go: Ready = ValidationSucceeded and NodeClassReady."""
    status = nodepool_status(None, VALID, _class("True"), generation=2, now=T0)
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "NodeClassReady": "True",
        "Ready": "True",
        "ValidationSucceeded": "True",
    }
    bad = Condition("ValidationSucceeded", "False", "NodePoolValidationFailed", "weight must be ≤ 100")
    status = nodepool_status(status, bad, _class("True"), generation=3, now=T0)
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "UnhealthyDependents",
        "ValidationSucceeded=False",
    )


def test_transition_time_stays_when_only_reason_message_or_generation_change() -> None:
    """awslabs/operatorpkg status/condition_set.go Set: with the status unchanged the old
    LastTransitionTime is kept, while reason, message and observedGeneration take the new values."""
    old = merge_conditions(
        None, [Condition("A", "False", "Broken", "one")], dependents=("A",), generation=1, now=T0
    )
    later = T0 + timedelta(hours=1)
    new = merge_conditions(
        old, [Condition("A", "False", "StillBroken", "two")], dependents=("A",), generation=2, now=later
    )
    by = {c["type"]: c for c in new}
    assert (by["A"]["reason"], by["A"]["message"], by["A"]["observedGeneration"]) == ("StillBroken", "two", 2)
    assert by["A"]["lastTransitionTime"] == "2026-11-01T00:00:00Z"
    # Ready stayed False too (only its generation moved): its transition time stays as well.
    assert (by["Ready"]["status"], by["Ready"]["lastTransitionTime"]) == ("False", "2026-11-01T00:00:00Z")
    assert by["Ready"]["observedGeneration"] == 2


def test_unsupported_alias_keeps_the_amis_status() -> None:
    """aws/karpenter-provider-aws pkg/controllers/nodeclass/ami.go (AMI) Reconcile: on an
    UnsupportedAlias error only AMIsReady is set False; Status.AMIs is left as it was (only
    AMINotFound clears it)."""
    old = nodeclass_status(None, SPEC, VALID, GOOD, generation=1, now=T0)
    res = Resolution([SUBNET], [GROUP], None, unsupported_alias="AL2 aliases are no longer supported")
    status = nodeclass_status(old, SPEC, VALID, res, generation=2, now=T0 + timedelta(hours=1))
    assert status["amis"] == old["amis"]
    assert _conds(status)["AMIsReady"]["reason"] == "UnsupportedAlias"


def test_the_profile_made_for_a_role_is_the_status_and_outlives_a_failed_pass() -> None:
    """aws/karpenter-provider-aws ``pkg/controllers/nodeclass/instanceprofile.go`` ``Reconcile``:
    with ``spec.role`` the profile made for it is ``status.instanceProfile`` and
    InstanceProfileReady True; a pass whose IAM calls failed keeps it (the status keeps the last
    good answer, as for the other parts)."""
    spec = EC2NodeClassSpec(
        name="r", security_group_selector_terms=SPEC.security_group_selector_terms, role="KarpenterNodeRole"
    )
    made = replace(GOOD, instance_profile="prod_123")
    status = nodeclass_status(None, spec, VALID, made, generation=1, now=T0)
    assert status["instanceProfile"] == "prod_123"
    assert _conds(status)["InstanceProfileReady"]["status"] == "True"
    assert _conds(status)["Ready"]["status"] == "True"
    failed = nodeclass_status(status, spec, VALID, GOOD, generation=1, now=T0)
    assert failed["instanceProfile"] == "prod_123"
    assert _conds(failed)["InstanceProfileReady"]["status"] == "True"
