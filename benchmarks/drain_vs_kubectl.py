"""Drain one 110-pod node with kubespot's engine and with `kubectl drain`, on identical fresh clusters.

Each run starts its own `kubespot kubesim` subprocess loaded with the same objects: a node `node-a`
running 10 Deployments x 11 replicas (half with a 0 s grace period, half with 5 s that they use in
full), each behind a PodDisruptionBudget allowing one disruption, plus a DaemonSet; and spare nodes
for the replacements. The clock runs from the start of the cordon to the moment the tool reports the
node empty (both wait for the pods to be gone). Prints one JSON object.

    python benchmarks/drain_vs_kubectl.py
    python benchmarks/drain_vs_kubectl.py --deployments 2 --replicas 3     # smoke
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from kubespot.actions.drain import drain_node
from kubespot.config.drain import DrainSettings
from kubespot.config.kube import KubeSettings
from kubespot.kube import KubeClient, connect
from kubespot.model.clock import SystemClock
from kubespot.sim.kubesim import conventions
from kubespot.sim.kubesim.testing import daemonset, deployment, namespace, node, pdb

NODE = "node-a"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def cluster(deployments: int, replicas: int, spares: int) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [namespace("bench"), node(NODE, pods="250")]
    objects += [node(f"spare-{i}", pods="250", unschedulable=True) for i in range(spares)]
    for i in range(deployments):
        grace = 0 if i % 2 == 0 else 5
        dep = deployment(f"app-{i}", replicas, namespace="bench", grace=grace)
        dep["spec"]["template"]["metadata"]["annotations"] = {conventions.SHUTDOWN_SECONDS: str(grace)}
        objects.append(dep)
        objects.append(
            pdb(
                f"app-{i}",
                namespace="bench",
                selector={"matchLabels": {"app": f"app-{i}"}},
                max_unavailable=1,
            )
        )
    objects.append(daemonset("node-agent"))
    return objects


def start_kubesim(
    objects: list[dict[str, Any]], workdir: Path, start_seconds: float
) -> tuple[subprocess.Popen[str], Path]:
    dump = workdir / "cluster.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    kubeconfig = workdir / "kubeconfig"
    log = workdir / "kubesim.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubespot",
            "kubesim",
            "--from",
            str(dump),
            "--kubeconfig-out",
            str(kubeconfig),
            "--pod-start-seconds",
            str(start_seconds),
        ],
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if re.search(r"serving \d+ objects at http://\S+", line):
            return proc, kubeconfig
    raise RuntimeError(f"kubesim did not start: {log.read_text()[-2000:]}")


async def settle(kube: KubeClient, expected: int, spares: int) -> None:
    """Wait until every workload pod runs on node-a, then open the spare nodes for replacements."""
    deadline = time.monotonic() + 120
    while True:
        pods = (await kube.list_pods_on_node(NODE)).pods
        running = [p for p in pods if p.phase == "Running" and p.namespace == "bench"]
        if len(running) >= expected and any(p.controller_kind == "DaemonSet" for p in pods):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(running)}/{expected} pods running")
        await asyncio.sleep(0.2)
    for i in range(spares):
        await kube.uncordon(f"spare-{i}")
    # Let the disruption controller publish budgets that count every pod healthy.
    await asyncio.sleep(1.0)


async def run_kubespot(kubeconfig: Path) -> tuple[float, dict[str, Any]]:
    kube = connect(KubeSettings(kubeconfig=str(kubeconfig)))
    clock = SystemClock()
    try:
        started = time.monotonic()
        await kube.cordon(NODE)
        result = await drain_node(
            NODE,
            kube=kube,
            settings=DrainSettings(),
            deadline=clock.now() + timedelta(seconds=600),
            clock=clock,
        )
        elapsed = time.monotonic() - started
    finally:
        await kube.close()
    return elapsed, {
        "emptied": result.emptied,
        "counts": result.counts(),
        "pdb_refusals": sum(p.blocked for p in result.pods),
    }


async def run_kubectl(kubeconfig: Path) -> float:
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        "drain",
        NODE,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--force",
        "--timeout=600s",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl drain failed: {err.decode()[-2000:]}")
    return elapsed


async def one(tool: str, args: argparse.Namespace) -> tuple[float, dict[str, Any]]:
    objects = cluster(args.deployments, args.replicas, args.spares)
    with tempfile.TemporaryDirectory(prefix=f"drain-{tool}-") as tmp:
        proc, kubeconfig = start_kubesim(objects, Path(tmp), args.pod_start_seconds)
        try:
            kube = connect(KubeSettings(kubeconfig=str(kubeconfig)))
            try:
                await settle(kube, args.deployments * args.replicas, args.spares)
            finally:
                await kube.close()
            if tool == "kubespot":
                return await run_kubespot(kubeconfig)
            elapsed = await run_kubectl(kubeconfig)
            kube = connect(KubeSettings(kubeconfig=str(kubeconfig)))
            try:
                left = [p for p in (await kube.list_pods_on_node(NODE)).pods if p.namespace == "bench"]
            finally:
                await kube.close()
            return elapsed, {"emptied": not left}
        finally:
            proc.terminate()
            proc.wait(timeout=10)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    kubespot_s, kubespot_info = await one("kubespot", args)
    kubectl_s, kubectl_info = await one("kubectl", args)
    return {
        "kubespot_s": round(kubespot_s, 2),
        "kubectl_s": round(kubectl_s, 2),
        "ratio": round(kubespot_s / kubectl_s, 3),
        "pods": args.deployments * args.replicas,
        "pod_start_s": args.pod_start_seconds,
        "kubespot": kubespot_info,
        "kubectl": kubectl_info,
    }


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """The size of the cluster ``cluster`` builds, and how fast kubesim starts its pods."""
    parser.add_argument("--deployments", type=int, default=10)
    parser.add_argument("--replicas", type=int, default=11)
    parser.add_argument("--spares", type=int, default=3)
    parser.add_argument("--pod-start-seconds", type=float, default=1.0, help="binding to Ready in kubesim")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_cluster_arguments(parser)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main_async(args))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
