"""The ideal client of ``queue_burst``: the burst's API calls with no product logic, for its ``limit_s``.

It sends what the controller must send before every pod outside the drain's last tier has been asked
to leave, and nothing else: one merge PATCH per node (taint + cordon), then, once that node's PATCH
is answered, one policy/v1 Eviction per pod (with its uid precondition), whatever the answer. No
queue, no AWS, no watch, no list, no retry: the pods to evict are given. Calls keep to the
controller's client-side budget, a token bucket of ``--qps``/``--burst`` (first come, first served:
the fences, queued first, go first), and at most ``--in-flight`` calls await an answer at once, over
one aiohttp session with unlimited keep-alive connections, as the controller's pod and node calls do
(``AIOHTTP_IN_FLIGHT`` = 32). It imports no kubespot code: it measures the API server and the
machine, not the product.

Protocol (``queue_burst.measure_limit`` drives it): it opens its session and one connection per
call in flight (checking the server answers), prints ``ready`` and reads one line from stdin, the
plan (JSON: ``{"nodes": [{"name", "patch", "pods": [[namespace, name, uid], ...]}]}``, built from
the cluster at that moment); it then sends everything and prints one JSON object: ``started`` /
``ended`` (epoch seconds, from the plan read to the last answer), ``fences``, ``evictions``,
``answers`` (count per "<call> <status>") and ``cpu_s`` (its own CPU time over that span).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from typing import Any

import aiohttp
import orjson

MERGE_PATCH = "application/merge-patch+json"
#: The controller's calls in flight on aiohttp (kubespot.kube.client.AIOHTTP_IN_FLIGHT).
IN_FLIGHT = 32


class Bucket:
    """``qps`` tokens a second, ``burst`` saved up; a caller books the next token and sleeps until it
    is due (tokens may go negative), so callers are served in arrival order."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps, self.burst = qps, max(1, burst)
        self.tokens, self.last = float(self.burst), time.monotonic()

    async def take(self) -> None:
        if self.qps <= 0:
            return
        now = time.monotonic()
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps) - 1.0
        self.last = now
        if self.tokens < 0:
            await asyncio.sleep(-self.tokens / self.qps)


class Client:
    def __init__(self, session: aiohttp.ClientSession, url: str, bucket: Bucket, in_flight: int) -> None:
        self.session, self.url, self.bucket = session, url.rstrip("/"), bucket
        self.slots = asyncio.Semaphore(in_flight)
        self.answers: Counter[str] = Counter()

    async def call(self, what: str, method: str, path: str, body: Any, content_type: str) -> None:
        await self.bucket.take()
        async with (
            self.slots,
            self.session.request(
                method, self.url + path, data=orjson.dumps(body), headers={"Content-Type": content_type}
            ) as resp,
        ):
            await resp.read()
            self.answers[f"{what} {resp.status}"] += 1

    async def node(self, plan: dict[str, Any]) -> None:
        name = plan["name"]
        await self.call("fence", "PATCH", f"/api/v1/nodes/{name}", plan["patch"], MERGE_PATCH)
        await asyncio.gather(*(self.evict(ns, pod, uid) for ns, pod, uid in plan["pods"]))

    async def evict(self, namespace: str, name: str, uid: str) -> None:
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
        await self.call("evict", "POST", path, body, "application/json")


async def version(session: aiohttp.ClientSession, url: str) -> None:
    async with session.get(url.rstrip("/") + "/version") as resp:
        resp.raise_for_status()
        await resp.read()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    headers = {"Authorization": f"Bearer {args.token}", "Accept": "application/json"}
    async with aiohttp.ClientSession(
        connector=connector, headers=headers, timeout=aiohttp.ClientTimeout(total=120)
    ) as session:
        # One request per call in flight at once: every connection the burst uses is open before it.
        await asyncio.gather(*(version(session, args.url) for _ in range(args.in_flight)))
        client = Client(session, args.url, Bucket(args.qps, args.burst), args.in_flight)
        print("ready", flush=True)
        nodes = orjson.loads(await asyncio.to_thread(sys.stdin.buffer.readline))["nodes"]
        started, cpu = time.time(), time.process_time()
        await asyncio.gather(*(client.node(n) for n in nodes))
        ended, cpu = time.time(), time.process_time() - cpu
    return {
        "started": started,
        "ended": ended,
        "cpu_s": cpu,
        "fences": len(nodes),
        "evictions": sum(len(n["pods"]) for n in nodes),
        "answers": dict(sorted(client.answers.items())),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", required=True, help="the API server (kubesim), http://host:port")
    parser.add_argument("--token", default="kubesim", help="bearer token")
    parser.add_argument("--qps", type=float, required=True)
    parser.add_argument("--burst", type=int, required=True)
    parser.add_argument("--in-flight", type=int, default=IN_FLIGHT)
    args = parser.parse_args()
    print(orjson.dumps(asyncio.run(run(args))).decode(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
