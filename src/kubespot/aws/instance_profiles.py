"""The instance profiles kubespot makes and owns for EC2NodeClasses that name ``spec.role``.

As aws/karpenter-provider-aws v1.6+ (``pkg/controllers/nodeclass/instanceprofile.go``
``Reconcile``, ``pkg/providers/instanceprofile/instanceprofile.go`` ``Create``/``ensureRole``/
``Delete``/``ListProfiles``, ``pkg/apis/v1/ec2nodeclass.go`` ``InstanceProfileName``/
``LegacyInstanceProfileName``/``InstanceProfileTags``, ``pkg/controllers/nodeclass/controller.go``
``cleanupManagedInstanceProfiles`` and ``pkg/controllers/nodeclass/garbagecollection/controller.go``):

- a class's profile is the one its ``status.instanceProfile`` names, kept while the role attached
  to it is ``spec.role`` (so a class an older kubespot or Karpenter v1.0-v1.5 made, whose profile
  has the stable name ``<cluster>_<hash of region and class name>`` and no IAM path, keeps working);
- otherwise (no profile yet, gone, or the role changed) a **new** profile is made, named
  ``<cluster>_<hash of region, class name and a random UUID>``, under the path
  ``/karpenter/<region>/<cluster>/<class uid>/`` (v1.6+; v1.0-v1.5 set no path),
  tagged with ``spec.tags`` and the cluster's own (``kubernetes.io/cluster/<cluster>`` = owned,
  ``eks:eks-cluster-name``, ``karpenter.k8s.aws/ec2nodeclass``, ``topology.kubernetes.io/region``),
  the role attached; a profile made but not finished is deleted at once. The running instances keep
  the old profile: it is never re-roled under them;
- the name made for a (class uid, role) is remembered for ``RECREATION_TTL`` (a status write that
  failed must not make a second one), and the new and the old profile are *protected* from
  collection for ``PROTECTED_TTL`` (a launch under way may still name the old one);
- ``collect`` lists the cluster's profiles by path and deletes those no class's status names, no
  live instance of the cluster carries, that are not protected and that are older than an hour by
  IAM's ``CreateDate`` (Karpenter: every 30 minutes; the age guard is kubespot's, so a Karpenter
  running beside it, whose protection of its new profiles kubespot cannot see, loses none);
- a profile's role, once made or read, is known for ``KNOWN_TTL`` without asking IAM each pass
  (Karpenter's ``instanceProfileCache``), so IAM's eventual consistency cannot make a second one;
- ``delete_class`` (the class's termination finalizer) deletes every profile under the class's
  path and the legacy stable name;
- under dry run (``node_actions.dry_run``) nothing is made or deleted; a creation is rehearsed
  unless ``iam:GetRole`` says the role does not exist (``RoleNotFound`` naming it: the failure a
  real run would meet at ``AddRoleToInstanceProfile``); a refusal (``AccessDenied``: a role the
  policy does not name, or a policy without ``iam:GetRole``) skips the check with a warning per
  role naming both causes.

The hash is ``hashstructure`` v2's of the string: its default hasher is Go's ``fnv.New64()``,
FNV-1 64 (multiply by the prime, then XOR the byte; not FNV-1a), over the string's bytes, so the
stable name is the very one Karpenter v1.0-v1.5 gave the class.

A profile found already existing is not re-tagged: Karpenter v1.0 ``Create`` added
``eks:eks-cluster-name`` to one that lacked it, v1.5 and later (HEAD) do not.

kubespot difference: Karpenter learns which profiles are in use from the NodeClaims'
``karpenter.k8s.aws/instance-profile-name`` annotation; kubespot asks EC2 which profiles the
cluster's live instances carry (``IamInstanceProfile``), the fact the annotation stands for.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Collection, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from kubespot.model import Clock, SystemClock

from .session import AwsClients, AwsError

__all__ = [
    "COLLECT_INTERVAL",
    "KNOWN_TTL",
    "PROTECTED_TTL",
    "RECREATION_TTL",
    "YOUNG",
    "InstanceProfiles",
    "RoleNotFound",
    "legacy_profile_name",
    "new_profile_name",
    "profile_path",
    "profile_tags",
]

NODECLASS_TAG = "karpenter.k8s.aws/ec2nodeclass"
log = logging.getLogger("kubespot.controller.provisioning")
REGION_TAG = "topology.kubernetes.io/region"
EKS_CLUSTER_TAG = "eks:eks-cluster-name"
#: Karpenter's ``RecreationTTL`` and ``ProtectedProfilesTTL`` (``pkg/cache/cache.go``).
RECREATION_TTL: Final = 60.0
PROTECTED_TTL: Final = 3600.0
#: How often unused profiles are collected (the garbage collector's ``RequeueAfter``).
COLLECT_INTERVAL: Final = 1800.0
#: A profile younger than this (IAM ``CreateDate``) is never collected: a Karpenter running beside
#: kubespot (a migration) protects the profiles it makes for ``ProtectedProfilesTTL`` in its own
#: memory, which kubespot cannot see.
YOUNG: Final = PROTECTED_TTL
#: How long a profile's role, once made or read here, is taken as known without asking IAM again
#: (Karpenter's ``InstanceProfileTTL``, ``pkg/cache/cache.go``; its ``Create`` caches what it made).
KNOWN_TTL: Final = 900.0
#: The states in which an instance still holds its profile.
_LIVE: Final = ("pending", "running", "stopping", "stopped", "shutting-down")

_FNV_OFFSET, _FNV_PRIME, _MASK = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1


def _fnv1_64(text: str) -> int:
    """Go's ``hash/fnv`` ``New64`` (FNV-1) over ``text``'s UTF-8 bytes."""
    h = _FNV_OFFSET
    for byte in text.encode():
        h = ((h * _FNV_PRIME) & _MASK) ^ byte
    return h


def legacy_profile_name(cluster: str, region: str, nodeclass: str) -> str:
    """The stable name Karpenter v1.0-v1.5 (``InstanceProfileName``) gave a class's profile."""
    return f"{cluster}_{_fnv1_64(region + nodeclass)}"


def new_profile_name(cluster: str, region: str, nodeclass: str, salt: str | None = None) -> str:
    """A fresh name for a class's profile (``InstanceProfileName``: a random UUID in the hash)."""
    return f"{cluster}_{_fnv1_64(region + nodeclass + (salt or str(uuid.uuid4())))}"


def _path(*segments: str) -> str:
    return "/" + "/".join(segments) + "/"


def profile_path(cluster: str, region: str, uid: str) -> str:
    """The IAM path of a class's profiles (``FormatPath("karpenter", region, cluster, uid)``)."""
    return _path("karpenter", region, cluster, uid)


def profile_tags(cluster: str, region: str, nodeclass: str, custom: Mapping[str, str]) -> dict[str, str]:
    """The class's tags with the cluster's own (which win: the IAM policy asks for them)."""
    return {
        **custom,
        f"kubernetes.io/cluster/{cluster}": "owned",
        EKS_CLUSTER_TAG: cluster,
        NODECLASS_TAG: nodeclass,
        REGION_TAG: region,
    }


def _not_found(err: AwsError) -> bool:
    return err.code == "NoSuchEntity"


#: IAM's refusals (its query API says ``AccessDenied``; ``AccessDeniedException`` from JSON APIs).
_DENIED = frozenset({"AccessDenied", "AccessDeniedException"})


def _created(value: Any) -> datetime | None:
    """IAM's ``CreateDate`` (botocore parses it; a string is read as ISO 8601), timezone-aware."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _bare(role: str) -> str:
    """AddRoleToInstanceProfile takes a bare name: a role given with a path loses it."""
    return role.rsplit("/", 1)[-1]


class RoleNotFound(AwsError):
    """Dry run: the class's ``spec.role`` does not exist (``iam:GetRole`` said ``NoSuchEntity``)."""


class InstanceProfiles:
    """Creates, replaces, collects and deletes the profiles of one cluster's EC2NodeClasses."""

    def __init__(
        self,
        clients: AwsClients,
        cluster: str,
        region: str,
        *,
        clock: Clock | None = None,
        dry_run: bool = False,
    ) -> None:
        self.clients = clients
        #: ``node_actions.dry_run``: only read; what would be created or deleted is logged.
        self.dry_run = dry_run
        #: Under dry run, (class uid, role) -> the name a profile would have been made with.
        self._would: dict[tuple[str, str], str] = {}
        self.cluster = cluster
        self.region = region
        self._clock = clock or SystemClock()
        #: (class uid, role) -> (profile made, when): ``RecreationTTL``.
        self._recent: dict[tuple[str, str], tuple[str, float]] = {}
        #: Profile name -> protected until (monotonic seconds): ``protectedProfileCache``.
        self._protected: dict[str, float] = {}
        #: Profile name -> (its role's bare name, when learned): what ``ensure`` made or read, so a
        #: pass does not ask IAM again (and IAM's eventual consistency cannot hide one just made).
        self._known: dict[str, tuple[str, float]] = {}
        #: Profiles this process deleted (tests and logs).
        self.deleted: list[str] = []
        #: The (role, error code) pairs the dry run's role check could not tell and warned of.
        self._unchecked: set[tuple[str, str]] = set()

    # -- protection -----------------------------------------------------------------------------------

    def protect(self, name: str | None) -> None:
        if name:
            self._protected[name] = self._clock.monotonic() + PROTECTED_TTL

    def protecting(self) -> bool:
        """Whether some profile is protected now (one made or given up in this process)."""
        return any(self.is_protected(n) for n in list(self._protected))

    def rehearsed(self, name: str | None) -> bool:
        """Whether ``name`` is a profile only a dry run named: it does not exist, so nothing may
        report it ready nor write it to a status."""
        return bool(name) and name in self._would.values()

    def is_protected(self, name: str) -> bool:
        until = self._protected.get(name)
        if until is None:
            return False
        if until <= self._clock.monotonic():
            del self._protected[name]
            return False
        return True

    # -- one class --------------------------------------------------------------------------------------

    async def _role_of(self, name: str) -> str | None:
        """The role attached to profile ``name`` ("" none); None when the profile does not exist."""
        try:
            found = (await self.clients.call("iam", "GetInstanceProfile", InstanceProfileName=name))[
                "InstanceProfile"
            ]
        except AwsError as err:
            if _not_found(err):
                return None
            raise
        roles = [r.get("RoleName", "") for r in found.get("Roles", [])]
        return str(roles[0]) if roles else ""

    async def _attached(self, name: str) -> str | None:
        """``_role_of``, from what this process made or read within ``KNOWN_TTL``."""
        now = self._clock.monotonic()
        known = self._known.get(name)
        if known is not None and now - known[1] < KNOWN_TTL:
            return known[0]
        role = await self._role_of(name)
        if role is None:
            self._known.pop(name, None)
        else:
            self._known[name] = (role, now)
        return role

    async def _check_role(self, nodeclass: str, role: str) -> None:
        """Dry run: the role a real run would attach exists (``iam:GetRole``), else the creation
        rehearsed here would fail at ``AddRoleToInstanceProfile`` (``NoSuchEntity``, the error
        Karpenter's ``ensureRole`` caches as role-not-found): a dry run says so now, naming the
        class and the role (``RoleNotFound``), instead of reporting a profile it could never make.

        IAM checks authorization before existence, and kubespot's policy grants ``iam:GetRole``
        (as ``iam:PassRole``) on the node roles only: a misspelled role is ``AccessDenied``, not
        ``NoSuchEntity``, which a policy without ``iam:GetRole`` (made before kubespot asked for
        it, or Karpenter's own) answers for every role. The check cannot tell the two apart, so the
        creation is rehearsed with a warning per role naming both causes. (Inferring "not named"
        once another role answered made the verdict depend on the order the classes were looked
        at, and change at the next resync with nothing changed: review 16f.)"""
        try:
            await self.clients.call("iam", "GetRole", RoleName=_bare(role))
        except AwsError as err:
            if _not_found(err):
                raise RoleNotFound(
                    err.code,
                    f"role {role!r} of EC2NodeClass {nodeclass} does not exist, so a real run could not "
                    "make its instance profile (iam:AddRoleToInstanceProfile would fail): create the "
                    "role or correct spec.role",
                    service="iam",
                    operation="GetRole",
                    status=err.status,
                ) from err
            denied = err.code in _DENIED
            if (role, err.code) not in self._unchecked:
                self._unchecked.add((role, err.code))
                if denied:
                    log.warning(
                        "dry-run: cannot check role %r of EC2NodeClass %s (%s): either the role is not "
                        "one of the node roles the controller's policy names (then iam:PassRole is "
                        "refused too and a real run would fail: correct spec.role or add the role with "
                        "kubespot aws policy --node-role), or the policy does not grant iam:GetRole "
                        "(made before kubespot asked for it: regenerate it); its instance profile is "
                        "rehearsed without the check",
                        role,
                        nodeclass,
                        err,
                    )
                else:
                    log.warning(
                        "dry-run: cannot check role %r of EC2NodeClass %s (%s); its instance profile "
                        "is rehearsed without the check",
                        role,
                        nodeclass,
                        err,
                    )
            return

    async def ensure(
        self, nodeclass: str, uid: str, role: str, tags: Mapping[str, str], current: str | None = None
    ) -> str:
        """The profile the class launches with: ``current`` (its ``status.instanceProfile``) while
        ``role`` is attached to it, else a new one made for ``role``. Raises ``AwsError``."""
        key = (uid, role)
        now = self._clock.monotonic()
        recent = self._recent.get(key)
        old = current
        if recent is not None and now - recent[1] < RECREATION_TTL:
            current = recent[0]
        if current and await self._attached(current) == _bare(role):
            if old and old != current:
                self.protect(old)
            return current
        if self.dry_run:
            await self._check_role(nodeclass, role)
            if key not in self._would:
                self._would[key] = new_profile_name(self.cluster, self.region, nodeclass)
                log.info(
                    "dry-run: would create instance profile %s for class %s (role %s)",
                    self._would[key],
                    nodeclass,
                    role,
                )
            return self._would[key]
        name = new_profile_name(self.cluster, self.region, nodeclass)
        try:
            await self.clients.call(
                "iam",
                "CreateInstanceProfile",
                InstanceProfileName=name,
                Path=profile_path(self.cluster, self.region, uid),
                Tags=[
                    {"Key": k, "Value": v}
                    for k, v in sorted(profile_tags(self.cluster, self.region, nodeclass, tags).items())
                ],
            )
            await self.clients.call(
                "iam", "AddRoleToInstanceProfile", InstanceProfileName=name, RoleName=_bare(role)
            )
        except AwsError:
            # Made but not finished (the role refused): deleted now, so a missing role cannot
            # leave one profile behind per pass; collection is the backstop if this fails too.
            with contextlib.suppress(AwsError):
                await self.delete(name)
            raise
        self._recent[key] = (name, now)
        self._known[name] = (_bare(role), now)
        # The new one until the class's status names it, the old one while launches may use it.
        self.protect(name)
        self.protect(old)
        return name

    async def delete(self, name: str) -> bool:
        """Delete profile ``name`` (its role detached first); False if there was none (and under
        dry run, where it is only logged)."""
        if self.dry_run:
            log.info("dry-run: would delete instance profile %s", name)
            return False
        try:
            role = await self._role_of(name)
            if role is None:
                return False
            if role:
                await self.clients.call(
                    "iam", "RemoveRoleFromInstanceProfile", InstanceProfileName=name, RoleName=role
                )
            await self.clients.call("iam", "DeleteInstanceProfile", InstanceProfileName=name)
        except AwsError as err:
            if _not_found(err):
                return False
            raise
        self._protected.pop(name, None)
        self._known.pop(name, None)
        self.deleted.append(name)
        return True

    async def _list(self, prefix: str) -> dict[str, datetime | None]:
        """The profiles under IAM path ``prefix``: name -> its ``CreateDate`` (None: not given)."""
        request: dict[str, Any] = {"PathPrefix": prefix}
        out: dict[str, datetime | None] = {}
        while True:
            page = await self.clients.call("iam", "ListInstanceProfiles", **request)
            for p in page.get("InstanceProfiles") or []:
                # The prefix checked again: a profile outside it is another cluster's or a person's.
                if str(p.get("Path") or "/").startswith(prefix):
                    out[str(p["InstanceProfileName"])] = _created(p.get("CreateDate"))
            if not page.get("IsTruncated"):
                return out
            request["Marker"] = page["Marker"]

    async def delete_class(self, nodeclass: str, uid: str) -> list[str]:
        """Delete every profile made for the class (by path) and its legacy stable name
        (``cleanupManagedInstanceProfiles``); the names deleted."""
        gone = [
            n for n in await self._list(profile_path(self.cluster, self.region, uid)) if await self.delete(n)
        ]
        legacy = legacy_profile_name(self.cluster, self.region, nodeclass)
        if legacy not in gone and await self.delete(legacy):
            gone.append(legacy)
        return gone

    # -- the cluster ------------------------------------------------------------------------------------

    async def _in_use(self) -> set[str]:
        """The profiles the cluster's live instances carry (the name: the ARN's last part)."""
        request: dict[str, Any] = {
            "Filters": [
                {"Name": f"tag:{EKS_CLUSTER_TAG}", "Values": [self.cluster]},
                {"Name": "instance-state-name", "Values": list(_LIVE)},
            ],
            "MaxResults": 1000,
        }
        out: set[str] = set()
        while True:
            page = await self.clients.call("ec2", "DescribeInstances", **request)
            for reservation in page.get("Reservations") or []:
                for raw in reservation.get("Instances") or []:
                    arn = str((raw.get("IamInstanceProfile") or {}).get("Arn") or "")
                    if arn:
                        out.add(arn.rsplit("/", 1)[-1])
            token = page.get("NextToken")
            if not token:
                return out
            request["NextToken"] = token

    async def collect(self, current: Collection[str]) -> list[str]:
        """Delete the cluster's profiles (by path) that no class's status names (``current``), no
        live instance carries and that are not protected (``cleanupInactiveProfiles``)."""
        listed = await self._list(_path("karpenter", self.region, self.cluster))
        young = self._clock.now() - timedelta(seconds=YOUNG)
        candidates = [
            n
            for n, created in listed.items()
            if n not in current and not self.is_protected(n) and (created is None or created <= young)
        ]
        if not candidates:
            return []
        in_use = await self._in_use()
        return [n for n in candidates if n not in in_use and await self.delete(n)]
