"""kubespot.aws.isolation against moto over HTTP: every interface of the instance moves to the
quarantine group, what it had is reported (and can be restored), a wrong group changes nothing."""

from __future__ import annotations

import pytest

from kubespot.aws import AwsClients, GroupRef, NetworkIsolation, QuarantineGroupError
from kubespot.sim.awssim import MotoServer

AMI = "ami-12c6146b"


class Node:
    """An instance with two interfaces (as the VPC CNI leaves a node), the groups on them, and a
    quarantine group in its VPC and one in another VPC."""

    def __init__(self, aws: MotoServer) -> None:
        ec2 = aws.client("ec2")
        self.ec2 = ec2
        vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
        subnet = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"][0]["SubnetId"]
        self.vpc = vpc

        def group(name: str, in_vpc: str) -> str:
            return ec2.create_security_group(GroupName=name, Description=name, VpcId=in_vpc)["GroupId"]

        self.nodes_sg = group("nodes", vpc)
        self.pods_sg = group("pods", vpc)
        self.cluster_sg = group("cluster", vpc)
        self.quarantine = group("quarantine", vpc)
        other_vpc = ec2.create_vpc(CidrBlock="10.99.0.0/16")["Vpc"]["VpcId"]
        self.elsewhere = group("quarantine-elsewhere", other_vpc)

        # Groups given on the interface, not the instance: moto reports an attached interface's
        # groups as its own plus the instance's launch groups (AWS keeps them per interface), which
        # would show the launch groups on every interface whatever is modified.
        (instance,) = ec2.run_instances(
            ImageId=AMI,
            MinCount=1,
            MaxCount=1,
            InstanceType="m5.large",
            NetworkInterfaces=[
                {"DeviceIndex": 0, "SubnetId": subnet, "Groups": [self.nodes_sg, self.cluster_sg]}
            ],
        )["Instances"]
        self.instance = instance["InstanceId"]
        self.primary = instance["NetworkInterfaces"][0]["NetworkInterfaceId"]
        self.secondary = ec2.create_network_interface(SubnetId=subnet, Groups=[self.pods_sg])[
            "NetworkInterface"
        ]["NetworkInterfaceId"]
        ec2.attach_network_interface(
            NetworkInterfaceId=self.secondary, InstanceId=self.instance, DeviceIndex=1
        )
        # An interface of another instance: must not be touched.
        (bystander,) = ec2.run_instances(
            ImageId=AMI,
            MinCount=1,
            MaxCount=1,
            NetworkInterfaces=[{"DeviceIndex": 0, "SubnetId": subnet, "Groups": [self.nodes_sg]}],
        )["Instances"]
        self.bystander = bystander["NetworkInterfaces"][0]["NetworkInterfaceId"]

    def groups(self, eni: str) -> set[str]:
        answer = self.ec2.describe_network_interfaces(NetworkInterfaceIds=[eni])["NetworkInterfaces"][0]
        return {g["GroupId"] for g in answer["Groups"]}


async def test_isolate_swaps_every_interface_and_reports_what_it_replaced(
    aws: MotoServer, clients: AwsClients
) -> None:
    node = Node(aws)
    isolation = NetworkIsolation(clients)
    outcome = await isolation.isolate(node.instance, node.quarantine)
    assert outcome.ok and outcome.gone == ()
    assert outcome.vpc_id == node.vpc
    assert outcome.quarantine_group == GroupRef(node.quarantine, "quarantine")
    assert [c.network_interface_id for c in outcome.interfaces] == [node.primary, node.secondary]
    assert all(c.changed for c in outcome.interfaces)
    previous = {c.network_interface_id: {g.group_id for g in c.previous_groups} for c in outcome.interfaces}
    assert previous == {node.primary: {node.nodes_sg, node.cluster_sg}, node.secondary: {node.pods_sg}}
    assert {g.group_name for g in outcome.replaced_groups} == {"nodes", "cluster", "pods"}
    assert node.groups(node.primary) == node.groups(node.secondary) == {node.quarantine}
    assert node.groups(node.bystander) == {node.nodes_sg}
    assert clients.counts[("ec2", "ModifyNetworkInterfaceAttribute")] == 2

    # Again (a resumed runner): nothing to change, and it says so.
    again = await isolation.isolate(node.instance, node.quarantine)
    assert again.ok and not any(c.changed for c in again.interfaces)
    assert again.replaced_groups == ()
    assert clients.counts[("ec2", "ModifyNetworkInterfaceAttribute")] == 2
    assert clients.counts[("ec2", "DescribeSecurityGroups")] == 1  # the group check is remembered

    # Undo (the interruption was withdrawn): the original groups come back.
    assert await isolation.restore(outcome.interfaces) == {}
    assert node.groups(node.primary) == {node.nodes_sg, node.cluster_sg}
    assert node.groups(node.secondary) == {node.pods_sg}


async def test_quarantine_group_by_name(aws: MotoServer, clients: AwsClients) -> None:
    node = Node(aws)
    outcome = await NetworkIsolation(clients).isolate(node.instance, "quarantine")
    assert outcome.quarantine_group == GroupRef(node.quarantine, "quarantine")
    assert node.groups(node.primary) == {node.quarantine}


async def test_wrong_or_missing_group_changes_nothing(aws: MotoServer, clients: AwsClients) -> None:
    node = Node(aws)
    isolation = NetworkIsolation(clients)
    with pytest.raises(QuarantineGroupError, match=f"is in vpc-.*instance VPC {node.vpc}") as caught:
        await isolation.isolate(node.instance, node.elsewhere)
    assert caught.value.group == node.elsewhere and caught.value.vpc_id == node.vpc
    with pytest.raises(QuarantineGroupError, match="does not exist"):
        await isolation.isolate(node.instance, "sg-0123456789abcdef0")
    with pytest.raises(QuarantineGroupError, match="does not exist in that VPC"):
        await isolation.isolate(node.instance, "quarantine-elsewhere")  # a name of another VPC
    assert clients.counts[("ec2", "ModifyNetworkInterfaceAttribute")] == 0
    assert node.groups(node.primary) == {node.nodes_sg, node.cluster_sg}


async def test_instance_without_interfaces(aws: MotoServer, clients: AwsClients) -> None:
    Node(aws)
    outcome = await NetworkIsolation(clients).isolate("i-0123456789abcdef0", "sg-0123456789abcdef0")
    assert outcome.ok and outcome.interfaces == () and outcome.vpc_id is None
    assert clients.counts[("ec2", "DescribeSecurityGroups")] == 0
