"""The one settings loader: flags > environment > file > defaults, for any composed settings class.

Environment variables are read under kubespot's name first, then under each name
aws-node-termination-handler uses for the same setting, so an env block written for the reference
handler works unchanged. An empty variable counts as unset: Helm charts render unset values as
``""``, and the reference handler's chart does exactly that (and NTH's own ``getEnv`` falls back to
the default for an empty value). The exception is a setting declared ``empty_is_value`` (its doc
says what "Empty:" means, and that differs from the default): an empty variable under kubespot's own
name is that value. Under an NTH name an empty variable stays unset, as in NTH.

The file (YAML or JSON) names settings by path (``drain.delete_local_data``) or by nesting
(``drain: {delete_local_data: true}``); a key that names no setting is an error, because a typo
that is silently ignored leaves a node running with a default its operator thought was changed.

Every problem found is reported at once in one ``SettingsError``, each line naming the setting, where
the value came from (flag, variable, file key) and the value (``<redacted>`` for secrets).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import json
import math
import os
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, cast

from .base import SettingMeta

T = TypeVar("T")

REDACTED = "<redacted>"
#: Read when neither ``file=`` nor ``--config`` names a settings file (a ConfigMap mount, say).
CONFIG_FILE_ENV = "KUBESPOT_CONFIG_FILE"
#: Prefix of the argparse destinations this module owns, so they never collide with a caller's own.
_DEST = "kubespot_setting:"
_TRUE = frozenset({"true", "1", "yes", "y", "on"})
_FALSE = frozenset({"false", "0", "no", "n", "off"})
_NONE = frozenset({"", "none", "null"})
_DURATION = re.compile(r"(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?")


class InvalidSetting(ValueError):
    """Raised by a settings group's ``__post_init__`` for a value of the right type that is not allowed.

    ``field`` is the field's name within the group; the loader turns it into the full setting path
    and adds where the value came from.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """One bad setting: which, from where, what value, and why it was refused."""

    setting: str
    source: str
    value: str | None
    reason: str

    def __str__(self) -> str:
        shown = "" if self.value is None else f" = {self.value}"
        where = f" (from {self.source}{shown})" if self.source else ""
        return f"{self.setting}: {self.reason}{where}"


class SettingsError(ValueError):
    """The configuration cannot be used; ``problems`` lists every reason, one per setting."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"invalid configuration:\n{lines}")


def check_each(items: Iterable[T], check: Callable[[T], object]) -> None:
    """``check`` every item; one ``SettingsError`` listing the problems of all of them, so start-up
    names every bad one at once (an ``InvalidSetting`` is one problem, its field a full path)."""
    problems: list[Problem] = []
    for item in items:
        try:
            check(item)
        except SettingsError as exc:
            problems += exc.problems
        except InvalidSetting as exc:
            problems.append(Problem(exc.field, "validation", None, exc.reason))
    if problems:
        raise SettingsError(problems)


@dataclasses.dataclass(frozen=True, slots=True)
class Spec:
    """A leaf setting of a composed settings class, with everything its metadata says about it."""

    path: str  # "drain.delete_local_data"; identity fields have no dot
    type: Any
    meta: SettingMeta
    default: Any  # dataclasses.MISSING when required

    @property
    def required(self) -> bool:
        return self.default is dataclasses.MISSING

    @property
    def env(self) -> str:
        return self.meta.get("env") or "KUBESPOT_" + self.path.upper().replace(".", "_")

    @property
    def nth(self) -> tuple[str, ...]:
        return self.meta.get("nth", ())

    @property
    def secret(self) -> bool:
        return self.meta.get("secret", False)

    @property
    def flag(self) -> str | None:
        """The command-line flag; secrets get none unless declared, as argv is readable in /proc."""
        if "flag" in self.meta:
            return self.meta["flag"]
        # Derived from the env name, so a setting's flag and variable always read alike.
        return None if self.secret else "--" + self.env.removeprefix("KUBESPOT_").lower().replace("_", "-")

    @property
    def unit(self) -> str:
        return self.meta.get("unit", "")

    @property
    def doc(self) -> str:
        return self.meta.get("doc", "")


@dataclasses.dataclass(frozen=True, slots=True)
class Group:
    """A settings dataclass inside a composed one ("" for the root), and its leaf settings."""

    path: str
    cls: type
    specs: tuple[Spec, ...]


def groups(cls: type) -> list[Group]:
    """The root and every nested settings group, depth first, in declaration order."""
    out: list[Group] = []

    def walk(c: type, prefix: str) -> None:
        hints = typing.get_type_hints(c)
        leaves: list[Spec] = []
        nested: list[tuple[type, str]] = []
        for f in dataclasses.fields(c):
            hint = hints[f.name]
            path = f"{prefix}{f.name}"
            if isinstance(hint, type) and dataclasses.is_dataclass(hint):
                nested.append((hint, path))
            else:
                _converter(hint)  # fail at import-time-ish for types the loader cannot read
                meta = cast(SettingMeta, dict(f.metadata))
                leaves.append(Spec(path, hint, meta, f.default))
        out.append(Group(prefix.rstrip("."), c, tuple(leaves)))
        for sub, path in nested:
            walk(sub, path + ".")

    walk(cls, "")
    return out


def specs(cls: type) -> list[Spec]:
    """Every leaf setting of ``cls``, flattened."""
    return [s for g in groups(cls) for s in g.specs]


# --- conversion from strings (env, flags) and from file values ---------------------------------


def _optional_inner(tp: Any) -> Any | None:
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0]
    return None


def is_pairs(tp: Any) -> bool:
    """``tuple[tuple[str, str], ...]`` is how an immutable settings dataclass holds a string mapping."""
    if typing.get_origin(tp) is not tuple:
        return False
    args = typing.get_args(tp)
    return len(args) == 2 and args[1] is Ellipsis and typing.get_args(args[0]) == (str, str)


Converter = Callable[[Any, str], Any]  # (raw value, unit) -> typed value; ValueError with a reason


def _converter(tp: Any) -> Converter:
    inner = _optional_inner(tp)
    if inner is not None:
        return _optional(_converter(inner), numeric=inner in (int, float))
    if is_pairs(tp):
        return _to_pairs
    origin = typing.get_origin(tp)
    if origin is Literal:
        return _literal(typing.get_args(tp))
    if origin in (tuple, frozenset) and origin is not None:
        args = typing.get_args(tp)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise TypeError(f"settings tuples must be tuple[X, ...], not {tp}")
        return _sequence(_converter(args[0]), origin)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp)
    simple: dict[Any, Converter] = {
        bool: _to_bool,
        int: _to_int,
        float: _to_float,
        str: _to_str,
        Path: _to_path,
    }
    if tp in simple:
        return simple[tp]
    raise TypeError(f"the settings loader cannot read values of type {tp!r}")


def _optional(conv: Converter, *, numeric: bool) -> Converter:
    def convert(raw: Any, unit: str) -> Any:
        if raw is None:
            return None
        if isinstance(raw, str) and raw.strip().lower() in _NONE:
            return None
        # The reference handler writes -1 for "not set" in its numeric settings.
        if numeric and not isinstance(raw, bool) and str(raw).strip() in ("-1", "-1.0"):
            return None
        return conv(raw, unit)

    return convert


def _to_bool(raw: Any, unit: str) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise ValueError("expected a boolean: true/false, 1/0, yes/no")


#: The longest duration any setting in seconds takes: ten years, far beyond any timing here and far
#: below what Python's dates can hold after it is added to now.
MAX_SECONDS = 10 * 365 * 24 * 3600.0


def _seconds(text: str) -> float | None:
    m = _DURATION.fullmatch(text.strip())
    if not m or not any(m.groups()):
        return None
    return sum(float(m[k] or 0) * mult for k, mult in (("h", 3600), ("m", 60), ("s", 1)))


def _to_float(raw: Any, unit: str) -> float:
    value = _number(raw, unit)
    _within_max(value, unit)
    return value


def _number(raw: Any, unit: str) -> float:
    if isinstance(raw, bool):
        raise ValueError("expected a number")
    if isinstance(raw, int | float):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            seconds = _seconds(raw) if unit == "seconds" else None
            if seconds is None:
                hint = " (or a duration like 90s, 5m, 1h30m)" if unit == "seconds" else ""
                raise ValueError(f"expected a number{hint}") from None
            value = seconds
    else:
        raise ValueError("expected a number")
    if not math.isfinite(value):
        raise ValueError("expected a finite number")
    return value


def _to_int(raw: Any, unit: str) -> int:
    if isinstance(raw, bool):
        raise ValueError("expected a whole number")
    whole: int | None = raw if isinstance(raw, int) else None
    if isinstance(raw, str):
        with contextlib.suppress(ValueError):
            whole = int(raw.strip())
    if whole is None:
        try:
            value = _number(raw, unit)
        except ValueError:
            value = math.nan
        if not value.is_integer():
            raise ValueError("expected a whole number")
        whole = int(value)
    _within_max(whole, unit)
    return whole


def _within_max(value: float, unit: str) -> None:
    if unit == "seconds" and abs(value) > MAX_SECONDS:
        # Date arithmetic on such a duration overflows (past year 9999) where the value is used,
        # perhaps once per event: refused here, once, with the setting's name.
        raise ValueError(f"expected a duration of at most {MAX_SECONDS:.0f} s (ten years)")


def _to_str(raw: Any, unit: str) -> str:
    if isinstance(raw, str):
        return raw
    # YAML reads `version: 1.0` as a number; a string setting takes its text.
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return str(raw)
    raise ValueError("expected a string")


def _to_path(raw: Any, unit: str) -> Path:
    return Path(_to_str(raw, unit))


def _literal(choices: tuple[Any, ...]) -> Converter:
    def convert(raw: Any, unit: str) -> Any:
        if raw in choices and not isinstance(raw, bool):
            return raw
        if isinstance(raw, str):
            # Case-insensitive, answered with the canonical spelling: "noschedule" -> "NoSchedule".
            for choice in choices:
                if isinstance(choice, str) and choice.lower() == raw.strip().lower():
                    return choice
        raise ValueError("expected one of " + ", ".join(str(c) for c in choices))

    return convert


def _enum(cls: type[enum.Enum]) -> Converter:
    def convert(raw: Any, unit: str) -> Any:
        if isinstance(raw, cls):
            return raw
        text = str(raw).strip().lower()
        for member in cls:
            if text in (str(member.value).lower(), member.name.lower()):
                return member
        raise ValueError("expected one of " + ", ".join(str(m.value) for m in cls))

    return convert


def _json(text: str, expected: str) -> Any:
    """An inline JSON value of a setting; ValueError saying what was ``expected`` when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"expected {expected} ({exc.msg})") from None


def _sequence(item: Converter, kind: type) -> Converter:
    def convert(raw: Any, unit: str) -> Any:
        if isinstance(raw, str):
            text = raw.strip()
            if text.startswith("["):
                raw = _json(text, "a JSON array or a comma-separated list")
            else:
                raw = [part.strip() for part in text.split(",") if part.strip()]
        if not isinstance(raw, list | tuple | set | frozenset):
            raise ValueError("expected a list")
        return kind(item(x, unit) for x in raw)

    return convert


def _to_pairs(raw: Any, unit: str) -> tuple[tuple[str, str], ...]:
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("{"):
            raw = _json(text, "a JSON object")
        else:
            # The reference handler's list form: key=value,key2=value2.
            items = [part for part in text.split(",") if part.strip()]
            if any("=" not in part for part in items):
                raise ValueError("expected a JSON object or key=value pairs separated by commas")
            raw = dict(part.split("=", 1) for part in items)
            raw = {k.strip(): v.strip() for k, v in raw.items()}
    if isinstance(raw, list | tuple) and all(isinstance(p, list | tuple) and len(p) == 2 for p in raw):
        raw = dict(raw)
    if not isinstance(raw, Mapping):
        raise ValueError("expected a mapping of strings to strings")
    out = []
    for key, value in raw.items():
        if not isinstance(key, str) or isinstance(value, Mapping | list | tuple) or value is None:
            raise ValueError("expected a mapping of strings to strings")
        out.append((key, value if isinstance(value, str) else json.dumps(value)))
    return tuple(out)


def convert(spec: Spec, raw: Any) -> Any:
    """``raw`` (a string from env/flags, or a parsed file value) as the setting's type, or ValueError."""
    return _converter(spec.type)(raw, spec.unit)


# --- sources -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Raw:
    value: Any
    source: str


def _shown(spec: Spec | None, value: Any) -> str:
    if spec is not None and spec.secret:
        return REDACTED
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return repr(text if len(text) <= 120 else text[:117] + "...")


def _from_env(all_specs: Sequence[Spec], env: Mapping[str, str]) -> dict[str, _Raw]:
    out: dict[str, _Raw] = {}
    for spec in all_specs:
        # kubespot's own name wins over the reference handler's when both are set.
        for name in (spec.env, *spec.nth):
            value = env.get(name)
            if value is not None and (
                value.strip() != "" or (name == spec.env and spec.meta.get("empty_is_value", False))
            ):
                source = (
                    f"env {name}" if name == spec.env else f"env {name} (aws-node-termination-handler name)"
                )
                out[spec.path] = _Raw(value, source)
                break
    return out


def read_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A settings file's top-level mapping (JSON, or YAML by suffix; YAML loaded only when needed)."""
    p = Path(path)

    def fail(reason: str) -> SettingsError:
        return SettingsError([Problem("(file)", f"file {p}", None, reason)])

    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror or exc}") from None
    suffix = p.suffix.lower()
    if suffix == ".json" or (suffix not in (".yaml", ".yml") and text.lstrip()[:1] == "{"):
        try:
            data = json.loads(text) if text.strip() else None
        except json.JSONDecodeError as exc:
            raise fail(f"cannot parse JSON: {exc}") from None
    else:
        import yaml  # only when a YAML file is given: the agent's memory budget is tight

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise fail(f"cannot parse YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise fail("the top level must be a mapping")
    return data


def _flatten_file(
    data: Mapping[str, Any], by_path: Mapping[str, Spec], group_paths: set[str], where: str
) -> tuple[dict[str, _Raw], list[Problem]]:
    out: dict[str, _Raw] = {}
    problems: list[Problem] = []

    def walk(mapping: Mapping[Any, Any], prefix: str) -> None:
        for key, value in mapping.items():
            path = f"{prefix}{key}"
            if path in by_path:
                if path in out:
                    problems.append(Problem(path, f"file {where} key {path}", None, "set twice in the file"))
                out[path] = _Raw(value, f"file {where} key {path}")
            elif path in group_paths and isinstance(value, Mapping):
                walk(value, path + ".")
            elif path in group_paths:
                problems.append(
                    Problem(path, f"file {where} key {path}", _shown(None, value), "expected a mapping")
                )
            else:
                import difflib  # only on this error path: nothing else needs it

                close = difflib.get_close_matches(path, [*by_path, *group_paths], n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                problems.append(Problem(path, f"file {where} key {path}", None, f"unknown setting{hint}"))

    walk(data, "")
    return out, problems


def _dest(spec: Spec) -> str:
    return _DEST + spec.path


def add_arguments(parser: argparse.ArgumentParser, cls: type, *, config_flag: bool = True) -> None:
    """Add a flag for every setting of ``cls`` (one argument group per settings group), plus ``--config``.

    Flags default to "not given", so only the flags actually passed take part in precedence.
    """
    if config_flag:
        parser.add_argument(
            "--config", dest=_DEST + "(config)", metavar="FILE", default=argparse.SUPPRESS,
            help=f"settings file, YAML or JSON (env {CONFIG_FILE_ENV})",
        )  # fmt: skip
    for group in groups(cls):
        title = (group.cls.__doc__ or group.cls.__name__).strip().splitlines()[0]
        arg_group = parser.add_argument_group(f"{group.path or 'identity'}: {title}")
        for spec in group.specs:
            if spec.flag is None:
                continue
            first = spec.doc.split(". ")[0].rstrip(".")
            help_text = f"{first} (env {spec.env})".replace("%", "%%")
            if spec.type is bool:
                arg_group.add_argument(
                    spec.flag, dest=_dest(spec), action=argparse.BooleanOptionalAction,
                    default=argparse.SUPPRESS, help=help_text,
                )  # fmt: skip
            else:
                arg_group.add_argument(
                    spec.flag, dest=_dest(spec), default=argparse.SUPPRESS, help=help_text,
                    metavar=spec.path.rsplit(".", 1)[-1].upper(),
                )  # fmt: skip


def _from_namespace(all_specs: Sequence[Spec], ns: argparse.Namespace) -> dict[str, _Raw]:
    given = vars(ns)
    return {
        s.path: _Raw(given[_dest(s)], f"flag {s.flag}") for s in all_specs if s.flag and _dest(s) in given
    }


# --- the loader ----------------------------------------------------------------------------------


def load(
    cls: type[T],
    *,
    argv: Sequence[str] | None = None,
    namespace: argparse.Namespace | None = None,
    env: Mapping[str, str] = os.environ,
    file: str | os.PathLike[str] | None = None,
) -> T:
    """Build ``cls`` from flags > env (kubespot names, then NTH's) > file > defaults.

    ``argv`` is parsed with the flags of ``add_arguments`` (``None`` means no flags, not
    ``sys.argv``); a caller with its own parser passes the parsed ``namespace`` instead. The file is
    ``file``, else ``--config``, else ``$KUBESPOT_CONFIG_FILE``. Raises ``SettingsError`` listing
    every bad or missing setting.
    """
    all_groups = groups(cls)
    all_specs = [s for g in all_groups for s in g.specs]
    by_path = {s.path: s for s in all_specs}
    if argv is not None:
        parser = argparse.ArgumentParser(prog=cls.__name__)
        add_arguments(parser, cls)
        namespace = parser.parse_args(list(argv))
    flags = _from_namespace(all_specs, namespace) if namespace is not None else {}
    if file is None and namespace is not None:
        file = vars(namespace).get(_DEST + "(config)")
    if file is None and env.get(CONFIG_FILE_ENV, "").strip():
        file = env[CONFIG_FILE_ENV]

    problems: list[Problem] = []
    from_file: dict[str, _Raw] = {}
    if file is not None:
        group_paths = {g.path for g in all_groups if g.path}
        from_file, file_problems = _flatten_file(read_file(file), by_path, group_paths, str(file))
        problems += file_problems
    # Later sources win.
    raw = {**from_file, **_from_env(all_specs, env), **flags}

    values: dict[str, Any] = {}
    sources: dict[str, _Raw] = {}
    for spec in all_specs:
        given = raw.get(spec.path)
        if given is None:
            if spec.required:
                *first, last = [n for n in (spec.flag, spec.env, *spec.nth) if n]
                names = f"{', '.join(first)} or {last}" if first else last
                problems.append(Problem(spec.path, "", None, f"required but not set: set {names}"))
            continue
        try:
            values[spec.path] = convert(spec, given.value)
            sources[spec.path] = given
        except ValueError as exc:
            problems.append(Problem(spec.path, given.source, _shown(spec, given.value), str(exc)))
    if problems:
        raise SettingsError(problems)
    return cast(T, _build(cls, "", values, sources, by_path))


def _build(
    cls: type,
    prefix: str,
    values: Mapping[str, Any],
    sources: Mapping[str, _Raw],
    by_path: Mapping[str, Spec],
) -> Any:
    problems: list[Problem] = []
    kwargs: dict[str, Any] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        path = prefix + f.name
        hint = hints[f.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            try:
                kwargs[f.name] = _build(hint, path + ".", values, sources, by_path)
            except SettingsError as exc:
                problems += exc.problems
        elif path in values:
            kwargs[f.name] = values[path]
    if problems:
        raise SettingsError(problems)
    try:
        return cls(**kwargs)
    except InvalidSetting as exc:
        spec = by_path.get(prefix + exc.field)
        if spec is None:
            return _raise(Problem(prefix + exc.field, "validation", None, exc.reason))
        given = sources.get(spec.path)
        value = _shown(spec, given.value if given else spec.default)
        return _raise(Problem(spec.path, given.source if given else "default", value, exc.reason))
    except (TypeError, ValueError) as exc:
        return _raise(_blame(cls, prefix, str(exc), sources, by_path))


def _raise(problem: Problem) -> Any:
    raise SettingsError([problem])


def _blame(
    cls: type, prefix: str, message: str, sources: Mapping[str, _Raw], by_path: Mapping[str, Spec]
) -> Problem:
    """Name the setting a group's plain ValueError is about: the one its message mentions first.

    Groups should raise ``InvalidSetting``; one that raises ``ValueError("X must be ...")`` naming
    the field, its variable or its reference-handler name still gets setting, source and value shown.
    """
    found: list[tuple[int, Spec]] = []
    for f in dataclasses.fields(cls):
        spec = by_path.get(prefix + f.name)
        if spec is None:
            continue
        for name in (f.name, spec.env, *spec.nth):
            m = re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message)
            if m:
                found.append((m.start(), spec))
    if not found:
        return Problem(prefix.rstrip(".") or cls.__name__, "validation", None, message)
    spec = min(found, key=lambda hit: hit[0])[1]
    given = sources.get(spec.path)
    value = _shown(spec, given.value if given else spec.default)
    return Problem(spec.path, given.source if given else "default", value, message)


# --- printing --------------------------------------------------------------------------------------


def plain(value: Any, *, pairs: bool = False) -> Any:
    """A setting's value as JSON-ready data: enums by value, tuples as lists, string pairs as an object."""
    if pairs and isinstance(value, tuple):
        return {k: v for k, v in value}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | frozenset | set | list):
        items = [plain(v) for v in value]
        return sorted(items, key=str) if isinstance(value, frozenset | set) else items
    if isinstance(value, Path):
        return str(value)
    return value


def _iter_values(settings: Any) -> Iterator[tuple[Spec, Any]]:
    for spec in specs(type(settings)):
        obj = settings
        for part in spec.path.split("."):
            obj = getattr(obj, part)
        yield spec, obj


def redacted(settings: Any) -> dict[str, Any]:
    """The effective configuration as nested plain data, secrets replaced by ``"<redacted>"``.

    An unset secret stays ``None`` (so an operator can see it is unset); a secret mapping keeps its
    keys (which headers are sent) and hides its values.
    """
    out: dict[str, Any] = {}
    for spec, value in _iter_values(settings):
        shown = plain(value, pairs=is_pairs(spec.type))
        if spec.secret and shown not in (None, "", [], {}):
            shown = {k: REDACTED for k in shown} if isinstance(shown, dict) else REDACTED
        *parents, leaf = spec.path.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = shown
    return out
