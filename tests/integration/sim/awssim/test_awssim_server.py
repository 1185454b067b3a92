"""The ``MotoServer`` helper itself: endpoint, env for child processes, reset, extensions."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import pytest
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError

from kubespot.sim.awssim import MotoServer


def test_env_lets_a_child_process_reach_the_server(aws: MotoServer) -> None:
    """A child process configured only by ``env()`` talks to this server (AWS_ENDPOINT_URL)."""
    aws.client("sqs").create_queue(QueueName="from-parent")
    code = "import boto3; print(boto3.client('sqs').list_queues()['QueueUrls'][0])"
    env = {**aws.env(), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("/from-parent")
    assert set(aws.env()) == {
        "AWS_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_DEFAULT_REGION",
        "AWS_REGION",
    }
    assert aws.env()["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")


def test_reset_forgets_everything(aws: MotoServer) -> None:
    aws.client("sqs").create_queue(QueueName="gone")
    aws.client("ec2").run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)
    aws.reset()
    assert "QueueUrls" not in aws.client("sqs").list_queues()
    assert aws.client("ec2").describe_instances()["Reservations"] == []


def test_unimplemented_call_fails_fast(aws: MotoServer) -> None:
    """moto answers 500 for what it does not implement; the client does not retry with back-off."""
    ec2 = aws.client("ec2")
    started = time.monotonic()
    # EC2 errors come back as an HTML 500 page, which botocore cannot parse.
    with pytest.raises((ClientError, ResponseParserError)):
        # Not implemented by moto 5.2.5 (nor by the extensions).
        ec2.get_spot_placement_scores(TargetCapacity=1, InstanceTypes=["m5.large"])
    assert time.monotonic() - started < 2


def test_health_route_lists_extensions(aws: MotoServer) -> None:
    with urllib.request.urlopen(f"{aws.endpoint_url}/_kubespot/health", timeout=5) as response:
        body = json.loads(response.read())
    assert body == {
        "ok": True,
        "extensions": [
            "sqs_depth",
            "events_account",
            "lifecycle",
            "spot_prices",
            "elbv2_draining",
            "pricing",
            "ssm_amis",
            "catalog_cache",
            "fleet",
            "run_instances",
            "image_lookup",
            "spot_request_ids",
            "iam_paths",
        ],
    }


def test_second_server_on_its_own_port() -> None:
    """A helper started separately gets another free port; state is shared per process (moto)."""
    with MotoServer(reset_on_start=False) as other:
        assert other.running
        assert other.port > 0
        assert other.client("sqs").list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert not other.running


def test_aws_env_fixture_sets_sdk_variables(aws_env: MotoServer) -> None:
    """With ``aws_env``, a client built from the environment alone reaches the server."""
    import boto3

    aws_env.client("sqs").create_queue(QueueName="via-env")
    urls = boto3.client("sqs").list_queues()["QueueUrls"]
    assert [u.rsplit("/", 1)[-1] for u in urls] == ["via-env"]
