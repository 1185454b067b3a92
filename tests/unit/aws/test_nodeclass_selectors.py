"""EC2NodeClass selector terms as EC2 filters and AMI aliases as SSM parameter names (pure).

Sources: aws/karpenter-provider-aws ``pkg/providers/subnet/subnet.go`` and
``pkg/providers/securitygroup/securitygroup.go`` ``getFilterSets``; ``pkg/providers/amifamily/
al2023.go`` / ``al2.go`` / ``bottlerocket.go`` / ``windows.go`` ``DescribeImageQuery`` /
``resolvePath``; ``types.go`` ``Variant.Requirements``; ``ami.go`` ``DescribeImageQueries`` (the AL2
deprecation at 1.33).
"""

from __future__ import annotations

import pytest

from kubespot.aws.ami_aliases import ACCELERATOR_COUNT, GPU_COUNT, UnsupportedAlias, alias_parameters
from kubespot.aws.selectors import filter_sets
from kubespot.scheduling.api.nodeclass import SelectorTerm


def test_tag_terms_are_separate_sets_and_ids_gathered_into_one() -> None:
    """getFilterSets: one set per tag term (``*`` → tag-key), every id in one more set."""
    terms = [
        SelectorTerm(tags={"karpenter.sh/discovery": "prod", "tier": "*"}),
        SelectorTerm(id="subnet-1"),
        SelectorTerm(id="subnet-2"),
    ]
    assert filter_sets(terms, id_filter="subnet-id") == [
        [{"Name": "tag:karpenter.sh/discovery", "Values": ["prod"]}, {"Name": "tag-key", "Values": ["tier"]}],
        [{"Name": "subnet-id", "Values": ["subnet-1", "subnet-2"]}],
    ]


def test_security_group_names_are_their_own_set() -> None:
    """securitygroup.go getFilterSets: ids in group-id, names in group-name."""
    terms = [SelectorTerm(name="nodes"), SelectorTerm(id="sg-1"), SelectorTerm(name="extra")]
    assert filter_sets(terms, id_filter="group-id", name_filter="group-name") == [
        [{"Name": "group-id", "Values": ["sg-1"]}],
        [{"Name": "group-name", "Values": ["nodes", "extra"]}],
    ]


def test_al2023_latest_reads_recommended_per_arch_and_variant() -> None:
    """al2023.go: standard/nvidia/neuron on x86_64, standard/nvidia on arm64; variant requirements."""
    params = {p.name: p.requirements for p in alias_parameters("al2023@latest", "1.32")}
    base = "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023"
    assert set(params) == {
        f"{base}/{arch}/{variant}/recommended/image_id"
        for arch, variant in [
            ("x86_64", "standard"),
            ("x86_64", "nvidia"),
            ("x86_64", "neuron"),
            ("arm64", "standard"),
            ("arm64", "nvidia"),
        ]
    }
    assert params[f"{base}/x86_64/nvidia/recommended/image_id"] == (((GPU_COUNT, "Exists", ()),),)
    assert params[f"{base}/arm64/standard/recommended/image_id"] == (
        ((ACCELERATOR_COUNT, "DoesNotExist", ()), (GPU_COUNT, "DoesNotExist", ())),
    )


def test_pinned_versions_name_the_release() -> None:
    """resolvePath: a version names the image; Bottlerocket's leading v is dropped."""
    al2023 = [p.name for p in alias_parameters("al2023@v20260701", "1.31")]
    assert (
        "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/"
        "amazon-eks-node-al2023-arm64-standard-1.31-v20260701/image_id" in al2023
    )
    bottlerocket = [p.name for p in alias_parameters("bottlerocket@v1.40.0", "1.32")]
    assert "/aws/service/bottlerocket/aws-k8s-1.32-nvidia/arm64/1.40.0/image_id" in bottlerocket
    al2 = {p.name: p.requirements for p in alias_parameters("al2@latest", "1.32")}
    gpu = al2["/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id"]
    assert len(gpu) == 2  # one image serving neuron and nvidia types


def test_al2_on_133_and_windows2025_before_135_are_unsupported() -> None:
    with pytest.raises(UnsupportedAlias):
        alias_parameters("al2@latest", "1.33")
    with pytest.raises(UnsupportedAlias):
        alias_parameters("windows2025@latest", "1.32")
    (win,) = alias_parameters("windows2022@latest", "1.32")
    assert (
        win.name
        == "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.32/image_id"
    )
    assert ("node.kubernetes.io/windows-build", "In", ("10.0.20348",)) in win.requirements[0]
    with pytest.raises(ValueError):
        alias_parameters("ubuntu@latest", "1.32")


class ImageStub:
    """DescribeImages from a canned list (no SSM)."""

    def __init__(self, images: list[dict[str, str]]) -> None:
        self.images = images
        self.requests: list[dict[str, object]] = []

    async def call(self, service: str, operation: str, **kwargs: object) -> dict[str, object]:
        self.requests.append(kwargs)
        return {"Images": self.images}


async def test_one_image_per_requirement_set_newest_first_non_deprecated_preferred() -> None:
    """ami.go amis/compareAMI: per requirement set, not deprecated beats deprecated, then newer,
    then greater name; AMIs.Sort: newest first. i386 images are dropped; the query asks for
    available images, deprecated included, owners self+amazon for a name."""
    from datetime import UTC, datetime

    from kubespot.aws.amis import resolve_amis

    images = [
        {
            "ImageId": "ami-old",
            "Name": "n-1",
            "Architecture": "x86_64",
            "CreationDate": "2026-01-01T00:00:00.000Z",
        },
        {
            "ImageId": "ami-new",
            "Name": "n-2",
            "Architecture": "x86_64",
            "CreationDate": "2026-06-01T00:00:00.000Z",
            "DeprecationTime": "2026-07-01T00:00:00.000Z",
        },
        {
            "ImageId": "ami-mid",
            "Name": "n-3",
            "Architecture": "x86_64",
            "CreationDate": "2026-03-01T00:00:00.000Z",
        },
        {
            "ImageId": "ami-arm",
            "Name": "n-4",
            "Architecture": "arm64",
            "CreationDate": "2026-02-01T00:00:00.000Z",
        },
        {
            "ImageId": "ami-386",
            "Name": "n-5",
            "Architecture": "i386",
            "CreationDate": "2026-09-01T00:00:00.000Z",
        },
    ]
    stub = ImageStub(images)
    now = datetime(2026, 11, 1, tzinfo=UTC)
    amis = await resolve_amis(stub, [SelectorTerm(name="n-*")], "1.32", now=now)  # type: ignore[arg-type]
    # ami-new is deprecated by now: ami-mid wins amd64; arm64 has its own set; newest first.
    assert [a.id for a in amis] == ["ami-mid", "ami-arm"]
    (request,) = stub.requests
    assert request["Owners"] == ["self", "amazon"] and request["IncludeDeprecated"] is True
    assert {"Name": "state", "Values": ["available"]} in request["Filters"]  # type: ignore[operator]
    before = await resolve_amis(
        ImageStub(images), [SelectorTerm(name="n-*")], "1.32", now=datetime(2026, 6, 2, tzinfo=UTC)
    )  # type: ignore[arg-type]
    assert [a.id for a in before] == ["ami-new", "ami-arm"]
