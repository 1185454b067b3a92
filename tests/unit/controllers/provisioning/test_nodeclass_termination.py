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


class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str | None, str, str, bool]] = []

    async def record(self, ref: Any, reason: str, message: str, *, warning: bool = False) -> None:
        self.events.append((ref.kind, ref.uid, reason, message, warning))


async def test_a_waiting_class_gets_one_event_naming_its_claims_per_dedupe_window() -> None:
    """Review 15a #8. aws pkg/controllers/nodeclass/events.go WaitingOnNodeClaimTerminationEvent:
    Normal, reason WaitingOnNodeClaimTermination, "Waiting on NodeClaim termination for " and
    utils.PrettySlice(names, 5); DedupeValues the class UID, so within the recorder's default 2
    minutes (core pkg/events/recorder.go) a repeat is dropped."""
    now = [0.0]
    recorder = _Recorder()
    going = _cls(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[FINALIZER], uid="u-1")
    claims = _Objects([_claim("default") | {"metadata": {"name": f"c{i}"}} for i in range(7)])
    term = NodeClassTermination(
        _Objects(),  # type: ignore[arg-type]
        claims,  # type: ignore[arg-type]
        None,
        recorder=recorder,  # type: ignore[arg-type]
        monotonic=lambda: now[0],
    )
    assert await term.finalize(going, None) is False
    assert recorder.events == [
        (
            "EC2NodeClass",
            "u-1",
            "WaitingOnNodeClaimTermination",
            "Waiting on NodeClaim termination for c0, c1, c2, c3, c4 and 2 other(s)",
            False,
        )
    ]
    now[0] = 119.0
    await term.finalize(going, None)
    assert len(recorder.events) == 1
    now[0] = 121.0
    await term.finalize(going, None)
    assert len(recorder.events) == 2
