"""The fixture every chart test takes: the helm binary (found once per module, failing without it)."""

from __future__ import annotations

import pytest
from helm_support import find_helm


@pytest.fixture(scope="module")
def helm() -> str:
    return find_helm()
