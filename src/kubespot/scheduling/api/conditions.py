"""Status conditions as Karpenter writes them on its objects (``type``, ``status``, ``reason``,
``message``), and the ``ValidationSucceeded`` condition built from a list of problems.

Karpenter's NodePool validation controller (kubernetes-sigs/karpenter
``pkg/controllers/nodepool/validation/controller.go``) sets ``ValidationSucceeded`` True, or False
with reason ``NodePoolValidationFailed`` and the joined error messages; the EC2NodeClass validation
(aws/karpenter-provider-aws ``pkg/controllers/nodeclass/validation.go``) uses a reason per check.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

VALIDATION_SUCCEEDED = "ValidationSucceeded"


@dataclass(frozen=True, slots=True)
class Problem:
    """One rule an object breaks: the condition reason it maps to and a message naming the field."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str = ""

    @property
    def is_true(self) -> bool:
        return self.status == "True"

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "status": self.status, "reason": self.reason, "message": self.message}


def validation_condition(problems: Iterable[Problem]) -> Condition:
    """``ValidationSucceeded``: True without problems; otherwise False with the first problem's
    reason and every message, joined as Karpenter's combined errors are (``; ``)."""
    found = list(problems)
    if not found:
        # Karpenter's SetTrue uses the condition type as its reason.
        return Condition(VALIDATION_SUCCEEDED, "True", VALIDATION_SUCCEEDED)
    messages = list(dict.fromkeys(p.message for p in found))
    return Condition(VALIDATION_SUCCEEDED, "False", found[0].reason, "; ".join(messages))
