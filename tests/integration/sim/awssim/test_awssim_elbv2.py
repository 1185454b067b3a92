"""ELBv2 target groups through boto3 over HTTP: register, describe health, deregister.

What moto does (5.2.5): CreateTargetGroup (instance and ip targets), RegisterTargets,
DeregisterTargets, DescribeTargetHealth (optionally for given targets), DescribeTargetGroups by
load balancer. Gaps: health is reported ``healthy`` as soon as a running instance is registered
(no ``initial`` state, no health checks); a stopped instance is reported ``unused`` only as moto
infers it. Stock moto also deregisters at once; the ``elbv2_draining`` extension adds the
``draining`` state (its own tests: ``test_awssim_elbv2_draining.py``).
"""

from __future__ import annotations

from kubespot.sim.awssim import MotoServer

AMI = "ami-12c6146b"


def test_register_describe_deregister_targets(aws: MotoServer) -> None:
    """Targets appear healthy at once; a deregistered one is draining (extension ``elbv2_draining``)."""
    ec2 = aws.client("ec2")
    elb = aws.client("elbv2")
    instances = ec2.run_instances(ImageId=AMI, MinCount=2, MaxCount=2, InstanceType="m5.large")["Instances"]
    ids = [i["InstanceId"] for i in instances]
    vpc_id = instances[0]["VpcId"]
    subnets = [
        s["SubnetId"]
        for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["Subnets"]
    ]

    lb_arn = elb.create_load_balancer(Name="web", Subnets=subnets[:2], Type="application")["LoadBalancers"][
        0
    ]["LoadBalancerArn"]
    tg_arn = elb.create_target_group(
        Name="web", Protocol="HTTP", Port=8080, VpcId=vpc_id, TargetType="instance"
    )["TargetGroups"][0]["TargetGroupArn"]
    elb.create_listener(
        LoadBalancerArn=lb_arn,
        Protocol="HTTP",
        Port=80,
        DefaultActions=[{"Type": "forward", "TargetGroupArn": tg_arn}],
    )
    elb.modify_target_group_attributes(
        TargetGroupArn=tg_arn, Attributes=[{"Key": "deregistration_delay.timeout_seconds", "Value": "30"}]
    )

    elb.register_targets(TargetGroupArn=tg_arn, Targets=[{"Id": i} for i in ids])
    health = elb.describe_target_health(TargetGroupArn=tg_arn)["TargetHealthDescriptions"]
    assert {h["Target"]["Id"]: h["TargetHealth"]["State"] for h in health} == dict.fromkeys(ids, "healthy")
    assert {h["Target"]["Port"] for h in health} == {8080}

    one = elb.describe_target_health(TargetGroupArn=tg_arn, Targets=[{"Id": ids[0]}])[
        "TargetHealthDescriptions"
    ]
    assert [h["Target"]["Id"] for h in one] == [ids[0]]

    groups = elb.describe_target_groups(LoadBalancerArn=lb_arn)["TargetGroups"]
    assert [g["TargetGroupArn"] for g in groups] == [tg_arn]
    attrs = elb.describe_target_group_attributes(TargetGroupArn=tg_arn)["Attributes"]
    assert {a["Key"]: a["Value"] for a in attrs}["deregistration_delay.timeout_seconds"] == "30"

    elb.deregister_targets(TargetGroupArn=tg_arn, Targets=[{"Id": ids[0]}])
    after = elb.describe_target_health(TargetGroupArn=tg_arn)["TargetHealthDescriptions"]
    # Stock moto drops ids[0] at once; with the extension it drains for the 30 s delay, as on AWS.
    assert {h["Target"]["Id"]: h["TargetHealth"]["State"] for h in after} == {
        ids[0]: "draining",
        ids[1]: "healthy",
    }


def test_ip_targets(aws: MotoServer) -> None:
    """ip-type target groups accept private IPs (used for pods behind an NLB/ALB in IP mode)."""
    ec2 = aws.client("ec2")
    elb = aws.client("elbv2")
    vpc_id = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    tg_arn = elb.create_target_group(Name="pods", Protocol="TCP", Port=80, VpcId=vpc_id, TargetType="ip")[
        "TargetGroups"
    ][0]["TargetGroupArn"]
    elb.register_targets(TargetGroupArn=tg_arn, Targets=[{"Id": "172.31.0.10", "Port": 8080}])
    health = elb.describe_target_health(TargetGroupArn=tg_arn)["TargetHealthDescriptions"]
    assert [(h["Target"]["Id"], h["Target"]["Port"]) for h in health] == [("172.31.0.10", 8080)]
    assert health[0]["TargetHealth"]["State"] == "healthy"
    elb.modify_target_group_attributes(
        TargetGroupArn=tg_arn, Attributes=[{"Key": "deregistration_delay.timeout_seconds", "Value": "0"}]
    )
    elb.deregister_targets(TargetGroupArn=tg_arn, Targets=[{"Id": "172.31.0.10", "Port": 8080}])
    # A zero deregistration delay skips draining.
    assert elb.describe_target_health(TargetGroupArn=tg_arn)["TargetHealthDescriptions"] == []
