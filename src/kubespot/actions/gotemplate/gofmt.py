"""How Go prints values: ``fmt``'s ``%v`` (what ``{{ .X }}`` prints), ``Sprint``/``Sprintln`` and
``Sprintf`` for the verbs templates use, and ``strconv.Quote``.

Values are Python's: str, bool, int, float, datetime (Go's ``time.Time``), list/tuple (slices),
mappings (maps, printed ``map[k:v]`` with sorted keys, as ``fmt`` sorts them), None (nil, printed
empty here: kubespot's fields that have no value, e.g. ``EndTime`` without a deadline) and
``MISSING`` (a map key that is absent: Go prints ``<no value>``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence, Set
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from .gotime import MONTHS


class _Missing:
    """A map's absent key, as Go's invalid ``reflect.Value``: prints ``<no value>``, is false."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING = _Missing()


class GoInt(int):
    """An int that prints as a name (Go's ``time.Month`` and ``time.Weekday`` are ``Stringer`` ints)."""

    names: tuple[str, ...] = ()
    first = 0

    def __str__(self) -> str:
        return self.names[int(self) - self.first]

    __repr__ = __str__


class Month(GoInt):
    names = MONTHS
    first = 1


class Weekday(GoInt):
    names = tuple(["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"])


def go_time(value: datetime) -> str:
    """``time.Time.String()`` of a UTC time: ``2006-01-02 15:04:05.5 +0000 UTC`` (naive = UTC)."""
    utc = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    # strftime's %Y does not pad years below 1000 on every libc; Go prints four digits (0001).
    text = f"{utc.year:04d}-" + utc.strftime("%m-%d %H:%M:%S")
    if utc.microsecond:
        # Go prints the fraction with trailing zeros trimmed (".999999999" layout).
        text += f".{utc.microsecond:06d}".rstrip("0")
    return text + " +0000 UTC"


def go_float(value: float) -> str:
    """``strconv.FormatFloat(value, 'g', -1, 64)``, how ``%v`` prints a float64: the shortest digits
    that read back the same, with an exponent when it is below -4 or at least 6 (``1e+06``, ``1.5``,
    ``123456``), as strconv's ``%g`` decides for the shortest precision (``eprec = 6``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign_bit, digit_tuple, exponent = Decimal(repr(float(value))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    lead = len("".join(map(str, digit_tuple))) - len("".join(map(str, digit_tuple)).lstrip("0"))
    digits = digits[lead:]
    assert isinstance(exponent, int)
    point = len(digit_tuple) - lead + exponent  # position of the decimal point after the digits' start
    sign = "-" if sign_bit else ""
    exp = point - 1
    if exp < -4 or exp >= 6:
        rest = digits[1:]
        return f"{sign}{digits[0]}{'.' + rest if rest else ''}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


def go_value(value: Any) -> str:
    """``fmt.Sprint(value)`` for one value (``%v``)."""
    if value is None:
        return ""
    if value is MISSING:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, GoInt):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, datetime):
        return go_time(value)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        items = " ".join(f"{go_value(k)}:{go_value(v)}" for k, v in sorted(value.items(), key=_key))
        return f"map[{items}]"
    if isinstance(value, list | tuple | Set):
        return "[" + " ".join(go_value(v) for v in value) + "]"
    return str(value)


def _key(item: tuple[Any, Any]) -> Any:
    key = item[0]
    return (0, key) if isinstance(key, int | float) and not isinstance(key, bool) else (1, str(key))


def go_quote(text: str) -> str:
    """``strconv.Quote``: double quotes, Go escapes for quotes, backslashes and controls."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ch in "\a\b\f\v":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"}[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif not ch.isprintable():
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def sprint(args: Sequence[Any]) -> str:
    """``fmt.Sprint``: a space between two operands when neither is a string."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if i and not isinstance(arg, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(go_value(arg))
    return "".join(out)


def sprintln(args: Sequence[Any]) -> str:
    """``fmt.Sprintln``: spaces between all operands, a newline at the end."""
    return " ".join(go_value(a) for a in args) + "\n"


_VERB = re.compile(r"%([-+# 0]*)(\d+|\*)?(?:\.(\d+|\*)?)?([a-zA-Z%])")


def _type_name(value: Any) -> str:
    if value is None:
        return "<nil>"
    return {
        bool: "bool",
        int: "int",
        float: "float64",
        str: "string",
        datetime: "time.Time",
    }.get(type(value), "interface {}")


def sprintf(layout: str, args: Sequence[Any]) -> str:
    """``fmt.Sprintf`` for the verbs a message template uses: %v %s %q %d %f %e %g %x %X %o %b %t %c
    %T %%, with flags, width and precision; a wrong verb prints Go's ``%!d(string=x)`` markers."""
    out: list[str] = []
    pos = 0
    n = 0
    for m in _VERB.finditer(layout):
        out.append(layout[pos : m.start()])
        pos = m.end()
        flags, width_s, prec_s, verb = m.groups()
        if verb == "%":
            out.append("%")
            continue
        if n >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        arg = args[n]
        n += 1
        text = _format_one(verb, arg, flags, None if prec_s is None else int(prec_s or 0))
        width = int(width_s) if width_s and width_s != "*" else 0
        if len(text) < width:
            if "-" in flags:
                text = text.ljust(width)
            elif "0" in flags and verb in "dfeEgGxXob" and not isinstance(arg, str):
                sign = text[0] if text[:1] in "+-" else ""
                text = sign + text[len(sign) :].rjust(width - len(sign), "0")
            else:
                text = text.rjust(width)
        out.append(text)
    out.append(layout[pos:])
    if n < len(args):
        extra = ", ".join(f"{_type_name(a)}={go_value(a)}" for a in args[n:])
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)


def _bad(verb: str, arg: Any) -> str:
    return f"%!{verb}({_type_name(arg)}={go_value(arg)})"


def _format_one(verb: str, arg: Any, flags: str, prec: int | None) -> str:
    is_int = isinstance(arg, int) and not isinstance(arg, bool)
    sign = "+" if "+" in flags else (" " if " " in flags else "")
    if verb == "v":
        return go_value(arg)
    if verb == "T":
        return _type_name(arg)
    if verb == "s":
        if isinstance(arg, int | float) and not isinstance(arg, bool | GoInt):
            return _bad(verb, arg)
        text = go_value(arg)
        return text[:prec] if prec is not None else text
    if verb == "q":
        if is_int and not isinstance(arg, GoInt):
            return "'" + go_quote(chr(arg))[1:-1].replace("'", "\\'") + "'"
        if isinstance(arg, str):
            return go_quote(arg)
        return _bad(verb, arg)
    if verb == "t":
        return ("true" if arg else "false") if isinstance(arg, bool) else _bad(verb, arg)
    if verb in "dxXob":
        if is_int:
            base = {"d": "d", "x": "x", "X": "X", "o": "o", "b": "b"}[verb]
            text = format(int(arg), sign + base)
            if "#" in flags and verb in "xX":
                text = ("-" if arg < 0 else "") + "0" + verb + text.lstrip("-+ ")
            return text
        if verb in "xX" and isinstance(arg, str):
            hexed = arg.encode().hex()
            return hexed.upper() if verb == "X" else hexed
        return _bad(verb, arg)
    if verb == "c":
        return chr(arg) if is_int else _bad(verb, arg)
    if verb in "feEgG":
        if isinstance(arg, float) or is_int:
            if is_int and not isinstance(arg, float):
                return _bad(verb, arg)
            if verb in "gG" and prec is None:
                text = go_float(float(arg))
                return (sign if arg >= 0 else "") + (text.upper() if verb == "G" else text)
            return format(float(arg), f"{sign}.{6 if prec is None else prec}{verb}")
        return _bad(verb, arg)
    return f"%!{verb}({_type_name(arg)}={go_value(arg)})"
