"""Resource quantities as upstream counts them (k8s.io/apimachinery ``pkg/api/resource``
``Quantity``: binary, decimal SI and exponent suffixes; ``MilliValue``/``Value`` round up)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from kubespot.model.quantity import QuantityError, milli, quantity, units


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        ("100m", Decimal("0.1")),
        ("1.5", Decimal("1.5")),
        ("512Mi", Decimal(512 * 1024**2)),
        ("2Gi", Decimal(2 * 1024**3)),
        ("1G", Decimal(10**9)),
        ("1e3", Decimal(1000)),
        ("1E", Decimal(10**18)),  # exa, not an exponent: upstream reads the suffix first
        (".5", Decimal("0.5")),
        ("-2k", Decimal(-2000)),
        (3, Decimal(3)),
    ],
)
def test_parses_upstreams_grammar(text: str | int, exact: Decimal) -> None:
    assert quantity(text) == exact


def test_cpu_in_millicores_and_others_in_units_rounded_up() -> None:
    assert milli("100m") == 100 and milli("1.5") == 1500 and milli("0.0001") == 1
    assert units("0.5") == 1 and units("1Ki") == 1024


@pytest.mark.parametrize("bad", ["", "1Mb", "one", "1.2.3", "Gi", True, None])
def test_rejects_what_is_not_a_quantity(bad: object) -> None:
    with pytest.raises(QuantityError):
        quantity(bad)  # type: ignore[arg-type]
