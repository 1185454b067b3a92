"""The provisioning controller's status loop over HTTP: kubesim serving the chart's CRDs, moto (with
kubespot's SSM AMI parameters) answering EC2 and SSM through boto3.

Sources: aws/karpenter-provider-aws ``pkg/controllers/nodeclass/controller.go`` (Reconcile: the
sub-reconcilers, the status patched only when it changed), ``subnet.go``, ``securitygroup.go``,
``ami.go``, ``instanceprofile.go``; kubernetes-sigs/karpenter
``pkg/controllers/nodepool/validation/controller.go`` and ``readiness/controller.go`` (Reconcile);
apiextensions-apiserver ``pkg/registry/customresource/strategy.go`` (``PrepareForUpdate``: a write
to the status subresource changes only status, so the generation stays).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from kubespot.aws import AwsClients, AwsError
from kubespot.aws.instance_profiles import InstanceProfiles
from kubespot.aws.launch_templates import LaunchTemplates
from kubespot.config.aws import AwsSettings
from kubespot.config.kube import KubeSettings
from kubespot.config.provisioning import ProvisioningSettings
from kubespot.controllers.provisioning.controller import NODECLASSES, NODEPOOLS
from kubespot.controllers.provisioning.nodeclass_termination import FINALIZER, NodeClassTermination
from kubespot.controllers.provisioning.provisioner import NODECLAIMS
from kubespot.controllers.provisioning.resolver import NodeClassResolver
from kubespot.controllers.provisioning.status_loop import StatusLoop
from kubespot.kube import connect
from kubespot.kube.custom import CustomObjects
from kubespot.kube.events import EventRecorder
from kubespot.kube.informer import Informers
from kubespot.model import SystemClock
from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig

ROOT = Path(__file__).resolve().parents[4]
CRDS = ROOT / "deploy" / "helm" / "kubespot" / "crds"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
Obj = dict[str, Any]
CLUSTER = "prod"


class FlakyClients(AwsClients):
    """moto through boto3, except while ``failing``: EC2 answers throttled, as under load."""

    failing = False

    async def call(self, service: Any, operation: str, **kwargs: Any) -> dict[str, Any]:
        if self.failing:
            raise AwsError(
                "RequestLimitExceeded",
                "Request limit exceeded.",
                service=service,
                operation=operation,
                throttled=True,
            )
        return await super().call(service, operation, **kwargs)


@dataclass
class Env:
    http: aiohttp.ClientSession
    loop: StatusLoop
    aws: FlakyClients
    subnets: list[str]
    group: str
    #: What the loop handed the cloud per class (``on_resolved``).
    resolved: dict[str, Any] = field(default_factory=dict)
    kubeconfig: str = ""
    #: The process's informers the loop reads (``None`` never: the fixture always makes them).
    informers: Informers | None = None
    sim: KubeSim | None = None
    #: The loop's task (a test stops and starts it again to play a lost and won-back lease).
    task: asyncio.Task[None] | None = None

    async def create(self, path: str, body: Obj) -> Obj:
        async with self.http.post(f"/{path}", json=body) as r:
            assert r.status == 201, await r.text()
            return dict(await r.json())

    async def get(self, path: str, name: str) -> Obj:
        async with self.http.get(f"/{path}/{name}") as r:
            return dict(await r.json())

    async def patch(self, path: str, name: str, body: Obj) -> Obj:
        headers = {"Content-Type": "application/merge-patch+json"}
        async with self.http.patch(f"/{path}/{name}", json=body, headers=headers) as r:
            assert r.status == 200, await r.text()
            return dict(await r.json())

    async def until(self, path: str, name: str, check: Callable[[Obj], bool], within: float = 5.0) -> Obj:
        deadline = asyncio.get_running_loop().time() + within
        while True:
            obj = await self.get(path, name)
            if check(obj):
                return obj
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{name}: {obj.get('status')}")
            await asyncio.sleep(0.02)


def conditions(obj: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def is_(type_: str, status: str) -> Callable[[Obj], bool]:
    return lambda obj: conditions(obj).get(type_, {}).get("status") == status


def nodeclass(name: str, **spec: Any) -> Obj:
    body = {
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "prod"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "prod"}}],
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "instanceProfile": "KarpenterNodeInstanceProfile",
        **spec,
    }
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": body,
    }


def nodepool(name: str, nodeclass_name: str) -> Obj:
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass_name}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"nodeClassRef": ref, "requirements": []}}},
    }


async def install_crds(http: aiohttp.ClientSession) -> None:
    for path in sorted(CRDS.glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            async with http.post(CRD_PATH, json=crd) as r:
                assert r.status == 201, await r.text()


@pytest.fixture
async def env(aws_env: MotoServer) -> AsyncIterator[Env]:
    async with running(aws_env, crds=True) as e:
        yield e


@contextlib.asynccontextmanager
async def running(aws_env: MotoServer, *, crds: bool) -> AsyncIterator[Env]:
    ec2 = aws_env.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{aws_env.region}{z}")[
            "Subnet"
        ]["SubnetId"]
        for i, z in enumerate("ab")
    ]
    group = ec2.create_security_group(GroupName="nodes", Description="nodes", VpcId=vpc)["GroupId"]
    ec2.create_tags(Resources=[*subnets, group], Tags=[{"Key": "karpenter.sh/discovery", "Value": "prod"}])
    idle = ControllerConfig(scheduler=False, kubelet=False, workloads=False)
    settings = ProvisioningSettings(nodeclass_resync_interval=0.3, retry_base=0.05, retry_cap=0.2)
    async with KubeSim(controllers=idle) as sim, aiohttp.ClientSession(sim.url) as http:
        if crds:
            await install_crds(http)
        kube = connect(KubeSettings(kubeconfig=str(sim.kubeconfig_path)))
        aws = FlakyClients(
            AwsSettings(region=aws_env.region, endpoint_url=aws_env.endpoint_url, max_attempts=1)
        )
        classes = CustomObjects(kube, NODECLASSES)
        profiles = InstanceProfiles(aws, CLUSTER, aws_env.region)
        resolved: dict[str, Any] = {}
        # The operator's wiring (controller.build): the loop reads from the process's informers; a
        # CRD not served yet is looked for again every 0.2 s instead of 10 s.
        informers = Informers(kube, unserved_retry=0.2)
        loop = StatusLoop(
            nodeclasses=classes,
            nodepools=CustomObjects(kube, NODEPOOLS),
            resolver=NodeClassResolver(aws, classes.server_version, profiles),
            settings=settings,
            clock=SystemClock(),
            on_resolved=resolved.__setitem__,
            termination=NodeClassTermination(
                classes,
                informers.get(NODECLAIMS),
                profiles,
                LaunchTemplates(aws, cluster=CLUSTER),
                recorder=EventRecorder(kube=kube),
            ),
            informers=informers,
        )
        env = Env(http, loop, aws, subnets, group, resolved, str(sim.kubeconfig_path), informers, sim)
        env.task = asyncio.create_task(loop.run())
        try:
            yield env
        finally:
            env.task.cancel()
            await asyncio.gather(env.task, return_exceptions=True)
            await asyncio.gather(*(i.stop() for i in informers))
            await aws.close()
            await kube.close()


async def test_class_and_pool_become_ready_with_karpenters_status(env: Env) -> None:
    await env.create(NODECLASSES, nodeclass("default"))
    await env.create(NODEPOOLS, nodepool("general", "default"))
    cls = await env.until(NODECLASSES, "default", is_("Ready", "True"))
    status = cls["status"]
    assert {s["id"] for s in status["subnets"]} == set(env.subnets)
    assert all(s["zone"] and s["zoneID"] for s in status["subnets"])
    assert status["securityGroups"] == [{"id": env.group, "name": "nodes"}]
    assert len(status["amis"]) == 5 and status["instanceProfile"] == "KarpenterNodeInstanceProfile"
    # The cloud is told what launching needs (AwsCloud.set_resolved): the same parts, and the spec.
    handed = env.resolved["default"]
    assert {s.id for s in handed.subnets} == set(env.subnets) and len(handed.amis) == 5
    assert [g.id for g in handed.security_groups] == [env.group] and handed.spec.name == "default"
    assert set(conditions(cls)) == {
        "AMIsReady",
        "InstanceProfileReady",
        "Ready",
        "SecurityGroupsReady",
        "SubnetsReady",
        "ValidationSucceeded",
    }
    assert cls["metadata"]["generation"] == 1  # status writes do not bump it
    pool = await env.until(NODEPOOLS, "general", is_("Ready", "True"))
    assert conditions(pool)["NodeClassReady"]["status"] == "True"
    # Nothing changed: later passes (resync every 0.3 s) write nothing.
    version = (await env.get(NODECLASSES, "default"))["metadata"]["resourceVersion"]
    writes = dict(env.loop.writes)
    await asyncio.sleep(0.7)
    assert (await env.get(NODECLASSES, "default"))["metadata"]["resourceVersion"] == version
    assert env.loop.writes == writes


async def test_aws_side_changes_show_after_the_resync(env: Env, aws_env: MotoServer) -> None:
    """securitygroup.go / ami.go requeue after 5 minutes (here 0.3 s): a group tagged later in AWS
    appears without any change to the object."""
    await env.create(NODECLASSES, nodeclass("default"))
    await env.until(NODECLASSES, "default", is_("Ready", "True"))
    ec2 = aws_env.client("ec2")
    vpc = ec2.describe_security_groups(GroupIds=[env.group])["SecurityGroups"][0]["VpcId"]
    late = ec2.create_security_group(GroupName="late", Description="late", VpcId=vpc)["GroupId"]
    ec2.create_tags(Resources=[late], Tags=[{"Key": "karpenter.sh/discovery", "Value": "prod"}])
    cls = await env.until(NODECLASSES, "default", lambda o: len(o["status"].get("securityGroups", [])) == 2)
    assert {g["id"] for g in cls["status"]["securityGroups"]} == {env.group, late}
    assert cls["metadata"]["generation"] == 1


async def test_a_spec_change_is_resolved_at_once_and_reaches_the_pool(env: Env) -> None:
    await env.create(NODECLASSES, nodeclass("default"))
    await env.create(NODEPOOLS, nodepool("general", "default"))
    await env.until(NODEPOOLS, "general", is_("Ready", "True"))
    await env.patch(
        NODECLASSES,
        "default",
        {"spec": {"subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "gone"}}]}},
    )
    cls = await env.until(NODECLASSES, "default", is_("SubnetsReady", "False"))
    assert conditions(cls)["SubnetsReady"]["reason"] == "SubnetsNotFound"
    assert "subnets" not in cls["status"]
    pool = await env.until(NODEPOOLS, "general", is_("NodeClassReady", "False"))
    ready = conditions(pool)["NodeClassReady"]
    assert (ready["reason"], ready["message"]) == ("UnhealthyDependents", "SubnetsReady=False")


async def test_the_loop_reads_the_shared_informers(env: Env) -> None:
    """Karpenter's nodeclass and nodepool controllers read controller-runtime's shared cache
    (manager.go: one informer per kind for every controller): the loop keeps no LIST or WATCH of
    its own. With another reader of the same kinds (the provisioner's passes), over a resync (0.3 s)
    and the loop's status writes, the API server serves one LIST and one WATCH of each kind, and
    that reader sees what the loop wrote."""
    assert env.informers is not None
    await asyncio.gather(*(env.informers.get(p).wait_synced() for p in (NODEPOOLS, NODECLASSES)))
    await env.create(NODECLASSES, nodeclass("default"))
    await env.create(NODEPOOLS, nodepool("general", "default"))
    await env.until(NODEPOOLS, "general", is_("Ready", "True"))
    await asyncio.sleep(0.35)  # a resync
    assert env.sim is not None
    requests = env.sim.server.requests
    for kind in ("nodepools", "ec2nodeclasses"):
        assert (requests[f"list {kind}"], requests[f"watch {kind}"]) == (1, 1), dict(requests)
    pool = env.informers.get(NODEPOOLS).get("general")
    assert pool is not None and conditions(pool)["Ready"]["status"] == "True"


async def test_a_lease_won_back_makes_no_pass_before_the_caches_synced(env: Env) -> None:
    """controller-runtime ``pkg/internal/controller/controller.go`` ``Start``: a controller's
    workers start once its sources' caches have synced (``WaitForSync``). The lease lost (the loop
    and the informers stopped, the caches dropped) and won back while the EC2NodeClass LIST is
    slow: no pass runs on the empty cache, and the cloud is never told the class is gone (it would
    launch nothing through it meanwhile); once listed, the loop goes on."""
    await env.create(NODECLASSES, nodeclass("default"))
    await env.until(NODECLASSES, "default", is_("Ready", "True"))
    assert env.task is not None and env.informers is not None and env.sim is not None
    assert env.resolved["default"] is not None
    env.task.cancel()
    await asyncio.gather(env.task, return_exceptions=True)
    await asyncio.gather(*(i.stop() for i in env.informers))
    env.sim.faults.add(verb="list", resource="ec2nodeclasses", latency_ms=400)
    env.task = asyncio.create_task(env.loop.run())
    await asyncio.sleep(0.2)
    assert env.loop.started is not None and env.loop.last_pass is None
    assert env.resolved["default"] is not None
    deadline = asyncio.get_running_loop().time() + 2
    while env.loop.last_pass is None:
        assert asyncio.get_running_loop().time() < deadline, "no pass after the caches synced"
        await asyncio.sleep(0.02)
    assert env.resolved["default"] is not None


async def test_garbage_gets_a_false_condition_and_the_loop_keeps_going(env: Env) -> None:
    """Objects the API server stores but no code can read (kubesim, like a cluster without the CRDs'
    schemas, accepts them): ValidationSucceeded False with a reason; the loop still serves a good
    class created afterwards."""
    garbage_pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "junk"},
        "spec": {"template": "x", "weight": "heavy"},
    }
    garbage_class = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "junk"},
        "spec": {"subnetSelectorTerms": 7, "role": ["r"]},
    }
    await env.create(NODEPOOLS, garbage_pool)
    await env.create(NODECLASSES, garbage_class)
    pool = await env.until(NODEPOOLS, "junk", is_("ValidationSucceeded", "False"))
    assert conditions(pool)["ValidationSucceeded"]["reason"] == "NodePoolValidationFailed"
    assert conditions(pool)["Ready"]["status"] == "False"
    cls = await env.until(NODECLASSES, "junk", is_("ValidationSucceeded", "False"))
    assert conditions(cls)["ValidationSucceeded"]["reason"] == "NodeClassValidationFailed"
    await env.create(NODECLASSES, nodeclass("good"))
    await env.until(NODECLASSES, "good", is_("Ready", "True"))


async def test_aws_errors_keep_the_last_good_status_and_are_retried(env: Env) -> None:
    await env.create(NODECLASSES, nodeclass("default"))
    good = await env.until(NODECLASSES, "default", is_("Ready", "True"))
    env.aws.failing = True
    # A spec change while AWS throttles: nothing resolvable, the last good lists stay.
    await env.patch(NODECLASSES, "default", {"spec": {"tags": {"team": "a"}}})
    await asyncio.sleep(0.5)
    now = await env.get(NODECLASSES, "default")
    for key in ("subnets", "securityGroups", "amis"):
        assert now["status"][key] == good["status"][key]
    assert conditions(now)["SubnetsReady"]["status"] == "True"
    env.aws.failing = False
    # Retried with backoff (0.05 s doubling to 0.2 s): the new generation is observed.
    await env.until(
        NODECLASSES, "default", lambda o: conditions(o)["SubnetsReady"]["observedGeneration"] == 2
    )


async def test_crds_installed_after_the_start_are_picked_up(aws_env: MotoServer) -> None:
    """Karpenter's controllers need their CRDs; kubespot's loop waits for them instead of failing
    (one warning), and serves them once installed, without a restart."""
    async with running(aws_env, crds=False) as env:
        await asyncio.sleep(0.2)
        assert env.loop.writes == {"EC2NodeClass": 0, "NodePool": 0}
        await install_crds(env.http)
        await env.create(NODECLASSES, nodeclass("default"))
        await env.create(NODEPOOLS, nodepool("general", "default"))
        await env.until(NODEPOOLS, "general", is_("Ready", "True"))


async def test_nodepool_resources_counted_and_written_with_the_conditions(env: Env) -> None:
    """kubernetes-sigs/karpenter pkg/controllers/nodepool/counter/controller.go: status.resources
    (capacity of the pool's non-deleting nodes and in-flight NodeClaims, base keys always there)
    and status.nodes, every few seconds; here counted by NodePoolCounter and written by the status
    loop with the readiness conditions (one writer: no 409s between two)."""
    from kubespot.controllers.provisioning.nodepool_counter import NodePoolCounter

    await env.create(NODECLASSES, nodeclass("default"))
    await env.create(NODEPOOLS, nodepool("general", "default"))
    await env.until(NODEPOOLS, "general", is_("Ready", "True"))
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "general-a", "labels": {"karpenter.sh/nodepool": "general"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [],
        },
    }
    stored = await env.create("apis/karpenter.sh/v1/nodeclaims", claim)
    stored["status"] = {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"}}
    async with env.http.put("/apis/karpenter.sh/v1/nodeclaims/general-a/status", json=stored) as r:
        assert r.status == 200, await r.text()
    assert env.informers is not None
    counter = NodePoolCounter(
        env.informers.get("api/v1/nodes"),
        env.informers.get(NODECLAIMS),
        env.loop.set_counts,
        clock=SystemClock(),
        interval=0.1,
    )
    task = asyncio.create_task(counter.run())
    try:
        pool = await env.until(NODEPOOLS, "general", lambda o: (o.get("status") or {}).get("nodes") == 1)
        assert pool["status"]["resources"] == {
            "cpu": "2",
            "memory": "8192Mi",
            "pods": "29",
            "ephemeral-storage": "0Mi",
            "nodes": "1",
        }
        assert conditions(pool)["Ready"]["status"] == "True"  # the conditions kept
        async with env.http.delete("/apis/karpenter.sh/v1/nodeclaims/general-a") as r:
            assert r.status in (200, 202)
        pool = await env.until(NODEPOOLS, "general", lambda o: o["status"].get("nodes") == 0)
        assert pool["status"]["resources"]["cpu"] == "0"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_role_only_class_gets_its_profile_and_becomes_ready(env: Env, aws_env: MotoServer) -> None:
    """aws/karpenter-provider-aws ``pkg/controllers/nodeclass/instanceprofile.go`` ``Reconcile``
    and ``pkg/providers/instanceprofile/instanceprofile.go`` ``Create``: a class naming
    ``spec.role`` gets a profile holding the role, at ``/karpenter/<region>/<cluster>/<uid>/``;
    ``status.instanceProfile`` names it, InstanceProfileReady and Ready are True, and the cloud
    launches with it, also after a pass whose AWS calls failed. A role that does not exist is an
    IAM failure: not ready, retried."""
    iam = aws_env.client("iam")
    principal = {"Service": "ec2.amazonaws.com"}
    statement = {"Effect": "Allow", "Principal": principal, "Action": "sts:AssumeRole"}
    trust = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
    iam.create_role(RoleName="KarpenterNodeRole-prod", AssumeRolePolicyDocument=trust)
    body = nodeclass("default", role="KarpenterNodeRole-prod")
    del body["spec"]["instanceProfile"]
    created = await env.create(NODECLASSES, body)
    cls = await env.until(NODECLASSES, "default", is_("Ready", "True"))
    name = cls["status"]["instanceProfile"]
    assert name.startswith(f"{CLUSTER}_")
    got = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    assert got["Path"] == f"/karpenter/{aws_env.region}/{CLUSTER}/{created['metadata']['uid']}/"
    assert [r["RoleName"] for r in got["Roles"]] == ["KarpenterNodeRole-prod"]
    assert env.resolved["default"].launch_spec.instance_profile == name
    # IAM (and EC2) failing: the profile the status names still reaches the cloud.
    env.aws.failing = True
    await env.patch(NODECLASSES, "default", {"spec": {"tags": {"team": "a"}}})
    deadline = asyncio.get_running_loop().time() + 5
    while env.resolved["default"].subnets is not None:
        assert asyncio.get_running_loop().time() < deadline, "no failed pass"
        await asyncio.sleep(0.02)
    assert env.resolved["default"].instance_profile == name
    env.aws.failing = False

    missing = nodeclass("other", role="NoSuchRole")
    del missing["spec"]["instanceProfile"]
    await env.create(NODECLASSES, missing)
    other = await env.until(NODECLASSES, "other", is_("SubnetsReady", "True"))
    assert conditions(other)["InstanceProfileReady"]["status"] == "Unknown"
    assert conditions(other)["Ready"]["status"] != "True"
    assert env.resolved["other"].not_ready() is not None


def _launch_template(aws_env: MotoServer, name: str, nodeclass: str) -> None:
    tags = [
        {"Key": "eks:eks-cluster-name", "Value": CLUSTER},
        {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": nodeclass},
    ]
    aws_env.client("ec2").create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={"ImageId": "ami-12c6146b"},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}],
    )


async def test_a_changed_role_gets_a_new_profile_in_the_status(env: Env, aws_env: MotoServer) -> None:
    """aws/karpenter-provider-aws ``pkg/controllers/nodeclass/instanceprofile.go`` ``Reconcile``
    (v1.6+): a changed ``spec.role`` makes a new profile, which the status and the launches name;
    the old one keeps its role for the instances running with it (collected later)."""
    iam = aws_env.client("iam")
    principal = {"Service": "ec2.amazonaws.com"}
    statement = {"Effect": "Allow", "Principal": principal, "Action": "sts:AssumeRole"}
    trust = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
    for role in ("old-nodes", "new-nodes"):
        iam.create_role(RoleName=role, AssumeRolePolicyDocument=trust)
    body = nodeclass("default", role="old-nodes")
    del body["spec"]["instanceProfile"]
    await env.create(NODECLASSES, body)
    old = (await env.until(NODECLASSES, "default", is_("Ready", "True")))["status"]["instanceProfile"]
    await env.patch(NODECLASSES, "default", {"spec": {"role": "new-nodes"}})
    cls = await env.until(NODECLASSES, "default", lambda o: o["status"].get("instanceProfile") != old)
    new = cls["status"]["instanceProfile"]
    assert new.startswith(f"{CLUSTER}_") and conditions(cls)["Ready"]["status"] == "True"
    roles = {
        n: [
            r["RoleName"] for r in iam.get_instance_profile(InstanceProfileName=n)["InstanceProfile"]["Roles"]
        ]
        for n in (old, new)
    }
    assert roles == {old: ["old-nodes"], new: ["new-nodes"]}
    assert env.resolved["default"].launch_spec.instance_profile == new


async def test_a_deleted_class_waits_for_its_nodeclaims_then_its_profile_goes(
    env: Env, aws_env: MotoServer
) -> None:
    """aws/karpenter-provider-aws ``pkg/controllers/nodeclass/controller.go`` ``finalize``: every
    class gets ``karpenter.k8s.aws/termination``; a deleted class stays while a NodeClaim's
    ``spec.nodeClassRef`` names it, then its role's instance profiles are deleted
    (``cleanupManagedInstanceProfiles``), its launch templates too (``launchtemplate.DeleteAll``:
    this cluster's, tagged with the class; another class's stay) and the finalizer removed, so the
    class goes. While it waits, ``finalize`` publishes the Normal ``WaitingOnNodeClaimTermination``
    event naming the claims (``pkg/controllers/nodeclass/events.go``), once per class UID within the
    dedupe window, found by ``kubectl describe``'s selector (kubectl ``describe.go``
    ``searchEvents``)."""
    _launch_template(aws_env, "kubespot.io/default-1", "default")
    _launch_template(aws_env, "kubespot.io/gpu-1", "gpu")
    iam = aws_env.client("iam")
    principal = {"Service": "ec2.amazonaws.com"}
    statement = {"Effect": "Allow", "Principal": principal, "Action": "sts:AssumeRole"}
    iam.create_role(
        RoleName="nodes",
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [statement]}),
    )
    body = nodeclass("default", role="nodes")
    del body["spec"]["instanceProfile"]
    await env.create(NODECLASSES, body)
    cls = await env.until(NODECLASSES, "default", is_("Ready", "True"))
    assert FINALIZER in cls["metadata"]["finalizers"]
    profile = cls["status"]["instanceProfile"]
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "general-abcde"},
        "spec": {"nodeClassRef": ref, "requirements": []},
    }
    await env.create(NODECLAIMS, claim)
    async with env.http.delete(f"/{NODECLASSES}/default") as r:
        assert r.status == 200, await r.text()
    await asyncio.sleep(0.5)  # more than a resync: the loop has looked and must have waited
    held = await env.get(NODECLASSES, "default")
    assert held["metadata"].get("deletionTimestamp") and FINALIZER in held["metadata"]["finalizers"]
    assert iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]["Roles"]
    selector = (
        "involvedObject.name=default,involvedObject.namespace=,involvedObject.kind=EC2NodeClass,"
        f"involvedObject.uid={held['metadata']['uid']}"
    )
    async with env.http.get("/api/v1/events", params={"fieldSelector": selector}) as r:
        (event,) = [e for e in (await r.json())["items"] if e["reason"] == "WaitingOnNodeClaimTermination"]
    assert event["type"] == "Normal"
    assert event["message"] == "Waiting on NodeClaim termination for general-abcde"
    assert event.get("count", 1) == 1  # looked at again every resync, published once (dedupe)
    # Looked at every resync, from the NodeClaim informer (aws finalize lists them from the cache):
    # its one LIST, never one per look.
    assert env.sim is not None and env.sim.server.requests["list nodeclaims"] == 1
    async with env.http.delete(f"/{NODECLAIMS}/general-abcde") as r:
        assert r.status == 200, await r.text()
    deadline = asyncio.get_running_loop().time() + 5
    while (await env.get(NODECLASSES, "default")).get("kind") == "EC2NodeClass":
        assert asyncio.get_running_loop().time() < deadline, "the class was not finalized"
        await asyncio.sleep(0.02)
    names = [p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]]
    assert profile not in names
    templates = aws_env.client("ec2").describe_launch_templates()["LaunchTemplates"]
    assert [t["LaunchTemplateName"] for t in templates] == ["kubespot.io/gpu-1"]
