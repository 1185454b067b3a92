"""Shared by the agent benchmarks: imdssim as a subprocess, real ``kubespot agent`` processes, /proc.

imdssim runs in a process of its own (``kubespot imds-sim``), as real IMDS is not in the API server's
process: its answers are never held up by whatever the benchmark process (kubesim, the measuring)
is busy with. Notices are fired through its control endpoint with an absolute ``at`` (epoch
seconds), so the moment a notice becomes visible is known exactly, independent of when the request
that scheduled it was sent.

Each agent is ``python -m kubespot agent`` exactly as the DaemonSet runs it, configured through
``KUBESPOT_*`` environment variables only; its log goes to a file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

READY_LINE = "IMDS monitor watching"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def progress(message: str) -> None:
    """Progress on stderr: stdout carries the one JSON object only."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- imdssim ---------------------------------------------------------------------------------------


@dataclass
class ImdsProcess:
    proc: subprocess.Popen[str]
    control_url: str
    #: instance id -> the base URL an agent on that instance uses (``<root>/<instance-id>``)
    instance_urls: dict[str, str]

    def stop(self) -> None:
        stop_process(self.proc)


def spawn_kubespot(*args: str, log: Path, python: Sequence[str] = (sys.executable,)) -> subprocess.Popen[str]:
    """``python -m kubespot ARGS`` (a simulator) with its stdout to read and its stderr to ``log``: a
    file, not a pipe nobody reads, so that a chatty process never blocks on a full pipe."""
    proc = subprocess.Popen(
        [*python, "-m", "kubespot", *args], stdout=subprocess.PIPE, stderr=log.open("w"), text=True
    )
    assert proc.stdout is not None
    return proc


def stop_process(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, and SIGKILL if it has not exited 10 s later."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_imdssim(instances: int, workdir: Path) -> ImdsProcess:
    """``kubespot imds-sim`` with ``instances`` spot instances on a free port; waits until it serves."""
    log = workdir / "imdssim.log"
    proc = spawn_kubespot(
        "imds-sim", "--port", "0", "--instances", str(instances), "--life-cycle", "spot", log=log
    )
    assert proc.stdout is not None
    urls: dict[str, str] = {}
    for line in proc.stdout:
        m = re.match(r"\s+(i-[0-9a-f]+)\s+(http://\S+)", line)
        if m:
            urls[m.group(1)] = m.group(2)
        m = re.match(r"\s+control\s+(http://\S+)", line)
        if m:
            if len(urls) != instances:
                raise RuntimeError(f"imdssim listed {len(urls)} instances, expected {instances}")
            return ImdsProcess(proc, m.group(1), urls)
    raise RuntimeError(f"imdssim did not start: {log.read_text()[-2000:]}")


async def fire_spot_itn(
    session: aiohttp.ClientSession,
    control_url: str,
    instance_id: str,
    *,
    at: float,
    lead_seconds: float = 120.0,
) -> None:
    """Schedule a spot interruption notice on ``instance_id`` that becomes visible at ``at`` (epoch s)."""
    body = {"kind": "spot-itn", "at": at, "lead_seconds": lead_seconds}
    async with session.post(f"{control_url}/instances/{instance_id}/events", json=body) as resp:
        if resp.status != 201:
            raise RuntimeError(f"imdssim refused the notice: {resp.status} {await resp.text()}")


# --- agents ----------------------------------------------------------------------------------------


def agent_env(node_name: str, kubeconfig: Path, imds_url: str, **extra: str) -> dict[str, str]:
    """The environment of one agent: this one's own minus any KUBESPOT_*/KUBECONFIG, plus ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBESPOT_", "KUBECONFIG"))}
    env["KUBESPOT_NODE_NAME"] = node_name
    env["KUBESPOT_KUBECONFIG"] = str(kubeconfig)
    env["KUBESPOT_IMDS_URL"] = imds_url
    env.update(extra)
    return env


@dataclass
class Agent:
    node: str
    proc: asyncio.subprocess.Process
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc.returncode is None

    def text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    async def stop(self, within: float = 10.0) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), within)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()


async def start_agent(node: str, env: dict[str, str], log_path: Path) -> Agent:
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kubespot",
            "agent",
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
        )
    return Agent(node, proc, log_path)


async def wait_ready(agents: list[Agent], within: float) -> float:
    """Wait until every agent has logged that its IMDS monitor polls; returns the seconds it took."""
    started = time.monotonic()
    waiting = list(agents)
    while waiting:
        for agent in list(waiting):
            if not agent.running:
                raise RuntimeError(f"agent for {agent.node} exited: {agent.text()[-3000:]}")
            if READY_LINE in agent.text():
                waiting.remove(agent)
        if not waiting:
            break
        if time.monotonic() - started > within:
            tail = waiting[0].text()[-2000:]
            raise RuntimeError(f"{len(waiting)} agents not ready after {within:.0f} s: {tail}")
        await asyncio.sleep(0.2)
    return time.monotonic() - started


async def stop_agents(agents: list[Agent]) -> None:
    await asyncio.gather(*(a.stop() for a in agents), return_exceptions=True)


# --- /proc -----------------------------------------------------------------------------------------


def status_kib(pid: int, field: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM, ...)."""
    text = Path(f"/proc/{pid}/status").read_text()
    m = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    if m is None:
        raise RuntimeError(f"no {field} in /proc/{pid}/status")
    return int(m.group(1))


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (not its children) in seconds, from /proc/<pid>/stat."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "; comm may contain spaces
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def mapped_extensions(pid: int) -> list[str]:
    """The compiled extension modules (``*.so`` under site-packages) mapped into ``pid``."""
    found: set[str] = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if "site-packages/" in path and ".so" in path:
            found.add(path.split("site-packages/", 1)[1])
    return sorted(found)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def round_all(obj: dict[str, Any], digits: int = 3) -> dict[str, Any]:
    return {k: round(v, digits) if isinstance(v, float) else v for k, v in obj.items()}


#: Iterations of ``machine_speed``'s loop: ~50-100 ms of one core on the project's machine kind.
SPEED_LOOP = 1_000_000


def machine_speed(runs: int = 5) -> dict[str, float]:
    """How fast this machine runs Python, so wall-clock figures from two machines can be compared:
    the best of ``runs`` timings of a fixed pure-Python loop (``cpu_loop_ms``: CPU time of this
    process, the core's speed; ``wall_loop_ms``: wall time, larger when other processes take the
    core). Lower is faster."""
    cpu = wall = float("inf")
    for _ in range(runs):
        started_cpu, started_wall = time.process_time(), time.perf_counter()
        total = 0
        for i in range(SPEED_LOOP):
            total += i * i % 7
        cpu = min(cpu, time.process_time() - started_cpu)
        wall = min(wall, time.perf_counter() - started_wall)
    return {"cpu_loop_ms": round(1000 * cpu, 1), "wall_loop_ms": round(1000 * wall, 1)}
