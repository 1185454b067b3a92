"""The instance profile kubespot makes and owns for an EC2NodeClass that names ``spec.role``.

As aws/karpenter-provider-aws ``pkg/providers/instanceprofile/instanceprofile.go`` (``Create``,
``ensureRole``, ``Delete``) and ``pkg/apis/v1/ec2nodeclass.go`` (``InstanceProfileName``,
``InstanceProfileTags``) in Karpenter v1.0-v1.5: one profile per class, named
``<cluster>_<hash of region and class name>`` (FNV-1a 64: ``hashstructure`` v2's default hasher
over a string's bytes; not checked against names a live Karpenter made), under the path
``/karpenter/<region>/<cluster>/<class uid>/``, tagged with the class's ``spec.tags`` and
``kubernetes.io/cluster/<cluster>`` = owned, ``eks:eks-cluster-name``,
``karpenter.k8s.aws/ec2nodeclass`` and ``topology.kubernetes.io/region``. Its one role is the
class's; a changed role is swapped in place. Deleted (role detached first) with the class.

kubespot difference: Karpenter v1.6+ gives each role a new randomly named profile and collects the
old ones later; kubespot keeps v1.0's stable name (a profile a Karpenter v1.0-v1.5 made for the
same class should be the same profile, adopted), so no collection is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .session import AwsClients, AwsError

__all__ = ["InstanceProfiles", "profile_name", "profile_path", "profile_tags"]

NODECLASS_TAG = "karpenter.k8s.aws/ec2nodeclass"
REGION_TAG = "topology.kubernetes.io/region"
EKS_CLUSTER_TAG = "eks:eks-cluster-name"

_FNV_OFFSET, _FNV_PRIME, _MASK = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1


def _fnv1a64(text: str) -> int:
    h = _FNV_OFFSET
    for byte in text.encode():
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


def profile_name(cluster: str, region: str, nodeclass: str) -> str:
    """The profile's name: stable for a class, so a restart finds the one it made."""
    return f"{cluster}_{_fnv1a64(region + nodeclass)}"


def profile_path(cluster: str, region: str, uid: str) -> str:
    """The IAM path: the controller's policy scopes its profile actions to the cluster's tags."""
    return f"/karpenter/{region}/{cluster}/{uid}/"


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


@dataclass(frozen=True, slots=True)
class InstanceProfiles:
    """Creates, re-roles and deletes the profiles of one cluster's EC2NodeClasses."""

    clients: AwsClients
    cluster: str
    region: str

    async def ensure(self, nodeclass: str, uid: str, role: str, tags: Mapping[str, str]) -> str:
        """The class's profile with ``role`` attached (created if missing); its name."""
        name = profile_name(self.cluster, self.region, nodeclass)
        try:
            found = (await self.clients.call("iam", "GetInstanceProfile", InstanceProfileName=name))[
                "InstanceProfile"
            ]
        except AwsError as err:
            if not _not_found(err):
                raise
            found = (
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
            )["InstanceProfile"]
        # AddRoleToInstanceProfile takes a bare name: a role given with a path loses it.
        role_name = role.rsplit("/", 1)[-1]
        attached = [r.get("RoleName", "") for r in found.get("Roles", [])]
        if attached == [role_name]:
            return name
        # A profile holds one role at most: a changed role is swapped.
        for old in attached:
            await self.clients.call(
                "iam", "RemoveRoleFromInstanceProfile", InstanceProfileName=name, RoleName=old
            )
        await self.clients.call(
            "iam", "AddRoleToInstanceProfile", InstanceProfileName=name, RoleName=role_name
        )
        return name

    async def delete(self, nodeclass: str) -> bool:
        """Delete the class's profile (its role detached first); False if there was none."""
        name = profile_name(self.cluster, self.region, nodeclass)
        try:
            found = (await self.clients.call("iam", "GetInstanceProfile", InstanceProfileName=name))[
                "InstanceProfile"
            ]
            for role in found.get("Roles", []):
                await self.clients.call(
                    "iam",
                    "RemoveRoleFromInstanceProfile",
                    InstanceProfileName=name,
                    RoleName=role["RoleName"],
                )
            await self.clients.call("iam", "DeleteInstanceProfile", InstanceProfileName=name)
        except AwsError as err:
            if _not_found(err):
                return False
            raise
        return True
