"""Kubernetes resource quantities as the capacity model counts them (``250m``, ``1.5``, ``4Gi``, ``1e3``).

The grammar is ``k8s.io/apimachinery/pkg/api/resource`` Quantity's: a signed decimal, then one binary
suffix (``Ki`` … ``Ei``), decimal SI suffix (``n u m k M G T P E``) or decimal exponent (``e3``).
Counting follows upstream: CPU in millicores, everything else in whole units, both rounded up
(``MilliValue()`` / ``Value()``). The simulators parse quantities on their own on purpose: they are
the independent oracle the product is checked against, so they share no code with it.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal

_SUFFIX_SCALE: dict[str, Decimal] = {
    **{s: Decimal(1024) ** p for p, s in enumerate(("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")) if s},
    **{s: Decimal(10) ** e for s, e in zip("numkMGTPE", (-9, -6, -3, 3, 6, 9, 12, 15, 18), strict=True)},
    "": Decimal(1),
}
_QUANTITY = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)")


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def quantity(value: str | int | float) -> Decimal:
    """The exact value of a quantity; JSON numbers are accepted as well as strings."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(f"a quantity is a string or a number, not {value!r}")
    if not isinstance(value, str):
        return Decimal(str(value))
    match = _QUANTITY.fullmatch(value.strip())
    if match is None:
        raise QuantityError(f"{value!r} is not a Kubernetes quantity")
    number, exponent, suffix = match.groups()
    if exponent:
        return Decimal(number).scaleb(int(exponent[1:]))
    return Decimal(number) * _SUFFIX_SCALE[suffix or ""]


def milli(value: str | int | float) -> int:
    """Thousandths, rounded up: how CPU is counted (``"100m"`` → 100, ``"1.5"`` → 1500)."""
    return int((quantity(value) * 1000).to_integral_value(ROUND_CEILING))


def units(value: str | int | float) -> int:
    """Whole units, rounded up: how memory, storage, pods and extended resources are counted."""
    return int(quantity(value).to_integral_value(ROUND_CEILING))


MIB = 1024 * 1024
GIB = 1024 * MIB


def quantity_text(name: str, amount: int) -> str:
    """A count back to a quantity string: CPU millicores as ``2`` or ``1500m``, memory and storage
    bytes as ``Mi`` when whole, anything else as the integer."""
    if name == "cpu":
        return f"{amount}m" if amount % 1000 else str(amount // 1000)
    if name in ("memory", "ephemeral-storage") and amount % MIB == 0:
        return f"{amount // MIB}Mi"
    return str(amount)
