"""Synchronous use (background thread, plain urllib) and the command line (flags, scenario file,
exit codes, and a real process that prints its URLs and stops on SIGTERM)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from imdssim_http import IID

from kubespot.sim.imdssim import FakeClock, ImdsSim, ImdsSimThread, SimInstance
from kubespot.sim.imdssim.cli import add_arguments, build_sim, main

SRC = Path(__file__).resolve().parents[4] / "src"


def fetch(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_thread_runner_with_urllib() -> None:
    clock = FakeClock()
    with ImdsSimThread(ImdsSim([SimInstance(IID)], clock=clock)) as sim:
        assert fetch(sim.url + "/latest/meta-data/instance-id") == (200, IID)
        status, token = fetch(
            sim.url + "/latest/api/token", "PUT", {"X-aws-ec2-metadata-token-ttl-seconds": "30"}
        )
        assert status == 200
        sim.call(lambda: sim.fleet.fire_spot_itn(IID, "hibernate", at=clock() + 1))
        path = "/latest/meta-data/spot/instance-action"
        assert fetch(sim.instance_url(IID) + path, headers={"X-aws-ec2-metadata-token": token})[0] == 404
        clock.advance(1)
        status, body = fetch(sim.instance_url(IID) + path, headers={"X-aws-ec2-metadata-token": token})
        assert status == 200 and json.loads(body)["action"] == "hibernate"
        url = sim.url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/latest/meta-data/instance-id", timeout=2)


def test_thread_runner_reports_start_failure() -> None:
    with ImdsSimThread(ImdsSim()) as first:
        port = int(first.url.rsplit(":", 1)[1])
        with pytest.raises(OSError), ImdsSimThread(ImdsSim(port=port)):
            pass


def test_flags_build_the_fleet_and_events() -> None:
    args = parse(
        "--port", "0", "--instances", "3", "--target", "all", "--spot-itn-after", "0", "--action", "stop",
        "--rebalance-after", "0", "--scheduled-event", "instance-reboot", "--not-before-in", "600",
        "--scheduled-canceled-after", "60", "--asg-terminated-after", "0", "--require-v2",
        "--fault", "latency,seconds=0", "--life-cycle", "on-demand", "--instance-type", "t3.micro",
    )  # fmt: skip
    sim = build_sim(args)
    fleet = sim.fleet
    assert len(fleet) == 3 and fleet.require_v2
    now = fleet.clock()
    for inst in fleet.instances():
        assert inst.instance_type == "t3.micro" and inst.life_cycle == "on-demand"
        spot = inst.spot_at(now)
        assert spot is not None and spot.action == "stop"
        assert inst.rebalance_at(now) is not None
        (event,) = inst.scheduled_at(now)
        assert event.code == "instance-reboot" and event.state_at(now + 60) == "canceled"
        assert event.not_before == pytest.approx(now + 600, abs=1)
        assert inst.asg_state_at(now) == "Terminated"
    assert [f.kind for f in fleet.faults.all()] == ["latency"]


def test_default_target_is_the_first_instance_only() -> None:
    sim = build_sim(parse("--instances", "2", "--spot-itn-after", "0"))
    first, second = sim.fleet.instances()
    now = sim.fleet.clock()
    assert first.spot_at(now) is not None and second.spot_at(now) is None


def test_scenario_file_plus_flags(tmp_path: Path) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"instances": [{"instance_id": IID}]}))
    sim = build_sim(parse("--scenario", str(scenario), "--target", IID, "--rebalance-after", "5"))
    (inst,) = sim.fleet.instances()
    assert inst.instance_id == IID and inst.rebalance_at(sim.fleet.clock() + 5) is not None


def test_bad_inputs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"instances": [{"events": [{"kind": "spot-itn", "action": "explode"}]}]}')
    assert main(parse("--scenario", str(bad))) == 2
    assert "action" in capsys.readouterr().err
    assert main(parse("--target", "i-0nope", "--spot-itn-after", "1")) == 2
    with pytest.raises(SystemExit):
        parse("--fault", "explode")
    with pytest.raises(SystemExit):
        parse("--spot-itn-after", "-3")


def test_cli_process_prints_urls_and_stops_on_sigterm() -> None:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubespot.sim.imdssim.cli", "--port", "0", "--instances", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        header = proc.stdout.readline()
        assert "2 instance(s)" in header, header + (proc.stderr.read() if proc.stderr else "")
        root = proc.stdout.readline().split()[1]
        assert fetch(root + "/latest/meta-data/instance-id")[0] == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
