"""An EC2NodeClass's termination finalizer, and the collection of what no class uses any more.

As aws/karpenter-provider-aws ``pkg/controllers/nodeclass/controller.go`` (``finalize``) and the
nodeclass controller, which adds ``karpenter.k8s.aws/termination`` to every class it reconciles: a
class being deleted waits while a NodeClaim still names it (``spec.nodeClassRef.name``); then the
instance profiles made for it (``cleanupManagedInstanceProfiles``: by the class's IAM path, and the
legacy stable name) and its launch templates (``launchtemplate.DeleteAll``: this cluster's, tagged
with the class's name) are deleted and the finalizer removed. The finalizer list is patched with
the version it was read at, so a concurrent change of the list is a 409 and retried, never lost.
While it waits, the class gets Karpenter's Normal ``WaitingOnNodeClaimTermination`` event naming the
claims (aws ``pkg/controllers/nodeclass/events.go``; at most one per class UID every 2 minutes, the
recorder's default dedupe), so ``kubectl describe ec2nodeclass`` says what holds it.

``collect`` runs on the status loop's schedule (``next_due``): launch templates no launch used for
a minute (Karpenter's template cache eviction, ``IDLE_TTL``), checked every minute, and every
``COLLECT_INTERVAL`` the cluster's instance profiles no class's status names and no live instance
carries (``pkg/controllers/nodeclass/garbagecollection``). A failure is logged and tried at the
next due time: collection never blocks a reconcile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from kubespot.aws import AwsError
from kubespot.aws.instance_profiles import COLLECT_INTERVAL, InstanceProfiles
from kubespot.aws.launch_templates import IDLE_TTL, LaunchTemplates
from kubespot.kube import ObjectRef
from kubespot.kube.custom import CustomObjects
from kubespot.kube.events import EventRecorder
from kubespot.kube.informer import Informer
from kubespot.model import Clock, SystemClock

__all__ = ["FINALIZER", "NodeClassTermination", "deleting"]

FINALIZER = "karpenter.k8s.aws/termination"
log = logging.getLogger("kubespot.controller.provisioning")
Obj = dict[str, Any]
WAITING = "WaitingOnNodeClaimTermination"
#: Karpenter's recorder drops a repeat of (reason, class UID) for this long (events/recorder.go).
WAITING_DEDUPE_SECONDS = 120.0
#: Seconds a deleting class's finalization waits for the NodeClaim informer's first LIST before
#: it is left for the next look.
CLAIMS_SYNC_WAIT = 5.0
#: How often idle launch templates are looked for (Karpenter's cache cleanup: every minute).
TEMPLATES_INTERVAL: Final = IDLE_TTL


def _few(names: list[str]) -> str:
    """At most five names, and how many more (aws ``events.go`` ``WaitingOnNodeClaimTermination``
    names a few claims, not all)."""
    return ", ".join(names[:5]) + (f" and {len(names) - 5} other(s)" if len(names) > 5 else "")


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


def _status_profile(obj: Mapping[str, Any]) -> str | None:
    status = obj.get("status")
    found = status.get("instanceProfile") if isinstance(status, Mapping) else None
    return found if isinstance(found, str) and found else None


#: IAM's answers to a call the policy does not allow.
_REFUSED: Final = ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation")


def _refused(err: AwsError) -> bool:
    return err.code in _REFUSED


def _role(obj: Mapping[str, Any]) -> bool:
    spec = obj.get("spec")
    return isinstance(spec, Mapping) and bool(spec.get("role"))


class NodeClassTermination:
    """Adds the finalizer to live classes, finalizes the ones being deleted, collects the rest."""

    def __init__(
        self,
        nodeclasses: CustomObjects,
        nodeclaims: CustomObjects | Informer,
        profiles: InstanceProfiles | None,
        templates: LaunchTemplates | None = None,
        *,
        clock: Clock | None = None,
        recorder: EventRecorder | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._classes = nodeclasses
        self._claims = nodeclaims
        self._profiles = profiles
        self._templates = templates
        self._clock = clock or SystemClock()
        self._recorder = recorder
        self._monotonic = monotonic
        #: class UID (its name without one) → when its waiting line and event may come again.
        self._quiet: dict[str, float] = {}
        #: Monotonic times of the next collections (None: at the first pass).
        self._templates_due: float | None = None
        self._profiles_due: float | None = None
        #: Whether IAM's refusal to list profiles was logged (a policy without the group).
        self._refusal_said = False

    @property
    def claims_informer(self) -> Informer | None:
        """The NodeClaim informer finalization reads (None: a LIST per look), for the status loop
        to requeue a deleting class when a claim goes or the cache syncs."""
        return self._claims if isinstance(self._claims, Informer) else None

    async def ensure_finalizer(self, obj: Obj) -> Obj | None:
        """The stored class with the finalizer added; None when it had it (or is going)."""
        if deleting(obj) or FINALIZER in _finalizers(obj):
            return None
        meta = _meta(obj)
        patch = {"metadata": {"finalizers": [*_finalizers(obj), FINALIZER]}}
        patch["metadata"]["resourceVersion"] = meta.get("resourceVersion", "")
        return await self._classes.patch(str(meta.get("name", "")), patch)

    async def finalize(self, obj: Obj, role: str | None) -> bool:
        """Clean up after a class being deleted; False while NodeClaims still use it. Raises
        ``AwsError`` when a profile or template could not be deleted (tried again later)."""
        if FINALIZER not in _finalizers(obj):
            return True
        name = str(_meta(obj).get("name", ""))
        claims = await self._claim_items()
        if claims is None:
            log.info("EC2NodeClass %s: NodeClaims not known (unlisted or unserved); deleting it later", name)
            return False
        users = _users(claims, name)
        if users:
            await self._waiting(obj, users)
            return False
        # Whatever spec.role says now (Karpenter's ``finalize`` cleans up regardless of it): a class
        # that went from spec.role to spec.instanceProfile still has its old profiles under its
        # path. A class without a role whose profiles IAM refuses to show (a policy without the
        # instance-profile group) is still deleted: it may never have made one.
        if self._profiles is not None:
            try:
                gone = await self._profiles.delete_class(name, str(_meta(obj).get("uid", "")))
            except AwsError as err:
                if role or not _refused(err):
                    raise
                log.info("EC2NodeClass %s: its instance profiles cannot be read: %s", name, err)
                gone = []
            if gone:
                log.info("EC2NodeClass %s: deleted instance profiles %s", name, ", ".join(gone))
        if self._templates is not None:
            gone = await self._templates.delete_all(name)
            if gone:
                log.info("EC2NodeClass %s: deleted launch templates %s", name, ", ".join(gone))
        patch = {
            "metadata": {
                "finalizers": [f for f in _finalizers(obj) if f != FINALIZER],
                "resourceVersion": _meta(obj).get("resourceVersion", ""),
            }
        }
        await self._classes.patch(name, patch)
        return True

    async def _claim_items(self) -> Iterable[Obj] | None:
        """Every NodeClaim: from the process's informer (as aws ``finalize`` lists them from
        controller-runtime's cache) once it has synced, else a LIST. None when the informer has not
        synced within ``CLAIMS_SYNC_WAIT`` or the last LIST was not served (404): neither is "no
        claims" (the class would be finalized under claims that use it; aws ``finalize`` returns
        the list error), and the status loop's pass must not hang on it."""
        if isinstance(self._claims, Informer):
            try:
                await asyncio.wait_for(self._claims.wait_synced(), CLAIMS_SYNC_WAIT)
            except TimeoutError:
                return None
            return self._claims.items() if self._claims.served else None
        listing = await self._claims.list()
        return listing.items if listing.served else None

    async def _waiting(self, obj: Obj, users: list[str]) -> None:
        """The waiting log line and the class's ``WaitingOnNodeClaimTermination`` event, at most
        once per class every ``WAITING_DEDUPE_SECONDS`` (Karpenter's recorder drops a repeat of
        (reason, class UID) that long), with the count and a few names: every deleted claim makes
        a look (the status loop's ``_claim_told``), and a line naming every claim at each one grew
        with the square of a pool's drain."""
        meta = _meta(obj)
        uid = str(meta.get("uid") or "")
        key = uid or str(meta.get("name") or "")
        now = self._monotonic()
        if self._quiet.get(key, 0.0) > now:
            return
        if len(self._quiet) >= 1024:
            self._quiet = {k: t for k, t in self._quiet.items() if t > now}
        self._quiet[key] = now + WAITING_DEDUPE_SECONDS
        shown = _few(users)
        log.info(
            "EC2NodeClass %s: waiting on %d NodeClaim(s) (%s) before deleting",
            meta.get("name", ""),
            len(users),
            shown,
        )
        if self._recorder is None or not uid:
            return
        ref = ObjectRef(
            "EC2NodeClass", str(meta.get("name", "")), None, uid, api_version="karpenter.k8s.aws/v1"
        )
        await self._recorder.record(ref, WAITING, f"Waiting on NodeClaim termination for {shown}")

    # -- collection ---------------------------------------------------------------------------------

    def next_due(self) -> float | None:
        """When ``collect`` has something to do next (monotonic seconds; None: nothing to collect)."""
        due = [
            d if d is not None else self._clock.monotonic()
            for d, what in ((self._templates_due, self._templates), (self._profiles_due, self._profiles))
            if what is not None
        ]
        return min(due, default=None)

    async def collect(self, classes: Iterable[Obj]) -> None:
        """Delete the idle launch templates and the unused instance profiles that are due."""
        now = self._clock.monotonic()
        if self._templates is not None and (self._templates_due is None or self._templates_due <= now):
            self._templates_due = now + TEMPLATES_INTERVAL
            try:
                gone = await self._templates.collect()
            except AwsError as err:
                log.warning("provisioning: cannot collect idle launch templates: %s", err)
            else:
                if gone:
                    log.info("provisioning: deleted idle launch templates %s", ", ".join(gone))
        if self._profiles is not None and (self._profiles_due is None or self._profiles_due <= now):
            self._profiles_due = now + COLLECT_INTERVAL
            # Every COLLECT_INTERVAL whatever the classes say (Karpenter's garbage collector runs
            # unconditionally): a profile left when the last role class switched to
            # spec.instanceProfile is collected once its protection is over. One LIST per interval.
            classes = list(classes)
            current = {p for p in (_status_profile(c) for c in classes) if p}
            try:
                gone = await self._profiles.collect(current)
            except AwsError as err:
                if _refused(err) and not any(_role(c) for c in classes):
                    # A policy without the instance-profile group, and no class needs it: said once.
                    (log.debug if self._refusal_said else log.info)(
                        "provisioning: instance profiles cannot be listed (%s); none collected", err
                    )
                    self._refusal_said = True
                else:
                    log.warning("provisioning: cannot collect unused instance profiles: %s", err)
            else:
                if gone:
                    log.info("provisioning: deleted unused instance profiles %s", ", ".join(gone))
