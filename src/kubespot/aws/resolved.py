"""``ResolvedNodeClass``: what launching needs of one EC2NodeClass once its selector terms are resolved.

The provisioning controller's status loop resolves each class (``controllers/provisioning``) and
hands the result to ``AwsCloud.set_resolved``; ``kubespot plan`` builds one from the status a
controller wrote. A part left None was not resolved (an AWS failure): ``merged`` keeps the last
good value then, as the status does. ``not_ready`` says why the class cannot launch (Karpenter's
``NodeClassNotReadyError``: its Ready condition is not True).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec

from .amis import AmiInfo
from .security_groups import SecurityGroupInfo
from .subnets import SubnetInfo

__all__ = ["ResolvedNodeClass"]


@dataclass(frozen=True, slots=True)
class ResolvedNodeClass:
    """An EC2NodeClass's spec and its resolved subnets, security groups and AMIs."""

    spec: EC2NodeClassSpec | None = None
    subnets: Sequence[SubnetInfo] | None = None
    security_groups: Sequence[SecurityGroupInfo] | None = None
    #: Newest first, as ``status.amis`` (the first compatible image serves a type).
    amis: Sequence[AmiInfo] | None = None
    #: The profile kubespot made for ``spec.role`` (``instance_profiles``); None: not (yet) made.
    instance_profile: str | None = None

    @classmethod
    def in_zones(cls, zones: Iterable[str]) -> ResolvedNodeClass:
        """Only where the class's subnets are (``kubespot plan``, from a status that names their
        zones but not their free addresses): enough to plan, not to launch."""
        return cls(subnets=tuple(SubnetInfo("", z, "") for z in sorted(set(zones))))

    @property
    def zones(self) -> frozenset[str] | None:
        """The zones of its subnets (None: not resolved)."""
        return None if self.subnets is None else frozenset(s.zone for s in self.subnets if s.zone)

    def merged(self, previous: ResolvedNodeClass | None) -> ResolvedNodeClass:
        """This resolution with the parts it lacks taken from ``previous``."""
        if previous is None:
            return self
        return replace(
            self,
            spec=self.spec if self.spec is not None else previous.spec,
            subnets=self.subnets if self.subnets is not None else previous.subnets,
            security_groups=(
                self.security_groups if self.security_groups is not None else previous.security_groups
            ),
            amis=self.amis if self.amis is not None else previous.amis,
            instance_profile=self.instance_profile or previous.instance_profile,
        )

    @property
    def profile(self) -> str | None:
        """The instance profile instances launch with: the spec's, or the one made for its role."""
        if self.spec is None:
            return None
        return self.spec.instance_profile or self.instance_profile

    @property
    def launch_spec(self) -> EC2NodeClassSpec | None:
        """The spec with the profile launches use in ``instanceProfile``."""
        if self.spec is None or self.spec.instance_profile or not self.instance_profile:
            return self.spec
        return replace(self.spec, instance_profile=self.instance_profile)

    def not_ready(self) -> str | None:
        """Why nothing can launch through this class (None: it can)."""
        if self.spec is None:
            return "EC2NodeClass not resolved"
        if not self.subnets:
            return "SubnetSelector did not match any Subnets"
        if not self.security_groups:
            return "SecurityGroupSelector did not match any SecurityGroups"
        if not self.amis:
            return "AMISelector did not match any AMIs"
        if not self.profile:
            # Made by the status loop (instance_profiles); not yet, or IAM refused.
            return f"the instance profile for role {self.spec.role!r} is not created"
        return None
