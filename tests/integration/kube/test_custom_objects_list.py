"""Custom objects listed in pages over HTTP: every object across pages, and the list's
resourceVersion a watch continues from.

Sources: staging/src/k8s.io/apiserver/pkg/storage/cacher ``GetList`` and the API concepts page
"Retrieving large results sets in chunks" (kubernetes.io/docs/reference/using-api/api-concepts):
a list with ``limit`` answers a ``continue`` token while more remain, every page of one list is
served from the same snapshot, so the first page's ``resourceVersion`` is the list's.
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
import yaml

from kubespot.config.kube import KubeSettings
from kubespot.kube import connect
from kubespot.kube.custom import CustomObjects
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig

ROOT = Path(__file__).resolve().parents[3]
CRDS = ROOT / "deploy" / "helm" / "kubespot" / "crds"
QUIET = ControllerConfig(scheduler=False, kubelet=False, workloads=False)
NODEPOOLS = "apis/karpenter.sh/v1/nodepools"


async def test_custom_objects_are_listed_in_pages_with_the_lists_version() -> None:
    async with KubeSim(controllers=QUIET) as sim, aiohttp.ClientSession(sim.url) as http:
        for path in sorted(CRDS.glob("*.yaml")):
            for crd in yaml.safe_load_all(path.read_text()):
                async with http.post(
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd
                ) as r:
                    assert r.status == 201, await r.text()
        ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
        for i in range(7):
            body = {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": f"pool-{i}"},
                "spec": {"template": {"spec": {"nodeClassRef": ref, "requirements": []}}},
            }
            async with http.post(f"/{NODEPOOLS}", json=body) as r:
                assert r.status == 201, await r.text()
        async with http.get(f"/{NODEPOOLS}") as r:
            whole = await r.json()
        async with http.get(f"/{NODEPOOLS}?limit=3") as r:
            first = await r.json()
        assert len(first["items"]) == 3 and first["metadata"]["continue"]  # the server pages
        kube = connect(KubeSettings(kubeconfig=str(sim.kubeconfig_path)))
        try:
            listed = await kube.list_versioned(NODEPOOLS, limit=3)
            assert listed is not None
            items, version = listed
            assert sorted(o["metadata"]["name"] for o in items) == [f"pool-{i}" for i in range(7)]
            assert version == whole["metadata"]["resourceVersion"]
            pools = await CustomObjects(kube, NODEPOOLS).list()
            assert len(pools.items) == 7 and pools.resource_version == version
            missing = await CustomObjects(kube, "apis/example.com/v1/widgets").list()
            assert missing.served is False and missing.items == ()
        finally:
            await kube.close()
