"""Toleration matching as k8s.io/api core/v1 ``Toleration.ToleratesTaint`` defines it."""

from __future__ import annotations

import pytest

from kubespot.scheduling.taints import Taint, Toleration, untolerated

GPU = Taint("nvidia.com/gpu", "NoSchedule", "true")


@pytest.mark.parametrize(
    ("toleration", "matches"),
    [
        (Toleration("nvidia.com/gpu", "Equal", "true", "NoSchedule"), True),
        (Toleration("nvidia.com/gpu", "Equal", "true"), True),  # empty effect: any effect
        (Toleration("nvidia.com/gpu", "Equal", "false", "NoSchedule"), False),
        (Toleration("nvidia.com/gpu", "Exists"), True),
        (Toleration("", "Exists"), True),  # empty key with Exists: every taint
        (Toleration("", "Exists", effect="NoExecute"), False),
        (Toleration("nvidia.com/gpu", "Equal", "true", "NoExecute"), False),
        (Toleration("other", "Exists"), False),
        (Toleration("", "Equal", ""), False),  # an empty key only matches with Exists
    ],
)
def test_toleration_matching(toleration: Toleration, matches: bool) -> None:
    assert toleration.tolerates(GPU) is matches


def test_every_taint_needs_a_toleration_prefer_no_schedule_too() -> None:
    soft = Taint("spot", "PreferNoSchedule")
    assert untolerated([GPU, soft], [Toleration("nvidia.com/gpu", "Exists")]) == [soft]
    assert untolerated([GPU, soft], [Toleration("", "Exists")]) == []


def test_parse_defaults_the_operator_to_equal() -> None:
    tol = Toleration.parse({"key": "a", "value": "b"})
    assert tol.operator == "Equal" and tol.tolerates(Taint("a", "NoSchedule", "b"))
