"""The public SSM parameters that name the node AMIs of each EKS image family, backed by real moto AMIs.

An ``EC2NodeClass`` alias (``al2023@latest``, ``bottlerocket@v1.40.0``, ``windows2022@latest`` …)
resolves to AMI ids through parameters AWS publishes under ``/aws/service/``; the caller then asks
DescribeImages about those ids. Stock moto serves only the Amazon Linux and ECS parameters, so this
extension registers, in every region's EC2 backend, one AMI per family, variant, architecture and
Kubernetes version (``K8S_VERSIONS``), and serves the parameters Karpenter's AWS provider reads
(``pkg/providers/amifamily/al2.go``, ``al2023.go``, ``bottlerocket.go``, ``windows.go``):

- AL2023: ``/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/<variant>/recommended/image_id``
  and ``…/<variant>/amazon-eks-node-al2023-<arch>-<variant>-<k8s>-<release>/image_id``; variants
  ``standard`` and ``nvidia`` on x86_64 and arm64, ``neuron`` on x86_64.
- AL2 (Kubernetes ≤ 1.32, the last AL2 EKS AMIs): ``/aws/service/eks/optimized-ami/<k8s>/
  amazon-linux-2[-arm64|-gpu]/recommended/image_id`` and the versioned names
  ``amazon-eks[-arm64|-gpu]-node-<k8s>-<release>``.
- Bottlerocket: ``/aws/service/bottlerocket/aws-k8s-<k8s>[-nvidia]/<arch>/latest/image_id`` and
  ``…/<version>/image_id``.
- Windows: ``/aws/service/ami-windows-latest/Windows_Server-<2019|2022|2025>-English-Core-
  EKS_Optimized-<k8s>/image_id``.

Each parameter is a ``String`` of data type ``aws:ec2:image`` whose value is the id of an AMI that
exists in moto (DescribeImages answers its name, architecture, ``platform: windows`` for Windows,
owner alias ``amazon``). Ids are derived from the region and image name, so they are stable across
resets and processes. ``image_ids(region)`` lists them for tests.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from moto.ec2.models.amis import Ami, AmiBackend
from moto.ssm.models import Parameter, ParameterDict

__all__ = ["K8S_VERSIONS", "PublishedAmi", "image_ids", "install", "published"]

_MARK = "_kubespot_ssm_amis"
#: Kubernetes versions whose node images are published.
K8S_VERSIONS = ("1.29", "1.30", "1.31", "1.32", "1.33", "1.34")
#: AL2 EKS AMIs stop at this version.
_AL2_LAST = (1, 32)
#: The release each parameter points at (the EKS AMI release, Bottlerocket and Windows builds).
EKS_RELEASE = "v20260701"
BOTTLEROCKET_VERSION = "1.40.0"
WINDOWS_BUILD = "2026.07.01"
_CREATED = datetime(2026, 7, 1, tzinfo=UTC)
_OWNER = "602401143452"  # the account that publishes the EKS-optimized AMIs
_PREFIXES = ("/aws/service/eks/optimized-ami", "/aws/service/bottlerocket", "/aws/service/ami-windows-latest")


@dataclass(frozen=True, slots=True)
class PublishedAmi:
    """One published image: its name, architecture, platform and the parameters naming it."""

    name: str
    architecture: str
    parameters: tuple[str, ...]
    windows: bool = False

    def image_id(self, region: str) -> str:
        return "ami-" + hashlib.sha256(f"{region}/{self.name}".encode()).hexdigest()[:17]


def _version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


def _al2023(k8s: str) -> Iterator[PublishedAmi]:
    for arch, variants in (("x86_64", ("standard", "nvidia", "neuron")), ("arm64", ("standard", "nvidia"))):
        for variant in variants:
            name = f"amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{EKS_RELEASE}"
            base = f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}"
            yield PublishedAmi(name, arch, (f"{base}/recommended/image_id", f"{base}/{name}/image_id"))


def _al2(k8s: str) -> Iterator[PublishedAmi]:
    if _version_tuple(k8s) > _AL2_LAST:
        return
    for suffix, arch in (("", "x86_64"), ("-arm64", "arm64"), ("-gpu", "x86_64")):
        name = f"amazon-eks{suffix}-node-{k8s}-{EKS_RELEASE}"
        base = f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2{suffix}"
        yield PublishedAmi(name, arch, (f"{base}/recommended/image_id", f"{base}/{name}/image_id"))


def _bottlerocket(k8s: str) -> Iterator[PublishedAmi]:
    for flavour in ("", "-nvidia"):
        for arch in ("x86_64", "arm64"):
            name = f"bottlerocket-aws-k8s-{k8s}{flavour}-{arch}-v{BOTTLEROCKET_VERSION}"
            base = f"/aws/service/bottlerocket/aws-k8s-{k8s}{flavour}/{arch}"
            params = (f"{base}/latest/image_id", f"{base}/{BOTTLEROCKET_VERSION}/image_id")
            yield PublishedAmi(name, arch, params)


def _windows(k8s: str) -> Iterator[PublishedAmi]:
    for year in ("2019", "2022", "2025"):
        base = f"Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}"
        param = f"/aws/service/ami-windows-latest/{base}/image_id"
        yield PublishedAmi(f"{base}-{WINDOWS_BUILD}", "x86_64", (param,), windows=True)


def published() -> list[PublishedAmi]:
    """Every image the extension publishes, for every version in ``K8S_VERSIONS``."""
    out: list[PublishedAmi] = []
    for k8s in K8S_VERSIONS:
        for family in (_al2023, _al2, _bottlerocket, _windows):
            out.extend(family(k8s))
    return out


def image_ids(region: str) -> dict[str, str]:
    """Parameter name → AMI id, as served in ``region``."""
    return {param: ami.image_id(region) for ami in published() for param in ami.parameters}


def _register_amis(backend: Any) -> None:
    region = backend.region_name
    for ami in published():
        image_id = ami.image_id(region)
        if image_id in backend.amis:
            continue
        backend.amis[image_id] = Ami(
            backend,
            ami_id=image_id,
            name=ami.name,
            description=ami.name,
            owner_id=_OWNER,
            owner_alias="amazon",
            public=True,
            virtualization_type="hvm",
            architecture=ami.architecture,
            creation_date=_CREATED,
            platform="windows" if ami.windows else None,
            hypervisor="xen",
            root_device_type="ebs",
            root_device_name="/dev/xvda",
            region_name=f"{region}a",
        )


def _load_parameters(params: Any) -> None:
    modified = _CREATED
    for name, image_id in image_ids(params.region_name).items():
        versions = defaultdict.__getitem__(params, name)
        if versions:
            continue
        versions.append(
            Parameter(  # type: ignore[abstract]  # moto's own loaders build it the same way
                account_id=params.account_id,
                name=name,
                value=image_id,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=modified,
                version=1,
                data_type="aws:ec2:image",
            )
        )


def install() -> None:
    """Patch moto's AMI loading and SSM's lazy loading of public parameters (once)."""
    if getattr(AmiBackend, _MARK, False):
        return
    original_load: Any = AmiBackend._load_amis

    def load_amis(self: Any) -> None:
        original_load(self)
        _register_amis(self)

    original_check: Any = ParameterDict._check_loading_status

    def check_loading_status(self: Any, key: str) -> None:
        original_check(self, key)
        text = str(key or "")
        if not getattr(self, _MARK, False) and (
            text.startswith(_PREFIXES) or any(p.startswith(text.rstrip("/") + "/") for p in _PREFIXES)
        ):
            setattr(self, _MARK, True)
            _load_parameters(self)

    AmiBackend._load_amis = load_amis  # type: ignore[method-assign]
    ParameterDict._check_loading_status = check_loading_status  # type: ignore[method-assign]
    setattr(AmiBackend, _MARK, True)
