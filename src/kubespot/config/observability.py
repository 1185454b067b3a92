"""What the agent tells the outside world about itself: logs, metrics, health probes, Kubernetes events.

Read by ``kubespot.observability``; the loader composes this group with the others. Names and
defaults follow aws-node-termination-handler, whose names are accepted as aliases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .base import setting
from .loader import InvalidSetting

LogLevel = Literal["debug", "info", "warn", "error"]
#: The words a level may be given as (``observability.logs.parse_level`` reads them).
_LEVEL_WORDS = ("debug", "info", "warn", "warning", "error", "critical")


@dataclass(frozen=True, slots=True, kw_only=True)
class ObservabilitySettings:
    """Logging, Prometheus metrics, health probes and Kubernetes events."""

    json_logging: bool = setting(
        False,
        doc=(
            "Write one JSON object per log line (for log shippers) instead of console text. Every "
            "line about an interruption carries its event id either way. Default false, as in the "
            "reference handler."
        ),
        env="KUBESPOT_OBSERVABILITY_JSON_LOGGING",
        nth="JSON_LOGGING",
        flag="--json-logging",
    )
    log_level: Literal["debug", "info", "warn", "error"] = setting(
        "info",
        doc="Least severe level logged: debug, info, warn or error (case-insensitive). Default info.",
        env="KUBESPOT_OBSERVABILITY_LOG_LEVEL",
        nth="LOG_LEVEL",
        flag="--log-level",
    )
    logger_levels: tuple[tuple[str, str], ...] = setting(
        (),
        doc=(
            "Levels of single loggers over log_level, as logger=level pairs (e.g. "
            "`kubespot=debug,botocore=warning`): kubespot's own debug lines without the AWS SDK's "
            "line per request, or one library's debug lines alone. A logger's children follow it."
        ),
        env="KUBESPOT_OBSERVABILITY_LOGGER_LEVELS",
    )
    enable_prometheus_server: bool = setting(
        False,
        doc=(
            "Serve Prometheus metrics on prometheus_server_port at /metrics. Off by default, as in "
            "the reference handler: an open port on every node is an opt-in."
        ),
        env="KUBESPOT_OBSERVABILITY_ENABLE_PROMETHEUS_SERVER",
        nth="ENABLE_PROMETHEUS_SERVER",
    )
    prometheus_server_port: int = setting(
        9092,
        doc=(
            "TCP port of the metrics server. 9092 is the reference handler's, so existing "
            "PodMonitors and firewall rules keep working. The agent runs with hostNetwork, so the "
            "port is taken on the node itself."
        ),
        env="KUBESPOT_OBSERVABILITY_PROMETHEUS_SERVER_PORT",
        nth="PROMETHEUS_SERVER_PORT",
        unit="port",
    )
    enable_probes_server: bool = setting(
        False,
        doc=(
            "Serve the liveness probe on probes_server_port at probes_server_endpoint. Off by "
            "default, as in the reference handler; the Helm chart turns it on."
        ),
        env="KUBESPOT_OBSERVABILITY_ENABLE_PROBES_SERVER",
        nth="ENABLE_PROBES_SERVER",
    )
    probes_server_port: int = setting(
        8080,
        doc=(
            "TCP port of the probes server (on the node, under hostNetwork). 8080, "
            " as in the reference handler."
        ),
        env="KUBESPOT_OBSERVABILITY_PROBES_SERVER_PORT",
        nth="PROBES_SERVER_PORT",
        unit="port",
    )
    probes_server_endpoint: str = setting(
        "/healthz",
        doc="HTTP path of the liveness probe. /healthz, as in the reference handler.",
        env="KUBESPOT_OBSERVABILITY_PROBES_SERVER_ENDPOINT",
        nth="PROBES_SERVER_ENDPOINT",
    )
    probes_stale_after: float = setting(
        60.0,
        doc=(
            "The probe fails when the instance metadata service or the Kubernetes API has not "
            "answered successfully for this long, so a wedged agent gets restarted; the reference "
            "handler's probe answers OK whatever state the handler is in. 60 s is 60 IMDS polls at "
            "the default interval: long enough to ride out an API server restart."
        ),
        env="KUBESPOT_OBSERVABILITY_PROBES_STALE_AFTER",
        unit="seconds",
    )
    emit_kubernetes_events: bool = setting(
        False,
        doc=(
            "Record Kubernetes events on the Node (and on evicted Pods) for each interruption and "
            "action, with the reference handler's reasons (SpotInterruption, Cordon, "
            "CordonAndDrain, ...). Default false, as in the reference handler; dry-run events are "
            "emitted whenever this is on."
        ),
        env="KUBESPOT_OBSERVABILITY_EMIT_KUBERNETES_EVENTS",
        nth="EMIT_KUBERNETES_EVENTS",
    )
    kubernetes_events_extra_annotations: tuple[tuple[str, str], ...] = setting(
        (),
        doc=(
            "Annotations added to every emitted Kubernetes event, as key=value pairs separated by "
            "commas (the reference handler's format) or a JSON object. Default none."
        ),
        env="KUBESPOT_OBSERVABILITY_KUBERNETES_EVENTS_EXTRA_ANNOTATIONS",
        nth="KUBERNETES_EVENTS_EXTRA_ANNOTATIONS",
    )

    def __post_init__(self) -> None:
        for logger, level in self.logger_levels:
            if not logger.strip():
                raise InvalidSetting("logger_levels", "a logger name is empty")
            if level.strip().lower() not in _LEVEL_WORDS:
                words = ", ".join(_LEVEL_WORDS)
                problem = f"{logger}: unknown level {level!r}; expected one of {words}"
                raise InvalidSetting("logger_levels", problem)
        for name in ("prometheus_server_port", "probes_server_port"):
            if not 1 <= getattr(self, name) <= 65535:
                raise InvalidSetting(name, "must be a TCP port, 1..65535")
        if (
            self.enable_prometheus_server
            and self.enable_probes_server
            and (self.prometheus_server_port == self.probes_server_port)
        ):
            raise InvalidSetting("probes_server_port", "must differ from prometheus_server_port")
        if not self.probes_server_endpoint.startswith("/"):
            raise InvalidSetting("probes_server_endpoint", "must be an HTTP path starting with /")
        if self.probes_stale_after <= 0:
            raise InvalidSetting("probes_stale_after", "must be positive")
