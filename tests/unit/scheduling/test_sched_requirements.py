"""The requirements algebra against Karpenter's semantics.

The compatibility matrix is the one Karpenter's own suite asserts for a well-known label
(kubernetes-sigs/karpenter ``pkg/scheduling/requirements_test.go``, "should be compatible with
well-known v1 labels undefined"): rows are the NodePool side (``self``), columns the pod side.
"""

from __future__ import annotations

import pytest

from kubespot.scheduling.labels import WELL_KNOWN, ZONE
from kubespot.scheduling.requirements import Requirement, RequirementError, Requirements

CASES: dict[str, list[tuple[str, list[str]]]] = {
    "unconstrained": [],
    "exists": [("Exists", [])],
    "doesNotExist": [("DoesNotExist", [])],
    "inA": [("In", ["A"])],
    "inB": [("In", ["B"])],
    "inAB": [("In", ["A", "B"])],
    "notInA": [("NotIn", ["A"])],
    "in1": [("In", ["1"])],
    "in9": [("In", ["9"])],
    "in19": [("In", ["1", "9"])],
    "notIn12": [("NotIn", ["1", "2"])],
    "greaterThan1": [("Gt", ["1"])],
    "greaterThan9": [("Gt", ["9"])],
    "lessThan1": [("Lt", ["1"])],
    "lessThan9": [("Lt", ["9"])],
}

# "+" compatible, "." not; columns in the order of CASES.
MATRIX = """
unconstrained  +++++++++++++++
exists         ++.++++++++++++
doesNotExist   +.+...+...+....
inA            ++.+.+....+....
inB            ++..+++...+....
inAB           ++.++++...+....
notInA         +++.+++++++++++
in1            ++....++.+....+
in9            ++....+.++++...
in19           ++....++++++..+
notIn12        +++++++.+++++++
greaterThan1   ++....+.+++++.+
greaterThan9   ++....+...+++..
lessThan1      ++....+...+..++
lessThan9      ++....++.+++.++
"""


def reqs(name: str) -> Requirements:
    return Requirements(Requirement.of(ZONE, op, vals) for op, vals in CASES[name])


def matrix() -> list[tuple[str, str, bool]]:
    names = list(CASES)
    out = []
    for line in MATRIX.strip().splitlines():
        row, marks = line.split()
        out.extend((row, col, mark == "+") for col, mark in zip(names, marks, strict=True))
    return out


@pytest.mark.parametrize(("pool", "pod", "expected"), matrix())
def test_compatibility_matrix_as_karpenter(pool: str, pod: str, expected: bool) -> None:
    assert reqs(pool).is_compatible(reqs(pod), allow_undefined=WELL_KNOWN) is expected


def test_a_custom_label_the_pool_does_not_define_is_unknown_unless_only_excluded() -> None:
    pool = Requirements()
    wants = Requirements([Requirement.of("team", "In", ["a"])])
    avoids = Requirements([Requirement.of("team", "NotIn", ["a"])])
    assert pool.compatibility(wants, WELL_KNOWN) == ['label "team" does not have known values']
    assert pool.is_compatible(avoids, WELL_KNOWN)


def test_adding_intersects_and_bounds_filter_finite_sets() -> None:
    r = Requirements([Requirement.of("gen", "In", ["1", "3", "5", "x"])])
    r.add(Requirement.of("gen", "Gt", ["2"]))
    assert r["gen"].values == {"3", "5"} and r["gen"].operator == "In"
    r.add(Requirement.of("gen", "Lte", ["4"]))
    assert r["gen"].values == {"3"}
    r.add(Requirement.of("gen", "Gte", ["5"]))
    assert r["gen"].operator == "DoesNotExist"


def test_bounds_on_complements_are_kept_and_read_as_gte_lte() -> None:
    r = Requirements([Requirement.of("cpu", "Gt", ["3"]), Requirement.of("cpu", "Lt", ["17"])])
    req = r["cpu"]
    assert (req.gte, req.lte, req.operator) == (4, 16, "Exists")
    assert req.has("4") and req.has("16") and not req.has("17") and not req.has("big")
    assert req.as_selector() == [
        {"key": "cpu", "operator": "Gte", "values": ["4"]},
        {"key": "cpu", "operator": "Lte", "values": ["16"]},
    ]


def test_min_values_take_the_largest() -> None:
    r = Requirements([Requirement.of("type", "Exists", [], min_values=2)])
    r.add(Requirement.of("type", "In", ["a", "b", "c"], min_values=3))
    assert r["type"].min_values == 3 and r.has_min_values()


def test_beta_labels_are_normalised() -> None:
    r = Requirements.from_selector(
        [{"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In", "values": ["z1"]}]
    )
    assert list(r) == [ZONE]


@pytest.mark.parametrize(
    ("operator", "values"), [("Gt", []), ("Lt", ["1", "2"]), ("Gte", ["x"]), ("Near", ["1"])]
)
def test_malformed_requirements_are_errors(operator: str, values: list[str]) -> None:
    with pytest.raises(RequirementError):
        Requirement.of("k", operator, values)


def test_conflict_names_the_key_and_both_sides() -> None:
    pool = Requirements([Requirement.of(ZONE, "In", ["a"])])
    pod = Requirements([Requirement.of(ZONE, "In", ["b"])])
    assert pool.compatibility(pod) == [f"key {ZONE}, {ZONE} In [b] not in {ZONE} In [a]"]


def test_identity_tells_long_value_lists_apart_that_read_alike() -> None:
    """Karpenter keys nothing on a requirement's text: pkg/scheduling/requirement.go keeps every
    value in a set and Requirements.Compatible compares them all. Two lists of six values that
    share their first five and their length read alike once ``str`` shortens them, but they are
    different requirements; ``identity`` (the memo and group key) tells them apart, and is the same
    whatever order the values and keys came in (review speed13, finding 1)."""
    shared = ["a1", "a2", "a3", "a4", "a5"]
    a = Requirements([Requirement.of("type", "In", [*shared, "b6"])])
    b = Requirements([Requirement.of("type", "In", [*shared, "c7"])])
    assert str(a) == str(b)  # the display text is shortened on purpose
    assert a.identity() != b.identity()
    one = Requirements([Requirement.of(ZONE, "In", ["z2", "z1"]), Requirement.of("type", "In", ["y", "x"])])
    two = Requirements([Requirement.of("type", "In", ["x", "y"]), Requirement.of(ZONE, "In", ["z1", "z2"])])
    assert one.identity() == two.identity()


def test_identity_follows_an_add() -> None:
    """pkg/scheduling/requirements.go Add intersects the key's requirement: the cached identity must
    be the narrowed set's, not the one from before the add (nor the copy's after it)."""
    r = Requirements([Requirement.of("type", "In", ["a", "b"])])
    before = r.identity()
    copy = r.copy()
    r.add(Requirement.of("type", "In", ["a"]))
    assert r.identity() == Requirements([Requirement.of("type", "In", ["a"])]).identity()
    assert r.identity() != before and copy.identity() == before
