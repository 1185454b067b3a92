"""An EC2NodeClass's termination finalizer: what kubespot made for a class goes with it.

As aws/karpenter-provider-aws ``pkg/controllers/nodeclass/termination/controller.go``
(``Finalize``) and the nodeclass controller, which adds ``karpenter.k8s.aws/termination`` to every
class it reconciles: a class being deleted waits while a NodeClaim still names it
(``spec.nodeClassRef.name``); then the instance profile made for its ``spec.role`` is deleted and
the finalizer removed. The finalizer list is patched with the version it was read at, so a
concurrent change of the list is a 409 and retried, never lost. While it waits, the class gets
Karpenter's Normal ``WaitingOnNodeClaimTermination`` event naming the claims (aws
``pkg/controllers/nodeclass/events.go``; at most one per class UID every 2 minutes, the recorder's
default dedupe), so ``kubectl describe ec2nodeclass`` says what holds it.

Not done (kubespot differs): Karpenter also deletes the class's launch templates here; kubespot's
are shared by name across classes with the same data and stay.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubespot.aws.instance_profiles import InstanceProfiles
from kubespot.kube import ObjectRef
from kubespot.kube.custom import CustomObjects
from kubespot.kube.events import EventRecorder

__all__ = ["FINALIZER", "NodeClassTermination", "deleting"]

FINALIZER = "karpenter.k8s.aws/termination"
WAITING = "WaitingOnNodeClaimTermination"
#: Karpenter's recorder drops a repeat of (reason, class UID) for this long (events/recorder.go).
WAITING_DEDUPE_SECONDS = 120.0
log = logging.getLogger("kubespot.controller.provisioning")
Obj = dict[str, Any]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _finalizers(obj: Mapping[str, Any]) -> list[str]:
    found = _meta(obj).get("finalizers")
    return [f for f in found if isinstance(f, str)] if isinstance(found, list) else []


def deleting(obj: Mapping[str, Any]) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def _users(claims: Iterable[Obj], name: str) -> list[str]:
    """The NodeClaims whose ``spec.nodeClassRef`` names the class."""
    out = []
    for claim in claims:
        spec = claim.get("spec")
        ref = spec.get("nodeClassRef") if isinstance(spec, Mapping) else None
        if isinstance(ref, Mapping) and ref.get("name") == name:
            out.append(str(_meta(claim).get("name", "")))
    return out


class NodeClassTermination:
    """Adds the finalizer to live classes and finalizes the ones being deleted."""

    def __init__(
        self,
        nodeclasses: CustomObjects,
        nodeclaims: CustomObjects,
        profiles: InstanceProfiles | None,
        *,
        recorder: EventRecorder | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._classes = nodeclasses
        self._claims = nodeclaims
        self._profiles = profiles
        self._recorder = recorder
        self._monotonic = monotonic
        #: class UID → when its waiting event may be published again.
        self._quiet: dict[str, float] = {}

    async def ensure_finalizer(self, obj: Obj) -> Obj | None:
        """The stored class with the finalizer added; None when it had it (or is going)."""
        if deleting(obj) or FINALIZER in _finalizers(obj):
            return None
        meta = _meta(obj)
        patch = {"metadata": {"finalizers": [*_finalizers(obj), FINALIZER]}}
        patch["metadata"]["resourceVersion"] = meta.get("resourceVersion", "")
        return await self._classes.patch(str(meta.get("name", "")), patch)

    async def finalize(self, obj: Obj, role: str | None) -> bool:
        """Clean up after a class being deleted; False while NodeClaims still use it."""
        if FINALIZER not in _finalizers(obj):
            return True
        name = str(_meta(obj).get("name", ""))
        users = _users((await self._claims.list()).items, name)
        if users:
            log.info("EC2NodeClass %s: waiting on NodeClaims %s before deleting", name, ", ".join(users))
            await self._waiting(obj, users)
            return False
        if role and self._profiles is not None:
            await self._profiles.delete(name)
        patch = {
            "metadata": {
                "finalizers": [f for f in _finalizers(obj) if f != FINALIZER],
                "resourceVersion": _meta(obj).get("resourceVersion", ""),
            }
        }
        await self._classes.patch(name, patch)
        return True

    async def _waiting(self, obj: Obj, users: list[str]) -> None:
        """The class's ``WaitingOnNodeClaimTermination`` event, deduplicated by its UID."""
        uid = str(_meta(obj).get("uid") or "")
        if self._recorder is None or not uid:
            return
        now = self._monotonic()
        if self._quiet.get(uid, 0.0) > now:
            return
        if len(self._quiet) >= 1024:
            self._quiet = {k: t for k, t in self._quiet.items() if t > now}
        self._quiet[uid] = now + WAITING_DEDUPE_SECONDS
        shown = ", ".join(users[:5]) + (f" and {len(users) - 5} other(s)" if len(users) > 5 else "")
        ref = ObjectRef(
            "EC2NodeClass", str(_meta(obj).get("name", "")), None, uid, api_version="karpenter.k8s.aws/v1"
        )
        await self._recorder.record(ref, WAITING, f"Waiting on NodeClaim termination for {shown}")
