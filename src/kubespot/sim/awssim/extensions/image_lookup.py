"""Instance launches look their AMI up by id instead of filtering every image moto knows.

Stock moto 5.2.5 builds each ``Instance`` with ``describe_images(filters={"image-id": <id>})``,
which runs ``fnmatch`` over all ~1 400 built-in AMIs (plus kubespot's EKS ones): about 18 ms per
instance launched, the largest cost of a CreateFleet call and minutes for a benchmark launching
thousands of nodes. An ``image-id`` filter that is one id without wildcards matches exactly the
image with that id, so it is answered from moto's ``amis`` dict; any other query is moto's own.
"""

from __future__ import annotations

from typing import Any

from moto.ec2.models.amis import AmiBackend

__all__ = ["install"]

_MARK = "_kubespot_image_lookup"
_WILDCARDS = frozenset("*?[")


def _make_describe_images(original: Any) -> Any:
    def describe_images(
        self: Any,
        ami_ids: list[str] | None = None,
        filters: dict[str, Any] | None = None,
        exec_users: list[str] | None = None,
        owners: list[str] | None = None,
    ) -> Any:
        if (
            not ami_ids
            and not exec_users
            and not owners
            and filters is not None
            and list(filters) == ["image-id"]
        ):
            wanted = filters["image-id"]
            if isinstance(wanted, list) and len(wanted) == 1:
                wanted = wanted[0]
            if isinstance(wanted, str) and not _WILDCARDS & set(wanted):
                image = self.amis.get(wanted)
                return [image] if image is not None else []
        return original(self, ami_ids=ami_ids, filters=filters, exec_users=exec_users, owners=owners)

    return describe_images


def install() -> None:
    """Patch moto's EC2 image lookup (once)."""
    cls: Any = AmiBackend
    if getattr(cls, _MARK, False):
        return
    cls.describe_images = _make_describe_images(cls.describe_images)
    setattr(cls, _MARK, True)
