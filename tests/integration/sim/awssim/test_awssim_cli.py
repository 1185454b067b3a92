"""``kubespot aws-sim``: moto with kubespot's extensions served until interrupted, like ``imds-sim``
(issue 13 §2), reachable by an SDK configured only by the variables it prints."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import boto3

SRC = Path(__file__).resolve().parents[4] / "src"


def test_aws_sim_serves_pricing_and_stops_on_sigterm() -> None:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubespot", "aws-sim", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        header = proc.stdout.readline()
        assert "awssim" in header, header + (proc.stderr.read() if proc.stderr else "")
        exports = dict(proc.stdout.readline().split()[1].split("=", 1) for _ in range(5))
        client = boto3.client(
            "pricing",
            endpoint_url=exports["AWS_ENDPOINT_URL"],
            region_name="us-east-1",
            aws_access_key_id=exports["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=exports["AWS_SECRET_ACCESS_KEY"],
        )
        answer = client.get_products(
            ServiceCode="AmazonEC2",
            Filters=[{"Type": "TERM_MATCH", "Field": "instanceType", "Value": "m5.large"}],
        )
        assert answer["PriceList"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert "stopped" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
