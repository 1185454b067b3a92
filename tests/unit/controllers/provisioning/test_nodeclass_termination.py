"""The EC2NodeClass termination finalizer without AWS: what is patched, and when it waits.

Source: aws/karpenter-provider-aws ``pkg/controllers/nodeclass/termination/controller.go``
``Finalize`` (NodeClaims naming the class hold it; the instance profile is deleted only for a class
with ``spec.role``; the finalizer removed last) and the nodeclass controller adding
``karpenter.k8s.aws/termination``.
"""

from __future__ import annotations

from typing import Any

from kubespot.controllers.provisioning.nodeclass_termination import FINALIZER, NodeClassTermination
from kubespot.kube.custom import ObjectList

Obj = dict[str, Any]


class _Objects:
    """``CustomObjects``' list and patch, in memory."""

    def __init__(self, items: list[Obj] | None = None) -> None:
        self.items = items or []
        self.patches: list[tuple[str, Obj]] = []

    async def list(self) -> ObjectList:
        return ObjectList(tuple(self.items), "1")

    async def patch(self, name: str, patch: Obj, *, subresource: str = "") -> Obj:
        self.patches.append((name, patch))
        return {"metadata": {"name": name, **patch["metadata"]}}


class _Profiles:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    async def delete(self, nodeclass: str) -> bool:
        self.deleted.append(nodeclass)
        return True


def _cls(**meta: Any) -> Obj:
    return {"metadata": {"name": "default", "resourceVersion": "7", **meta}, "spec": {}}


def _claim(nodeclass: str) -> Obj:
    return {"metadata": {"name": f"c-{nodeclass}"}, "spec": {"nodeClassRef": {"name": nodeclass}}}


async def test_the_finalizer_is_added_once_with_the_version_read() -> None:
    classes = _Objects()
    term = NodeClassTermination(classes, _Objects(), None)  # type: ignore[arg-type]
    stored = await term.ensure_finalizer(_cls(finalizers=["other"]))
    assert stored is not None and stored["metadata"]["finalizers"] == ["other", FINALIZER]
    assert classes.patches[0][1]["metadata"]["resourceVersion"] == "7"
    assert await term.ensure_finalizer(_cls(finalizers=[FINALIZER])) is None
    assert await term.ensure_finalizer(_cls(deletionTimestamp="2026-01-01T00:00:00Z")) is None
    assert len(classes.patches) == 1


async def test_a_class_in_use_waits_and_one_without_a_role_keeps_iam_untouched() -> None:
    classes, profiles = _Objects(), _Profiles()
    going = _cls(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[FINALIZER, "other"])
    claims = _Objects([_claim("default"), _claim("gpu")])
    term = NodeClassTermination(classes, claims, profiles)  # type: ignore[arg-type]
    assert await term.finalize(going, "nodes") is False
    assert classes.patches == [] and profiles.deleted == []
    claims.items = [_claim("gpu")]
    assert await term.finalize(going, None) is True
    assert profiles.deleted == []  # instanceProfile classes: the profile is the user's
    assert classes.patches[-1][1]["metadata"] == {"finalizers": ["other"], "resourceVersion": "7"}
    assert await term.finalize(going, "nodes") is True
    assert profiles.deleted == ["default"]
