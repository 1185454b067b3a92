"""``kubespot node-joiner``: flags, and the command's loop joining an instance."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from typing import Any

import pytest
from joiner_world import CLUSTER, World
from userdata_samples import AL2023_MIME

from kubespot import cli
from kubespot.sim.joiner import cli as joiner_cli


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    joiner_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """Wired lazily in the composition root like ``imds-sim``; every flag of the brief is there."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["node-joiner", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for flag in (
        "--ec2-endpoint",
        "--kube-url",
        "--cluster",
        "--boot-delay",
        "--ready-delay",
        "--jitter",
        "--seed",
    ):
        assert flag in out
    assert cli.EXTRAS["node-joiner"] == "sim"


def test_flags_make_the_config() -> None:
    args = _args(
        "--ec2-endpoint", "http://e", "--kube-url", "http://k", "--cluster", "c", "--boot-delay", "3"
    )
    config = joiner_cli.config_from(args)
    assert (config.cluster, config.boot_delay, config.ready_delay, config.poll_interval) == (
        "c",
        3.0,
        2.0,
        1.0,
    )
    with pytest.raises(SystemExit):
        _args("--ec2-endpoint", "e", "--kube-url", "k", "--cluster", "c", "--boot-delay", "-1")


async def test_the_command_joins_an_instance(world: World) -> None:
    """The command's loop, on moto and kubesim URLs only (what a separate process gets)."""
    instance = world.launch(AL2023_MIME)
    args = _args(
        "--ec2-endpoint", world.aws.endpoint_url, "--kube-url", world.sim.url, "--cluster", CLUSTER,
        "--boot-delay", "0", "--ready-delay", "0.1", "--poll-interval", "0.05",
    )  # fmt: skip
    task = asyncio.ensure_future(joiner_cli._serve(args))
    try:
        await world.until(lambda: world.ready(instance["PrivateDnsName"]) == "True")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_node_lifecycle_flags_are_upstreams_and_scale_with_the_time_scale() -> None:
    """kube-controller-manager's ``--node-monitor-grace-period`` (50 s in v1.32) and
    cloud-controller-manager's ``--node-monitor-period`` (5 s) by default; ``--time-scale X``
    divides every duration but the poll interval, as ``kubespot sandbox --time-scale``."""
    base = ("--ec2-endpoint", "http://e", "--kube-url", "http://k", "--cluster", "c")
    config = joiner_cli.config_from(_args(*base))
    assert (config.node_monitor_grace, config.node_monitor_period) == (50.0, 5.0)
    config = joiner_cli.config_from(
        _args(*base, "--time-scale", "10", "--boot-delay", "35", "--node-monitor-grace-period", "40")
    )
    assert (config.boot_delay, config.ready_delay, config.node_monitor_grace, config.node_monitor_period) == (
        3.5,
        0.2,
        4.0,
        0.5,
    )
    assert config.poll_interval == 1.0
    for bad in ("0", "-2", "inf", "x"):
        with pytest.raises(SystemExit):
            _args(*base, "--time-scale", bad)


async def test_the_command_keeps_a_terminated_instance_node_through_the_scaled_grace(
    world_with: Any,
) -> None:
    """The command's loop with upstream's grace at ``--time-scale 50`` (50 s → 1 s): the Node of a
    terminated instance is still Ready half-way through it and deleted only after it
    (pkg/controller/nodelifecycle ``tryUpdateNodeHealth``; cloud-provider controllers/nodelifecycle
    ``MonitorNodes`` skips Ready Nodes and deletes one whose instance is gone)."""
    async with world_with(node_monitor_grace_seconds=1.0) as world:
        instance = world.launch(AL2023_MIME)
        name = instance["PrivateDnsName"]
        args = _args(
            "--ec2-endpoint", world.aws.endpoint_url, "--kube-url", world.sim.url, "--cluster", CLUSTER,
            "--boot-delay", "0", "--ready-delay", "5", "--poll-interval", "0.05", "--time-scale", "50",
        )  # fmt: skip
        task = asyncio.ensure_future(joiner_cli._serve(args))
        try:
            await world.until(lambda: world.ready(name) == "True")
            world.ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
            started = time.monotonic()
            await asyncio.sleep(0.5)
            assert world.ready(name) == "True"
            await world.until(lambda: world.node(name) is None, within=6.0)
            assert time.monotonic() - started >= 1.0
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
