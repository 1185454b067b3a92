"""``kubespot convert FILE...``: old Karpenter manifests (v1alpha5 Provisioner, v1alpha1
AWSNodeTemplate, v1beta1 NodePool/EC2NodeClass) and eksctl ClusterConfig files (each node group a
NodePool, each distinct node configuration an EC2NodeClass) as v1 YAML on stdout, one warning per
field without a v1 equivalent on stderr.

With ``--instance-sizes`` the eksctl node groups' instance types are read from EC2
(DescribeInstanceTypes; region, endpoint and credentials as for ``kubespot plan``) so that ``maxSize``
becomes estimated ``cpu`` and ``memory`` limits beside the exact ``nodes`` one.

Exit 0 when every file was converted (warnings or not); 1, with nothing on stdout, when a file cannot
be read or is not YAML, or the instance types cannot be read. The conversion itself is
``scheduling.api.convert`` (pure).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from pathlib import Path
from typing import Any, TextIO

from .config.aws import AwsSettings
from .model.capacity import InstanceTypeInfo
from .scheduling.api.convert import convert


@dataclasses.dataclass(frozen=True)
class ConvertCommandSettings:
    """How ``--instance-sizes`` reaches EC2: the AWS settings ``kubespot plan`` reads."""

    aws: AwsSettings = dataclasses.field(default_factory=AwsSettings)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        metavar="FILE",
        nargs="+",
        help="YAML to convert: old Karpenter manifests or eksctl ClusterConfig files ('-' reads stdin)",
    )

    parser.add_argument(
        "--instance-sizes",
        action="store_true",
        help="read the eksctl node groups' instance types from EC2 (DescribeInstanceTypes; "
        "KUBESPOT_AWS_REGION, KUBESPOT_AWS_ENDPOINT_URL, the SDK's credentials) to add estimated "
        "cpu and memory limits (maxSize times the largest type)",
    )


def _read(path: str) -> list[Any]:
    import yaml  # only this command needs it

    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


async def _instance_sizes(documents: list[Any]) -> dict[str, InstanceTypeInfo]:
    """EC2's facts for every instance type the ClusterConfigs among ``documents`` name."""
    from .aws import AwsClients
    from .aws.catalog import describe_types
    from .config import loader
    from .scheduling.api.convert_eksctl import instance_types_of, is_cluster_config

    names = {
        t for d in documents if isinstance(d, dict) and is_cluster_config(d) for t in instance_types_of(d)
    }
    if not names:
        return {}
    async with AwsClients(loader.load(ConvertCommandSettings).aws) as clients:
        if not clients.region:
            raise ValueError("no AWS region: set KUBESPOT_AWS_REGION or AWS_REGION")
        return await describe_types(clients, names)


def run(files: list[str], *, out: TextIO, err: TextIO, instance_sizes: bool = False) -> int:
    import yaml

    documents: list[tuple[str, list[Any]]] = []
    for path in files:
        try:
            documents.append((path, _read(path)))
        except OSError as exc:
            print(f"error: cannot read {path}: {exc.strerror or exc}", file=err)
            return 1
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            print(f"error: {path} is not YAML: {str(exc).splitlines()[0]}", file=err)
            return 1
    everything = [doc for _, docs in documents for doc in docs]
    sizes: dict[str, InstanceTypeInfo] = {}
    if instance_sizes:
        from .aws import AwsError

        try:
            sizes = asyncio.run(_instance_sizes(everything))
        except (AwsError, ValueError) as exc:  # ValueError: SettingsError, no region
            print(f"error: cannot read the instance types: {exc}", file=err)
            return 1
    # All files at once: a pool's kubelet block moves to a node class that may be in another file.
    result = convert(everything, sizes=sizes)
    for warning in result.warnings:
        print(f"warning: {warning}", file=err)
    if result.documents:
        out.write(yaml.dump_all(result.documents, Dumper=_dumper(), sort_keys=False, explicit_start=True))
    return 0


def _dumper() -> Any:
    """A safe dumper that writes multi-line strings (user data) as literal blocks, as people do."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return Dumper


def main(args: argparse.Namespace) -> int:
    return run(list(args.files), out=sys.stdout, err=sys.stderr, instance_sizes=args.instance_sizes)
