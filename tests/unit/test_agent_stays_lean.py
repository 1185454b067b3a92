"""The per-node agent never loads the AWS SDK (docs/designs/response-actions.md, decision 1), nor the
controller's aiohttp HTTP stack (kube/transport.py): boto3 alone
is ~30 MiB, paid once per node. The AWS response actions live in the controller; the agent reads
their record on the Node (``kubespot.records.actions``), which needs no SDK. The Go-template
engine (and zoneinfo behind it) is loaded on first use: an agent without templates or notification
targets never pays for it (the agent's peak RSS goal is 48 MiB). Nor does it load the operator or any
of its controllers (``kubespot.operator``, ``kubespot.controllers``)."""

from __future__ import annotations

from support.imports import loaded_by


def test_the_agent_and_the_record_it_reads_load_no_aws_sdk() -> None:
    code = (
        "import kubespot.agent.command, kubespot.agent.runtime, kubespot.records.actions;"
        "import kubespot.handling.node_handler"
    )
    heavy = {"boto3", "botocore", "aiohttp", "kubespot.aws", "kubespot.operator", "kubespot.controllers"}
    # Nor the provisioner's LP solver (kubespot.scheduling.packing: HiGHS and numpy).
    heavy |= {"highspy", "numpy", "kubespot.scheduling"}
    assert loaded_by(code, {*heavy, "kubespot.actions.gotemplate", "zoneinfo"}) == []
