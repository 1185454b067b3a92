"""Quantity parsing against upstream's ``resource.Quantity`` grammar and rounding."""

from __future__ import annotations

from decimal import Decimal

import pytest

from kubespot.sim.kubesim.quantity import QuantityError, parse_quantity, to_int, to_milli


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Decimal("0.1")),
        ("1.5", Decimal("1.5")),
        ("512Mi", Decimal(512 * 2**20)),
        ("2Gi", Decimal(2 * 2**30)),
        ("1G", Decimal(10**9)),
        ("1e3", Decimal(1000)),
        ("1E", Decimal(10**18)),  # a bare E is exa, not an exponent
        ("2E2", Decimal(200)),
        ("5Ki", Decimal(5120)),
        (".5", Decimal("0.5")),
        ("250u", Decimal("0.00025")),
        ("3", Decimal(3)),
        ("-1", Decimal(-1)),
        (2, Decimal(2)),
        (0.25, Decimal("0.25")),
    ],
)
def test_parse(text: str | int | float, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1KiB", "1e", "1.2.3", "Mi", "1 Gi", "1k1"])
def test_invalid_quantities_are_rejected(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_cpu_millis_round_up_like_milli_value() -> None:
    assert to_milli("100m") == 100
    assert to_milli("1.5") == 1500
    assert to_milli("2") == 2000
    assert to_milli("1n") == 1  # upstream MilliValue rounds up
    assert to_milli("0.0001") == 1


def test_whole_units_round_up_like_value() -> None:
    assert to_int("512Mi") == 536_870_912
    assert to_int("1G") == 1_000_000_000
    assert to_int("100m") == 1
    assert to_int("110") == 110


def test_booleans_are_not_quantities() -> None:
    with pytest.raises(QuantityError):
        parse_quantity(True)
