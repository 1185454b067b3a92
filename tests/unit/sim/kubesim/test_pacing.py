"""The pacer's decisions: when the simulated control plane yields to API requests, and when it may not.

Clocks are injected, so these tests check decisions, not timings.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from pathlib import Path

import pytest

from kubespot.sim.kubesim import cli
from kubespot.sim.kubesim.controllers import ControllerConfig, ControllerManager
from kubespot.sim.kubesim.controllers.pacing import Pacer
from kubespot.sim.kubesim.store import Store


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.cpu = 10.0

    def __call__(self) -> float:
        return self.now

    def cpu_clock(self) -> float:
        return self.cpu

    def advance(self, seconds: float, *, busy: float = 1.0) -> None:
        """Let ``seconds`` of wall time pass, the loop's thread busy for ``busy`` of it."""
        self.now += seconds
        self.cpu += seconds * busy


def pacer(clock: Clock, **kwargs: float) -> Pacer:
    return Pacer(
        min_share=kwargs.pop("min_share", 0.4),
        busy_slice=0.001,
        idle_slice=0.02,
        window=0.05,
        linger=0.25,
        quiet=0.002,
        clock=clock,
        cpu_clock=clock.cpu_clock,
    )


def work(p: Pacer, clock: Clock, seconds: float) -> None:
    """A slice of control-plane work of ``seconds``, charged."""
    started = clock()
    clock.advance(seconds)
    p.charge(started)


def request(p: Pacer, clock: Clock) -> None:
    p.request_started()
    clock.advance(0.0003)
    p.request_finished()


def test_without_requests_work_loops_keep_their_long_slices_and_never_wait() -> None:
    clock = Clock()
    p = pacer(clock)
    work(p, clock, 0.1)  # a control plane that had the loop to itself
    started = clock()
    clock.advance(0.005)
    assert not p.due(started)
    clock.advance(0.016)
    assert p.due(started)
    assert p.hold_for() == 0.0
    assert not p.requests_coming()


def test_with_requests_coming_and_the_share_used_a_loop_yields_after_a_short_slice_and_stays_away() -> None:
    clock = Clock()
    p = pacer(clock)
    work(p, clock, 0.05)  # all of the last window: share ~0.6 after decay
    request(p, clock)
    started = clock()
    clock.advance(0.0015)
    assert p.due(started)
    p.charge(started)
    hold = p.hold_for()
    assert 0.0 < hold <= p.quiet
    # Staying away while requests keep the loop busy lets the share decay to min_share, no further.
    for _ in range(200):
        if p.hold_for() == 0.0:
            break
        clock.advance(p.hold_for())
        request(p, clock)
    assert p.hold_for() == 0.0
    assert p.share() == pytest.approx(0.4, abs=0.05)


def test_below_its_share_the_control_plane_is_not_cut_short_by_requests() -> None:
    clock = Clock()
    p = pacer(clock)
    request(p, clock)
    started = clock()
    clock.advance(0.005)  # 5 ms of work against a 20 ms floor (0.4 x 50 ms): go on
    assert not p.due(started)
    assert p.hold_for() == 0.0
    clock.advance(0.016)  # now past its share (and past the idle slice)
    assert p.due(started)


def test_share_is_measured_over_a_short_window() -> None:
    clock = Clock()
    p = pacer(clock)
    work(p, clock, 0.05)  # a slice counts when it ends
    assert p.share() == pytest.approx(1.0)
    clock.advance(0.05, busy=0.0)
    assert p.share() == pytest.approx(math.exp(-1))
    clock.advance(0.45, busy=0.0)
    assert p.share() < 0.001


def test_requests_stop_coming_after_the_linger() -> None:
    clock = Clock()
    p = pacer(clock)
    p.request_started()
    clock.advance(1.0)
    assert p.requests_coming()  # still being served
    p.request_finished()
    assert p.in_flight == 0 and p.served == 1
    clock.advance(0.2)
    assert p.requests_coming()
    clock.advance(0.1)
    assert not p.requests_coming()


def test_a_step_away_without_requests_ends_the_hold_for_a_window() -> None:
    clock = Clock()
    p = pacer(clock)
    work(p, clock, 0.05)
    request(p, clock)
    assert p.hold_for() > 0.0
    since, cpu, activity = clock(), clock.cpu, 2
    clock.advance(0.002, busy=0.0)
    p.stayed_away(since, cpu, activity, clock(), clock.cpu)
    assert p.hold_for() == 0.0  # nobody needed the time: do not sit idle beside the API
    clock.advance(0.051)
    work(p, clock, 0.03)
    request(p, clock)
    assert p.hold_for() > 0.0  # a window later, with requests again, the API goes first again


def test_a_step_away_with_requests_but_an_idle_loop_ends_the_hold() -> None:
    clock = Clock()
    p = pacer(clock)
    work(p, clock, 0.05)
    request(p, clock)
    since, cpu, activity = clock(), clock.cpu, 2
    clock.advance(0.002, busy=0.2)  # requests came, but the loop idled 80 % of the step
    request(p, clock)
    p.stayed_away(since, cpu, activity, clock(), clock.cpu)
    assert p.hold_for() == 0.0


def test_a_step_away_with_the_loop_busy_serving_requests_keeps_holding() -> None:
    clock = Clock()
    p = pacer(clock)
    work(p, clock, 0.05)
    request(p, clock)
    since, cpu, activity = clock(), clock.cpu, 2
    clock.advance(0.002, busy=0.9)
    request(p, clock)
    p.stayed_away(since, cpu, activity, clock(), clock.cpu)
    assert p.hold_for() > 0.0


@pytest.mark.parametrize(
    "config", [ControllerConfig(api_first=False), ControllerConfig(control_plane_share=1.0)]
)
def test_switched_off_the_control_plane_never_waits_for_requests(config: ControllerConfig) -> None:
    clock = Clock()
    p = Pacer(
        enabled=config.api_first, min_share=config.control_plane_share, clock=clock, cpu_clock=clock.cpu_clock
    )
    work(p, clock, 0.05)
    request(p, clock)
    started = clock()
    clock.advance(0.005)
    assert not p.enabled
    assert not p.due(started)
    assert p.hold_for() == 0.0


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5])
def test_a_share_outside_0_1_is_refused(share: float) -> None:
    with pytest.raises(ValueError, match="share"):
        Pacer(min_share=share)


def test_the_manager_gives_its_controllers_the_server_facing_pacer() -> None:
    manager = ControllerManager(Store(), ControllerConfig(control_plane_share=0.3))
    assert manager.pacer.enabled
    assert manager.pacer.min_share == 0.3


async def test_pause_stays_away_until_the_share_has_decayed_while_requests_keep_the_loop_busy() -> None:
    # Real clocks; the loop's CPU clock is wall time, i.e. "the loop was busy all along".
    p = Pacer(window=0.05, quiet=0.002, cpu_clock=time.perf_counter)
    started = p.clock() - 0.05  # a slice that took the whole window
    p.request_started()  # a request in progress: clients are waiting
    try:
        await p.pause(started)
    finally:
        p.request_finished()
    assert p.pauses == 1
    assert p.share() <= 0.4 + 0.05


async def test_pause_only_yields_when_no_request_comes() -> None:
    p = Pacer(window=0.05, quiet=0.002)
    done = asyncio.Event()

    async def other() -> None:
        done.set()

    task = asyncio.get_running_loop().create_task(other())
    await p.pause(p.clock() - 0.05)
    assert done.is_set()  # it let the loop run
    assert p.pauses == 0  # but did not stay away: no request was ever served
    await task


def test_cli_flags_set_the_share_and_switch_api_first_off(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    out = str(tmp_path / "kubeconfig")
    sim = cli.build(
        parser.parse_args(["--nodes", "0", "--kubeconfig-out", out, "--control-plane-share", "0.3"])
    )
    assert sim.controllers.pacer.enabled and sim.controllers.pacer.min_share == 0.3
    assert sim.server.pacer is sim.controllers.pacer
    off = cli.build(parser.parse_args(["--nodes", "0", "--kubeconfig-out", out, "--no-api-first"]))
    assert not off.controllers.pacer.enabled
    with pytest.raises(ValueError, match="control-plane-share"):
        cli.build(parser.parse_args(["--kubeconfig-out", out, "--control-plane-share", "0"]))
