"""The EC2NodeClass termination finalizer without AWS: what is patched, and when it waits.

Source: aws/karpenter-provider-aws ``pkg/controllers/nodeclass/controller.go`` ``finalize``
(NodeClaims naming the class hold it; ``cleanupManagedInstanceProfiles``, whatever ``spec.role``
says; ``launchTemplateProvider.DeleteAll``; the finalizer removed last) and
the nodeclass controller adding ``karpenter.k8s.aws/termination``; collection on its schedule:
``pkg/controllers/nodeclass/garbagecollection/controller.go`` ``Reconcile`` (every 30 minutes,
``cleanupInactiveProfiles`` given the profiles the classes' status names) and
``pkg/providers/launchtemplate/launchtemplate.go`` (the template cache's one-minute cleanup).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubespot.aws import AwsError
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
        self.collected: list[set[str]] = []

    async def delete_class(self, nodeclass: str, uid: str) -> list[str]:
        self.deleted.append(f"{nodeclass}/{uid}")
        return []

    async def collect(self, current: set[str]) -> list[str]:
        self.collected.append(set(current))
        return []

    def protecting(self) -> bool:
        return False


class _Templates:
    def __init__(self) -> None:
        self.deleted: list[str] = []
        self.collections = 0

    async def delete_all(self, nodeclass: str) -> list[str]:
        self.deleted.append(nodeclass)
        return []

    async def collect(self) -> list[str]:
        self.collections += 1
        return []


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t


def _cls(**meta: Any) -> Obj:
    return {"metadata": {"name": "default", "uid": "u1", "resourceVersion": "7", **meta}, "spec": {}}


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


class _Refused(_Profiles):
    """A policy without the instance-profile group: IAM refuses every call."""

    async def delete_class(self, nodeclass: str, uid: str) -> list[str]:
        raise AwsError("AccessDenied", "not authorized to perform: iam:ListInstanceProfiles")

    async def collect(self, current: set[str]) -> list[str]:
        raise AwsError("AccessDenied", "not authorized to perform: iam:ListInstanceProfiles")


async def test_a_class_in_use_waits_and_its_profiles_go_whatever_its_role() -> None:
    """review 15c #5: ``finalize`` → ``cleanupManagedInstanceProfiles`` runs regardless of
    ``spec.role`` (a class that switched to ``spec.instanceProfile`` still has its old profiles
    under its path); a class without a role whose profiles IAM refuses to show is still deleted
    (it may never have made one), one with a role waits for IAM."""
    classes, profiles, templates = _Objects(), _Profiles(), _Templates()
    going = _cls(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[FINALIZER, "other"])
    claims = _Objects([_claim("default"), _claim("gpu")])
    term = NodeClassTermination(classes, claims, profiles, templates)  # type: ignore[arg-type]
    assert await term.finalize(going, "nodes") is False
    assert classes.patches == [] and profiles.deleted == [] and templates.deleted == []
    claims.items = [_claim("gpu")]
    assert await term.finalize(going, None) is True
    assert profiles.deleted == ["default/u1"]  # by the class's uid: its IAM path, role or not
    assert templates.deleted == ["default"]  # the templates are kubespot's whatever the profile
    assert classes.patches[-1][1]["metadata"] == {"finalizers": ["other"], "resourceVersion": "7"}
    refused = NodeClassTermination(_Objects(), _Objects(), _Refused(), None)  # type: ignore[arg-type]
    assert await refused.finalize(going, None) is True
    with pytest.raises(AwsError):
        await refused.finalize(going, "nodes")


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


async def test_collection_runs_each_part_on_its_own_schedule() -> None:
    """Templates every minute, profiles every 30 minutes, both at the first pass; the profiles the
    classes' status names are handed over as in use."""
    profiles, templates, clock = _Profiles(), _Templates(), _Clock()
    term = NodeClassTermination(_Objects(), _Objects(), profiles, templates, clock=clock)  # type: ignore[arg-type]
    classes = [
        {"metadata": {"name": "a"}, "spec": {"role": "nodes"}, "status": {"instanceProfile": "prod_1"}},
        _cls(),
    ]
    assert term.next_due() == clock.t
    await term.collect(classes)
    assert templates.collections == 1 and profiles.collected == [{"prod_1"}]
    assert term.next_due() == clock.t + 60
    clock.t += 60
    await term.collect(classes)
    await term.collect(classes)  # not due again yet
    assert templates.collections == 2 and len(profiles.collected) == 1
    clock.t += 1800
    await term.collect(classes)
    assert templates.collections == 3 and len(profiles.collected) == 2
    assert NodeClassTermination(_Objects(), _Objects(), None).next_due() is None  # type: ignore[arg-type]
    # review 15c #5: no class names spec.role any more, nothing protected here: collected all the
    # same (Karpenter's garbage collector runs unconditionally), so a profile left by the last role
    # class that switched to spec.instanceProfile goes once its protection is over.
    quiet = _Profiles()
    term = NodeClassTermination(_Objects(), _Objects(), quiet, None, clock=clock)  # type: ignore[arg-type]
    await term.collect([_cls()])
    assert quiet.collected == [set()]
    # A policy without the instance-profile group: the refusal is no error, said once.
    term = NodeClassTermination(_Objects(), _Objects(), _Refused(), None, clock=clock)  # type: ignore[arg-type]
    await term.collect([_cls()])
    assert term._refusal_said


class _SlowList:
    """A ``KubeClient`` whose LIST never answers (the informer stays unsynced)."""

    async def list_versioned(self, path: str, **kw: Any) -> Any:
        await asyncio.Event().wait()


async def test_a_claim_cache_not_synced_holds_the_class_and_never_hangs_the_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """aws ``finalize`` lists the NodeClaims through controller-runtime's cache, which a manager
    reads only once synced: an empty cache is not "no claims", so the class is not finalized (its
    profiles and templates stay, the finalizer too) and is looked at again; the wait is bounded,
    so the status loop's pass goes on with the other objects."""
    from kubespot.controllers.provisioning import nodeclass_termination
    from kubespot.kube.informer import Informer

    monkeypatch.setattr(nodeclass_termination, "CLAIMS_SYNC_WAIT", 0.05)
    claims = Informer(_SlowList(), "apis/karpenter.sh/v1/nodeclaims")  # type: ignore[arg-type]
    classes, profiles, templates = _Objects(), _Profiles(), _Templates()
    term = NodeClassTermination(classes, claims, profiles, templates)  # type: ignore[arg-type]
    going = _cls(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[FINALIZER])
    try:
        assert await asyncio.wait_for(term.finalize(going, "nodes"), 1.0) is False
        assert classes.patches == [] and profiles.deleted == [] and templates.deleted == []
        # Synced (empty: no claim names the class): now it is finalized.
        claims._replace([])
        assert await term.finalize(going, "nodes") is True
        assert profiles.deleted == ["default/u1"] and classes.patches[-1][1]["metadata"]["finalizers"] == []
    finally:
        await claims.stop()


class _Unserved:
    """A ``KubeClient`` whose NodeClaim LIST is answered 404 (``list_versioned`` → None)."""

    async def list_versioned(self, path: str, **kw: Any) -> Any:
        return None


async def test_an_unserved_claim_list_holds_the_class_as_a_list_error_does() -> None:
    """aws ``finalize`` returns the error of its NodeClaim list (a 404 included) before it deletes
    anything: a list not served (an informer or a LIST answered 404) is not "no claims", so the
    class keeps its profiles, templates and finalizer."""
    from kubespot.kube.informer import Informer

    going = _cls(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[FINALIZER])
    claims = Informer(_Unserved(), "apis/karpenter.sh/v1/nodeclaims", unserved_retry=60)  # type: ignore[arg-type]
    classes, profiles, templates = _Objects(), _Profiles(), _Templates()
    term = NodeClassTermination(classes, claims, profiles, templates)  # type: ignore[arg-type]
    try:
        assert await term.finalize(going, "nodes") is False
        assert claims.synced.is_set() and claims.served is False
        assert classes.patches == [] and profiles.deleted == [] and templates.deleted == []
    finally:
        await claims.stop()

    class _UnservedList(_Objects):
        async def list(self) -> ObjectList:
            return ObjectList((), "", served=False)

    term = NodeClassTermination(classes, _UnservedList(), profiles, templates)  # type: ignore[arg-type]
    assert await term.finalize(going, "nodes") is False
    assert classes.patches == [] and profiles.deleted == [] and templates.deleted == []


async def test_a_pool_drained_one_claim_at_a_time_logs_a_few_lines_not_every_name_each_look(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """aws pkg/controllers/nodeclass/controller.go ``finalize`` publishes only the deduplicated
    ``WaitingOnNodeClaimTermination`` event (events.go: ``PrettySlice(names, 5)``); every deleted
    claim makes a look (``Register``), so the waiting log line is written at most once per class
    per dedupe window, with the count and at most five names: 1 000 claims going one by one log
    one short line, not a line naming every remaining claim at each look."""
    now = [0.0]
    going = _cls(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[FINALIZER], uid="u-1")
    claims = _Objects(
        [
            {"metadata": {"name": f"c{i:04d}"}, "spec": {"nodeClassRef": {"name": "default"}}}
            for i in range(1000)
        ]
    )
    term = NodeClassTermination(_Objects(), claims, None, monotonic=lambda: now[0])  # type: ignore[arg-type]
    caplog.set_level("INFO", logger="kubespot.controller.provisioning")
    while len(claims.items) > 1:
        claims.items = claims.items[1:]
        assert await term.finalize(going, None) is False
    lines = [r.getMessage() for r in caplog.records if "waiting on" in r.getMessage()]
    assert lines == [
        "EC2NodeClass default: waiting on 999 NodeClaim(s) "
        "(c0001, c0002, c0003, c0004, c0005 and 994 other(s)) before deleting"
    ]
    now[0] = 121.0  # a dedupe window later: said again
    assert await term.finalize(going, None) is False
    assert "waiting on 1 NodeClaim(s) (c0999)" in caplog.records[-1].getMessage()
