"""The provisioning loop at scale: pending pods → NodeClaims → CreateFleet → Nodes → bound pods.

Setup per size (``--sizes``, default 1 000 and 5 000 pods): a fresh provisioning world
(``kubespot.sandbox.provision_world``: kubesim with the chart's CRDs and two NodePools, moto's spot
market in this process with a VPC in three zones and the interruption queue, the node joiner in
this process) and one real ``python -m kubespot controller`` process with provisioning on. The
NodePools allow the sandbox's types plus ``m5.4xlarge`` / ``c5.4xlarge`` / ``r5.4xlarge`` so that
thousands of small pods do not need hundreds of nodes.

One Deployment of ``size`` replicas (100m CPU, 128Mi, preferring spot) is created at once; the clock
starts at its creation and runs until:

- ``claims_created_s``: the last NodeClaim created for them is seen (watch);
- ``launched_s``: the last of those NodeClaims has its providerID (CreateFleet answered, status written);
- ``bound_s``: every pod is bound to a node (so it includes the boot: the instance's registration
  ``--boot`` real seconds after its launch and Ready 0.5 s later, ``boot_delay_s``, reported apart);
- ``fleet_calls``: CreateFleet calls until then (awssim's call log).

Then the spot market runs dry (every spot pool's capacity = what runs there) and a second
Deployment of ``size / 100`` (at least 5) pods of 3.5 CPU each, too large for what is left on the
nodes, is created: ``fallback_p99_s`` (and ``fallback_p50_s``) is issue 14 §5's fallback latency
(goal p99 ≤ 2 s) "from the error to the next launch call" as the controller lives it: for each
insufficient-capacity answer, from the moment the controller has it to the start of its next launch
call (``controller_next_calls``, from the controller's log: each launch logs its end and duration).
``fallback_p99_ec2_s`` is the same seen from EC2's side (awssim's timestamped call log,
``GET /_kubespot/ec2/fleet-calls``: from the market's refusal to the next call it serves), which
adds the time each call waits to be served by the single-process market (its calls are served one
at a time, ten to fifty at once here) and the answer's way back; ``fallback_s`` beside them (EC2's
side), from the first refusal to the first launch after it.

``fallback_breakdown`` says where that time goes, from the controller's own log after the market ran
dry (median and max in seconds): ``window`` (a re-plan's wait from the first trigger to its pass:
a claim deleted while a pass runs waits for it), the pass's ``lists`` (the informers' read) /
``prepare`` (pods sorted out, the catalog read) / ``simulation`` / ``build`` (events, limits, the
NodeClaims built) / ``creation``, and ``launch_call`` (the NodeClaim controller's launch: the tag
lookup and CreateFleet) of the refused and of the launched claims.

``controller_cpu_s`` is the controllers' user+system CPU seconds summed over the sizes (each size
has its own process; per size in ``<size>.controller_cpu_s``), ``peak_rss_mib`` the largest VmHWM.
Prints one JSON object; progress goes to stderr.

``--list-load NODES`` measures something else instead: the LIST load the controller puts on the API
server of a cluster of ``NODES`` synthetic nodes (``--list-pods-per-node`` pods each) once it has
started and gone quiet (nothing pending, no NodeClaim): after ``--list-warmup`` seconds, the LIST
requests kubesim serves (its request counters, by resource) during ``--list-window`` seconds, as
``list_load.lists_per_min`` (by resource) and ``list_load.total_per_min``; ``list_load.watches``
is the WATCH requests made meanwhile, by resource. The controller reads Nodes and NodeClaims from
its informers, so a quiet controller should list nothing.

    python benchmarks/provision_loop.py                      # 1 000 and 5 000 pods
    python benchmarks/provision_loop.py --sizes 100          # smoke
    python benchmarks/provision_loop.py --list-load 1000     # LISTs per minute, 1 000 nodes
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubespot.sandbox import provision_world as pw
from kubespot.sandbox.observer import TimelineEntry
from kubespot.sandbox.provision import ProvisionTracker, deployment
from kubespot.sandbox.provision_summary import next_call_times, percentile, time_to_fall_back
from kubespot.sandbox.timing import Timing
from kubespot.sim.awssim import MotoServer

TYPES = (*pw.INSTANCE_TYPES, "m5.4xlarge", "c5.4xlarge", "r5.4xlarge")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"[provision_loop {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


_PASS = re.compile(
    r"window \w+ (?P<window>[\d.]+) s, lists (?P<lists>[\d.]+) s, prepare (?P<prepare>[\d.]+) s, "
    r"simulation (?P<simulation>[\d.]+) s, build (?P<build>[\d.]+) s, creation (?P<creation>[\d.]+) s"
)
_LAUNCH = re.compile(r"(?:launch call (?P<refused>[\d.]+) s\))|(?:\) in (?P<launched>[\d.]+) s$)")
_REFUSED = re.compile(r"deleting \(insufficient_capacity; launch call (?P<took>[\d.]+) s\)")


def _log_entries(log_path: Path, since: float) -> list[tuple[float, str]]:
    """(epoch seconds to the millisecond, message) of the controller's log lines after ``since``."""
    out = []
    for line in log_path.read_text().splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        stamp = entry["time"]  # 2026-11-26T08:34:27.738Z
        at = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float(stamp[19:-1] or 0)
        if at + 1 >= since:
            out.append((at, entry.get("message", "")))
    return out


def controller_next_calls(log_path: Path, since: float) -> list[float]:
    """Issue 14 §5's fallback latency as the controller lives it: for each insufficient-capacity
    answer after ``since``, seconds from the controller having it (its ``deleting
    (insufficient_capacity; launch call T s)`` line) to the start of its next launch call (each
    launch's line, refused or launched, minus the call's own duration T). Unlike EC2's side
    (``next_call_times``, from awssim's call log), this leaves out the time a call waits in the
    single-process market before it is served, on both ends."""
    errors: list[float] = []
    starts: list[float] = []
    for at, message in _log_entries(log_path, since):
        if m := _LAUNCH.search(message):
            took = float(m.group("refused") or m.group("launched"))
            starts.append(at - took)
            if _REFUSED.search(message):
                errors.append(at)
    starts.sort()
    out = []
    for err in errors:
        nxt = next((s for s in starts if s >= err), None)
        if nxt is not None:
            out.append(nxt - err)
    return out


def fallback_breakdown(log_path: Path, since: float) -> dict[str, dict[str, float]]:
    """Median and max per phase of the controller's timing logs written after ``since``."""
    phases: dict[str, list[float]] = {}
    for line in log_path.read_text().splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        at = calendar.timegm(time.strptime(entry["time"][:19], "%Y-%m-%dT%H:%M:%S"))
        if at + 1 < since:
            continue
        message = entry.get("message", "")
        if m := _PASS.search(message):
            for k, v in m.groupdict().items():
                phases.setdefault(k, []).append(float(v))
        elif m := _LAUNCH.search(message):
            for k, v in m.groupdict().items():
                if v is not None:
                    phases.setdefault(f"launch_call_{k}", []).append(float(v))
    return {
        k: {"median": round(statistics.median(v), 3), "max": round(max(v), 3), "n": len(v)}
        for k, v in sorted(phases.items())
    }


async def wait(predicate: Any, within: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError(f"{what}: not within {within:.0f}s")
        await asyncio.sleep(0.05)


async def one_size(
    aws: MotoServer, size: int, workdir: Path, timing: Timing, within: float
) -> dict[str, Any]:
    world = pw.ProvisionWorld(workdir / str(size), timing, aws, instance_types=TYPES)
    await world.start()
    try:
        proc = await world.start_controller()
        assert proc.pid is not None
        pid = proc.pid

        def quiet(_: TimelineEntry) -> None:
            pass

        tracker = ProvisionTracker(world.api_url, quiet)
        await tracker.start()
        try:
            await world.create(
                "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
            )
            body = deployment("shop", "web", "100m", "128Mi", 30)
            body["spec"]["replicas"] = size
            log(f"{size}: creating the Deployment")
            t0 = time.time()
            await world.create("/apis/apps/v1/namespaces/shop/deployments", body)
            await wait(
                lambda: len(tracker.pods) >= size and tracker.unbound() == 0, within, f"{size} pods bound"
            )
            bound = time.time() - t0
            claims = dict(tracker.claim_seen)
            launched = [tracker.launched_at.get(n) for n in claims]
            calls = await asyncio.to_thread(aws.fleet_call_log)
            log(f"{size}: bound in {bound:.1f}s, {len(claims)} NodeClaims, {len(calls)} CreateFleet calls")

            # The spot market runs dry; a tenth more pods must fall back to on-demand.
            await pw.exhaust_spot(aws)
            ice_at = time.time()
            # Pods too large for what is left on the nodes, so each needs new capacity.
            big = deployment("shop", "batch", "3500m", "1Gi", 30)
            big["spec"]["replicas"] = extra = max(5, size // 100)
            await world.create("/apis/apps/v1/namespaces/shop/deployments", big)
            more = size + extra
            await wait(
                lambda: len(tracker.pods) >= more and tracker.unbound() == 0, within, f"{more} pods bound"
            )
            after = await asyncio.to_thread(aws.fleet_call_log)
            next_calls = next_call_times(after, ice_at)
            fallback = time_to_fall_back(after, ice_at)
            p99_ec2 = percentile(next_calls, 99)
            controller_calls = controller_next_calls(workdir / str(size) / "controller.log", ice_at)
            p99 = percentile(controller_calls, 99)
            cpu, rss = cpu_seconds(pid), peak_rss_mib(pid)
        finally:
            await tracker.stop()
        return {
            "claims_created_s": round(max(claims.values()) - t0, 3),
            "launched_s": None if None in launched else round(max(x for x in launched if x) - t0, 3),
            "bound_s": round(bound, 3),
            "boot_delay_s": round(timing.s(pw.BOOT_SECONDS) + timing.s(pw.READY_SECONDS), 3),
            "fleet_calls": len(calls),
            "fallback_p99_s": None if p99 is None else round(p99, 3),
            "fallback_p50_s": None if not controller_calls else round(statistics.median(controller_calls), 3),
            "fallback_p99_ec2_s": None if p99_ec2 is None else round(p99_ec2, 3),
            "fallback_s": None if fallback is None else round(fallback, 3),
            "capacity_refusals": len(next_calls),
            "fallback_breakdown": fallback_breakdown(workdir / str(size) / "controller.log", ice_at),
            "nodeclaims": len(claims),
            "nodes": len(tracker.nodes),
            "controller_cpu_s": round(cpu, 2),
            "peak_rss_mib": round(rss, 1),
        }
    finally:
        await world.stop()


async def list_load(
    aws: MotoServer, args: argparse.Namespace, workdir: Path, timing: Timing
) -> dict[str, Any]:
    """The quiet controller's LISTs per minute on a cluster of ``args.list_load`` nodes."""
    nodes = args.list_load
    world = pw.ProvisionWorld(
        workdir / f"list-{nodes}",
        timing,
        aws,
        existing_nodes=nodes,
        existing_pods_per_node=args.list_pods_per_node,
    )
    await world.start()
    try:
        await world.start_controller()
        assert world.kubesim is not None
        requests = world.kubesim.server.requests
        log(f"list load: {nodes} nodes, warming up {args.list_warmup:.0f}s")
        await asyncio.sleep(args.list_warmup)
        before = dict(requests)
        await asyncio.sleep(args.list_window)
        served = {k: n - before.get(k, 0) for k, n in requests.items() if n > before.get(k, 0)}
        per_min = 60.0 / args.list_window
        lists = {
            k.split(" ", 1)[1]: round(n * per_min, 1) for k, n in served.items() if k.startswith("list ")
        }
        return {
            "nodes": nodes,
            "pods": nodes * args.list_pods_per_node,
            "window_s": args.list_window,
            "lists_per_min": dict(sorted(lists.items())),
            "total_per_min": round(sum(lists.values()), 1),
            "watches": {k.split(" ", 1)[1]: n for k, n in sorted(served.items()) if k.startswith("watch ")},
        }
    finally:
        await world.stop()


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="provision-loop-"))
    timing = Timing(args.time_scale)
    aws = MotoServer()
    await asyncio.to_thread(aws.start)
    out: dict[str, Any] = {}
    if args.list_load:
        try:
            out["list_load"] = await list_load(aws, args, workdir, timing)
        finally:
            await asyncio.to_thread(aws.stop)
        out["workdir"] = str(workdir)
        return out
    try:
        for i, size in enumerate(args.sizes):
            if i:
                await asyncio.to_thread(aws.reset)
            out[str(size)] = await one_size(aws, size, workdir, timing, args.timeout)
    finally:
        await asyncio.to_thread(aws.stop)
    out["controller_cpu_s"] = round(sum(v["controller_cpu_s"] for v in out.values()), 2)
    out["peak_rss_mib"] = max(v["peak_rss_mib"] for k, v in out.items() if isinstance(v, dict))
    out["time_scale"] = timing.scale
    out["workdir"] = str(workdir)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000], help="pending pods per run")
    parser.add_argument(
        "--time-scale", type=float, default=10.0, help="compress the boot (35 s) and Ready (5 s) this much"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="real seconds a phase may take")
    parser.add_argument("--workdir", default=None, help="where the controller logs go")
    parser.add_argument(
        "--list-load", type=int, default=0, help="instead: LISTs per minute of a quiet controller, N nodes"
    )
    parser.add_argument("--list-pods-per-node", type=int, default=2, help="pods on each synthetic node")
    parser.add_argument("--list-warmup", type=float, default=15.0, help="seconds before counting")
    parser.add_argument("--list-window", type=float, default=60.0, help="seconds counted")
    args = parser.parse_args()
    out = asyncio.run(main_async(args))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
