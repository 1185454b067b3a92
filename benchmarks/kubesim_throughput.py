"""kubesim throughput and footprint: load time, RSS, evictions/s, GETs/s, watch events/s, pods scheduled/s.

Runs `kubespot kubesim` as a subprocess (so server and client each get a core, as a real client
would) and drives it from one async aiohttp client over loopback. Prints one JSON object.

    python benchmarks/kubesim_throughput.py                      # 5 000 nodes x 20 pods (100 000)
    python benchmarks/kubesim_throughput.py --nodes 200 --pods-per-node 10 --seconds 2   # smoke
    python benchmarks/kubesim_throughput.py --phases schedule --schedule-pods 2000        # scheduler
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from agent_harness import spawn_kubespot


def _rss_mib(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) of ``pid`` in MiB, from /proc."""
    text = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", text).group(1))  # type: ignore[union-attr]
    hwm = int(re.search(r"VmHWM:\s+(\d+)", text).group(1))  # type: ignore[union-attr]
    return rss / 1024, hwm / 1024


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` has used, from /proc: a figure other load on the machine
    does not inflate, unlike wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(
    nodes: int,
    pods_per_node: int,
    kubeconfig: Path,
    *,
    log: Path,
    profile: str | None = None,
    controllers: bool = True,
) -> tuple[subprocess.Popen[str], str, float]:
    started = time.monotonic()
    python = [sys.executable, "-m", "cProfile", "-o", profile] if profile else [sys.executable]
    proc = spawn_kubespot(
        "kubesim",
        "--nodes",
        str(nodes),
        "--pods-per-node",
        str(pods_per_node),
        "--kubeconfig-out",
        str(kubeconfig),
        "--pod-start-seconds",
        "0.5",
        # kubesim's own cost per eviction, as before budgets contended: with contention on, 64
        # concurrent evictions over a few budgets mostly wait out upstream's 500 ms conflict
        # retries (about 300 evictions/s on the 200-node smoke run instead of about 1 600).
        "--eviction-write-seconds",
        "0",
        *([] if controllers else ["--no-controllers"]),
        log=log,
        python=python,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(r"serving (\d+) objects at (http://\S+)", line)
        if m:
            return proc, m.group(2), time.monotonic() - started
    raise RuntimeError(f"kubesim did not start: {log.read_text()[-2000:]}")


async def _list_pods(session: aiohttp.ClientSession, url: str) -> list[dict[str, Any]]:
    async with session.get(f"{url}/api/v1/pods") as resp:
        return list(orjson.loads(await resp.read())["items"])


async def bench_gets(
    session: aiohttp.ClientSession, url: str, pods: list[dict[str, Any]], seconds: float, concurrency: int
) -> tuple[float, int]:
    paths = [
        f"{url}/api/v1/namespaces/{p['metadata']['namespace']}/pods/{p['metadata']['name']}" for p in pods
    ]
    done = 0
    errors = 0
    deadline = time.monotonic() + seconds

    async def worker(offset: int) -> None:
        nonlocal done, errors
        i = offset
        while time.monotonic() < deadline:
            async with session.get(paths[i % len(paths)]) as resp:
                await resp.read()
                if resp.status != 200:
                    errors += 1
            done += 1
            i += concurrency

    started = time.monotonic()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return done / (time.monotonic() - started), errors


async def bench_evictions(
    session: aiohttp.ClientSession, url: str, pods: list[dict[str, Any]], seconds: float, concurrency: int
) -> dict[str, float]:
    """Evict what a drain evicts: every pod but DaemonSet pods, round-robin across owners so that
    consecutive evictions meet different PodDisruptionBudgets (as draining many nodes at once does).
    Evictions a budget refuses (429) are answered evictions too and are reported apart."""
    by_owner: dict[str, list[dict[str, Any]]] = {}
    for p in pods:
        owners = p["metadata"].get("ownerReferences") or [{}]
        if owners[0].get("kind") == "DaemonSet":
            continue
        by_owner.setdefault(str(owners[0].get("uid", p["metadata"]["name"])), []).append(p)
    targets = [p for group in itertools.zip_longest(*by_owner.values()) for p in group if p is not None]
    counts = {"201": 0, "429": 0, "other": 0}
    deadline = time.monotonic() + seconds
    next_idx = 0

    async def worker() -> None:
        nonlocal next_idx
        while time.monotonic() < deadline and next_idx < len(targets):
            p = targets[next_idx]
            next_idx += 1
            ns, name = p["metadata"]["namespace"], p["metadata"]["name"]
            body = orjson.dumps(
                {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
            )
            async with session.post(
                f"{url}/api/v1/namespaces/{ns}/pods/{name}/eviction",
                data=body,
                headers={"Content-Type": "application/json"},
            ) as resp:
                await resp.read()
                key = str(resp.status) if resp.status in (201, 429) else "other"
                counts[key] += 1

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    took = time.monotonic() - started
    return {
        "evictions_per_s": counts["201"] / took,
        "eviction_requests_per_s": sum(counts.values()) / took,
        "evicted": counts["201"],
        "eviction_429": counts["429"],
        "eviction_other": counts["other"],
    }


async def bench_watch(
    session: aiohttp.ClientSession, url: str, resource_version: str | None, expect: int | None
) -> tuple[float, int]:
    """Events per second a pod watch delivers to a client that parses every line.

    With no resourceVersion the watch starts with one ADDED event per existing pod (upstream's
    "get state and start at most recent"), and ends when ``expect`` events arrived; otherwise it
    replays history after that version and ends when the stream is idle for 2 s.
    """
    params = {"watch": "true", "timeoutSeconds": "300"}
    if resource_version:
        params["resourceVersion"] = resource_version
    started = time.monotonic()
    events = 0
    last = started
    timeout = aiohttp.ClientTimeout(total=None, sock_read=30.0 if expect else 2.0)
    async with session.get(f"{url}/api/v1/pods", params=params, timeout=timeout) as resp:
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            async for line in resp.content:
                if line.strip():
                    orjson.loads(line)
                    events += 1
                    last = time.monotonic()
                    if expect is not None and events >= expect:
                        break
    return events / max(last - started, 1e-6), events


def _schedule_shape(i: int, group: int) -> dict[str, Any]:
    """Pod ``i`` of Deployment-like group ``group``: plain, zone-pinned, anti-affine per host, or spread
    over zones (DoNotSchedule) and hosts (ScheduleAnyway), in turn."""
    app = f"bench-{group}"
    labels = {"bench": "schedule", "app": app}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "nginx:1.27",
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
            }
        ],
        "terminationGracePeriodSeconds": 1,
    }
    selector = {"matchLabels": {"app": app}}
    kind = group % 4
    if kind == 1:
        spec["nodeSelector"] = {"topology.kubernetes.io/zone": "us-east-1b"}
    elif kind == 2:
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
    elif kind == 3:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
            },
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": selector,
            },
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{app}-{i}", "namespace": "default", "labels": labels},
        "spec": spec,
    }


async def bench_schedule(
    session: aiohttp.ClientSession, url: str, count: int, groups: int, concurrency: int, pid: int
) -> dict[str, Any]:
    """Create ``count`` pending pods in ``groups`` Deployment-like shapes (see ``_schedule_shape``) and
    time them from the first create to the last bind, as seen by a pod watch; also the server's CPU
    time over that span (API requests, scheduling, binding, kubelets starting the pods)."""
    bound: set[str] = set()
    params = {"watch": "true", "labelSelector": "bench=schedule", "timeoutSeconds": "600"}
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60.0)
    done = asyncio.Event()
    last_bind = 0.0

    async with session.get(f"{url}/api/v1/pods", params=params, timeout=timeout) as watch:

        async def read() -> None:
            nonlocal last_bind
            async for line in watch.content:
                if not line.strip():
                    continue
                obj = orjson.loads(line)["object"]
                if obj.get("spec", {}).get("nodeName"):
                    bound.add(obj["metadata"]["name"])
                    last_bind = time.monotonic()
                    if len(bound) >= count:
                        done.set()
                        return

        reader = asyncio.create_task(read())
        bodies = [orjson.dumps(_schedule_shape(i, i % groups)) for i in range(count)]
        created = 0
        cpu_started = _cpu_s(pid)
        started = time.monotonic()

        async def create(offset: int) -> None:
            nonlocal created
            for i in range(offset, count, concurrency):
                async with session.post(
                    f"{url}/api/v1/namespaces/default/pods",
                    data=bodies[i],
                    headers={"Content-Type": "application/json"},
                ) as resp:
                    await resp.read()
                    created += resp.status == 201

        await asyncio.gather(*(create(i) for i in range(concurrency)))
        created_s = time.monotonic() - started
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(done.wait(), 300)
        cpu = _cpu_s(pid) - cpu_started
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    took = max(last_bind - started, 1e-6)
    return {
        "pods_scheduled_per_s": round(len(bound) / took, 1),
        "pods_scheduled_per_server_cpu_s": round(len(bound) / max(cpu, 1e-6), 1),
        "schedule_pods_created": created,
        "schedule_pods_bound": len(bound),
        "schedule_create_s": round(created_s, 2),
        "schedule_s": round(took, 2),
    }


async def settle(session: aiohttp.ClientSession, url: str, limit_s: float = 120.0) -> float:
    """Wait until the server answers /healthz in < 20 ms five times running: start-up work done."""
    started = time.monotonic()
    calm = 0
    while calm < 5 and time.monotonic() - started < limit_s:
        t0 = time.monotonic()
        async with session.get(f"{url}/healthz") as resp:
            await resp.read()
        calm = calm + 1 if time.monotonic() - t0 < 0.02 else 0
        await asyncio.sleep(0.2)
    return time.monotonic() - started


async def session_figures(args: argparse.Namespace, *, controllers: bool, phases: set[str]) -> dict[str, Any]:
    """Start one server, run the given phases against it, and return its figures."""
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, load_s = start_server(
            args.nodes,
            args.pods_per_node,
            Path(tmp) / "kubeconfig",
            log=Path(tmp) / "kubesim.log",
            profile=args.profile_server if controllers else None,
            controllers=controllers,
        )
        out: dict[str, Any] = {"load_s": round(load_s, 2)}
        try:
            out["rss_mib"] = round(_rss_mib(proc.pid)[0], 1)
            connector = aiohttp.TCPConnector(limit=args.concurrency)
            async with aiohttp.ClientSession(connector=connector) as session:
                out["settle_s"] = round(await settle(session, url), 2)
                pods = await _list_pods(session, url)
                out["pods"] = len(pods)
                async with session.get(f"{url}/api/v1/pods", params={"limit": "1"}) as resp:
                    rv_before = orjson.loads(await resp.read())["metadata"]["resourceVersion"]
                if args.ready_file:
                    Path(args.ready_file).write_text(str(proc.pid))  # noqa: ASYNC240 - before timing
                if "watch" in phases:
                    rate, n = await bench_watch(session, url, None, len(pods))
                    out |= {"watch_events_per_s": round(rate, 1), "watch_events": n}
                if "gets" in phases:
                    rate, errors = await bench_gets(session, url, pods, args.seconds, args.concurrency)
                    out |= {"gets_per_s": round(rate, 1), "get_errors": errors}
                if "evictions" in phases:
                    ev = await bench_evictions(session, url, pods, args.seconds, args.concurrency)
                    out |= {k: round(v, 1) if isinstance(v, float) else v for k, v in ev.items()}
                if "schedule" in phases:
                    out |= await bench_schedule(
                        session, url, args.schedule_pods, args.schedule_groups, args.concurrency, proc.pid
                    )
                if "resume" in phases:
                    rate, n = await bench_watch(session, url, rv_before, None)
                    out |= {"watch_resume_events_per_s": round(rate, 1), "watch_resume_events": n}
            out["rss_end_mib"], out["rss_peak_mib"] = (round(v, 1) for v in _rss_mib(proc.pid))
        finally:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=20)
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    phases = set(args.phases.split(","))
    full = await session_figures(args, controllers=True, phases=phases)
    result: dict[str, Any] = {"nodes": args.nodes, **full}
    if "evictions" in phases and not args.skip_api_only:
        # The same evictions against the API server alone: no kubelets, scheduler or workload
        # controllers reacting in the same Python process (a real cluster runs those elsewhere).
        api = await session_figures(args, controllers=False, phases={"evictions"})
        result |= {f"api_only_{k}": v for k, v in api.items() if k.startswith("evict")}
    result |= {"concurrency": args.concurrency, "python": sys.version.split()[0], "cpus": os.cpu_count()}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of the GET and eviction phases")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--phases",
        default="watch,gets,evictions,resume",
        help="comma-separated phases: watch, gets, evictions, resume, schedule (default: the first four)",
    )
    parser.add_argument("--schedule-pods", type=int, default=2000, help="pods the schedule phase creates")
    parser.add_argument("--schedule-groups", type=int, default=20, help="Deployment-like groups of them")
    parser.add_argument(
        "--profile-server", metavar="PATH", help="run the server under cProfile, stats to PATH"
    )
    parser.add_argument("--ready-file", help="write the server pid here once it has settled (for profilers)")
    parser.add_argument("--skip-api-only", action="store_true", help="skip the API-only eviction run")
    print(json.dumps(asyncio.run(run(parser.parse_args()))))


if __name__ == "__main__":
    main()
