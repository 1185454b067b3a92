"""One EC2NodeClass's selector terms resolved through the AWS adapter, part by part.

Each part (subnets, security groups, AMIs) is resolved on its own: one that fails (throttling, a
5xx, no answer: ``AwsError``; an alias none of whose parameters exists: ``AliasNotFound``, which
Karpenter also treats as a failed reconcile) is logged with the class and the call, left None in
the ``Resolution`` so the status keeps its last good value, and reported in ``failures`` so the
loop retries it with backoff. An alias with no images at this Kubernetes version is not a failure
but an answer (``UnsupportedAlias``, a False condition). A class naming ``spec.role`` gets its
instance profile made here (a new one when its role changed), as Karpenter's
``nodeclass/instanceprofile.go``; an IAM failure is a failed part like the others. A class that
names ``spec.instanceProfile`` instead protects the profile its status named from collection
(``Reconcile``'s else branch: a role given up for a profile of one's own).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from kubespot.aws import AwsClients, AwsError
from kubespot.aws.amis import AliasNotFound, resolve_amis
from kubespot.aws.instance_profiles import InstanceProfiles, RoleNotFound
from kubespot.aws.security_groups import resolve_security_groups
from kubespot.aws.subnets import resolve_subnets
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec

from .nodeclass_status import Resolution

__all__ = ["NodeClassResolver", "Resolved"]

log = logging.getLogger("kubespot.controller.provisioning")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Resolved:
    resolution: Resolution
    #: One line per part that failed (retried with backoff); empty when all answered.
    failures: tuple[str, ...] = field(default=())


class NodeClassResolver:
    """Resolves EC2NodeClasses with one set of AWS clients."""

    def __init__(
        self,
        clients: AwsClients,
        k8s_version: Callable[[], Awaitable[str]],
        profiles: InstanceProfiles | None = None,
    ) -> None:
        self._clients = clients
        self._k8s_version = k8s_version
        #: None: no cluster name to scope profiles by; a role-only class stays not ready.
        self.profiles = profiles

    async def resolve(
        self, spec: EC2NodeClassSpec, *, now: datetime, uid: str = "", profile: str | None = None
    ) -> Resolved:
        """``profile``: the class's ``status.instanceProfile`` (kept while its role is the class's)."""
        failures: list[str] = []

        async def part(what: str, run: Callable[[], Awaitable[T]]) -> T | None:
            try:
                return await run()
            except (AwsError, AliasNotFound) as err:
                log.warning("EC2NodeClass %s: cannot resolve its %s: %s", spec.name, what, err)
                failures.append(f"{what}: {err}")
                return None

        subnets = await part("subnets", lambda: resolve_subnets(self._clients, spec.subnet_selector_terms))
        groups = await part(
            "security groups",
            lambda: resolve_security_groups(self._clients, spec.security_group_selector_terms),
        )
        unsupported: str | None = None
        amis = None
        try:
            version = await self._k8s_version()
            amis = await part(
                "AMIs", lambda: resolve_amis(self._clients, spec.ami_selector_terms, version, now=now)
            )
        except ValueError as err:  # UnsupportedAlias, or an alias that slipped past validation
            unsupported = str(err)
        except Exception as err:  # the version read failed (the API server): a failure like AWS's
            log.warning("EC2NodeClass %s: cannot learn the Kubernetes version: %s", spec.name, err)
            failures.append(f"Kubernetes version: {err}")
        made = profile_error = None
        role_missing = False
        if spec.role and self.profiles is not None:
            profiles, role, before = self.profiles, spec.role, len(failures)

            async def ensure() -> str:
                nonlocal role_missing
                try:
                    return await profiles.ensure(spec.name, uid, role, spec.tags, profile)
                except RoleNotFound:
                    role_missing = True
                    raise

            made = await part("instance profile", ensure)
            if len(failures) > before:
                profile_error = str(failures[before].removeprefix("instance profile: "))
        elif self.profiles is not None and profile != spec.instance_profile:
            self.profiles.protect(profile)
        would = None
        if self.profiles is not None and self.profiles.rehearsed(made):
            made, would = None, made  # a dry run's: not made, so not ready (nodeclass_status)
        return Resolved(
            Resolution(subnets, groups, amis, unsupported, made, would, profile_error, role_missing),
            tuple(failures),
        )
