"""Notice -> tainted+cordoned latency of real `kubespot agent` processes, one per spot node.

Setup: kubesim in this process with N spot nodes (a Deployment of 2 pods per node and a DaemonSet,
scheduler and kubelets on) and two on-demand spares; `kubespot imds-sim` in its own process with N
spot instances; N `python -m kubespot agent` processes, one per node, each pointed at its instance
(`KUBESPOT_IMDS_URL=<imdssim>/<instance-id>`) at the default 1 s poll interval. Once every agent
polls, N spot interruption notices are scheduled in imdssim at absolute times, one every 0.2-0.5 s
(random gaps, random order), so each one measures one agent's reaction rather than a queue.

Latency of one interruption = the moment kubesim commits a Node that carries both the
`kubespot.io/spot-itn` taint and spec.unschedulable=true (seen by an in-process store listener,
synchronously at commit) minus the `at` the notice was scheduled with (when imdssim starts showing
it). It is split with the agents' JSON logs into detection (notice -> the IMDS monitor logs the
event; bounded by the poll interval) and reaction (that log line -> the fenced Node is committed).
Prints one JSON object.

    python benchmarks/agent_reaction.py                 # 50 agents, 50 interruptions
    python benchmarks/agent_reaction.py --n 3           # smoke
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from agent_harness import (
    Agent,
    agent_env,
    fire_spot_itn,
    percentile,
    progress,
    round_all,
    start_agent,
    start_imdssim,
    stop_agents,
    wait_ready,
)
from kubespot.config.kube import KubeSettings
from kubespot.kube import connect
from kubespot.sim.kubesim import conventions
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.store import NODE_KEY, WatchEvent
from kubespot.sim.kubesim.testing import daemonset, deployment, is_ready, node, until

TAINT_KEY = "kubespot.io/spot-itn"
SPARES = 2
MONITOR_LOGGER = "kubespot.sources.imds.monitor"
MEASURED_WITH = (
    "in-process kubesim store listener (kubesim runs in the benchmark process; the listener is called "
    "synchronously when the fenced Node is committed); imdssim in its own process; notice time = the "
    "absolute `at` the notice was scheduled with"
)

Obj = dict[str, Any]


def spot_name(i: int) -> str:
    return f"spot-{i:03d}"


def cluster(instance_ids: list[str]) -> list[Obj]:
    """N spot nodes (one per instance) with two Deployment pods and one DaemonSet pod each; spares
    that open once the pods run, so the drains that follow the fences have somewhere to go."""
    objects: list[Obj] = []
    for i, iid in enumerate(instance_ids):
        spot = node(spot_name(i), labels={"karpenter.sh/capacity-type": "spot", "lifecycle": "Ec2Spot"})
        spot.setdefault("spec", {})["providerID"] = f"aws:///us-east-1a/{iid}"
        objects.append(spot)
    objects += [node(f"od-{i}", pods="250", unschedulable=True) for i in range(SPARES)]
    web = deployment("web", 2 * len(instance_ids), namespace="default", grace=2)
    web["spec"]["template"]["metadata"]["annotations"] = {conventions.SHUTDOWN_SECONDS: "0.2"}
    objects.append(web)
    objects.append(daemonset("node-agent"))
    return objects


def fenced(obj: Obj) -> bool:
    spec = obj.get("spec") or {}
    taints = spec.get("taints") or ()
    return bool(spec.get("unschedulable")) and any(t.get("key") == TAINT_KEY for t in taints)


def detection_time(agent: Agent) -> float | None:
    """Epoch seconds of the agent's IMDS monitor logging the spot event (JSON logs, ms resolution)."""
    for raw in agent.log_path.read_bytes().splitlines():
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if (
            isinstance(doc, dict)
            and doc.get("logger") == MONITOR_LOGGER
            and str(doc.get("message", "")).startswith("event ")
        ):
            return datetime.fromisoformat(str(doc["time"])).timestamp()
    return None


def summary(values: list[float], prefix: str) -> dict[str, float]:
    if not values:
        return {}
    return {
        f"{prefix}p50_s": percentile(values, 50),
        f"{prefix}p90_s": percentile(values, 90),
        f"{prefix}p99_s": percentile(values, 99),
        f"{prefix}max_s": max(values),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="agent-reaction-") as tmpdir:
        tmp = Path(tmpdir)
        imds = start_imdssim(args.n, tmp)
        agents: list[Agent] = []
        try:
            ids = list(imds.instance_urls)
            node_of = {iid: spot_name(i) for i, iid in enumerate(ids)}
            commits: dict[str, float] = {}
            all_fenced = asyncio.Event()

            def listener(event: WatchEvent) -> None:
                name = event.obj["metadata"]["name"]
                if name not in commits and fenced(event.obj):
                    commits[name] = time.time()
                    if len(commits) == args.n:
                        all_fenced.set()

            config = ControllerConfig(pod_start_seconds=0.2)
            async with KubeSim(objects=cluster(ids), controllers=config) as sim:
                sim.store.add_listener(listener, [NODE_KEY])
                pods_rt = sim.store.registry.lookup("", "v1", "pods")
                assert pods_rt is not None

                async def settled() -> bool:
                    pods = sim.store.list(pods_rt)
                    return len(pods) >= 3 * args.n and all(is_ready(p) for p in pods)

                await until(settled, within=60, interval=0.2)
                kube = connect(KubeSettings(kubeconfig=str(sim.kubeconfig_path)))
                try:
                    for i in range(SPARES):
                        await kube.uncordon(f"od-{i}")
                finally:
                    await kube.close()
                progress(f"kubesim: {args.n} spot nodes, {3 * args.n} pods running; starting {args.n} agents")

                extra = {
                    "KUBESPOT_IMDS_POLL_INTERVAL": str(args.poll_interval),
                    "KUBESPOT_OBSERVABILITY_JSON_LOGGING": "true",
                }
                agents = list(
                    await asyncio.gather(
                        *(
                            start_agent(
                                node_of[iid],
                                agent_env(node_of[iid], sim.kubeconfig_path, url, **extra),
                                tmp / f"agent-{node_of[iid]}.log",
                            )
                            for iid, url in imds.instance_urls.items()
                        )
                    )
                )
                ready_s = await wait_ready(agents, within=60 + 2 * args.n)
                progress(f"{args.n} agents polling after {ready_s:.1f} s; settling {args.settle:.0f} s")
                await asyncio.sleep(args.settle)

                order = list(ids)
                rng.shuffle(order)
                at: dict[str, float] = {}
                t = time.time() + 1.0
                for iid in order:
                    at[node_of[iid]] = t
                    t += rng.uniform(args.min_gap, args.max_gap)
                async with aiohttp.ClientSession() as session:
                    for iid in order:
                        await fire_spot_itn(session, imds.control_url, iid, at=at[node_of[iid]])
                last = max(at.values())
                progress(f"{args.n} notices scheduled over {last - min(at.values()):.1f} s")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(all_fenced.wait(), last + args.timeout - time.time())
                sim.store.remove_listener(listener)
                # Let the JSON log lines reach the files before reading them.
                await asyncio.sleep(0.5)
                await stop_agents(agents)
        finally:
            await stop_agents(agents)
            imds.stop()

        latencies = [commits[n] - at[n] for n in at if n in commits]
        detect: list[float] = []
        react: list[float] = []
        for agent in agents:
            seen = detection_time(agent)
            if seen is not None and agent.node in commits:
                detect.append(seen - at[agent.node])
                react.append(commits[agent.node] - seen)
    if not latencies:
        raise RuntimeError("no node was fenced")
    goal = args.poll_interval + 0.15
    p99 = percentile(latencies, 99)
    missed = args.n - len(latencies)
    out: dict[str, Any] = {
        "n": args.n,
        "fenced": len(latencies),
        "missed": missed,
        "poll_interval_s": args.poll_interval,
        "p50_s": percentile(latencies, 50),
        "p90_s": percentile(latencies, 90),
        "p99_s": p99,
        "max_s": max(latencies),
        "min_s": min(latencies),
        "mean_s": sum(latencies) / len(latencies),
        "goal_p99_s": goal,
        "met": missed == 0 and p99 <= goal,
        **summary(detect, "detect_"),
        **summary(react, "react_"),
        "agents_ready_s": ready_s,
        "notice_gap_s": [args.min_gap, args.max_gap],
        "percentiles": "linear interpolation between closest ranks",
        "measured_with": MEASURED_WITH,
    }
    out = round_all(out)
    out["latencies_s"] = sorted(round(v, 3) for v in latencies)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=50, help="spot nodes, agents and interruptions")
    parser.add_argument(
        "--poll-interval", type=float, default=1.0, help="KUBESPOT_IMDS_POLL_INTERVAL of the agents"
    )
    parser.add_argument("--min-gap", type=float, default=0.2, help="shortest gap between two notices (s)")
    parser.add_argument("--max-gap", type=float, default=0.5, help="longest gap between two notices (s)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds between agents ready and notices")
    parser.add_argument("--timeout", type=float, default=15.0, help="wait after the last notice (s)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main_async(args))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
