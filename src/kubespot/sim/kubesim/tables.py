"""Server-side ``meta.k8s.io/v1`` ``Table`` rendering, as kubectl requests with ``Accept: ...;as=Table``.

Columns and cell values follow the API server's printers (``kubernetes/kubernetes``
``pkg/printers/internalversion/printers.go``). The server always renders the wide cells
(``GenerateOptions{Wide: true}``); kubectl hides ``priority > 0`` columns unless ``-o wide``. Custom
resources use the CRD's ``additionalPrinterColumns`` like apiextensions-apiserver's table convertor
(a leading Name column, then the declared columns, ``Age`` if none are declared). Ages use
``k8s.io/apimachinery/pkg/util/duration.HumanDuration``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from kubespot.sim.kubesim.selectors import SelectorError, label_selector_from_dict

__all__ = ["human_duration", "to_table"]

_NAME_DESC: Final = (
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name automatically. Name "
    "is primarily intended for creation idempotence and configuration definition. Cannot be updated. "
    "More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_AGE_DESC: Final = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. It "
    "is not guaranteed to be set in happens-before order across separate operations. Clients may not "
    "set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. "
    "Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


def _col(
    name: str, type_: str = "string", description: str = "", *, priority: int = 0, fmt: str = ""
) -> dict[str, Any]:
    return {"name": name, "type": type_, "format": fmt, "description": description, "priority": priority}


_NAME_COL: Final = _col("Name", "string", _NAME_DESC, fmt="name")
_AGE_COL: Final = _col("Age", "string", _AGE_DESC)
_CONTAINERS_COL: Final = _col("Containers", "string", "Names of each container in the template.", priority=1)
_IMAGES_COL: Final = _col(
    "Images", "string", "Images referenced by each container in the template.", priority=1
)


# --------------------------------------------------------------------------------------------------
# Time


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``: ``5s``, ``3m2s``, ``15m``, ``5h3m``, ``20h``, ``2d3h``, ``30d``, ``2y5d``.

    ``seconds`` is the elapsed time; slightly negative values (clock skew) print as ``0s``.
    """
    whole = int(seconds)  # Go's int(d.Seconds()) truncates toward zero
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        s = whole % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if dy == 0 else f"{years}y{dy}d"
    return f"{hours // 24 // 365}y"


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _since(value: Any, now: datetime) -> str:
    """``translateTimestampSince``: ``<unknown>`` for an unset timestamp."""
    ts = _parse_time(value)
    if ts is None:
        return "<unknown>"
    return human_duration((now - ts).total_seconds())


# --------------------------------------------------------------------------------------------------
# Helpers


def _get(obj: Any, *path: str) -> Any:
    cur = obj
    for p in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(p)
    return cur


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _format_labels(labels: Any) -> str:
    """``labels.FormatLabels``."""
    items = sorted(_map(labels).items())
    return ",".join(f"{k}={v}" for k, v in items) if items else "<none>"


def _format_selector(selector: Any, *, none_text: str = "<none>") -> str:
    """``metav1.FormatLabelSelector``."""
    try:
        text = str(label_selector_from_dict(selector if isinstance(selector, Mapping) else None))
    except SelectorError:
        return "<error>"
    return text or none_text


def _containers(template_spec: Any) -> tuple[str, str]:
    """``layoutContainerCells``."""
    containers = [c for c in _list(_get(template_spec, "containers")) if isinstance(c, Mapping)]
    return (
        ",".join(_str(c.get("name")) for c in containers),
        ",".join(_str(c.get("image")) for c in containers),
    )


def _int_or_string(value: Any) -> str:
    if value is None:
        return "N/A"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


# --------------------------------------------------------------------------------------------------
# Printers: each returns (cells, row conditions or None)

_Cells = list[Any]
_Printer = Callable[[Mapping[str, Any], datetime], tuple[_Cells, list[dict[str, Any]] | None]]


def _name(obj: Mapping[str, Any]) -> str:
    return _str(_get(obj, "metadata", "name"))


def _age(obj: Mapping[str, Any], now: datetime) -> str:
    return _since(_get(obj, "metadata", "creationTimestamp"), now)


_POD_SUCCEEDED: Final = [
    {
        "type": "Completed",
        "status": "True",
        "reason": "Succeeded",
        "message": "The pod has completed successfully.",
    }
]
_POD_FAILED: Final = [
    {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}
]


def _terminated_reason(term: Mapping[str, Any], prefix: str) -> str:
    reason = _str(term.get("reason"))
    if reason:
        return prefix + reason
    signal = _int(term.get("signal"))
    if signal:
        return f"{prefix}Signal:{signal}"
    return f"{prefix}ExitCode:{_int(term.get('exitCode'))}"


def _pod_status(pod: Mapping[str, Any], now: datetime) -> tuple[str, str, str]:
    """(READY, STATUS, RESTARTS) exactly as printPod derives them."""
    spec = _map(pod.get("spec"))
    status = _map(pod.get("status"))
    conditions = [c for c in _list(status.get("conditions")) if isinstance(c, Mapping)]
    phase = _str(status.get("phase"))
    reason = _str(status.get("reason")) or phase
    for c in conditions:
        if c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    init_specs = {_str(c.get("name")): c for c in _list(spec.get("initContainers")) if isinstance(c, Mapping)}

    def sidecar(name: str) -> bool:
        return _str(_map(init_specs.get(name)).get("restartPolicy")) == "Always"

    total = len(_list(spec.get("containers"))) + sum(1 for n in init_specs if sidecar(n))
    ready = 0
    restarts = 0
    sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None

    def later(a: datetime | None, b: Any) -> datetime | None:
        t = _parse_time(b)
        return t if t is not None and (a is None or t > a) else a

    init_statuses = [s for s in _list(status.get("initContainerStatuses")) if isinstance(s, Mapping)]
    initializing = False
    for i, cs in enumerate(init_statuses):
        name = _str(cs.get("name"))
        restarts += _int(cs.get("restartCount"))
        last_term = _map(_get(cs, "lastState", "terminated"))
        if last_term:
            last_restart = later(last_restart, last_term.get("finishedAt"))
        if sidecar(name):
            sidecar_restarts += _int(cs.get("restartCount"))
            if last_term:
                last_sidecar_restart = later(last_sidecar_restart, last_term.get("finishedAt"))
        state = _map(cs.get("state"))
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if isinstance(terminated, Mapping) and _int(terminated.get("exitCode")) == 0:
            continue
        if sidecar(name) and cs.get("started") is True:
            if cs.get("ready") is True:
                ready += 1
            continue
        if isinstance(terminated, Mapping):
            reason = _terminated_reason(terminated, "Init:")
        elif isinstance(waiting, Mapping) and _str(waiting.get("reason")) not in ("", "PodInitializing"):
            reason = "Init:" + _str(waiting.get("reason"))
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions)
    if not initializing or initialized:
        restarts = sidecar_restarts
        last_restart = last_sidecar_restart
        has_running = False
        statuses = [s for s in _list(status.get("containerStatuses")) if isinstance(s, Mapping)]
        for cs in reversed(statuses):
            restarts += _int(cs.get("restartCount"))
            last_term = _map(_get(cs, "lastState", "terminated"))
            if last_term:
                last_restart = later(last_restart, last_term.get("finishedAt"))
            state = _map(cs.get("state"))
            waiting = _map(state.get("waiting"))
            terminated = state.get("terminated")
            if _str(waiting.get("reason")):
                reason = _str(waiting.get("reason"))
            elif isinstance(terminated, Mapping):
                reason = _terminated_reason(terminated, "")
            elif cs.get("ready") is True and isinstance(state.get("running"), Mapping):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            reason = "Running" if pod_ready else "NotReady"

    if _get(pod, "metadata", "deletionTimestamp"):
        if _str(status.get("reason")) == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    return f"{ready}/{total}", reason, restarts_text


def _print_pod(pod: Mapping[str, Any], now: datetime) -> tuple[_Cells, list[dict[str, Any]] | None]:
    ready, reason, restarts = _pod_status(pod, now)
    status = _map(pod.get("status"))
    spec = _map(pod.get("spec"))
    ips = _list(status.get("podIPs"))
    pod_ip = _str(_map(ips[0]).get("ip")) if ips else _str(status.get("podIP"))
    gates = [g for g in _list(spec.get("readinessGates")) if isinstance(g, Mapping)]
    gates_text = "<none>"
    if gates:
        conds = {
            _str(c.get("type")): c.get("status")
            for c in reversed(_list(status.get("conditions")))
            if isinstance(c, Mapping)
        }
        true_count = sum(1 for g in gates if conds.get(_str(g.get("conditionType"))) == "True")
        gates_text = f"{true_count}/{len(gates)}"
    cells: _Cells = [
        _name(pod),
        ready,
        reason,
        restarts,
        _age(pod, now),
        pod_ip or "<none>",
        _str(spec.get("nodeName")) or "<none>",
        _str(status.get("nominatedNodeName")) or "<none>",
        gates_text,
    ]
    phase = status.get("phase")
    conditions = _POD_SUCCEEDED if phase == "Succeeded" else _POD_FAILED if phase == "Failed" else None
    return cells, conditions


_POD_COLUMNS: Final = [
    _NAME_COL,
    _col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", "string", "The aggregate status of the containers in this pod."),
    _col(
        "Restarts",
        "string",
        "The number of times the containers in this pod have been restarted and when the last container "
        "in this pod has restarted.",
    ),
    _AGE_COL,
    _col(
        "IP", "string", "IP address allocated to the pod. Routable at least within the cluster.", priority=1
    ),
    _col("Node", "string", "NodeName indicates in which node this pod is scheduled.", priority=1),
    _col(
        "Nominated Node",
        "string",
        "nominatedNodeName is set when this pod preempts other pods on the node.",
        priority=1,
    ),
    _col(
        "Readiness Gates",
        "string",
        "If specified, all readiness gates will be evaluated for pod readiness.",
        priority=1,
    ),
]


def _node_roles(labels: Mapping[str, Any]) -> str:
    roles: set[str] = set()
    for k, v in labels.items():
        if k.startswith("node-role.kubernetes.io/"):
            role = k[len("node-role.kubernetes.io/") :]
            if role:
                roles.add(role)
        elif k == "kubernetes.io/role" and v:
            roles.add(str(v))
    return ",".join(sorted(roles)) or "<none>"


def _print_node(node: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    status = _map(node.get("status"))
    info = _map(status.get("nodeInfo"))
    states: list[str] = []
    for c in _list(status.get("conditions")):
        if isinstance(c, Mapping) and c.get("type") == "Ready":
            # Only NodeReady is reported; Unknown and False both print as NotReady.
            states = ["Ready" if c.get("status") == "True" else "NotReady"]
    if not states:
        states = ["Unknown"]
    if _get(node, "spec", "unschedulable") is True:
        states.append("SchedulingDisabled")

    def address(kind: str) -> str:
        for a in _list(status.get("addresses")):
            if isinstance(a, Mapping) and a.get("type") == kind:
                return _str(a.get("address"))
        return "<none>"

    return [
        _name(node),
        ",".join(states),
        _node_roles(_map(_get(node, "metadata", "labels"))),
        _age(node, now),
        _str(info.get("kubeletVersion")),
        address("InternalIP"),
        address("ExternalIP"),
        _str(info.get("osImage")) or "<unknown>",
        _str(info.get("kernelVersion")) or "<unknown>",
        _str(info.get("containerRuntimeVersion")) or "<unknown>",
    ], None


_NODE_COLUMNS: Final = [
    _NAME_COL,
    _col("Status", "string", "The status of the node"),
    _col("Roles", "string", "The roles of the node"),
    _AGE_COL,
    _col("Version", "string", "Kubelet Version reported by the node."),
    _col("Internal-IP", "string", "List of addresses reachable to the node.", priority=1),
    _col("External-IP", "string", "List of addresses reachable to the node.", priority=1),
    _col(
        "OS-Image",
        "string",
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        priority=1,
    ),
    _col(
        "Kernel-Version",
        "string",
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        priority=1,
    ),
    _col(
        "Container-Runtime",
        "string",
        "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        priority=1,
    ),
]


def _print_namespace(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    return [_name(obj), _str(_get(obj, "status", "phase")), _age(obj, now)], None


_NAMESPACE_COLUMNS: Final = [_NAME_COL, _col("Status", "string", "The status of the namespace"), _AGE_COL]


def _print_deployment(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    names, images = _containers(_get(spec, "template", "spec"))
    return [
        _name(obj),
        f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'))}",
        _int(status.get("updatedReplicas")),
        _int(status.get("availableReplicas")),
        _age(obj, now),
        names,
        images,
        _format_selector(spec.get("selector"), none_text=""),
    ], None


_DEPLOYMENT_COLUMNS: Final = [
    _NAME_COL,
    _col("Ready", "string", "Number of the pod with ready state"),
    _col(
        "Up-to-date",
        "string",
        "Total number of non-terminated pods targeted by this "
        "deployment that have the desired template spec.",
    ),
    _col(
        "Available",
        "string",
        "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
    ),
    _AGE_COL,
    _CONTAINERS_COL,
    _IMAGES_COL,
    _col(
        "Selector",
        "string",
        "Label selector for pods. Existing ReplicaSets whose pods are selected "
        "by this will be the ones affected by this deployment.",
        priority=1,
    ),
]


def _print_replicaset(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    names, images = _containers(_get(spec, "template", "spec"))
    return [
        _name(obj),
        _int(spec.get("replicas")),
        _int(status.get("replicas")),
        _int(status.get("readyReplicas")),
        _age(obj, now),
        names,
        images,
        _format_selector(spec.get("selector")),
    ], None


_REPLICASET_COLUMNS: Final = [
    _NAME_COL,
    _col("Desired", "integer", "Replicas is the number of desired replicas."),
    _col("Current", "integer", "Replicas is the most recently observed number of replicas."),
    _col("Ready", "integer", "The number of ready replicas for this replica set."),
    _AGE_COL,
    _CONTAINERS_COL,
    _IMAGES_COL,
    _col(
        "Selector",
        "string",
        "Selector is a label query over pods that should match the replica count.",
        priority=1,
    ),
]


def _print_daemonset(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    template_spec = _get(spec, "template", "spec")
    names, images = _containers(template_spec)
    return [
        _name(obj),
        _int(status.get("desiredNumberScheduled")),
        _int(status.get("currentNumberScheduled")),
        _int(status.get("numberReady")),
        _int(status.get("updatedNumberScheduled")),
        _int(status.get("numberAvailable")),
        _format_labels(_get(template_spec, "nodeSelector")),
        _age(obj, now),
        names,
        images,
        _format_selector(spec.get("selector")),
    ], None


_DAEMONSET_COLUMNS: Final = [
    _NAME_COL,
    _col("Desired", "integer", "The total number of nodes that should be running the daemon pod."),
    _col(
        "Current",
        "integer",
        "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
    ),
    _col(
        "Ready",
        "integer",
        "The number of nodes that should be running the daemon pod and have one or "
        "more of the daemon pod running with a Ready Condition.",
    ),
    _col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"),
    _col(
        "Available",
        "integer",
        "The number of nodes that should be running the daemon pod and have "
        "one or more of the daemon pod running and available.",
    ),
    _col(
        "Node Selector",
        "string",
        "NodeSelector is a selector which must be true for the pod to fit on a node.",
    ),
    _AGE_COL,
    _CONTAINERS_COL,
    _IMAGES_COL,
    _col("Selector", "string", "A label query over pods that are managed by the daemon set.", priority=1),
]


def _print_statefulset(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    names, images = _containers(_get(spec, "template", "spec"))
    return [
        _name(obj),
        f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'))}",
        _age(obj, now),
        names,
        images,
    ], None


_STATEFULSET_COLUMNS: Final = [
    _NAME_COL,
    _col("Ready", "string", "Number of the pod with ready state"),
    _AGE_COL,
    _CONTAINERS_COL,
    _IMAGES_COL,
]


def _print_pdb(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    spec = _map(obj.get("spec"))
    return [
        _name(obj),
        _int_or_string(spec.get("minAvailable")),
        _int_or_string(spec.get("maxUnavailable")),
        _int(_get(obj, "status", "disruptionsAllowed")),
        _age(obj, now),
    ], None


_PDB_COLUMNS: Final = [
    _NAME_COL,
    _col("Min Available", "string", "The minimum number of pods that must be available."),
    _col("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
    _col("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
    _AGE_COL,
]


def _print_event(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    first = _since(obj.get("firstTimestamp"), now)
    if _parse_time(obj.get("firstTimestamp")) is None:
        first = _since(obj.get("eventTime"), now)
    last = _since(obj.get("lastTimestamp"), now)
    if _parse_time(obj.get("lastTimestamp")) is None:
        last = first
    count = _int(obj.get("count"))
    series = obj.get("series")
    if isinstance(series, Mapping):
        last = _since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1
    involved = _map(obj.get("involvedObject"))
    kind = _str(involved.get("kind")).lower()
    target = f"{kind}/{_str(involved.get('name'))}" if involved.get("name") else kind
    source = _map(obj.get("source"))
    component = _str(source.get("component")) or _str(obj.get("reportingComponent"))
    instance = _str(source.get("host")) or _str(obj.get("reportingInstance"))
    return [
        last,
        _str(obj.get("type")),
        _str(obj.get("reason")),
        target,
        _str(involved.get("fieldPath")),
        f"{component}, {instance}" if instance else component,
        _str(obj.get("message")).strip(),
        first,
        count,
        _name(obj),
    ], None


_EVENT_COLUMNS: Final = [
    _col("Last Seen", "string", "The time at which the most recent occurrence of this event was recorded."),
    _col("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future"),
    _col(
        "Reason",
        "string",
        "This should be a short, machine understandable string that gives the "
        "reason for the transition into the object's current status.",
    ),
    _col("Object", "string", "The object that this event is about."),
    _col(
        "Subobject",
        "string",
        "If referring to a piece of an object instead of an entire object, this "
        "string should contain a valid JSON/Go field access statement.",
        priority=1,
    ),
    _col(
        "Source",
        "string",
        "The component reporting this event. Should be a short machine understandable string.",
        priority=1,
    ),
    _col("Message", "string", "A human-readable description of the status of this operation."),
    _col(
        "First Seen",
        "string",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        priority=1,
    ),
    _col("Count", "string", "The number of times this event has occurred.", priority=1),
    _col("Name", "string", _NAME_DESC, priority=1, fmt="name"),
]


def _print_lease(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    return [_name(obj), _str(_get(obj, "spec", "holderIdentity")), _age(obj, now)], None


_LEASE_COLUMNS: Final = [
    _NAME_COL,
    _col("Holder", "string", "holderIdentity contains the identity of the holder of a current lease."),
    _AGE_COL,
]


def _print_configmap(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    count = len(_map(obj.get("data"))) + len(_map(obj.get("binaryData")))
    return [_name(obj), count, _age(obj, now)], None


_CONFIGMAP_COLUMNS: Final = [
    _NAME_COL,
    _col("Data", "string", "Data contains the configuration data."),
    _AGE_COL,
]


def _print_secret(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    return [_name(obj), _str(obj.get("type")), len(_map(obj.get("data"))), _age(obj, now)], None


_SECRET_COLUMNS: Final = [
    _NAME_COL,
    _col("Type", "string", "Used to facilitate programmatic handling of secret data."),
    _col("Data", "string", "Data contains the secret data."),
    _AGE_COL,
]


def _service_external_ip(spec: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    svc_type = _str(spec.get("type")) or "ClusterIP"
    external = [str(ip) for ip in _list(spec.get("externalIPs"))]
    if svc_type in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else "<none>"
    if svc_type == "LoadBalancer":
        lb: set[str] = set()
        for ing in _list(_get(status, "loadBalancer", "ingress")):
            if isinstance(ing, Mapping):
                value = _str(ing.get("ip")) or _str(ing.get("hostname"))
                if value:
                    lb.add(value)
        results = sorted(lb) + external
        return ",".join(results) if results else "<pending>"
    if svc_type == "ExternalName":
        return _str(spec.get("externalName"))
    return "<unknown>"


def _print_service(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    cluster_ips = _list(spec.get("clusterIPs"))
    cluster_ip = _str(cluster_ips[0]) if cluster_ips else _str(spec.get("clusterIP"))
    ports: list[str] = []
    for p in _list(spec.get("ports")):
        if not isinstance(p, Mapping):
            continue
        protocol = _str(p.get("protocol")) or "TCP"
        node_port = _int(p.get("nodePort"))
        port = _int(p.get("port"))
        ports.append(f"{port}:{node_port}/{protocol}" if node_port > 0 else f"{port}/{protocol}")
    return [
        _name(obj),
        _str(spec.get("type")) or "ClusterIP",
        cluster_ip or "<none>",
        _service_external_ip(spec, status),
        ",".join(ports) or "<none>",
        _age(obj, now),
        _format_labels(spec.get("selector")),
    ], None


_SERVICE_COLUMNS: Final = [
    _NAME_COL,
    _col("Type", "string", "type determines how the Service is exposed."),
    _col(
        "Cluster-IP", "string", "clusterIP is the IP address of the service and is usually assigned randomly."
    ),
    _col(
        "External-IP",
        "string",
        "externalIPs is a list of IP addresses for which nodes in the "
        "cluster will also accept traffic for this service.",
    ),
    _col("Port(s)", "string", "The list of ports that are exposed by this service."),
    _AGE_COL,
    _col(
        "Selector",
        "string",
        "Route service traffic to pods with label keys and values matching this selector.",
        priority=1,
    ),
]


def _print_serviceaccount(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    return [_name(obj), len(_list(obj.get("secrets"))), _age(obj, now)], None


_SERVICEACCOUNT_COLUMNS: Final = [
    _NAME_COL,
    _col(
        "Secrets",
        "string",
        "Secrets is a list of the secrets in the same namespace that pods "
        "running using this ServiceAccount are allowed to use.",
    ),
    _AGE_COL,
]


def _print_crd(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    # apiextensions serves CRDs with the generic rest.DefaultTableConvertor: NAME, CREATED AT (RFC 3339).
    ts = _parse_time(_get(obj, "metadata", "creationTimestamp"))
    created = ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if ts is not None else ""
    return [_name(obj), created], None


_CRD_COLUMNS: Final = [_NAME_COL, _col("Created At", "date", _AGE_DESC)]


def _print_default(obj: Mapping[str, Any], now: datetime) -> tuple[_Cells, None]:
    return [_name(obj), _age(obj, now)], None


_DEFAULT_COLUMNS: Final = [_NAME_COL, _AGE_COL]

_PRINTERS: Final[dict[str, tuple[list[dict[str, Any]], _Printer]]] = {
    "Pod": (_POD_COLUMNS, _print_pod),
    "Node": (_NODE_COLUMNS, _print_node),
    "Namespace": (_NAMESPACE_COLUMNS, _print_namespace),
    "Deployment": (_DEPLOYMENT_COLUMNS, _print_deployment),
    "ReplicaSet": (_REPLICASET_COLUMNS, _print_replicaset),
    "DaemonSet": (_DAEMONSET_COLUMNS, _print_daemonset),
    "StatefulSet": (_STATEFULSET_COLUMNS, _print_statefulset),
    "PodDisruptionBudget": (_PDB_COLUMNS, _print_pdb),
    "Event": (_EVENT_COLUMNS, _print_event),
    "Lease": (_LEASE_COLUMNS, _print_lease),
    "ConfigMap": (_CONFIGMAP_COLUMNS, _print_configmap),
    "Secret": (_SECRET_COLUMNS, _print_secret),
    "Service": (_SERVICE_COLUMNS, _print_service),
    "ServiceAccount": (_SERVICEACCOUNT_COLUMNS, _print_serviceaccount),
    "CustomResourceDefinition": (_CRD_COLUMNS, _print_crd),
}


# --------------------------------------------------------------------------------------------------
# Custom resources: additionalPrinterColumns with a simple JSONPath subset

#: A field (``\.`` escapes a dot inside a name, as client-go's jsonpath ``advance`` allows: Karpenter's
#: columns read ``.metadata.labels.node\.kubernetes\.io/instance-type``), an index, a quoted key, or
#: an equality filter on the elements of a list (``[?(@.type=="Ready")]``, client-go ``parseFilter``).
_JSONPATH_TOKEN: Final = re.compile(
    r"\.((?:\\.|[^.\[\]\\])+)"
    r"|\[(\d+)\]"
    r"|\[['\"]([^'\"]+)['\"]\]"
    r"|\[\?\(@((?:\.(?:\\.|[^.=!<>()\\\s])+)+)\s*(==|!=)\s*(?:\"([^\"]*)\"|'([^']*)'|([^)\s]+))\s*\)\]"
)
_ESCAPE: Final = re.compile(r"\\(.)")


@dataclass(frozen=True)
class _Filter:
    """``[?(@.path OP literal)]``: the elements of a list whose ``path`` compares as asked."""

    path: list[str | int]
    equal: bool
    literal: Any


def _literal(quoted: str | None, bare: str | None) -> Any:
    if quoted is not None:
        return quoted
    text = bare or ""
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _parse_jsonpath(path: str) -> list[str | int | _Filter] | None:
    r"""``.a.b``, ``.a[0].b``, ``.metadata.labels['x.y/z']``, ``.labels.x\.y/z``,
    ``.conditions[?(@.type=="Ready")].status`` (also wrapped in ``{}``); else None."""
    p = path.strip()
    if p.startswith("{") and p.endswith("}"):
        p = p[1:-1].strip()
    if not p.startswith((".", "[")):
        return None
    out: list[str | int | _Filter] = []
    pos = 0
    while pos < len(p):
        m = _JSONPATH_TOKEN.match(p, pos)
        if m is None:
            return None
        field, index, key, left, op, dq, sq, bare = m.groups()
        if field is not None:
            out.append(_ESCAPE.sub(r"\1", field))
        elif index is not None:
            out.append(int(index))
        elif key is not None:
            out.append(key)
        else:
            inner = _parse_jsonpath(left)
            if inner is None or any(isinstance(t, _Filter) for t in inner):
                return None
            literal = _literal(dq if dq is not None else sq, bare)
            out.append(_Filter([t for t in inner if not isinstance(t, _Filter)], op == "==", literal))
        pos = m.end()
    return out


_MISSING: Final = object()


def _eval_jsonpath(obj: Any, tokens: Sequence[str | int | _Filter]) -> Any:
    """The first value the path reaches (the tableconvertor keeps ``results[0][0]``), or _MISSING."""
    cur = obj
    for i, t in enumerate(tokens):
        if isinstance(t, _Filter):
            if not isinstance(cur, list):
                return _MISSING
            for item in cur:
                value = _eval_jsonpath(item, t.path)
                matched = value is not _MISSING and (value == t.literal and type(value) is type(t.literal))
                if matched == t.equal and value is not _MISSING:
                    found = _eval_jsonpath(item, tokens[i + 1 :])
                    if found is not _MISSING:
                        return found
            return _MISSING
        if isinstance(t, int):
            if not isinstance(cur, list) or t >= len(cur):
                return _MISSING
            cur = cur[t]
        else:
            if not isinstance(cur, Mapping) or t not in cur:
                return _MISSING
            cur = cur[t]
    return cur


def _custom_cell(type_: str, value: Any, now: datetime) -> Any:
    """apiextensions tableconvertor: string columns print anything; others must match their type."""
    if value is _MISSING or value is None:
        return None
    if type_ == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return str(value)
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    if type_ == "integer":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
        return None
    if type_ == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        return None
    if type_ == "boolean":
        return value if isinstance(value, bool) else None
    if type_ == "date":
        if not isinstance(value, str):
            return None
        ts = _parse_time(value)
        return "<invalid>" if ts is None else human_duration((now - ts).total_seconds())
    return None


def _custom_columns(
    printer_columns: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[tuple[str, list[str | int | _Filter] | None]]]:
    columns = [dict(_NAME_COL)]
    evaluators: list[tuple[str, list[str | int | _Filter] | None]] = []
    declared = list(printer_columns) or [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]
    for pc in declared:
        json_path = str(pc.get("jsonPath") or pc.get("JSONPath") or "")
        type_ = str(pc.get("type") or "string")
        description = str(pc.get("description") or "")
        if not description:
            description = f"Custom resource definition column (in JSONPath format): {json_path}"
        columns.append(
            _col(
                str(pc.get("name", "")),
                type_,
                description,
                priority=int(pc.get("priority") or 0),
                fmt=str(pc.get("format") or ""),
            )
        )
        evaluators.append((type_, _parse_jsonpath(json_path)))
    return columns, evaluators


# --------------------------------------------------------------------------------------------------


def _row_object(obj: Mapping[str, Any], include_object: str) -> Any:
    if include_object == "Object":
        return obj
    return {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": dict(_map(obj.get("metadata"))),
    }


def to_table(
    kind: str,
    objects: Sequence[Mapping[str, Any]],
    *,
    now: datetime,
    resource_version: str,
    continue_token: str | None = None,
    include_object: str = "Metadata",
    printer_columns: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Render ``objects`` (all of ``kind``) as a ``meta.k8s.io/v1`` Table.

    ``include_object`` is the ``includeObject`` parameter: ``Metadata`` (kubectl's default) embeds a
    PartialObjectMetadata per row, ``Object`` the whole object, ``None`` nothing. ``printer_columns``
    are a CRD version's ``additionalPrinterColumns``; passing them (even empty) selects the custom
    resource layout. ``now`` should be timezone-aware.
    """
    if include_object not in ("Metadata", "Object", "None"):
        raise ValueError(f"includeObject must be Metadata, Object or None, not {include_object!r}")
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    rows: list[dict[str, Any]] = []
    if printer_columns is not None:
        columns, evaluators = _custom_columns(printer_columns)
        for obj in objects:
            cells: list[Any] = [_name(obj)]
            for type_, tokens in evaluators:
                value = _MISSING if tokens is None else _eval_jsonpath(obj, tokens)
                cells.append(_custom_cell(type_, value, now))
            rows.append(_row(obj, cells, None, include_object))
    else:
        column_defs, printer = _PRINTERS.get(kind, (_DEFAULT_COLUMNS, _print_default))
        columns = [dict(c) for c in column_defs]
        items = list(objects)
        if kind == "Event":
            # printEventList sorts by lastTimestamp (SortableEvents); unset sorts first.
            epoch = datetime.min.replace(tzinfo=UTC)
            items.sort(key=lambda e: _parse_time(e.get("lastTimestamp")) or epoch)
        for obj in items:
            cells, conditions = printer(obj, now)
            rows.append(_row(obj, cells, conditions, include_object))
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    }


def _row(
    obj: Mapping[str, Any], cells: list[Any], conditions: list[dict[str, Any]] | None, include_object: str
) -> dict[str, Any]:
    row: dict[str, Any] = {"cells": cells}
    if conditions:
        row["conditions"] = [dict(c) for c in conditions]
    if include_object != "None":
        row["object"] = _row_object(obj, include_object)
    return row
