"""What an instance's user data tells its kubelet: node labels, registration taints, max pods.

Reads the three families Karpenter writes (docs/designs/launching-research.md §3.2):

- **AL2023**: a MIME multipart archive (or one bare document) whose ``application/node.eks.aws``
  parts are nodeadm ``NodeConfig`` YAML; nodeadm merges them in order, so the kubelet gets every
  part's ``spec.kubelet.flags`` (``--node-labels=k=v,...``, ``--register-with-taints=...``,
  ``--max-pods=N``) and the last ``spec.kubelet.config`` value of ``registerWithTaints`` and ``maxPods``.
- **AL2**: a shell script (bare or a MIME part) calling ``/etc/eks/bootstrap.sh ... --kubelet-extra-args
  '<kubelet flags>'``.
- **Bottlerocket**: TOML ``settings.kubernetes.node-labels`` (``k = "v"``), ``node-taints``
  (``key = ["value:Effect", ...]``) and ``max-pods``.

Kubelet flags repeat as the kubelet's flag parser takes them: each ``--node-labels`` adds to the
map (later keys win; k8s.io/component-base ``cli/flag`` ``MapStringString.Set``). What the kubelet
would refuse to start with (a malformed label pair or taint) is reported as ``refusal``; user data
that is none of the three families is ``problem`` (the node registers without extra labels). Pure.
"""

from __future__ import annotations

import email
import email.message
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from typing import Any

import yaml

#: The taint effects the kubelet's taint parser accepts (k8s pkg/util/taints ``parseTaint``).
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

_BOOTSTRAP = "/etc/eks/bootstrap.sh"
_NODEADM_CONTENT_TYPE = "application/node.eks.aws"


@dataclass
class BootConfig:
    """What the kubelet starts with, as read from the user data."""

    family: str = ""  # "AL2023" | "AL2" | "Bottlerocket" | "" (none recognised)
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    max_pods: int | None = None
    #: why the user data gave nothing (unreadable, no known family): the node joins without extras
    problem: str = ""
    #: why the kubelet would refuse to start with it: the node never registers
    refusal: str = ""


class _Refused(Exception):
    """A kubelet flag the kubelet would fail to parse."""


def parse(data: bytes | None) -> BootConfig:
    """The kubelet's start-up settings in ``data`` (decoded user data; None or empty: none)."""
    if not data:
        return BootConfig(problem="no user data")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return BootConfig(problem="user data is not UTF-8 text")
    config = BootConfig()
    try:
        _parse_text(text, config)
    except _Refused as exc:
        config.refusal = str(exc)
    return config


def _parse_text(text: str, config: BootConfig) -> None:
    head = text.lstrip()[:200].lower()
    if head.startswith("mime-version:") or head.startswith("content-type:"):
        _parse_mime(text, config)
    elif _BOOTSTRAP in text:
        _parse_al2_script(text, config)
    elif (doc := _node_config(text)) is not None:
        config.family = "AL2023"
        _apply_node_config(doc, config)
    elif (settings := _bottlerocket(text)) is not None:
        config.family = "Bottlerocket"
        _apply_bottlerocket(settings, config)
    else:
        config.problem = "user data is not a NodeConfig, an EKS bootstrap script or Bottlerocket TOML"


def _parse_mime(text: str, config: BootConfig) -> None:
    message = email.message_from_string(text)
    if not message.is_multipart():
        config.problem = "user data says MIME but is not a multipart archive"
        return
    for part in message.walk():
        if part.is_multipart():
            continue
        body = _payload(part)
        if part.get_content_type() == _NODEADM_CONTENT_TYPE:
            doc = _node_config(body)
            if doc is None:
                config.problem = "a node.eks.aws part is not a NodeConfig"
                continue
            config.family = "AL2023"
            _apply_node_config(doc, config)
        elif _BOOTSTRAP in body and not config.family:
            _parse_al2_script(body, config)
    if not config.family and not config.problem:
        config.problem = "no NodeConfig part and no EKS bootstrap call in the MIME archive"


def _payload(part: email.message.Message) -> str:
    raw = part.get_payload(decode=True)
    if isinstance(raw, bytes):
        return raw.decode(errors="replace")
    return str(part.get_payload())


def _node_config(text: str) -> dict[str, Any] | None:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if isinstance(doc, dict) and doc.get("kind") == "NodeConfig":
        return doc
    return None


def _apply_node_config(doc: dict[str, Any], config: BootConfig) -> None:
    kubelet = _dict(_dict(doc.get("spec")).get("kubelet"))
    flags = kubelet.get("flags") or []
    if isinstance(flags, list):
        # nodeadm hands the flags to the kubelet's systemd unit, whose word splitting drops quotes.
        try:
            words = [word for flag in flags for word in shlex.split(str(flag))]
        except ValueError:
            raise _Refused(f"kubelet flags do not parse: {flags!r}") from None
        _apply_flags(words, config)
    settings = _dict(kubelet.get("config"))
    if "registerWithTaints" in settings:
        config.taints = [_config_taint(t) for t in settings.get("registerWithTaints") or []]
    if "maxPods" in settings:
        config.max_pods = _int(settings["maxPods"], "maxPods")


def _config_taint(item: Any) -> dict[str, str]:
    taint = _dict(item)
    key, effect = str(taint.get("key") or ""), str(taint.get("effect") or "")
    if not key or effect not in TAINT_EFFECTS:
        raise _Refused(f"invalid taint in registerWithTaints: {item!r}")
    out = {"key": key, "effect": effect}
    if taint.get("value"):
        out["value"] = str(taint["value"])
    return out


def _parse_al2_script(text: str, config: BootConfig) -> None:
    for line in _joined_lines(text):
        if _BOOTSTRAP not in line:
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            config.problem = "the bootstrap.sh line does not parse as shell words"
            return
        config.family = "AL2"
        for i in range(len(words)):
            value = _flag_value(words, i, "--kubelet-extra-args")
            if value is not None:
                try:
                    _apply_flags(shlex.split(value), config)
                except ValueError:
                    raise _Refused("--kubelet-extra-args does not parse as shell words") from None
        return


def _joined_lines(text: str) -> list[str]:
    """Shell lines with backslash continuations joined."""
    return re.sub(r"\\\r?\n", " ", text).splitlines()


def _apply_flags(words: list[str], config: BootConfig) -> None:
    for i in range(len(words)):
        if (value := _flag_value(words, i, "--node-labels")) is not None:
            config.labels.update(_label_pairs(value))
        elif (value := _flag_value(words, i, "--register-with-taints")) is not None:
            config.taints = [_flag_taint(spec) for spec in value.split(",") if spec]
        elif (value := _flag_value(words, i, "--max-pods")) is not None:
            config.max_pods = _int(value, "--max-pods")


def _flag_value(words: list[str], i: int, name: str) -> str | None:
    """The value of flag ``name`` at ``words[i]`` (``--f=v`` or ``--f v``), else None."""
    word = words[i]
    if word.startswith(name + "="):
        return word[len(name) + 1 :]
    if word == name and i + 1 < len(words):
        return words[i + 1]
    return None


def _label_pairs(value: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in value.split(","):
        if not pair:
            continue
        key, sep, val = pair.partition("=")
        if not sep:
            raise _Refused(
                f'invalid argument "{value}" for "--node-labels" flag: {pair} must be formatted as key=value'
            )
        out[key.strip()] = val.strip()
    return out


def _flag_taint(spec: str) -> dict[str, str]:
    """``key=value:Effect`` or ``key:Effect``, as k8s pkg/util/taints ``parseTaint`` reads it."""
    head, sep, effect = spec.rpartition(":")
    if not sep or effect not in TAINT_EFFECTS:
        raise _Refused(f"invalid taint spec: {spec}")
    key, _eq, value = head.partition("=")
    if not key:
        raise _Refused(f"invalid taint spec: {spec}")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def _bottlerocket(text: str) -> dict[str, Any] | None:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    settings = doc.get("settings")
    return settings if isinstance(settings, dict) else None


def _apply_bottlerocket(settings: dict[str, Any], config: BootConfig) -> None:
    k8s = _dict(settings.get("kubernetes"))
    for key, value in _dict(k8s.get("node-labels")).items():
        config.labels[str(key)] = str(value)
    for key, values in _dict(k8s.get("node-taints")).items():
        # Bottlerocket takes a list per key, or (older settings) one "value:Effect" string.
        for item in values if isinstance(values, list) else [values]:
            value, sep, effect = str(item).rpartition(":")
            if not sep or effect not in TAINT_EFFECTS:
                raise _Refused(f"invalid node-taints entry {key} = {item!r}")
            taint = {"key": str(key), "effect": effect}
            if value:
                taint["value"] = value
            config.taints.append(taint)
    if "max-pods" in k8s:
        config.max_pods = _int(k8s["max-pods"], "max-pods")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any, name: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise _Refused(f"{name} is not a whole number: {value!r}") from None
    if number <= 0:
        raise _Refused(f"{name} must be positive, got {number}")
    return number
