"""Go's ``time.Time.Format``: layouts written with the reference time ``Mon Jan 2 15:04:05 MST 2006``.

The layout elements and their precedence follow Go's ``time/format.go`` (``nextStdChunk``): ``2006``
``06`` years, ``January`` ``Jan`` ``01`` ``1`` months, ``Monday`` ``Mon`` weekdays, ``02`` ``_2``
``2`` days, ``002`` ``__2`` days of the year, ``15`` ``03`` ``3`` hours, ``04`` ``4`` minutes, ``05``
``5`` seconds, ``PM`` ``pm``, ``MST`` zone names, ``Z07:00`` ``-0700``... offsets, and ``.000`` /
``.999`` (or with ``,``) fractions of a second, fixed or with trailing zeros trimmed. Everything else
is copied as is.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

#: Go's month names (time.Month.String), January first.
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _offset(value: datetime, *, colon: bool, seconds: bool, hours_only: bool, z: bool) -> str:
    off = value.utcoffset() or timedelta(0)
    total = int(off.total_seconds())
    if z and total == 0:
        return "Z"
    sign = "-" if total < 0 else "+"
    total = abs(total)
    hh, mm, ss = total // 3600, total // 60 % 60, total % 60
    if hours_only:
        return f"{sign}{hh:02d}"
    sep = ":" if colon else ""
    text = f"{sign}{hh:02d}{sep}{mm:02d}"
    return text + f"{sep}{ss:02d}" if seconds else text


def _zone(value: datetime) -> str:
    name = value.tzname() if value.tzinfo is not None else "UTC"
    if name and name[:1].isalpha():
        return name
    # Go prints a numeric zone (-0700 style) when the location has no abbreviation.
    return _offset(value, colon=False, seconds=False, hours_only=False, z=False)


def _fraction(value: datetime, digits: int, trim: bool, sep: str) -> str:
    nanos = f"{value.microsecond:06d}000"[:digits]
    if trim:
        nanos = nanos.rstrip("0")
        return sep + nanos if nanos else ""
    return sep + nanos


def _chunk(layout: str, i: int, t: datetime) -> tuple[str, int] | None:
    """The element of ``layout`` at ``i`` formatted, and its length; None if it is plain text."""
    rest = layout[i:]
    c = rest[0]
    hour12 = t.hour % 12 or 12
    if c == "J" and rest.startswith("Jan"):
        return (MONTHS[t.month - 1], 7) if rest.startswith("January") else (MONTHS[t.month - 1][:3], 3)
    if c == "M":
        if rest.startswith("Monday"):
            return _DAYS[t.weekday()], 6
        if rest.startswith("Mon"):
            return _DAYS[t.weekday()][:3], 3
        if rest.startswith("MST"):
            return _zone(t), 3
    if c == "0" and len(rest) > 1 and rest[1] in "123456":
        element = {
            "1": f"{t.month:02d}",
            "2": f"{t.day:02d}",
            "3": f"{hour12:02d}",
            "4": f"{t.minute:02d}",
            "5": f"{t.second:02d}",
            "6": f"{t.year % 100:02d}",
        }[rest[1]]
        return element, 2
    if c == "0" and rest.startswith("002"):
        return f"{t.timetuple().tm_yday:03d}", 3
    if c == "1":
        if rest.startswith("15"):
            return f"{t.hour:02d}", 2
        return str(t.month), 1
    if c == "2":
        if rest.startswith("2006"):
            return f"{t.year:04d}", 4
        return str(t.day), 1
    if c == "_":
        if rest.startswith("_2"):
            # "_2006" is "_" followed by a year, not a padded day (Go keeps the underscore).
            if rest.startswith("_2006"):
                return "_" + f"{t.year:04d}", 5
            return f"{t.day:>2d}", 2
        if rest.startswith("__2"):
            return f"{t.timetuple().tm_yday:>3d}", 3
    if c == "3":
        return str(hour12), 1
    if c == "4":
        return str(t.minute), 1
    if c == "5":
        return str(t.second), 1
    if c == "P" and rest.startswith("PM"):
        return ("PM" if t.hour >= 12 else "AM"), 2
    if c == "p" and rest.startswith("pm"):
        return ("pm" if t.hour >= 12 else "am"), 2
    if c in "-Z":
        z = c == "Z"
        for spelled, colon, seconds, hours in (
            ("070000", False, True, False),
            ("07:00:00", True, True, False),
            ("0700", False, False, False),
            ("07:00", True, False, False),
            ("07", False, False, True),
        ):
            if rest[1:].startswith(spelled):
                return _offset(t, colon=colon, seconds=seconds, hours_only=hours, z=z), 1 + len(spelled)
    if c in ".," and len(rest) > 1 and rest[1] in "09":
        digit = rest[1]
        j = 1
        while j < len(rest) and rest[j] == digit:
            j += 1
        if not (j < len(rest) and rest[j].isdigit()):
            return _fraction(t, j - 1, digit == "9", c), j
    return None


def go_format(value: datetime, layout: str) -> str:
    """``value.Format(layout)`` as Go writes it (naive times are taken as UTC)."""
    t = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    out: list[str] = []
    i = 0
    while i < len(layout):
        found = _chunk(layout, i, t)
        if found is None:
            out.append(layout[i])
            i += 1
        else:
            out.append(found[0])
            i += found[1]
    return "".join(out)
