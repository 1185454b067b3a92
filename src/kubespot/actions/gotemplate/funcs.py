"""The functions a template can call: Go ``text/template``'s built-ins and the sprig functions
(``sprig.TxtFuncMap``, what aws-node-termination-handler registers) that a message needs.

Semantics follow Go's ``text/template/funcs.go`` and sprig v3's sources (``strings.go``,
``defaults.go``, ``date.go``, ``list.go``, ``numeric.go``, ``dict.go``): argument order included
(sprig puts the subject last, ``replace old new s``, so it can be piped). Sprig functions that read
the environment (``env``, ``expandenv``: the agent's environment holds the webhook URL and other
secrets) or the network (``getHostByName``), and the crypto and random generators, are not offered:
a template using one is reported as unsupported, naming it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import urllib.parse
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .errors import TemplateError
from .gofmt import MISSING, GoInt, go_quote, go_value, sprint, sprintf, sprintln
from .gotime import go_format

Func = Callable[..., Any]


# --- values --------------------------------------------------------------------------------------------


def truth(value: Any) -> bool:
    """Go's ``isTrue``: false, 0, nil, and empty strings, slices and maps are false; structs true."""
    if value is None or value is MISSING:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str | list | tuple | Mapping | set | frozenset):
        return len(value) > 0
    return True


def _type(value: Any) -> str:
    if value is None or value is MISSING:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime):
        return "time.Time"
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, list | tuple):
        return "slice"
    return type(value).__name__


def _str(value: Any, what: str = "value") -> str:
    """A string argument, as Go's typed parameter takes it (nil: empty, as kubespot's unset fields)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if value is MISSING:
        raise TemplateError(f"invalid value for {what}; expected string")
    raise TemplateError(f"wrong type for {what}; expected string; got {_type(value)}")


def _int(value: Any, what: str = "value") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TemplateError(f"wrong type for {what}; expected int; got {_type(value)}")
    return int(value)


def strval(value: Any) -> str:
    """sprig's ``strval``: strings as they are, anything else as ``%v`` prints it."""
    return value if isinstance(value, str) else go_value(value)


def to_int64(value: Any) -> int:
    """sprig's ``toInt64`` (via cast): numbers truncated, numeric strings parsed, else 0."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip(), 0)
        except ValueError:
            try:
                return int(float(value))
            except ValueError:
                return 0
    return 0


def to_float(value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return 0.0
    return 0.0


def _as_list(value: Any, fn: str) -> list[Any]:
    if isinstance(value, list | tuple):
        return list(value)
    if value is None or value is MISSING:
        return []
    raise TemplateError(f"{fn}: cannot find {fn} on type {_type(value)}")


def strslice(value: Any) -> list[str]:
    """sprig's ``strslice``: a list's non-nil items as strings, a single value as a one-item list."""
    if isinstance(value, list | tuple):
        return [strval(v) for v in value if v is not None and v is not MISSING]
    if value is None or value is MISSING:
        return []
    return [strval(value)]


def _time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, int) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, tz=UTC)
    return None


# --- JSON (encoding/json's Marshal) ---------------------------------------------------------------------


def _json_ready(value: Any) -> Any:
    if value is MISSING:
        return None
    if isinstance(value, datetime):
        t = _time(value)
        assert t is not None
        # time.Time marshals as RFC 3339 with nanoseconds trimmed, "Z" for UTC.
        return go_format(t, "2006-01-02T15:04:05.999999999Z07:00")
    if isinstance(value, GoInt):
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _json_ready(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_ready(v) for v in value]
    return value


def to_json(value: Any, *, html_safe: bool = True, indent: bool = False) -> str:
    """``json.Marshal`` as sprig's ``toJson`` calls it: ``<``, ``>``, ``&``, U+2028/9 escaped
    (``toRawJson`` keeps them); maps with sorted keys; ``toPrettyJson`` indents by two spaces."""
    text = json.dumps(
        _json_ready(value),
        ensure_ascii=False,
        separators=(",", ": ") if indent else (",", ":"),
        indent=2 if indent else None,
        allow_nan=False,
    )
    if html_safe:
        text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def from_json(text: Any) -> Any:
    try:
        return json.loads(_str(text, "fromJson"))
    except json.JSONDecodeError:
        return {}


# --- Go built-ins ---------------------------------------------------------------------------------------

_BASIC = ("bool", "int", "float64", "string")


def _basic(value: Any) -> str | None:
    kind = _type(value)
    return kind if kind in _BASIC else None


def _equal(a: Any, b: Any) -> bool:
    nil_a, nil_b = a is None or a is MISSING, b is None or b is MISSING
    if nil_a or nil_b:
        return nil_a and nil_b
    ka, kb = _basic(a), _basic(b)
    if ka is not None or kb is not None:
        if ka != kb:
            raise TemplateError(f"incompatible types for comparison: {_type(a)} and {_type(b)}")
        return bool(a == b)
    if isinstance(a, datetime) and isinstance(b, datetime):
        return a == b
    raise TemplateError(f"non-comparable type {_type(a)}")


def go_eq(first: Any, *others: Any) -> bool:
    """``eq a b c``: a == b || a == c."""
    if not others:
        raise TemplateError("missing argument for comparison")
    return any(_equal(first, o) for o in others)


def go_ne(a: Any, b: Any) -> bool:
    return not _equal(a, b)


def _order(a: Any, b: Any) -> int:
    ka, kb = _basic(a), _basic(b)
    if ka is None or kb is None or ka == "bool" or kb == "bool":
        raise TemplateError(f"invalid type for comparison: {_type(a) if ka in (None, 'bool') else _type(b)}")
    if ka != kb:
        raise TemplateError(f"incompatible types for comparison: {ka} and {kb}")
    return -1 if a < b else (1 if a > b else 0)


#: The longest string or list a function may make: what a template could print (execute.MAX_OUTPUT).
MAX_VALUE = 1 << 20


def _repeat(count: int, text: str) -> str:
    if count > 0 and count * len(text) > MAX_VALUE:
        raise TemplateError(f"repeat: result longer than {MAX_VALUE} characters")
    return text * max(0, count)


def go_index(item: Any, *keys: Any) -> Any:
    """``index x 1 2``: slice elements, map values (an absent key gives the zero value), string bytes.

    The data's maps are Python dicts without an element type: a map whose values are all strings
    (NTH's ``NodeLabels map[string]string``) gives ``""`` for an absent key, as Go's zero value."""
    for key in keys:
        if isinstance(item, Mapping):
            if key in item:
                item = item[key]
            elif item and all(isinstance(v, str) for v in item.values()):
                item = ""
            else:
                item = None
        elif isinstance(item, list | tuple | str):
            i = _int(key, "index")
            seq: Sequence[Any] = item.encode() if isinstance(item, str) else item
            if not 0 <= i < len(seq):
                raise TemplateError(f"error calling index: index out of range: {i}")
            item = seq[i]
        elif item is None or item is MISSING:
            raise TemplateError("error calling index: index of untyped nil")
        else:
            raise TemplateError(f"error calling index: can't index item of type {_type(item)}")
    return item


def go_slice(item: Any, *indices: Any) -> Any:
    """``slice x 1 2`` (sprig's, which replaces Go's: lists, and strings as Go's built-in)."""
    if not isinstance(item, list | tuple | str):
        raise TemplateError(f"error calling slice: cannot slice type {_type(item)}")
    bounds = [_int(i, "slice index") for i in indices]
    if len(bounds) > 2:
        raise TemplateError("error calling slice: too many slice indexes")
    start = bounds[0] if bounds else 0
    end = bounds[1] if len(bounds) > 1 else len(item)
    if not 0 <= start <= end <= len(item):
        raise TemplateError(f"error calling slice: index out of range: {start}:{end}")
    return item[start:end]


def go_len(item: Any) -> int:
    if isinstance(item, str):
        return len(item.encode())
    if isinstance(item, list | tuple | Mapping | set | frozenset):
        return len(item)
    raise TemplateError(f"error calling len: len of type {_type(item)}")


def _js_escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in "\\'\"":
            out.append("\\" + ch)
        elif ch in "<>&=":
            out.append(f"\\u{ord(ch):04X}")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def _html_escape(text: str) -> str:
    # Go's HTMLEscapeString: &#34; &#39; &amp; &lt; &gt; and NUL as U+FFFD.
    return (
        text.replace("&", "&amp;")
        .replace("'", "&#39;")
        .replace('"', "&#34;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\0", "\ufffd")
    )


def _eval_args(args: Sequence[Any]) -> str:
    # Go's evalArgs: one string argument is used as is, else fmt.Sprint of them all.
    return args[0] if len(args) == 1 and isinstance(args[0], str) else sprint(args)


# --- sprig -----------------------------------------------------------------------------------------------


def _empty(value: Any) -> bool:
    """sprig's ``empty``: as Go's truth, but structs (times) are never empty."""
    return not truth(value)


def _default(default: Any, *given: Any) -> Any:
    return default if not given or _empty(given[0]) else given[0]


def _date_in_zone(layout: Any, when: Any, zone: Any) -> str:
    t = _time(when) or datetime.now(UTC)
    name = _str(zone, "zone")
    # Imported here: zoneinfo (and sysconfig behind it) would cost every agent memory at start-up.
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        tz = UTC if name in ("UTC", "Local", "") else ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        tz = UTC  # sprig falls back to UTC for a zone it cannot load
    # "Local" is the agent's zone, which in its container is UTC.
    return go_format(t.astimezone(tz), _str(layout, "layout"))


def _title(text: Any) -> str:
    # strings.Title: the first letter of each word (after a non-letter) upper-cased.
    return re.sub(r"(?<![^\W\d_])([^\W\d_])", lambda m: m.group(1).upper(), _str(text))


def _trunc(count: Any, text: Any) -> str:
    c, s = _int(count, "trunc"), _str(text)
    if c < 0 and len(s) + c > 0:
        return s[len(s) + c :]
    if c >= 0 and len(s) > c:
        return s[:c]
    return s


def _substr(start: Any, end: Any, text: Any) -> str:
    a, b, s = _int(start), _int(end), _str(text)
    if a < 0:
        return s[:b]
    if b < 0 or b > len(s):
        return s[a:]
    return s[a:b]


def _indent(spaces: Any, text: Any) -> str:
    pad = " " * _int(spaces, "indent")
    return pad + _str(text).replace("\n", "\n" + pad)


def _split(sep: Any, text: Any) -> dict[str, str]:
    return {f"_{i}": part for i, part in enumerate(_str(text).split(_str(sep)))}


def _uniq(items: Any) -> list[Any]:
    out: list[Any] = []
    for item in _as_list(items, "uniq"):
        if item not in out:
            out.append(item)
    return out


def _has(needle: Any, haystack: Any) -> bool:
    return haystack is not None and needle in _as_list(haystack, "has")


def _dict(*pairs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i in range(0, len(pairs), 2):
        out[strval(pairs[i])] = pairs[i + 1] if i + 1 < len(pairs) else ""
    return out


def _get(d: Any, key: Any) -> Any:
    if not isinstance(d, Mapping):
        raise TemplateError(f"wrong type for value; expected map; got {_type(d)}")
    return d.get(_str(key), "")


def _keys(*dicts: Any) -> list[str]:
    out: list[str] = []
    for d in dicts:
        if not isinstance(d, Mapping):
            raise TemplateError(f"wrong type for value; expected map; got {_type(d)}")
        out.extend(str(k) for k in d)
    return out


def _div(a: Any, b: Any) -> int:
    x, y = to_int64(a), to_int64(b)
    if y == 0:
        raise TemplateError("error calling div: integer divide by zero")
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y >= 0) else -q  # Go truncates towards zero


def _mod(a: Any, b: Any) -> int:
    x, y = to_int64(a), to_int64(b)
    if y == 0:
        raise TemplateError("error calling mod: integer divide by zero")
    return x - _div(x, y) * y


def _regex(pattern: Any) -> re.Pattern[str]:
    try:
        return re.compile(_str(pattern, "regex"))
    except re.error as exc:
        raise TemplateError(f"error calling regex: {exc}") from None


def _b64dec(text: Any) -> str:
    try:
        return base64.b64decode(_str(text), validate=True).decode("utf-8", "replace")
    except ValueError as exc:
        return str(exc)


def _fail(message: Any) -> Any:
    raise TemplateError(f"error calling fail: {strval(message)}")


def _reverse(items: Any) -> list[Any]:
    return list(reversed(_as_list(items, "reverse")))


FUNCS: dict[str, Func] = {
    # Go built-ins (and/or/not/call are handled by the executor: and/or are lazy).
    "eq": go_eq,
    "ne": go_ne,
    "lt": lambda a, b: _order(a, b) < 0,
    "le": lambda a, b: _order(a, b) <= 0,
    "gt": lambda a, b: _order(a, b) > 0,
    "ge": lambda a, b: _order(a, b) >= 0,
    "index": go_index,
    "slice": go_slice,
    "len": go_len,
    "print": lambda *a: sprint(a),
    "printf": lambda layout, *a: sprintf(_str(layout, "printf format"), a),
    "println": lambda *a: sprintln(a),
    "html": lambda *a: _html_escape(_eval_args(a)),
    "js": lambda *a: _js_escape(_eval_args(a)),
    "urlquery": lambda *a: urllib.parse.quote_plus(_eval_args(a), safe=""),
    # sprig: strings
    "upper": lambda s: _str(s).upper(),
    "lower": lambda s: _str(s).lower(),
    "title": _title,
    "untitle": lambda s: re.sub(r"\b(\w)", lambda m: m.group(1).lower(), _str(s)),
    "trim": lambda s: _str(s).strip(" \t\n\r\v\f"),
    "trimAll": lambda cut, s: _str(s).strip(_str(cut)),
    "trimall": lambda cut, s: _str(s).strip(_str(cut)),
    "trimPrefix": lambda p, s: _str(s).removeprefix(_str(p)),
    "trimSuffix": lambda p, s: _str(s).removesuffix(_str(p)),
    "trunc": _trunc,
    "substr": _substr,
    "repeat": lambda n, s: _repeat(_int(n), _str(s)),
    "nospace": lambda s: re.sub(r"\s", "", _str(s)),
    "contains": lambda sub, s: _str(sub) in _str(s),
    "hasPrefix": lambda p, s: _str(s).startswith(_str(p)),
    "hasSuffix": lambda p, s: _str(s).endswith(_str(p)),
    "quote": lambda *a: " ".join(go_quote(strval(v)) for v in a if v is not None),
    "squote": lambda *a: " ".join(f"'{strval(v)}'" for v in a if v is not None),
    "cat": lambda *a: " ".join(go_value(v) for v in a if v is not None),
    "indent": _indent,
    "nindent": lambda n, s: "\n" + _indent(n, s),
    "replace": lambda old, new, s: _str(s).replace(_str(old), _str(new)),
    "toString": strval,
    "toStrings": strslice,
    "atoi": lambda s: to_int64(_str(s)) if re.fullmatch(r"\s*[+-]?\d+\s*", _str(s)) else 0,
    "int": to_int64,
    "int64": to_int64,
    "float64": to_float,
    "split": _split,
    "splitList": lambda sep, s: _str(s).split(_str(sep)),
    "join": lambda sep, v: _str(sep).join(strslice(v)),
    "sortAlpha": lambda v: sorted(strslice(v)),
    "regexMatch": lambda r, s: _regex(r).search(_str(s)) is not None,
    "regexFind": lambda r, s: m.group(0) if (m := _regex(r).search(_str(s))) else "",
    # sprig: numbers
    "add1": lambda a: to_int64(a) + 1,
    "add": lambda *a: sum(to_int64(v) for v in a),
    "sub": lambda a, b: to_int64(a) - to_int64(b),
    "mul": lambda *a: _product(a),
    "div": _div,
    "mod": _mod,
    "max": lambda a, *rest: max([to_int64(a), *(to_int64(v) for v in rest)]),
    "min": lambda a, *rest: min([to_int64(a), *(to_int64(v) for v in rest)]),
    # sprig: lists and dicts
    "list": lambda *a: list(a),
    "tuple": lambda *a: list(a),
    "first": lambda v: lst[0] if (lst := _as_list(v, "first")) else None,
    "last": lambda v: lst[-1] if (lst := _as_list(v, "last")) else None,
    "rest": lambda v: _as_list(v, "rest")[1:],
    "initial": lambda v: _as_list(v, "initial")[:-1],
    "append": lambda v, x: [*_as_list(v, "append"), x],
    "prepend": lambda v, x: [x, *_as_list(v, "prepend")],
    "concat": lambda *a: [x for v in a for x in _as_list(v, "concat")],
    "reverse": _reverse,
    "compact": lambda v: [x for x in _as_list(v, "compact") if not _empty(x)],
    "uniq": _uniq,
    "has": _has,
    "dict": _dict,
    "get": _get,
    "hasKey": lambda d, k: isinstance(d, Mapping) and _str(k) in d,
    "keys": _keys,
    "values": lambda d: list(d.values()) if isinstance(d, Mapping) else [],
    # sprig: defaults, JSON, flow
    "default": _default,
    "empty": _empty,
    "coalesce": lambda *a: next((v for v in a if not _empty(v)), None),
    "all": lambda *a: all(not _empty(v) for v in a),
    "any": lambda *a: any(not _empty(v) for v in a),
    "ternary": lambda t, f, cond: t if truth(cond) else f,
    "toJson": to_json,
    "mustToJson": to_json,
    "toRawJson": lambda v: to_json(v, html_safe=False),
    "mustToRawJson": lambda v: to_json(v, html_safe=False),
    "toPrettyJson": lambda v: to_json(v, indent=True),
    "mustToPrettyJson": lambda v: to_json(v, indent=True),
    "fromJson": from_json,
    "fail": _fail,
    # sprig: dates (now is the executor's, so a render can be given its time)
    "date": lambda layout, when: _date_in_zone(layout, when, "Local"),
    "dateInZone": _date_in_zone,
    "date_in_zone": _date_in_zone,
    "htmlDate": lambda when: _date_in_zone("2006-01-02", when, "Local"),
    "htmlDateInZone": lambda when, zone: _date_in_zone("2006-01-02", when, zone),
    "unixEpoch": lambda when: str(int(t.timestamp())) if (t := _time(when)) else "0",
    # sprig: encodings
    "b64enc": lambda s: base64.b64encode(strval(s).encode()).decode(),
    "b64dec": _b64dec,
    "b32enc": lambda s: base64.b32encode(strval(s).encode()).decode(),
    "sha1sum": lambda s: hashlib.sha1(_str(s).encode(), usedforsecurity=False).hexdigest(),
    "sha256sum": lambda s: hashlib.sha256(_str(s).encode()).hexdigest(),
    "sha512sum": lambda s: hashlib.sha512(_str(s).encode()).hexdigest(),
    "uuidv4": lambda: str(uuid.uuid4()),
    # kubespot's own, as its jinja filters: APIs want times as RFC 3339 or epoch seconds.
    "rfc3339": lambda when: (
        go_format(t.replace(microsecond=0), "2006-01-02T15:04:05Z07:00") if (t := _time(when)) else ""
    ),
    "unix": lambda when: int(t.timestamp()) if (t := _time(when)) else "",
}


def _product(values: Sequence[Any]) -> int:
    out = 1
    for v in values:
        out *= to_int64(v)
    return out


#: Handled by the executor itself (lazy arguments, or the render's clock).
SPECIAL = frozenset(("and", "or", "not", "now"))

#: Every name of sprig v3's ``GenericFuncMap`` (functions.go), to tell "a sprig function this engine
#: does not offer" from "no such function".
SPRIG = frozenset(
    [
        "hello",
        "ago",
        "date",
        "date_in_zone",
        "date_modify",
        "dateInZone",
        "dateModify",
        "duration",
        "durationRound",
        "htmlDate",
        "htmlDateInZone",
        "must_date_modify",
        "mustDateModify",
        "mustToDate",
        "now",
        "toDate",
        "unixEpoch",
        "abbrev",
        "abbrevboth",
        "trunc",
        "trim",
        "upper",
        "lower",
        "title",
        "untitle",
        "substr",
        "repeat",
        "trimall",
        "trimAll",
        "trimSuffix",
        "trimPrefix",
        "nospace",
        "initials",
        "randAlphaNum",
        "randAlpha",
        "randAscii",
        "randNumeric",
        "swapcase",
        "shuffle",
        "snakecase",
        "camelcase",
        "kebabcase",
        "wrap",
        "wrapWith",
        "contains",
        "hasPrefix",
        "hasSuffix",
        "quote",
        "squote",
        "cat",
        "indent",
        "nindent",
        "replace",
        "plural",
        "sha1sum",
        "sha256sum",
        "sha512sum",
        "adler32sum",
        "toString",
        "atoi",
        "int64",
        "int",
        "float64",
        "seq",
        "toDecimal",
        "split",
        "splitList",
        "splitn",
        "toStrings",
        "until",
        "untilStep",
        "add1",
        "add",
        "sub",
        "div",
        "mod",
        "mul",
        "randInt",
        "add1f",
        "addf",
        "subf",
        "divf",
        "mulf",
        "biggest",
        "max",
        "min",
        "maxf",
        "minf",
        "ceil",
        "floor",
        "round",
        "join",
        "sortAlpha",
        "default",
        "empty",
        "coalesce",
        "all",
        "any",
        "compact",
        "mustCompact",
        "fromJson",
        "toJson",
        "toPrettyJson",
        "toRawJson",
        "mustFromJson",
        "mustToJson",
        "mustToPrettyJson",
        "mustToRawJson",
        "ternary",
        "deepCopy",
        "mustDeepCopy",
        "typeOf",
        "typeIs",
        "typeIsLike",
        "kindOf",
        "kindIs",
        "deepEqual",
        "env",
        "expandenv",
        "getHostByName",
        "base",
        "dir",
        "clean",
        "ext",
        "isAbs",
        "osBase",
        "osClean",
        "osDir",
        "osExt",
        "osIsAbs",
        "b64enc",
        "b64dec",
        "b32enc",
        "b32dec",
        "tuple",
        "list",
        "dict",
        "get",
        "set",
        "unset",
        "hasKey",
        "pluck",
        "keys",
        "pick",
        "omit",
        "merge",
        "mergeOverwrite",
        "mustMerge",
        "mustMergeOverwrite",
        "values",
        "append",
        "mustAppend",
        "prepend",
        "mustPrepend",
        "first",
        "mustFirst",
        "rest",
        "mustRest",
        "last",
        "mustLast",
        "initial",
        "mustInitial",
        "reverse",
        "mustReverse",
        "uniq",
        "mustUniq",
        "without",
        "mustWithout",
        "has",
        "mustHas",
        "slice",
        "mustSlice",
        "concat",
        "dig",
        "chunk",
        "mustChunk",
        "bcrypt",
        "htpasswd",
        "genPrivateKey",
        "derivePassword",
        "buildCustomCert",
        "genCA",
        "genCAWithKey",
        "genSelfSignedCert",
        "genSelfSignedCertWithKey",
        "genSignedCert",
        "genSignedCertWithKey",
        "encryptAES",
        "decryptAES",
        "randBytes",
        "uuidv4",
        "semver",
        "semverCompare",
        "fail",
        "regexMatch",
        "mustRegexMatch",
        "regexFindAll",
        "mustRegexFindAll",
        "regexFind",
        "mustRegexFind",
        "regexReplaceAll",
        "mustRegexReplaceAll",
        "regexReplaceAllLiteral",
        "mustRegexReplaceAllLiteral",
        "regexSplit",
        "mustRegexSplit",
        "regexQuoteMeta",
        "urlParse",
        "urlJoin",
    ]
)

_WHY = {
    "env": "reads the agent's environment, which holds secrets (the webhook URL); not offered",
    "expandenv": "reads the agent's environment, which holds secrets (the webhook URL); not offered",
    "getHostByName": "makes a DNS lookup while rendering; not offered",
    "call": "calls a function value; not offered",
}


def functions() -> frozenset[str]:
    """Every function name a template may use."""
    return frozenset(FUNCS) | SPECIAL


def unsupported(name: str) -> str | None:
    """Why ``name`` (a Go built-in or sprig function) is not offered; None if it is no function at all."""
    if name in _WHY:
        return _WHY[name]
    if name in SPRIG:
        return "a sprig function kubespot does not offer"
    return None
