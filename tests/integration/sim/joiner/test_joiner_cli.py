"""``kubespot node-joiner``: flags, and the command's loop joining an instance."""

from __future__ import annotations

import argparse
import asyncio
import contextlib

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
