"""Kubernetes resource quantities (``100m``, ``1.5``, ``512Mi``, ``2Gi``, ``1G``, ``1e3``).

The grammar is upstream's ``resource.Quantity``: an optionally signed decimal number followed by
one suffix, either binary (``Ki Mi Gi Ti Pi Ei``), decimal SI (``n u m k M G T P E``) or a decimal
exponent (``e3``, ``E-2``). Values are parsed exactly with ``Decimal``; the scheduler works in
integers (millicores, bytes) rounded up as upstream's ``MilliValue()``/``Value()`` do.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Number first, then the suffix: "1E" is exa, "1E3" is an exponent, as upstream disambiguates.
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE]?)$")


class QuantityError(ValueError):
    """The text is not a valid quantity."""


def parse_quantity(value: str | int | float) -> Decimal:
    """The exact value of ``value``; numbers (as JSON may carry them) are accepted too."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must be strings or numbers, not {value!r}")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantity is not finite: {value!r}")
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantities must be strings or numbers, not {type(value).__name__}")
    m = _RE.match(value.strip())
    if m is None:
        raise QuantityError(
            f"quantities must match the regular expression of a Kubernetes quantity: {value!r}"
        )
    number, suffix = m.groups()
    try:
        base = Decimal(number)
    except InvalidOperation:  # pragma: no cover - the regular expression admits only valid numbers
        raise QuantityError(f"invalid quantity {value!r}") from None
    if suffix in _BINARY:
        return base * Decimal(1024) ** _BINARY[suffix]
    if suffix and suffix[0] in "eE" and len(suffix) > 1:
        return base.scaleb(int(suffix[1:]))
    return base.scaleb(_DECIMAL[suffix])


def _ceil(d: Decimal) -> int:
    return int(d.to_integral_value(rounding="ROUND_CEILING"))


def to_milli(value: str | int | float) -> int:
    """Thousandths, rounded up (how CPU is counted: ``"100m"`` -> 100, ``"1.5"`` -> 1500)."""
    return _ceil(parse_quantity(value) * 1000)


def to_int(value: str | int | float) -> int:
    """Whole units, rounded up (how memory, pods and extended resources are counted)."""
    return _ceil(parse_quantity(value))
