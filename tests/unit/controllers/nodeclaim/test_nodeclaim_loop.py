"""The NodeClaim loop's handling of a claim re-read after a conflict (``loop.NodeClaimLoop``).

Each test names the kubernetes-sigs/karpenter (core) function it follows.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

from kubespot.cloud.fake import FakeCloud
from kubespot.config.drain import DrainSettings
from kubespot.config.launch import LaunchSettings
from kubespot.controllers.nodeclaim.controller import build
from kubespot.kube import KubeError
from kubespot.model import SystemClock

Obj = dict[str, Any]


def _claim(**meta: Any) -> Obj:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "general-abc", "resourceVersion": "1", **meta},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}},
    }


class _Claims:
    """A NodeClaim API whose ``get`` returns the claim deleted meanwhile."""

    path = "apis/karpenter.sh/v1/nodeclaims"

    async def get(self, name: str) -> Obj:
        return _claim(resourceVersion="2", deletionTimestamp="2026-01-01T00:00:00Z")


async def test_a_claim_deleted_while_its_write_conflicted_goes_to_termination() -> None:
    """core lifecycle/controller.go Reconcile (a claim with a deletionTimestamp goes to finalize,
    never to launch/registration): the copy re-read after a 409 is checked for deletion."""
    loop = build(
        kube=MagicMock(),
        cloud=FakeCloud(),
        launch=LaunchSettings(),
        drain=DrainSettings(),
        clock=SystemClock(),
        recorder=None,
        stuck_after=60.0,
    ).loop
    loop._claims_api = _Claims()  # type: ignore[assignment]
    seen: list[Obj] = []

    async def reconcile(claim: Obj) -> float | None:
        seen.append(claim)
        raise KubeError(409, "the object has been modified")

    loop._reconcile = reconcile  # type: ignore[method-assign]
    loop.claims["general-abc"] = _claim()
    assert await loop._reconcile_fresh(_claim()) == 0.0
    assert len(seen) == 1  # the deleting copy was not reconciled
    assert loop.claims["general-abc"]["metadata"]["deletionTimestamp"]
