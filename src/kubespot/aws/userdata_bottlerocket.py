"""Bottlerocket user data: the user's TOML settings with Karpenter's merged in (pure).

As aws/karpenter-provider-aws ``pkg/providers/amifamily/bootstrap/bottlerocket.go``
(``Bottlerocket.Script``) and ``bottlerocketsettings.go`` (``UnmarshalTOML``, ``MarshalTOML``), golden
files ``pkg/providers/launchtemplate/testdata/br_userdata_*``:

- ``spec.userData`` must be TOML; only its ``[settings]`` survive, and of those every table but
  ``settings.kubernetes`` is kept as written (``network``, ``ntp``, ``bootstrap-commands``…);
- ``settings.kubernetes`` keeps the keys Bottlerocket's settings model knows (``KNOWN_KEYS``); the
  others are dropped and logged ("Unknown parameter in userData K8s settings"), because Karpenter
  re-encodes the table from its typed struct; a known key of the wrong type is an error;
- Karpenter overwrites ``cluster-name``, ``api-server`` and ``cluster-certificate``, merges its labels
  over ``node-labels``, sets ``max-pods``, ``cluster-dns-ip`` (the first cluster DNS IP) and the
  kubelet block's reserved, eviction, image-GC and CFS-quota values when the NodeClass sets them,
  and *replaces* ``node-taints`` with its taints (``key = ["value:Effect", …]``);
- with the RAID0 instance-store policy it adds the ``000-mount-instance-storage`` bootstrap command.

The ephemeral-storage bind names its directories explicitly (Karpenter's form for every Bottlerocket
release; newer releases also accept a bare ``bind``, which Karpenter picks from the AMI version,
unknown here).
"""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Mapping
from typing import Any

import tomli_w

from .userdata_options import BootstrapOptions, UserDataError, grace_periods

__all__ = ["KNOWN_KEYS", "render_bottlerocket"]

log = logging.getLogger(__name__)

# The TOML types of Karpenter's ``BottlerocketKubernetes`` fields, in its order (which is also the
# order it writes them in).
_STR, _INT, _BOOL, _STR_MAP, _STR_LIST, _STR_LISTS, _TABLE = (
    "string",
    "integer",
    "boolean",
    "table of strings",
    "array of strings",
    "table of string arrays",
    "table",
)
KNOWN_KEYS: Mapping[str, str] = {
    "api-server": _STR,
    "cloud-provider": _STR,
    "cluster-certificate": _STR,
    "cluster-name": _STR,
    "cluster-dns-ip": _STR,
    "credential-providers": _TABLE,
    "node-labels": _STR_MAP,
    "node-taints": _STR_LISTS,
    "max-pods": _INT,
    "static-pods": _TABLE,
    "eviction-hard": _STR_MAP,
    "eviction-soft": _STR_MAP,
    "eviction-soft-grace-period": _STR_MAP,
    "eviction-max-pod-grace-period": _INT,
    "kube-reserved": _STR_MAP,
    "system-reserved": _STR_MAP,
    "allowed-unsafe-sysctls": _STR_LIST,
    "server-tls-bootstrap": _BOOL,
    "registry-qps": _INT,
    "registry-burst": _INT,
    "event-qps": _INT,
    "event-burst": _INT,
    "kube-api-qps": _INT,
    "kube-api-burst": _INT,
    "container-log-max-size": _STR,
    "container-log-max-files": _INT,
    "cpu-manager-policy": _STR,
    "cpu-manager-policy-options": _STR_LIST,
    "cpu-manager-reconcile-period": _STR,
    "memory-manager-policy": _STR,
    "topology-manager-scope": _STR,
    "topology-manager-policy": _STR,
    "topology-manager-policy-options": _TABLE,
    "image-gc-high-threshold-percent": _STR,
    "image-gc-low-threshold-percent": _STR,
    "ids-per-pod": _INT,
    "cpu-cfs-quota-enforced": _BOOL,
    "shutdown-grace-period": _STR,
    "shutdown-grace-period-for-critical-pods": _STR,
    "cluster-domain": _STR,
    "seccomp-default": _BOOL,
    "pod-pids-limit": _INT,
    "device-ownership-from-security-context": _BOOL,
    "single-process-oom-kill": _BOOL,
    "container-log-max-workers": _INT,
    "container-log-monitor-interval": _STR,
    "hostname-override-source": _STR,
    "log-level": _INT,
}
MOUNT_INSTANCE_STORAGE = "000-mount-instance-storage"
_BIND_DIRS = ("/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")


def _is(kind: str, value: object) -> bool:
    match kind:
        case "string":
            return isinstance(value, str)
        case "integer":
            return isinstance(value, int) and not isinstance(value, bool)
        case "boolean":
            return isinstance(value, bool)
        case "table of strings":
            return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        case "array of strings":
            return isinstance(value, list) and all(isinstance(v, str) for v in value)
        case "table of string arrays":
            return isinstance(value, dict) and all(_is(_STR_LIST, v) for v in value.values())
        case _:
            return isinstance(value, dict)


def _table(parent: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
    value = parent.get(key, {})
    if not isinstance(value, dict):
        raise UserDataError(f"invalid UserData: {path} is not a table")
    return value


def _parse(custom: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The user's settings other than kubernetes, and their known kubernetes settings."""
    if not custom:
        return {}, {}
    try:
        doc = tomllib.loads(custom)
    except tomllib.TOMLDecodeError as e:
        raise UserDataError(f"invalid UserData: not TOML: {e}") from e
    if dropped := sorted(set(doc) - {"settings"}):
        log.warning("Bottlerocket userData: only [settings] is kept, dropped %s", dropped)
    settings = dict(_table(doc, "settings", "settings"))
    k8s = _table(settings, "kubernetes", "settings.kubernetes")
    settings.pop("kubernetes", None)
    _table(settings, "bootstrap-commands", "settings.bootstrap-commands")
    known: dict[str, Any] = {}
    for key, value in k8s.items():
        kind = KNOWN_KEYS.get(key)
        if kind is None:
            log.warning("Unknown parameter in userData K8s settings: settings.kubernetes.%s dropped", key)
        elif not _is(kind, value):
            raise UserDataError(f"invalid UserData: settings.kubernetes.{key} must be of type {kind}")
        else:
            known[key] = value
    return settings, known


def _kubernetes(opts: BootstrapOptions, user: dict[str, Any]) -> dict[str, Any]:
    c, k = opts.cluster, opts.kubelet
    s = dict(user)
    s["cluster-name"] = c.name
    s["api-server"] = c.endpoint
    # Overwritten even when unknown, so a stale certificate in userData cannot survive.
    if c.ca_bundle:
        s["cluster-certificate"] = c.ca_bundle
    else:
        s.pop("cluster-certificate", None)
    labels = {**s.get("node-labels", {}), **opts.labels}
    s["node-labels"] = {key: labels[key] for key in sorted(labels)}
    if not labels:
        del s["node-labels"]
    if k.max_pods is not None:
        s["max-pods"] = k.max_pods
    if k.cluster_dns:
        s["cluster-dns-ip"] = k.cluster_dns[0]
    for key, values in (
        ("system-reserved", k.system_reserved),
        ("kube-reserved", k.kube_reserved),
        ("eviction-hard", k.eviction_hard),
        ("eviction-soft", k.eviction_soft),
        ("eviction-soft-grace-period", grace_periods(k)),
    ):
        if values:
            s[key] = dict(values)
    if k.eviction_max_pod_grace_period is not None:
        s["eviction-max-pod-grace-period"] = k.eviction_max_pod_grace_period
    if k.image_gc_high_threshold_percent is not None:
        s["image-gc-high-threshold-percent"] = str(k.image_gc_high_threshold_percent)
    if k.image_gc_low_threshold_percent is not None:
        s["image-gc-low-threshold-percent"] = str(k.image_gc_low_threshold_percent)
    if k.cpu_cfs_quota is not None:
        s["cpu-cfs-quota-enforced"] = k.cpu_cfs_quota
    taints: dict[str, list[str]] = {}
    for t in opts.taints:
        taints.setdefault(t.key, []).append(f"{t.value}:{t.effect}")
    s["node-taints"] = {key: taints[key] for key in sorted(taints)}
    if not s["node-taints"]:
        del s["node-taints"]
    return {key: s[key] for key in KNOWN_KEYS if key in s}


def render_bottlerocket(opts: BootstrapOptions) -> str:
    settings, k8s = _parse(opts.custom)
    settings["kubernetes"] = _kubernetes(opts, k8s)
    if opts.instance_store_raid0:
        commands = dict(settings.get("bootstrap-commands", {}))
        commands[MOUNT_INSTANCE_STORAGE] = {
            "commands": [
                ["apiclient", "ephemeral-storage", "init"],
                ["apiclient", "ephemeral-storage", "bind", "--dirs", *_BIND_DIRS],
            ],
            "mode": "always",
            "essential": True,
        }
        settings["bootstrap-commands"] = commands
    return tomli_w.dumps({"settings": {key: settings[key] for key in sorted(settings)}})
