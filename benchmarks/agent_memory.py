"""Footprint of one `kubespot agent` process: RSS idle and at peak (draining a 110-pod node), idle CPU.

The cluster is drain_vs_kubectl.py's, built by its own code: node `node-a` runs 10 Deployments x 11
replicas (half with a 0 s grace period, half with 5 s used in full), each behind a
PodDisruptionBudget allowing one disruption, plus a DaemonSet pod; spare nodes take the
replacements. `kubespot kubesim` and `kubespot imds-sim` run as their own processes. One agent runs
as the DaemonSet runs it (`python -m kubespot agent`, default settings, 1 s poll interval).

Procedure: start the agent and sample its VmRSS every 50 ms from then on; once it polls IMDS, let it
settle; idle CPU = utime+stime (/proc/<pid>/stat) over the idle window / the window; idle RSS =
VmRSS at the end of it. Then a spot interruption notice (120 s lead) is fired and the benchmark waits
until no workload pod is left on node-a; peak RSS = VmHWM (/proc/<pid>/status) at the end, which
covers start-up too (the highest VmRSS sample while draining is `drain_peak_rss_mib`). Also
reported: which heavy modules `import kubespot.agent.command` loads (a separate interpreter) and
which compiled extensions are mapped into the running agent.
Prints one JSON object.

    python benchmarks/agent_memory.py
    python benchmarks/agent_memory.py --deployments 2 --replicas 2 --idle-seconds 2      # smoke
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from agent_harness import (
    agent_env,
    cpu_seconds,
    fire_spot_itn,
    mapped_extensions,
    progress,
    round_all,
    start_agent,
    start_imdssim,
    status_kib,
    wait_ready,
)
from drain_vs_kubectl import NODE, add_cluster_arguments, cluster, settle, start_kubesim
from kubespot.config.kube import KubeSettings
from kubespot.kube import connect

GOAL_PEAK_RSS_MIB = 48.0
GOAL_IDLE_CPU_PERCENT = 1.0
HEAVY = ("boto3", "botocore", "pydantic", "kubernetes", "aiohttp", "moto")
SAMPLE_EVERY = 0.05


def forbidden_modules() -> list[str]:
    """Heavy packages that importing the agent's command module pulls in (must be none)."""
    code = (
        "import json, sys, kubespot.agent.command; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return list(json.loads(res.stdout))


class RssSampler:
    """VmRSS of ``pid`` every 50 ms, in a task, until stopped or the process is gone."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[int] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                self.samples.append(status_kib(self.pid, "VmRSS"))
            except (OSError, RuntimeError):
                return
            await asyncio.sleep(SAMPLE_EVERY)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def peak_mib(self) -> float:
        return max(self.samples, default=0) / 1024


async def workload_pods_left(kubeconfig: Path) -> int:
    kube = connect(KubeSettings(kubeconfig=str(kubeconfig)))
    try:
        pods = (await kube.list_pods_on_node(NODE)).pods
    finally:
        await kube.close()
    return sum(1 for p in pods if p.namespace == "bench")


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    forbidden = forbidden_modules()
    pods = args.deployments * args.replicas
    with tempfile.TemporaryDirectory(prefix="agent-memory-") as tmpdir:
        tmp = Path(tmpdir)
        kubesim, kubeconfig = start_kubesim(
            cluster(args.deployments, args.replicas, args.spares), tmp, args.pod_start_seconds
        )
        imds = start_imdssim(1, tmp)
        agent = None
        sampler = None
        try:
            kube = connect(KubeSettings(kubeconfig=str(kubeconfig)))
            try:
                await settle(kube, pods, args.spares)
            finally:
                await kube.close()
            progress(f"kubesim: {pods} workload pods running on {NODE}; starting the agent")
            [(iid, url)] = imds.instance_urls.items()
            agent = await start_agent(NODE, agent_env(NODE, kubeconfig, url), tmp / "agent.log")
            sampler = RssSampler(agent.pid)
            sampler.start()
            ready_s = await wait_ready([agent], within=60)
            progress(f"agent polling after {ready_s:.1f} s; settling {args.settle:.0f} s")
            await asyncio.sleep(args.settle)

            progress(f"measuring idle CPU over {args.idle_seconds:.0f} s")
            cpu0, t0 = cpu_seconds(agent.pid), time.monotonic()
            await asyncio.sleep(args.idle_seconds)
            cpu1, t1 = cpu_seconds(agent.pid), time.monotonic()
            idle_cpu_percent = 100 * (cpu1 - cpu0) / (t1 - t0)
            idle_rss = status_kib(agent.pid, "VmRSS") / 1024
            startup_hwm = status_kib(agent.pid, "VmHWM") / 1024

            progress("firing the spot interruption notice (120 s lead); waiting for the drain")
            notice = time.time() + 0.2
            first_drain_sample = len(sampler.samples)
            async with aiohttp.ClientSession() as session:
                await fire_spot_itn(session, imds.control_url, iid, at=notice)
            deadline = time.monotonic() + args.timeout
            while await workload_pods_left(kubeconfig):
                if time.monotonic() > deadline or not agent.running:
                    raise RuntimeError(f"node not drained: {agent.text()[-3000:]}")
                await asyncio.sleep(0.25)
            drain_s = time.time() - notice
            drain_peak = max(sampler.samples[first_drain_sample:], default=0) / 1024
            await asyncio.sleep(1.0)  # the agent records the outcome, logs, writes its state
            peak = status_kib(agent.pid, "VmHWM") / 1024
            after_rss = status_kib(agent.pid, "VmRSS") / 1024
            drain_cpu = cpu_seconds(agent.pid) - cpu1
            extensions = mapped_extensions(agent.pid)
            await sampler.stop()
        except BaseException:
            for name in ("kubesim.log", "imdssim.log", "agent.log"):
                with contextlib.suppress(OSError):
                    progress(f"--- {name} (tail) ---\n{(tmp / name).read_text(errors='replace')[-3000:]}")
            progress(f"kubesim exit code: {kubesim.poll()}")
            raise
        finally:
            if sampler is not None:
                await sampler.stop()
            if agent is not None:
                await agent.stop()
            imds.stop()
            kubesim.terminate()
            kubesim.wait(timeout=10)
    out: dict[str, Any] = {
        "pods": pods,
        "idle_rss_mib": idle_rss,
        "startup_hwm_mib": startup_hwm,
        "peak_rss_mib": peak,
        "sampled_peak_rss_mib": sampler.peak_mib,
        "rss_samples": len(sampler.samples),
        "drain_peak_rss_mib": drain_peak,
        "after_drain_rss_mib": after_rss,
        "idle_cpu_percent": idle_cpu_percent,
        "idle_seconds": args.idle_seconds,
        "drain_s": drain_s,
        "drain_cpu_s": drain_cpu,
        "agent_ready_s": ready_s,
        "goal_peak_rss_mib": GOAL_PEAK_RSS_MIB,
        "goal_idle_cpu_percent": GOAL_IDLE_CPU_PERCENT,
        "peak_met": peak <= GOAL_PEAK_RSS_MIB,
        "idle_cpu_met": idle_cpu_percent <= GOAL_IDLE_CPU_PERCENT,
        "met": peak <= GOAL_PEAK_RSS_MIB and idle_cpu_percent <= GOAL_IDLE_CPU_PERCENT and not forbidden,
        "forbidden_modules": forbidden,
        "mapped_extensions": extensions,
    }
    return round_all(out, 2)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_cluster_arguments(parser)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds from ready to idle window")
    parser.add_argument("--idle-seconds", type=float, default=30.0, help="idle CPU measurement window")
    parser.add_argument("--timeout", type=float, default=180.0, help="longest wait for the drain (s)")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main_async(args))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
