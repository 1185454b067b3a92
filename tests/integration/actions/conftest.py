"""A node full of workloads on kubesim, ready to be drained by the real engine over HTTP.

``drain_env(...)`` loads the given objects with one schedulable node (``node-a``) and spare nodes
that stay cordoned until every workload pod runs on node-a; then it opens the spares (so
replacements have somewhere to go), cordons node-a and hands over an ``Env``: the simulator, a real
``KubeClient`` and store reads for assertions. ``debug_logs``: every log line captured, the HTTP
libraries' debug lines included (for the no-secret-in-logs checks of the outgoing HTTP tests).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from kubespot.actions.drain import DrainResult, drain_node
from kubespot.config.drain import DrainSettings
from kubespot.config.kube import KubeSettings
from kubespot.kube import EventRecorder, KubeClient, connect
from kubespot.model.clock import SystemClock
from kubespot.sim.kubesim import conventions
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import is_ready, node, until

Obj = dict[str, Any]
NODE = "node-a"
FAST = ControllerConfig(pod_start_seconds=0.1, lease_renew_seconds=5.0, node_status_seconds=30.0)
#: Quick retries and a small margin, so drains with deadlines of a few seconds behave as 120 s ones do.
QUICK = DrainSettings(safety_margin=0.5, retry_backoff_base=0.05, retry_backoff_cap=0.3)
CLOCK = SystemClock()


def template(
    obj: Obj,
    *,
    shutdown: float | None = None,
    annotations: Mapping[str, str] | None = None,
    priority_class: str | None = None,
    empty_dir: bool = False,
) -> Obj:
    """Adjust a workload's pod template: exit time after SIGTERM, priority class, an emptyDir volume."""
    tpl = obj["spec"]["template"]
    notes = dict(annotations or {})
    if shutdown is not None:
        notes[conventions.SHUTDOWN_SECONDS] = str(shutdown)
    if notes:
        tpl["metadata"].setdefault("annotations", {}).update(notes)
    if priority_class:
        tpl["spec"]["priorityClassName"] = priority_class
    if empty_dir:
        tpl["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        tpl["spec"]["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    return obj


@dataclass
class Env:
    sim: KubeSim
    kube: KubeClient

    def _rt(self, plural: str) -> Any:
        return self.sim.store.registry.lookup("", "v1", plural)

    def pods(self, node_name: str | None = NODE) -> list[Obj]:
        return [
            copy.deepcopy(p)
            for p in self.sim.store.list(self._rt("pods"))
            if node_name is None or (p.get("spec") or {}).get("nodeName") == node_name
        ]

    def pod(self, namespace: str, name: str) -> Obj | None:
        return self.sim.store.find(self._rt("pods"), namespace, name)

    def node(self, name: str = NODE) -> Obj | None:
        return self.sim.store.find(self._rt("nodes"), None, name)

    def events(self, reason: str | None = None) -> list[Obj]:
        return [
            e for e in self.sim.store.list(self._rt("events")) if reason is None or e.get("reason") == reason
        ]

    @staticmethod
    def deadline(seconds: float) -> datetime:
        return CLOCK.now() + timedelta(seconds=seconds)

    async def drain(
        self,
        deadline: float | datetime,
        settings: DrainSettings = QUICK,
        *,
        events: bool = False,
        **options: Any,
    ) -> DrainResult:
        """The real drain engine on node-a over HTTP, due at ``deadline`` (or that many seconds from
        now); ``events``: with a Kubernetes events recorder (unless ``options`` give one);
        ``options``: drain_node's other arguments."""
        if events:
            options.setdefault("recorder", EventRecorder(kube=self.kube))
        return await drain_node(
            NODE,
            kube=self.kube,
            settings=settings,
            deadline=deadline if isinstance(deadline, datetime) else self.deadline(deadline),
            clock=CLOCK,
            **options,
        )


@asynccontextmanager
async def drain_env(*objects: Obj, spares: int = 2, expect_pods: int | None = None) -> AsyncIterator[Env]:
    nodes = [node(NODE), *(node(f"spare-{i}", unschedulable=True) for i in range(spares))]
    async with KubeSim(objects=[*nodes, *objects], controllers=FAST) as sim:
        kube = connect(KubeSettings(kubeconfig=str(sim.kubeconfig_path)))
        env = Env(sim, kube)
        try:

            async def settled() -> bool:
                pods = env.pods(None)
                if expect_pods is not None and len(pods) < expect_pods:
                    return False
                return bool(pods) and all(
                    is_ready(p) or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                    for p in pods
                )

            await until(settled, within=10)
            for i in range(spares):
                await kube.uncordon(f"spare-{i}")
            await kube.cordon(NODE)
            yield env
        finally:
            await kube.close()


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Everything logged, the HTTP libraries' debug lines included."""
    caplog.set_level(logging.DEBUG)
    yield caplog
