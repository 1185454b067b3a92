"""kubesim throughput and footprint: load time, RSS, evictions/s, GETs/s, watch events/s.

Runs `kubespot kubesim` as a subprocess (so server and client each get a core, as a real client
would) and drives it from one async aiohttp client over loopback. Prints one JSON object.

    python benchmarks/kubesim_throughput.py                      # 5 000 nodes x 20 pods (100 000)
    python benchmarks/kubesim_throughput.py --nodes 200 --pods-per-node 10 --seconds 2   # smoke
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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


def _rss_mib(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) of ``pid`` in MiB, from /proc."""
    text = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", text).group(1))  # type: ignore[union-attr]
    hwm = int(re.search(r"VmHWM:\s+(\d+)", text).group(1))  # type: ignore[union-attr]
    return rss / 1024, hwm / 1024


def start_server(
    nodes: int, pods_per_node: int, kubeconfig: Path
) -> tuple[subprocess.Popen[str], str, float]:
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubespot",
            "kubesim",
            "--nodes",
            str(nodes),
            "--pods-per-node",
            str(pods_per_node),
            "--kubeconfig-out",
            str(kubeconfig),
            "--pod-start-seconds",
            "0.5",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(r"serving (\d+) objects at (http://\S+)", line)
        if m:
            return proc, m.group(2), time.monotonic() - started
    err = proc.stderr.read() if proc.stderr else ""
    raise RuntimeError(f"kubesim did not start: {err}")


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
    """Evict pods that no budget protects (DaemonSet and bare pods first), one request each."""

    def unprotected(p: dict[str, Any]) -> bool:
        owners = p["metadata"].get("ownerReferences") or []
        return not owners or owners[0].get("kind") == "DaemonSet"

    targets = [p for p in pods if unprotected(p)] + [p for p in pods if not unprotected(p)]
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
    session: aiohttp.ClientSession, url: str, resource_version: str | None
) -> tuple[float, int]:
    """Events per second a pod watch delivers to a client that parses every line.

    With no resourceVersion the watch starts with one ADDED event per existing pod (upstream's
    "get state and start at most recent"); otherwise it replays history after that version.
    """
    params = {"watch": "true", "timeoutSeconds": "120"}
    if resource_version:
        params["resourceVersion"] = resource_version
    started = time.monotonic()
    events = 0
    last = started
    async with session.get(
        f"{url}/api/v1/pods", params=params, timeout=aiohttp.ClientTimeout(total=None, sock_read=2.0)
    ) as resp:
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            async for line in resp.content:
                if line.strip():
                    orjson.loads(line)
                    events += 1
                    last = time.monotonic()
    return events / max(last - started, 1e-6), events


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, load_s = start_server(args.nodes, args.pods_per_node, Path(tmp) / "kubeconfig")
        try:
            rss_after_load, _ = _rss_mib(proc.pid)
            connector = aiohttp.TCPConnector(limit=args.concurrency)
            async with aiohttp.ClientSession(connector=connector) as session:
                pods = await _list_pods(session, url)
                async with session.get(f"{url}/api/v1/pods", params={"limit": "1"}) as resp:
                    rv_before = orjson.loads(await resp.read())["metadata"]["resourceVersion"]
                watch_s, watch_n = await bench_watch(session, url, None)
                gets_s, get_errors = await bench_gets(session, url, pods, args.seconds, args.concurrency)
                ev = await bench_evictions(session, url, pods, args.seconds, args.concurrency)
                resume_s, resume_n = await bench_watch(session, url, rv_before)
            rss_now, rss_peak = _rss_mib(proc.pid)
        finally:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=20)
    return {
        "nodes": args.nodes,
        "pods": sum(1 for _ in pods),
        "load_s": round(load_s, 2),
        "rss_mib": round(rss_after_load, 1),
        "rss_peak_mib": round(rss_peak, 1),
        "rss_end_mib": round(rss_now, 1),
        "gets_per_s": round(gets_s, 1),
        "get_errors": get_errors,
        **{k: round(v, 1) if isinstance(v, float) else v for k, v in ev.items()},
        "watch_events_per_s": round(watch_s, 1),
        "watch_events": watch_n,
        "watch_resume_events_per_s": round(resume_s, 1),
        "watch_resume_events": resume_n,
        "concurrency": args.concurrency,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of the GET and eviction phases")
    parser.add_argument("--concurrency", type=int, default=64)
    print(json.dumps(asyncio.run(run(parser.parse_args()))))


if __name__ == "__main__":
    main()
