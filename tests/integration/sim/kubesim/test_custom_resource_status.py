"""The status subresource of custom resources, as the provisioning controller uses it.

Source: kubernetes/kubernetes staging/src/k8s.io/apiextensions-apiserver/pkg/registry/customresource/
strategy.go: ``PrepareForCreate`` (a status sent with a create is dropped when the status
subresource is on), ``PrepareForUpdate`` (a write to the main resource keeps the stored status and
bumps ``metadata.generation`` only when something but status and metadata changed), and
status_strategy.go ``statusStrategy.PrepareForUpdate`` (a write to ``/status`` keeps everything but
status, never bumping the generation); an update carrying an old ``resourceVersion`` is a 409 Conflict
(``apiserver/pkg/registry/generic/registry/store.go`` ``Update``).
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
import yaml

from support.kubesim_http import call

ROOT = Path(__file__).resolve().parents[4]
CRD = ROOT / "deploy" / "helm" / "kubespot" / "crds" / "karpenter.sh_nodepools.yaml"
POOLS = "/apis/karpenter.sh/v1/nodepools"


async def test_status_writes_change_only_status_and_keep_the_generation(http: aiohttp.ClientSession) -> None:
    status, _ = await call(
        http,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        yaml.safe_load(CRD.read_text()),
    )
    assert status == 201
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {"weight": 1},
    }
    _, created = await call(http, "POST", POOLS, {**pool, "status": {"conditions": [{"type": "Ready"}]}})
    assert not (created.get("status") or {}).get("conditions")
    assert created["metadata"]["generation"] == 1
    conditions = [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Ready",
            "message": "",
            "lastTransitionTime": "2026-11-01T00:00:00Z",
        }
    ]
    body = {**created, "spec": {"weight": 50}, "status": {"conditions": conditions}}
    status, written = await call(http, "PUT", f"{POOLS}/p/status", body)
    assert status == 200
    assert written["status"]["conditions"] == conditions
    assert written["spec"] == {"weight": 1} and written["metadata"]["generation"] == 1
    # A main-resource update keeps the status and bumps the generation.
    status, updated = await call(http, "PUT", f"{POOLS}/p", {**written, "spec": {"weight": 2}, "status": {}})
    assert status == 200
    assert updated["status"]["conditions"] == conditions and updated["metadata"]["generation"] == 2
    # A status write based on the older read is refused.
    status, body = await call(http, "PUT", f"{POOLS}/p/status", {**written, "status": {"conditions": []}})
    assert status == 409 and body["reason"] == "Conflict"
