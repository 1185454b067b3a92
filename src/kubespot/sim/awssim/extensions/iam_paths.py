"""IAM's ListInstanceProfiles honours ``PathPrefix``, as the IAM API reference describes it.

Stock moto 5.2.5 answers every instance profile of the account whatever ``PathPrefix`` says. EC2
node class controllers (Karpenter v1.6+, kubespot) list a cluster's profiles by their path
(``/karpenter/<region>/<cluster>/``) to collect the unused ones, so a prefix ignored would hand them
other clusters' profiles. Here only profiles whose path starts with the prefix are answered
(default ``/``: all). Paging (``Marker``/``MaxItems``) stays moto's: one page.
"""

from __future__ import annotations

from typing import Any

from moto.core.responses import ActionResult
from moto.iam.responses import IamResponse

__all__ = ["install"]

_MARK = "_kubespot_iam_paths"


def _make_list(original: Any) -> Any:
    def list_instance_profiles(self: Any) -> ActionResult:
        prefix = self._get_param("PathPrefix") or "/"
        if prefix == "/":
            result: ActionResult = original(self)
            return result
        profiles = [p for p in self.backend.get_instance_profiles() if str(p.path).startswith(prefix)]
        return ActionResult({"InstanceProfiles": profiles})

    return list_instance_profiles


def install() -> None:
    """Patch moto's ListInstanceProfiles (once)."""
    cls: Any = IamResponse
    if getattr(cls, _MARK, False):
        return
    cls.list_instance_profiles = _make_list(cls.list_instance_profiles)
    setattr(cls, _MARK, True)
