"""``kubespot convert FILE...``: old Karpenter manifests (v1alpha5 Provisioner, v1alpha1
AWSNodeTemplate, v1beta1 NodePool/EC2NodeClass) and eksctl ClusterConfig files (each node group a
NodePool, each distinct node configuration an EC2NodeClass) as v1 YAML on stdout, one warning per
field without a v1 equivalent on stderr.

Exit 0 when every file was converted (warnings or not); 1, with nothing on stdout, when a file cannot
be read or is not YAML. The conversion itself is ``scheduling.api.convert`` (pure).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from .scheduling.api.convert import convert


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        metavar="FILE",
        nargs="+",
        help="YAML to convert: old Karpenter manifests or eksctl ClusterConfig files ('-' reads stdin)",
    )


def _read(path: str) -> list[Any]:
    import yaml  # only this command needs it

    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def run(files: list[str], *, out: TextIO, err: TextIO) -> int:
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
    # All files at once: a pool's kubelet block moves to a node class that may be in another file.
    result = convert(doc for _, docs in documents for doc in docs)
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
    return run(list(args.files), out=sys.stdout, err=sys.stderr)
