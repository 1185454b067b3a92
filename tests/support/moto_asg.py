"""An Auto Scaling group on moto (``kubespot.sim.awssim.MotoServer``): a launch template and the
group launched from it, for the tests of lifecycle actions (the adapter, the simulator's extension,
the controller's end-to-end scenarios)."""

from __future__ import annotations

from collections.abc import Sequence

from kubespot.sim.awssim import MotoServer

#: An image id moto knows.
AMI = "ami-12c6146b"


def auto_scaling_group(
    aws: MotoServer,
    name: str,
    *,
    desired: int,
    max_size: int = 5,
    zones: Sequence[str] = ("a",),
    template: str = "nodes",
) -> list[str]:
    """Launch template ``template`` (``AMI``, m5.large) and group ``name`` launched from it with
    ``desired`` instances in the region's ``zones``; the ids of its instances, sorted."""
    aws.client("ec2").create_launch_template(
        LaunchTemplateName=template, LaunchTemplateData={"ImageId": AMI, "InstanceType": "m5.large"}
    )
    asg = aws.client("autoscaling")
    asg.create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateName": template, "Version": "$Latest"},
        MinSize=0,
        MaxSize=max_size,
        DesiredCapacity=desired,
        AvailabilityZones=[f"{aws.region}{zone}" for zone in zones],
    )
    group = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]
    return sorted(i["InstanceId"] for i in group["Instances"])
