"""The public SSM parameters of the EKS node images (``ssm_amis`` extension), as Karpenter reads them.

Paths are those of aws/karpenter-provider-aws ``pkg/providers/amifamily/al2023.go``
(``resolvePath``), ``al2.go``, ``bottlerocket.go`` and ``windows.go`` (``DescribeImageQuery``);
each value is an AMI id that DescribeImages knows, as on AWS (SSM GetParameter and EC2
DescribeImages API references).
"""

from __future__ import annotations

import pytest

from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import ssm_amis

PATHS = {
    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id": "x86_64",
    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/standard/recommended/image_id": "arm64",
    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/nvidia/recommended/image_id": "x86_64",
    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id": "x86_64",
    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id": "arm64",
    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id": "x86_64",
    "/aws/service/bottlerocket/aws-k8s-1.32/x86_64/latest/image_id": "x86_64",
    "/aws/service/bottlerocket/aws-k8s-1.32/arm64/latest/image_id": "arm64",
    "/aws/service/bottlerocket/aws-k8s-1.32-nvidia/x86_64/latest/image_id": "x86_64",
    "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.32/image_id": "x86_64",
}


def test_alias_parameters_name_images_describe_images_knows(aws: MotoServer) -> None:
    """Every family's path resolves (GetParameters in one call) to an AMI of the right architecture;
    Windows images say ``platform: windows``."""
    ssm, ec2 = aws.client("ssm"), aws.client("ec2")
    answer = ssm.get_parameters(Names=list(PATHS))
    assert answer["InvalidParameters"] == []
    ids = {p["Name"]: p["Value"] for p in answer["Parameters"]}
    assert {p["DataType"] for p in answer["Parameters"]} == {"aws:ec2:image"}
    images = ec2.describe_images(Filters=[{"Name": "image-id", "Values": list(ids.values())}])["Images"]
    by_id = {image["ImageId"]: image for image in images}
    for path, arch in PATHS.items():
        image = by_id[ids[path]]
        assert image["Architecture"] == arch
        assert image["State"] == "available"
        assert (image.get("Platform") == "windows") == ("windows" in path)
    assert ids == {p: ssm_amis.image_ids(aws.region)[p] for p in PATHS}


def test_versioned_names_and_missing_al2_after_1_32(aws: MotoServer) -> None:
    """A pinned alias (al2023@v…, bottlerocket@…) reads the versioned path; AL2 has no 1.33 AMI."""
    ssm = aws.client("ssm")
    release = ssm_amis.EKS_RELEASE
    pinned = (
        f"/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/"
        f"amazon-eks-node-al2023-x86_64-standard-1.31-{release}/image_id"
    )
    latest = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id"
    values = {p["Name"]: p["Value"] for p in ssm.get_parameters(Names=[pinned, latest])["Parameters"]}
    assert values[pinned] == values[latest]
    bottlerocket = f"/aws/service/bottlerocket/aws-k8s-1.33/arm64/{ssm_amis.BOTTLEROCKET_VERSION}/image_id"
    assert ssm.get_parameter(Name=bottlerocket)["Parameter"]["Value"].startswith("ami-")
    with pytest.raises(ssm.exceptions.ParameterNotFound):
        ssm.get_parameter(Name="/aws/service/eks/optimized-ami/1.33/amazon-linux-2/recommended/image_id")
    under = ssm.get_parameters_by_path(Path="/aws/service/bottlerocket/aws-k8s-1.32", Recursive=True)
    assert len(under["Parameters"]) == 4  # x86_64 and arm64, latest and pinned
