"""Where an AMI alias (``family@version``) is published: the SSM parameters per family and variant (pure).

As aws/karpenter-provider-aws ``pkg/providers/amifamily/al2023.go``, ``al2.go``, ``bottlerocket.go``
and ``windows.go`` (``DescribeImageQuery`` / ``resolvePath``): each family names one parameter per
architecture and variant, ``recommended`` / ``latest`` for ``@latest`` and the release's own name
otherwise; the image a parameter names carries the variant's requirements (types ``types.go``
``Variant.Requirements``: standard images for types without GPUs or accelerators, nvidia for types
with GPUs, neuron for types with accelerators), Windows images the OS and build. AL2 has no images
for Kubernetes 1.33 and later (``ami.go``: an ``UnsupportedAlias``), Windows Server 2025 none before
1.35.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kubespot.scheduling.labels import OS, WINDOWS_BUILD

__all__ = [
    "ACCELERATOR_COUNT",
    "GPU_COUNT",
    "AliasParameter",
    "Requirement",
    "UnsupportedAlias",
    "alias_parameters",
]

GPU_COUNT: Final = "karpenter.k8s.aws/instance-gpu-count"
ACCELERATOR_COUNT: Final = "karpenter.k8s.aws/instance-accelerator-count"
#: aws ``pkg/apis/v1/labels.go``: the Windows Server builds of the EKS-optimized images.
WINDOWS_BUILDS: Final = {"2019": "10.0.17763", "2022": "10.0.20348", "2025": "10.0.26100"}

#: (key, operator, values): one node selector requirement of an AMI.
Requirement = tuple[str, str, tuple[str, ...]]

_VARIANTS: Final[dict[str, tuple[Requirement, ...]]] = {
    "standard": ((ACCELERATOR_COUNT, "DoesNotExist", ()), (GPU_COUNT, "DoesNotExist", ())),
    "nvidia": ((GPU_COUNT, "Exists", ()),),
    "neuron": ((ACCELERATOR_COUNT, "Exists", ()),),
}


class UnsupportedAlias(ValueError):
    """An alias no image exists for at this Kubernetes version (Karpenter's ``UnsupportedAlias``)."""


@dataclass(frozen=True, slots=True)
class AliasParameter:
    """One SSM parameter an alias reads, and the requirement sets of the image it names (one per
    variant the image serves, without the architecture: that comes from DescribeImages)."""

    name: str
    requirements: tuple[tuple[Requirement, ...], ...]


def _variants(*names: str) -> tuple[tuple[Requirement, ...], ...]:
    return tuple(_VARIANTS[n] for n in names)


def _minor(k8s_version: str) -> int:
    try:
        return int(k8s_version.split(".")[1])
    except (IndexError, ValueError):
        return 0


def alias_parameters(alias: str, k8s_version: str) -> list[AliasParameter]:
    """The parameters ``alias`` (``al2023@latest``, ``bottlerocket@v1.40.0`` …) reads at ``k8s_version``.

    ``ValueError`` for a malformed alias or unknown family; ``UnsupportedAlias`` where the family
    publishes no image for this version.
    """
    family, sep, version = alias.partition("@")
    family = family.lower()
    if not sep or not version:
        raise ValueError(f"alias {alias!r} is not family@version")
    latest = version == "latest"
    k = k8s_version
    if family == "al2023":
        out = []
        for arch, variants in (
            ("x86_64", ("standard", "nvidia", "neuron")),
            ("arm64", ("standard", "nvidia")),
        ):
            for variant in variants:
                leaf = "recommended" if latest else f"amazon-eks-node-al2023-{arch}-{variant}-{k}-{version}"
                path = (
                    f"/aws/service/eks/optimized-ami/{k}/amazon-linux-2023/{arch}/{variant}/{leaf}/image_id"
                )
                out.append(AliasParameter(path, _variants(variant)))
        return out
    if family == "al2":
        if _minor(k) >= 33:
            raise UnsupportedAlias(f"AL2 aliases are no longer supported on Kubernetes 1.33+ (alias {alias})")
        out = []
        al2: tuple[tuple[str, str, tuple[str, ...]], ...] = (
            ("", "node", ("standard",)),
            ("-arm64", "arm64-node", ("standard",)),
            ("-gpu", "gpu-node", ("neuron", "nvidia")),
        )
        for suffix, node, names in al2:
            leaf = "recommended" if latest else f"amazon-eks-{node}-{k}-{version}"
            path = f"/aws/service/eks/optimized-ami/{k}/amazon-linux-2{suffix}/{leaf}/image_id"
            out.append(AliasParameter(path, _variants(*names)))
        return out
    if family == "bottlerocket":
        # Bottlerocket versions are written with a leading v on GitHub but not in the parameters.
        trimmed = version.lstrip("v")
        return [
            AliasParameter(
                f"/aws/service/bottlerocket/aws-k8s-{k}{flavour}/{arch}/{trimmed}/image_id", _variants(*v)
            )
            for flavour, arch, v in (
                ("", "x86_64", ("standard", "neuron")),
                ("", "arm64", ("standard",)),
                ("-nvidia", "x86_64", ("nvidia",)),
                ("-nvidia", "arm64", ("nvidia",)),
            )
        ]
    if family.startswith("windows") and family[len("windows") :] in WINDOWS_BUILDS:
        year = family[len("windows") :]
        if year == "2025" and _minor(k) < 35:
            raise UnsupportedAlias(f"Windows Server 2025 requires Kubernetes 1.35 or later, not {k}")
        path = (
            f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k}/image_id"
        )
        windows = ((OS, "In", ("windows",)), (WINDOWS_BUILD, "In", (WINDOWS_BUILDS[year],)))
        return [AliasParameter(path, (windows,))]
    raise ValueError(f"alias {alias!r}: unknown family {family!r}")
