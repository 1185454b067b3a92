"""Instance types for the scheduling tests: exact allocatable, given prices, no overhead.

The builder is the shipped fake cloud's (``kubespot.cloud.fake_type``), so the tests and
``FakeCloud`` describe types the same way.
"""

from __future__ import annotations

from kubespot.cloud.fake import DEFAULT_ZONES as ZONES
from kubespot.cloud.fake import fake_type as itype

__all__ = ["ZONES", "itype"]
