"""Issue 14 §2, "`kubespot plan --why` showing the offerings avoided and why", over HTTP: the elected
controller's publisher (``controllers.provisioning.avoided_publisher``) writes its status ConfigMap
into kubesim, and ``kubespot plan`` (the CLI's entry point, ``cli.main``) reads it back.

Sources: Cluster Autoscaler's status ConfigMap (``cluster-autoscaler-status`` in its own namespace,
its name a flag, ``utils.WriteStatusConfigMap``: got, created when absent, updated otherwise, the
write time in the ``cluster-autoscaler.kubernetes.io/last-updated`` annotation); the marks are aws
``pkg/cache/unavailableofferings.go``'s (what marked a pool, until when).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from kubespot import cli, plan_cli
from kubespot.cloud import UnavailableOfferings
from kubespot.cloud.avoided_status import UPDATED_ANNOTATION, configmap, entries
from kubespot.cloud.pool_risk import PoolRisk
from kubespot.config.kube import KubeSettings
from kubespot.controllers.provisioning.avoided_publisher import AvoidedPublisher
from kubespot.kube import connect
from kubespot.kube.custom import CustomObjects
from kubespot.model import SystemClock
from kubespot.scheduling.explain import AvoidedOffering
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import until
from support.catalog import ZONES
from unit.test_plan_why import FixedCatalog, FixedCloud, NoAws, write_manifests

CONFIGMAP = "/api/v1/namespaces/kube-system/configmaps/kubespot-status"
#: A pod of the manifests' Deployment that goes to a new NodeClaim (tests/unit/test_plan_why.py).
POD = "shop/web-plan-2"


@contextlib.asynccontextmanager
async def publishing(
    sim: KubeSim, unavailable: UnavailableOfferings, risk: PoolRisk
) -> AsyncIterator[AvoidedPublisher]:
    kube = connect(KubeSettings(kubeconfig=str(sim.kubeconfig_path)))
    publisher = AvoidedPublisher(
        CustomObjects(kube, "api/v1/namespaces/kube-system/configmaps"),
        "kubespot-status",
        "kube-system",
        unavailable=unavailable,
        risk=risk,
        clock=SystemClock(),
        interval=0.02,
    )
    task = asyncio.create_task(publisher.run())
    try:
        yield publisher
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()


@pytest.fixture
async def sim(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[KubeSim]:
    idle = ControllerConfig(scheduler=False, kubelet=False, workloads=False)
    async with KubeSim(controllers=idle) as running:
        monkeypatch.setenv("KUBESPOT_KUBECONFIG", str(running.kubeconfig_path))
        monkeypatch.setattr(plan_cli, "Catalog", FixedCatalog)
        monkeypatch.setattr(plan_cli, "AwsCloud", FixedCloud)
        monkeypatch.setattr(plan_cli, "AwsClients", NoAws)
        yield running


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """The example NodePool and EC2NodeClass, and a Deployment whose pods need a new NodeClaim."""
    return write_manifests(tmp_path)


async def kubespot_plan(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``kubespot plan ARGV`` through the CLI's entry point (it runs its own event loop)."""
    capsys.readouterr()
    code = await asyncio.to_thread(cli.main, ["plan", *argv])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


async def test_plan_why_prints_what_the_controller_avoids_with_its_reason(
    sim: KubeSim, manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The publisher writes the marks (what marked a pool, seconds left) and the risky spot pools,
    on change only; ``kubespot plan --why`` and ``--output json`` show them."""
    clock = SystemClock()
    unavailable, risk = UnavailableOfferings(clock), PoolRisk(clock)
    unavailable.mark("spot", "c5.large", ZONES[0], reason="InsufficientInstanceCapacity", ttl=170.0)
    risk.interruption_warning("m5.large", ZONES[1])
    async with aiohttp.ClientSession(sim.url) as http, publishing(sim, unavailable, risk) as publisher:

        async def stored() -> dict[str, Any] | None:
            async with http.get(CONFIGMAP) as r:
                return await r.json() if r.status == 200 else None

        cm = await until(stored, within=2.0, interval=0.02)
        assert UPDATED_ANNOTATION in cm["metadata"]["annotations"]

        text = await kubespot_plan(capsys, "-f", str(manifests), "--why", POD)
        mark = f"spot c5.large in {ZONES[0]}: unavailable (InsufficientInstanceCapacity) for another"
        assert mark in text
        assert f"spot m5.large in {ZONES[1]}: reclaim risk" in text

        told = orjson.loads(await kubespot_plan(capsys, "-f", str(manifests), "-o", "json"))
        (entry,) = [a for a in told["avoided_offerings"] if a["kind"] == "unavailable"]
        assert entry["instance_type"] == "c5.large" and entry["reason"] == "InsufficientInstanceCapacity"
        assert 150 <= entry["seconds_left"] <= 170
        assert told["avoided_offerings_source"]["configmap"] == "kube-system/kubespot-status"
        assert told["avoided_offerings_source"]["age_seconds"] <= 5

        # Nothing changed for many ticks: not written again (the heartbeat is a minute away);
        # a change is written on the next tick.
        writes = publisher.writes
        await asyncio.sleep(0.1)
        assert publisher.writes == writes
        unavailable.mark("on-demand", "m5.xlarge", ZONES[0], reason="InsufficientInstanceCapacity")

        async def changed() -> bool:
            cm = await stored()
            return cm is not None and "m5.xlarge" in cm["data"]["avoided-offerings"]

        await until(changed, within=2.0, interval=0.02)
        assert publisher.writes == writes + 1


async def test_plan_why_says_not_known_when_the_configmap_is_absent_or_stale(
    sim: KubeSim, manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No ConfigMap (no controller published one): not known, said so. One written ten minutes ago
    and not kept since (no leader): not known, with its age; its marks are not shown."""
    text = await kubespot_plan(capsys, "-f", str(manifests), "--why", POD)
    assert "Offerings avoided: not known here (no status ConfigMap kube-system/kubespot-status" in text

    old = datetime.fromtimestamp(datetime.now(UTC).timestamp() - 600, UTC)
    mark = AvoidedOffering("unavailable", "spot", "c5.large", ZONES[0], "InsufficientInstanceCapacity", 900)
    body = configmap("kubespot-status", "kube-system", entries([mark], old), old)
    async with (
        aiohttp.ClientSession(sim.url) as http,
        http.post("/api/v1/namespaces/kube-system/configmaps", json=body) as r,
    ):
        assert r.status == 201, await r.text()
    text = await kubespot_plan(capsys, "-f", str(manifests), "--why", POD)
    stale = r"not known here \(the status ConfigMap kube-system/kubespot-status is 60\d s old"
    assert re.search(stale, text), text
    assert "c5.large in" not in text
