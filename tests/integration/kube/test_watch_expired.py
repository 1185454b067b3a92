"""A watch resumed from a compacted resourceVersion: the API server answers HTTP 200 and one ERROR
event carrying the 410 Expired Status (staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go
Watch, newErrWatcher), and the client re-lists (RESYNC) instead of dying, on both HTTP stacks."""

from __future__ import annotations

from typing import Literal

import pytest

from kubespot.config.kube import KubeSettings
from kubespot.kube import connect
from kubespot.kube.views import PodEventType
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import node

QUIET = ControllerConfig(scheduler=False, kubelet=False, workloads=False)


@pytest.mark.parametrize("stack", ["httpx", "aiohttp"])
async def test_a_node_watch_from_a_compacted_version_re_lists(stack: Literal["httpx", "aiohttp"]) -> None:
    async with KubeSim(objects=[node("n1", ready=True)], controllers=QUIET) as sim:
        kube = connect(KubeSettings(kubeconfig=str(sim.kubeconfig_path)), http=stack)
        try:
            listing = await kube.list_nodes()
            rt = sim.store.registry.lookup("", "v1", "nodes")
            assert rt is not None
            sim.store.create(rt, node("n2", ready=True))
            sim.store.compact()
            events = kube.watch_nodes(resource_version=listing.resource_version)
            first = await anext(events)
            assert first.type is PodEventType.RESYNC
            assert sorted(n.name for n in first.nodes) == ["n1", "n2"]
            await events.aclose()
        finally:
            await kube.close()
