"""Settings that come as a set of named entries (notification targets, outgoing HTTP calls).

The loader reads fixed groups; a user may declare any number of targets, each under a name, so these
are read here, with the loader's conversions and its way of reporting problems:

* from the environment, ``<PREFIX><NAME>_<FIELD>`` (``KUBESPOT_NOTIFY_SLACK_URL_FILE``): the name is
  what precedes the longest known field suffix, lower-cased (``OPS_TEAM`` -> ``ops_team``);
* from a YAML or JSON file mapping each name to its fields (a ConfigMap mount, say).

The environment wins field by field, as it does over the settings file. Every problem is reported at
once in one ``SettingsError``, each naming the entry's setting path (``notify.slack.url``), where the
value came from and the value (``<redacted>`` for secrets). An unknown field is an error with a
suggestion, because a typo silently ignored leaves a target half-configured.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .loader import REDACTED, InvalidSetting, Problem, SettingsError, Spec, convert, read_file, specs

T = TypeVar("T")

#: Entry names: what an environment variable name can carry, so every entry can be set from both.
NAME = re.compile(r"[a-z][a-z0-9_]*")


def _shown(spec: Spec | None, value: Any) -> str:
    if spec is not None and spec.secret:
        return REDACTED
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return repr(text if len(text) <= 120 else text[:117] + "...")


def _did_you_mean(word: str, choices: Collection[str]) -> str:
    import difflib  # only on this error path

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]}?" if close else ""


def load_named(
    cls: type[T],
    *,
    group: str,
    env_prefix: str,
    env: Mapping[str, str],
    file: str | Path | None,
    reserved_env: Collection[str] = (),
    reserved_names: Mapping[str, str] | None = None,
    name_field: str = "name",
) -> tuple[T, ...]:
    """Every entry of ``cls`` declared in ``env`` and ``file``, sorted by name.

    ``cls`` is a settings dataclass whose ``name_field`` is filled in with the entry's name and whose
    other fields are read; ``__post_init__`` may raise ``InvalidSetting``. ``reserved_env`` are
    variables under ``env_prefix`` that belong to someone else (the group's own settings);
    ``reserved_names`` maps names no entry may take to the reason.
    """
    fields = {s.path: s for s in specs(cls) if s.path != name_field}
    # Longest first, so URL_FILE wins over URL and a name may itself end in a field's word.
    suffixes = sorted(((f"_{p.upper()}", p) for p in fields), key=lambda kv: -len(kv[0]))
    problems: list[Problem] = []
    raw: dict[str, dict[str, tuple[Any, str]]] = {}

    if file is not None:
        where = str(file)
        for name, entry in read_file(file).items():
            key = f"{group}.{name}"
            if not isinstance(name, str) or not NAME.fullmatch(name.lower()):
                problems.append(
                    Problem(
                        key, f"file {where}", None, "names are letters, digits and _, starting with a letter"
                    )
                )
                continue
            if not isinstance(entry, Mapping):
                problems.append(
                    Problem(key, f"file {where} key {name}", None, "expected a mapping of fields")
                )
                continue
            slot = raw.setdefault(name.lower(), {})
            for field_name, value in entry.items():
                source = f"file {where} key {name}.{field_name}"
                if field_name not in fields:
                    hint = _did_you_mean(str(field_name), fields)
                    problems.append(Problem(f"{key}.{field_name}", source, None, f"unknown setting{hint}"))
                    continue
                slot[field_name] = (value, source)

    for var, value in sorted(env.items()):
        if not var.startswith(env_prefix) or var in reserved_env or value.strip() == "":
            continue
        rest = var[len(env_prefix) :]
        match = next(
            ((rest[: -len(sfx)], p) for sfx, p in suffixes if rest.endswith(sfx) and len(rest) > len(sfx)),
            None,
        )
        if match is None:
            hint = _did_you_mean(var, [f"{env_prefix}<NAME>_{p.upper()}" for p in fields])
            problems.append(
                Problem(
                    f"{group}.?",
                    f"env {var}",
                    None,
                    f"not a known field: expected {env_prefix}<NAME>_<FIELD>{hint}",
                )
            )
            continue
        name, field_name = match[0].lower(), match[1]
        if not NAME.fullmatch(name):
            problems.append(
                Problem(
                    f"{group}.{name}",
                    f"env {var}",
                    None,
                    "names are letters, digits and _, starting with a letter",
                )
            )
            continue
        raw.setdefault(name, {})[field_name] = (value, f"env {var}")

    out: list[T] = []
    for name in sorted(raw):
        key = f"{group}.{name}"
        if reserved_names and name in reserved_names:
            problems.append(Problem(key, "", None, reserved_names[name]))
            continue
        values: dict[str, Any] = {name_field: name}
        sources: dict[str, tuple[Any, str]] = {}
        for field_name, (value, source) in raw[name].items():
            spec = fields[field_name]
            try:
                values[field_name] = convert(spec, value)
                sources[field_name] = (value, source)
            except ValueError as exc:
                problems.append(Problem(f"{key}.{field_name}", source, _shown(spec, value), str(exc)))
        if len(values) != len(raw[name]) + 1:
            continue  # conversion problems already reported; validation would only repeat them
        missing = [s.path for s in fields.values() if s.required and s.path not in values]
        if missing:
            for path in missing:
                problems.append(Problem(f"{key}.{path}", "", None, "required but not set"))
            continue
        try:
            out.append(cls(**values))
        except InvalidSetting as exc:
            bad = fields.get(exc.field)
            given = sources.get(exc.field)
            shown = _shown(bad, given[0]) if given is not None else None
            problems.append(
                Problem(f"{key}.{exc.field}", given[1] if given else "default", shown, exc.reason)
            )
    if problems:
        raise SettingsError(problems)
    return tuple(out)


def read_setting_file(setting: str, path: str) -> str:
    """The text of a file a setting names (a Secret or ConfigMap mount), or ``SettingsError``.

    The problem names the setting and the file, never the content: the file may hold a secret.
    """
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        reason = f"cannot read: {exc.strerror or exc}"
        raise SettingsError([Problem(setting, f"file {path}", None, reason)]) from None


#: Proxy schemes: HTTP(S) proxies, SOCKS5 (``socks5h``: the proxy resolves the name), and ``tcp``,
#: the scheme of NTH's own ``--webhook-proxy`` example. Go's HTTP transport (which NTH uses) treats any
#: proxy scheme other than https and socks5 as a plain HTTP proxy reached over TCP, so ``tcp://h:p``
#: is ``http://h:p``.
PROXY_SCHEMES = ("http", "https", "socks5", "socks5h", "tcp")


def check_proxy(text: str) -> str | None:
    """Why ``text`` cannot be a proxy URL, or None when it can."""
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in PROXY_SCHEMES:
        return "must be an http://, https://, socks5://, socks5h:// or tcp:// URL"
    if not rest or rest[0] in "/?#":
        return "must name a host after the scheme"
    return None


def proxy_url(text: str | None) -> str | None:
    """The proxy URL as the HTTP client takes it: ``tcp://`` is an HTTP proxy (see ``PROXY_SCHEMES``)."""
    if text is None:
        return None
    scheme, sep, rest = text.partition("://")
    return f"http://{rest}" if sep and scheme.lower() == "tcp" else text


def check_url(text: str) -> str | None:
    """Why ``text`` cannot be an endpoint URL (scheme and host needed), or None when it can."""
    if not text.startswith(("http://", "https://")):
        return "must be an http:// or https:// URL"
    rest = text.split("://", 1)[1]
    if not rest or rest[0] in "/?#":
        return "must name a host after the scheme"
    return None
