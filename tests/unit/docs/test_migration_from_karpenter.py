"""docs/migration-from-karpenter.md §2 (running kubespot instead of Karpenter) says what the code does:
Karpenter's NodeClaims are kubespot's to manage, Karpenter's instances are found by the tags both
launch with and count as managed by the queue processor, an instance Karpenter started for a claim in
mid-launch is collected, kubespot's NodeClaims carry its own hash
version, and no NodePool hash annotation is written; the page's links lead to files and headings.

Sources: core ``pkg/utils/nodeclaim`` ``IsManaged``; aws ``pkg/utils/utils.go`` ``GetTags`` and
``pkg/providers/instance/instance.go`` ``List`` (the launch tags and the listing's filters); core
``pkg/controllers/nodeclaim/disruption/drift.go`` ``areStaticFieldsDrifted`` and
``pkg/controllers/nodepool/hash/controller.go`` (why the version is not ``v3``,
docs/designs/launching.md §2b).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from pathlib import Path
from types import MappingProxyType

import pytest

from kubespot import cli
from kubespot.aws import fleet
from kubespot.aws.ec2 import InstanceInfo
from kubespot.aws.instances import Instance
from kubespot.cloud.provider import CloudNodeClaim
from kubespot.controllers.nodeclaim.garbage_collection import orphan_instances
from kubespot.controllers.nodeclaim.objects import managed
from kubespot.controllers.provisioning.nodeclaim_template import HASH_VERSION, HASH_VERSION_ANNOTATION
from unit.docs.doclinks import broken_links

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "migration-from-karpenter.md"
SRC = ROOT / "src" / "kubespot"

#: A NodeClaim as Karpenter v1 writes it (its NodePool's template, its hash version ``v3``).
KARPENTERS_CLAIM = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodeClaim",
    "metadata": {
        "name": "general-x7k2p",
        "labels": {"karpenter.sh/nodepool": "general"},
        "annotations": {"karpenter.sh/nodepool-hash": "6821555240594823858", HASH_VERSION_ANNOTATION: "v3"},
        "finalizers": ["karpenter.sh/termination"],
    },
    "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
}


def section(number: int) -> str:
    text = DOC.read_text()
    start = text.index(f"\n## {number}. ")
    return text[start : text.index("\n## ", start + 1)]


def test_karpenters_nodeclaims_are_kubespots_to_manage() -> None:
    """``IsManaged``: any claim of an EC2NodeClass, whoever created it; another provider's is not."""
    assert managed(KARPENTERS_CLAIM)
    aks = {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "default"}
    other = {**KARPENTERS_CLAIM, "spec": {"nodeClassRef": aks}}
    assert not managed(other)
    assert "`IsManaged`" in section(2)


def test_karpenters_instances_are_found_and_handled() -> None:
    """The tags both launch with (aws ``GetTags``) include every key kubespot lists instances by
    (``instance.go`` ``List``), and an instance with them is managed by the queue processor without
    NTH's tag."""
    tags = fleet.launch_tags(
        cluster="prod", nodepool="general", nodeclass="default", nodeclaim="general-x7k2p"
    )
    for key in ("karpenter.sh/nodepool", "karpenter.k8s.aws/ec2nodeclass", "eks:eks-cluster-name"):
        assert key in tags and f"`{key}`" in section(2), key
    # Karpenter tags the NodeClaim's name only after registration: leave it out.
    karpenters = {k: v for k, v in tags.items() if k != "karpenter.sh/nodeclaim"}
    info = InstanceInfo(
        "i-0123", "ip-10-0-0-1.ec2.internal", "eu-west-1a", "running", MappingProxyType(karpenters)
    )
    assert info.is_managed("aws-node-termination-handler/managed", "prod")
    assert not info.is_managed("aws-node-termination-handler/managed", "other-cluster")


def test_an_instance_karpenter_started_for_a_claim_in_mid_launch_is_collected() -> None:
    """A claim Karpenter had not marked ``Launched`` when it stopped: the instance it started has
    Karpenter's launch tags but no ``karpenter.sh/nodeclaim`` (aws ``tagInstance`` adds it after
    registration), so kubespot's garbage collection does not spare it for the claim, and once more
    than 30 s old it is an orphan (aws ``garbagecollection/controller.go`` ``Reconcile``)."""
    tags = fleet.launch_tags(cluster="prod", nodepool="general", nodeclass="default", nodeclaim="x")
    del tags["karpenter.sh/nodeclaim"]
    started = Instance("i-0123", "m5.large", "eu-west-1a", "running", "spot", tags=MappingProxyType(tags))
    assert started.nodeclaim == ""
    waiting = {**KARPENTERS_CLAIM, "status": {}}  # no providerID, no Launched=True
    as_listed = CloudNodeClaim(started.nodeclaim, started.provider_id, "m5.large", "eu-west-1a", "spot")
    young = dataclasses.replace(as_listed, launched_at=1000.0 - 10)
    old = dataclasses.replace(as_listed, launched_at=1000.0 - 31)
    assert orphan_instances([young], [waiting], now=1000.0) == []
    assert orphan_instances([old], [waiting], now=1000.0) == [old]
    assert "more than 30 s old" in section(2)


def test_the_hash_version_is_kubespots_own() -> None:
    """kubespot stamps its NodeClaims with ``kubespot-1``, never Karpenter's ``v3``; the page says
    the same value."""
    assert HASH_VERSION == "kubespot-1"
    assert f"`karpenter.sh/nodepool-hash-version: {HASH_VERSION}`" in section(2)


def test_no_nodepool_hash_annotation_is_written() -> None:
    """The page says kubespot writes no hash annotation on NodePools: only the NodeClaim template
    names the hash annotations."""
    writers = [
        p.relative_to(SRC).as_posix()
        for p in SRC.rglob("*.py")
        if "nodepool-hash" in p.read_text() or "HASH_VERSION_ANNOTATION" in p.read_text()
    ]
    assert writers == ["controllers/provisioning/nodeclaim_template.py"]
    assert "writes no hash annotation on NodePools" in DOC.read_text()


def test_the_pages_links_lead_to_files_and_headings() -> None:
    count, broken = broken_links(DOC)
    assert count and broken == []


def test_step_one_grants_the_instance_profile_group_and_section_six_does_not_deny_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Review 15a #3. aws pkg/controllers/nodeclass/instanceprofile.go (a class's ``spec.role``
    profile made) and the nodeclass termination's finalize (deleted with the class) need the IAM
    calls of the ``instance-profile`` group (Karpenter's ``AllowScopedInstanceProfile*``
    statements): the §2 step 1 command, run as written, prints them and the queue's; §6 no longer
    says a class must name its ``instanceProfile``."""
    (line,) = re.findall(r"`(kubespot aws policy [^`]+)`", section(2))
    filled = line.replace("NAME", "prod").replace("ACCOUNT", "123456789012")
    filled = filled.replace("REGION", "eu-west-1").replace("ROLE", "KarpenterNodeRole-prod")
    assert cli.main(shlex.split(filled)[1:]) == 0
    policy = json.loads(capsys.readouterr().out)
    actions = {
        a
        for s in policy["Statement"]
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert {"iam:CreateInstanceProfile", "iam:DeleteInstanceProfile", "iam:GetInstanceProfile"} <= actions
    assert {"ec2:CreateFleet", "sqs:ReceiveMessage"} <= actions
    not_yet = DOC.read_text().split("\n## 6. ", 1)[1]
    assert "spec.role" not in not_yet and "must name its `instanceProfile`" not in not_yet
