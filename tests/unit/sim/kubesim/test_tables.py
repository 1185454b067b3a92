"""Server-side Table output checked against upstream printers.

References:
* ``kubernetes/kubernetes`` ``pkg/printers/internalversion/printers.go`` (column definitions,
  printPod/printNode/... cell derivation; the API server renders with ``GenerateOptions{Wide: true}``).
* ``k8s.io/apimachinery/pkg/util/duration/duration.go`` ``HumanDuration``.
* ``k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor`` (Name column plus
  ``additionalPrinterColumns``; default Age column; typed cells).
* ``meta.k8s.io/v1`` Table / TableColumnDefinition / TableRow / PartialObjectMetadata.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubespot.sim.kubesim.tables import human_duration, to_table

NOW = datetime(2025, 1, 10, 12, 0, 0, tzinfo=UTC)


def _ts(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _one(kind: str, obj: dict[str, Any], **kw: Any) -> list[Any]:
    table = to_table(kind, [obj], now=NOW, resource_version="1", **kw)
    cells: list[Any] = table["rows"][0]["cells"]
    assert len(cells) == len(table["columnDefinitions"]), kind
    return cells


def _names(kind: str, wide: bool = False) -> list[str]:
    cols = to_table(kind, [], now=NOW, resource_version="1")["columnDefinitions"]
    return [c["name"] for c in cols if wide or c["priority"] == 0]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (-0.5, "0s"),
        (0, "0s"),
        (5, "5s"),
        (119, "119s"),
        (120, "2m"),
        (182, "3m2s"),
        (599, "9m59s"),
        (600, "10m"),
        (179 * 60 + 59, "179m"),
        (3 * 3600, "3h"),
        (5 * 3600 + 3 * 60, "5h3m"),
        (8 * 3600, "8h"),
        (47 * 3600 + 59 * 60, "47h"),
        (2 * 86400 + 3 * 3600, "2d3h"),
        (3 * 86400, "3d"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (735 * 86400, "2y5d"),
        (8 * 365 * 86400, "8y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    """duration.HumanDuration thresholds: <2m seconds, <10m m+s, <3h minutes, <8h h+m, <48h hours,
    <8d d+h, <2y days, <8y y+d, then years; -1s of skew is "0s", anything earlier "<invalid>"."""
    assert human_duration(seconds) == text


def test_table_envelope_and_object_modes() -> None:
    """Table kind/apiVersion/metadata; includeObject Metadata -> PartialObjectMetadata, Object -> the
    object, None -> no object."""
    cm = {
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns", "labels": {"a": "b"}},
        "data": {"x": "1"},
    }
    table = to_table("ConfigMap", [cm], now=NOW, resource_version="42", continue_token="tok")
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "42", "continue": "tok"}
    assert table["rows"][0]["object"] == {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": cm["metadata"],
    }
    assert (
        to_table("ConfigMap", [cm], now=NOW, resource_version="1", include_object="Object")["rows"][0][
            "object"
        ]
        is cm
    )
    assert (
        "object"
        not in to_table("ConfigMap", [cm], now=NOW, resource_version="1", include_object="None")["rows"][0]
    )
    assert "continue" not in to_table("ConfigMap", [], now=NOW, resource_version="1")["metadata"]
    with pytest.raises(ValueError):
        to_table("ConfigMap", [], now=NOW, resource_version="1", include_object="All")


def test_column_definition_shape() -> None:
    """TableColumnDefinition always carries name, type, format, description, priority."""
    for col in to_table("Pod", [], now=NOW, resource_version="1")["columnDefinitions"]:
        assert set(col) == {"name", "type", "format", "description", "priority"}
    assert to_table("Pod", [], now=NOW, resource_version="1")["columnDefinitions"][0]["format"] == "name"


@pytest.mark.parametrize(
    ("kind", "normal", "wide_extra"),
    [
        (
            "Node",
            ["Name", "Status", "Roles", "Age", "Version"],
            ["Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"],
        ),
        (
            "Pod",
            ["Name", "Ready", "Status", "Restarts", "Age"],
            ["IP", "Node", "Nominated Node", "Readiness Gates"],
        ),
        ("Namespace", ["Name", "Status", "Age"], []),
        (
            "Deployment",
            ["Name", "Ready", "Up-to-date", "Available", "Age"],
            ["Containers", "Images", "Selector"],
        ),
        ("ReplicaSet", ["Name", "Desired", "Current", "Ready", "Age"], ["Containers", "Images", "Selector"]),
        (
            "DaemonSet",
            ["Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age"],
            ["Containers", "Images", "Selector"],
        ),
        ("StatefulSet", ["Name", "Ready", "Age"], ["Containers", "Images"]),
        (
            "PodDisruptionBudget",
            ["Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"],
            [],
        ),
        (
            "Event",
            ["Last Seen", "Type", "Reason", "Object", "Message"],
            ["Subobject", "Source", "First Seen", "Count", "Name"],
        ),
        ("Lease", ["Name", "Holder", "Age"], []),
        ("ConfigMap", ["Name", "Data", "Age"], []),
        ("Secret", ["Name", "Type", "Data", "Age"], []),
        ("Service", ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age"], ["Selector"]),
        ("ServiceAccount", ["Name", "Secrets", "Age"], []),
        ("CustomResourceDefinition", ["Name", "Created At"], []),
        ("ControllerRevision", ["Name", "Age"], []),
    ],
)
def test_columns(kind: str, normal: list[str], wide_extra: list[str]) -> None:
    """Column names per printers.go; priority 1 columns are the -o wide ones."""
    assert _names(kind) == normal
    assert [n for n in _names(kind, wide=True) if n not in normal] == wide_extra


def _node(**over: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "metadata": {
            "name": "n1",
            "creationTimestamp": _ts(3 * 86400 + 3600),
            "labels": {"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": ""},
        },
        "spec": {},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True"},
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0",
                "osImage": "Bottlerocket",
                "kernelVersion": "6.1",
                "containerRuntimeVersion": "containerd://1.7",
            },
        },
    }
    for k, v in over.items():
        node[k] = {**node[k], **v}
    return node


def test_node_row() -> None:
    assert _one("Node", _node()) == [
        "n1",
        "Ready",
        "control-plane,worker",
        "3d1h",
        "v1.32.0",
        "10.0.0.1",
        "<none>",
        "Bottlerocket",
        "6.1",
        "containerd://1.7",
    ]


@pytest.mark.parametrize(
    ("spec", "conditions", "status"),
    [
        ({"unschedulable": True}, [{"type": "Ready", "status": "True"}], "Ready,SchedulingDisabled"),
        ({}, [{"type": "Ready", "status": "False"}], "NotReady"),
        ({}, [{"type": "Ready", "status": "Unknown"}], "NotReady"),
        ({}, [], "Unknown"),
        ({"unschedulable": True}, [], "Unknown,SchedulingDisabled"),
    ],
)
def test_node_status(spec: dict[str, Any], conditions: list[dict[str, Any]], status: str) -> None:
    """printNode: Ready if the Ready condition is True, "Not"+type otherwise, Unknown without it;
    SchedulingDisabled appended for spec.unschedulable (kubectl cordon)."""
    node = _node(spec=spec)
    node["status"]["conditions"] = conditions
    assert _one("Node", node)[1] == status


def test_node_roles_and_defaults() -> None:
    """findNodeRoles: node-role.kubernetes.io/<role> keys and kubernetes.io/role=<role>, sorted; <none>."""
    node = {
        "metadata": {"name": "n", "labels": {"kubernetes.io/role": "infra", "node-role.kubernetes.io/": ""}}
    }
    cells = _one("Node", node)
    assert cells[2] == "infra"
    assert cells[3] == "<unknown>"  # no creationTimestamp
    assert cells[5:] == ["<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"]
    assert _one("Node", {"metadata": {"name": "n"}})[2] == "<none>"


def _pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "creationTimestamp": _ts(182)},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
        "status": {"phase": "Running", **status},
    }


def _running(name: str, ready: bool = True, restarts: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "ready": ready,
        "restartCount": restarts,
        "state": {"running": {"startedAt": _ts(100)}},
    }


def test_pod_running_row() -> None:
    pod = _pod(podIP="10.1.0.5", containerStatuses=[_running("a"), _running("b", ready=False)])
    assert _one("Pod", pod) == ["p", "1/2", "Running", "0", "3m2s", "10.1.0.5", "n1", "<none>", "<none>"]


@pytest.mark.parametrize(
    ("status", "deletion", "expected"),
    [
        ({"phase": "Pending"}, False, "Pending"),
        (
            {
                "phase": "Running",
                "containerStatuses": [{"name": "a", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
            },
            False,
            "CrashLoopBackOff",
        ),
        (
            {
                "phase": "Running",
                "containerStatuses": [{"name": "a", "state": {"waiting": {"reason": "ContainerCreating"}}}],
            },
            False,
            "ContainerCreating",
        ),
        (
            {
                "phase": "Succeeded",
                "containerStatuses": [
                    {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
                ],
            },
            False,
            "Completed",
        ),
        (
            {
                "phase": "Failed",
                "containerStatuses": [
                    {"name": "a", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
                ],
            },
            False,
            "OOMKilled",
        ),
        (
            {
                "phase": "Failed",
                "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 2}}}],
            },
            False,
            "ExitCode:2",
        ),
        (
            {
                "phase": "Failed",
                "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 0, "signal": 9}}}],
            },
            False,
            "Signal:9",
        ),
        ({"phase": "Failed", "reason": "Evicted"}, False, "Evicted"),
        ({"phase": "Running", "containerStatuses": [_running("a")]}, True, "Terminating"),
        ({"phase": "Succeeded"}, True, "Succeeded"),  # terminal phases do not show Terminating
        ({"phase": "Running", "reason": "NodeLost"}, True, "Unknown"),
        (
            {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
            },
            False,
            "SchedulingGated",
        ),
        (
            {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [
                    {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    _running("b"),
                ],
            },
            False,
            "Running",
        ),
    ],
)
def test_pod_status_column(status: dict[str, Any], deletion: bool, expected: str) -> None:
    """printPod reason precedence: phase < status.reason < container waiting/terminated reasons;
    Terminating (non-terminal phase with deletionTimestamp), Unknown for NodeLost, SchedulingGated,
    and "Completed" flipped back to Running while a container still runs."""
    pod = _pod()
    pod["status"] = status
    if deletion:
        pod["metadata"]["deletionTimestamp"] = _ts(1)
    assert _one("Pod", pod)[2] == expected


def test_pod_init_containers() -> None:
    """Init:N/M while initializing; Init:<reason> for waiting/failed init containers; restartable
    init containers (sidecars) count towards READY's total."""
    pod = _pod(
        initContainerStatuses=[
            {"name": "i1", "state": {"terminated": {"exitCode": 0}}},
            {"name": "i2", "state": {"running": {}}},
        ]
    )
    pod["spec"]["initContainers"] = [{"name": "i1"}, {"name": "i2"}]
    assert _one("Pod", pod)[2] == "Init:1/2"
    pod["status"]["initContainerStatuses"][1] = {
        "name": "i2",
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
    }
    assert _one("Pod", pod)[2] == "Init:CrashLoopBackOff"
    pod["status"]["initContainerStatuses"][1] = {
        "name": "i2",
        "state": {"terminated": {"exitCode": 1, "reason": "Error"}},
    }
    assert _one("Pod", pod)[2] == "Init:Error"
    sidecar = _pod(
        initContainerStatuses=[{"name": "s", "started": True, "ready": True, "state": {"running": {}}}],
        containerStatuses=[_running("a"), _running("b")],
    )
    sidecar["spec"]["initContainers"] = [{"name": "s", "restartPolicy": "Always"}]
    assert _one("Pod", sidecar)[1:3] == ["3/3", "Running"]


def test_pod_restarts_with_last_restart_age() -> None:
    """RESTARTS is "N (AGE ago)" when a container has a lastState.terminated.finishedAt."""
    a = _running("a", restarts=2)
    a["lastState"] = {"terminated": {"finishedAt": _ts(300), "exitCode": 1}}
    pod = _pod(containerStatuses=[a, _running("b", restarts=1)])
    assert _one("Pod", pod)[3] == "3 (5m ago)"
    assert _one("Pod", _pod(containerStatuses=[_running("a", restarts=4)]))[3] == "4"


def test_pod_wide_cells_and_row_conditions() -> None:
    """IP/NODE <none> when unset; NOMINATED NODE; READINESS GATES true/total; Completed row condition."""
    pod = _pod()
    pod["spec"] = {
        "containers": [{"name": "a"}],
        "readinessGates": [{"conditionType": "g1"}, {"conditionType": "g2"}],
    }
    pod["status"] = {
        "phase": "Succeeded",
        "nominatedNodeName": "n9",
        "conditions": [{"type": "g1", "status": "True"}],
    }
    table = to_table("Pod", [pod], now=NOW, resource_version="1")
    assert table["rows"][0]["cells"][5:] == ["<none>", "<none>", "n9", "1/2"]
    assert table["rows"][0]["conditions"][0]["type"] == "Completed"


def test_workload_rows() -> None:
    template = {
        "spec": {
            "containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}],
            "nodeSelector": {"z": "1", "a": "2"},
        }
    }
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["y", "x"]}],
    }
    meta = {"name": "w", "creationTimestamp": _ts(7200)}
    dep = {
        "metadata": meta,
        "spec": {"replicas": 3, "selector": selector, "template": template},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    assert _one("Deployment", dep) == ["w", "2/3", 3, 2, "120m", "a,b", "a:1,b:2", "app=web,tier in (x,y)"]
    rs = {
        "metadata": meta,
        "spec": {"replicas": 3, "selector": selector, "template": template},
        "status": {"replicas": 3, "readyReplicas": 1},
    }
    assert _one("ReplicaSet", rs) == ["w", 3, 3, 1, "120m", "a,b", "a:1,b:2", "app=web,tier in (x,y)"]
    ds = {
        "metadata": meta,
        "spec": {"selector": selector, "template": template},
        "status": {
            "desiredNumberScheduled": 5,
            "currentNumberScheduled": 5,
            "numberReady": 4,
            "updatedNumberScheduled": 5,
            "numberAvailable": 4,
        },
    }
    assert _one("DaemonSet", ds) == [
        "w",
        5,
        5,
        4,
        5,
        4,
        "a=2,z=1",
        "120m",
        "a,b",
        "a:1,b:2",
        "app=web,tier in (x,y)",
    ]
    sts = {"metadata": meta, "spec": {"replicas": 2, "template": template}, "status": {"readyReplicas": 2}}
    assert _one("StatefulSet", sts) == ["w", "2/2", "120m", "a,b", "a:1,b:2"]
    ds_no_selector = {"metadata": meta, "spec": {"template": {"spec": {}}}}
    assert _one("DaemonSet", ds_no_selector)[6] == "<none>"


@pytest.mark.parametrize(
    ("spec", "status", "cells"),
    [
        ({"minAvailable": 1}, {"disruptionsAllowed": 2}, ["1", "N/A", 2]),
        ({"maxUnavailable": "25%"}, {}, ["N/A", "25%", 0]),
    ],
)
def test_pdb_row(spec: dict[str, Any], status: dict[str, Any], cells: list[Any]) -> None:
    """printPodDisruptionBudget: IntOrString.String() or N/A; status.disruptionsAllowed."""
    pdb = {"metadata": {"name": "pdb", "creationTimestamp": _ts(30)}, "spec": spec, "status": status}
    assert _one("PodDisruptionBudget", pdb) == ["pdb", *cells, "30s"]


def test_event_row_and_sorting() -> None:
    """printEvent: Object is lower(kind)/name, Source "component, host", count defaults to 1,
    Last Seen falls back to First Seen; printEventList sorts by lastTimestamp."""
    newer = {
        "metadata": {"name": "e1"},
        "type": "Warning",
        "reason": "Evicted",
        "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"},
        "source": {"component": "kubelet", "host": "n1"},
        "message": " evicted \n",
        "firstTimestamp": _ts(600),
        "lastTimestamp": _ts(60),
        "count": 3,
    }
    older = {
        "metadata": {"name": "e0"},
        "involvedObject": {"kind": "Node"},
        "reportingComponent": "ctrl",
        "firstTimestamp": _ts(900),
    }
    table = to_table("Event", [newer, older], now=NOW, resource_version="1")
    assert [r["cells"][-1] for r in table["rows"]] == ["e0", "e1"]
    assert table["rows"][1]["cells"] == [
        "60s",
        "Warning",
        "Evicted",
        "pod/p",
        "spec.containers{a}",
        "kubelet, n1",
        "evicted",
        "10m",
        3,
        "e1",
    ]
    assert table["rows"][0]["cells"][:4] == ["15m", "", "", "node"]
    assert table["rows"][0]["cells"][5] == "ctrl" and table["rows"][0]["cells"][8] == 1


def test_misc_rows() -> None:
    meta = {"name": "x", "creationTimestamp": _ts(10)}
    assert _one("Namespace", {"metadata": meta, "status": {"phase": "Active"}}) == ["x", "Active", "10s"]
    assert _one("Lease", {"metadata": meta, "spec": {"holderIdentity": "me"}}) == ["x", "me", "10s"]
    assert _one("Lease", {"metadata": meta, "spec": {}}) == ["x", "", "10s"]
    assert _one("ConfigMap", {"metadata": meta, "data": {"a": "1"}, "binaryData": {"b": ""}}) == [
        "x",
        2,
        "10s",
    ]
    assert _one("Secret", {"metadata": meta, "type": "Opaque", "data": {"a": "", "b": ""}}) == [
        "x",
        "Opaque",
        2,
        "10s",
    ]
    assert _one("ServiceAccount", {"metadata": meta}) == ["x", 0, "10s"]
    assert _one(
        "CustomResourceDefinition",
        {"metadata": {"name": "w.example.com", "creationTimestamp": "2024-05-01T10:00:00Z"}},
    ) == ["w.example.com", "2024-05-01T10:00:00Z"]
    assert _one("Widget", {"metadata": meta}) == ["x", "10s"]


@pytest.mark.parametrize(
    ("spec", "status", "cells"),
    [
        (
            {"clusterIP": "10.96.0.1", "ports": [{"port": 443, "protocol": "TCP"}]},
            {},
            ["ClusterIP", "10.96.0.1", "<none>", "443/TCP"],
        ),
        (
            {"type": "NodePort", "clusterIPs": ["10.96.0.2"], "ports": [{"port": 80, "nodePort": 30080}]},
            {},
            ["NodePort", "10.96.0.2", "<none>", "80:30080/TCP"],
        ),
        (
            {"type": "LoadBalancer", "clusterIP": "10.96.0.3", "ports": []},
            {},
            ["LoadBalancer", "10.96.0.3", "<pending>", "<none>"],
        ),
        (
            {"type": "LoadBalancer", "clusterIP": "10.96.0.3", "externalIPs": ["5.5.5.5"]},
            {"loadBalancer": {"ingress": [{"hostname": "lb.example"}, {"ip": "1.2.3.4"}]}},
            ["LoadBalancer", "10.96.0.3", "1.2.3.4,lb.example,5.5.5.5", "<none>"],
        ),
        (
            {"type": "ExternalName", "externalName": "db.example"},
            {},
            ["ExternalName", "<none>", "db.example", "<none>"],
        ),
    ],
)
def test_service_row(spec: dict[str, Any], status: dict[str, Any], cells: list[Any]) -> None:
    """printService/getServiceExternalIP/makePortString."""
    svc = {
        "metadata": {"name": "s", "creationTimestamp": _ts(5)},
        "spec": {**spec, "selector": {"app": "a"}},
        "status": status,
    }
    assert _one("Service", svc) == ["s", *cells, "5s", "app=a"]


def test_custom_resource_printer_columns() -> None:
    """apiextensions tableconvertor: Name first, then additionalPrinterColumns with typed cells
    (missing -> null, date -> age); description defaults to the JSONPath text."""
    columns: list[dict[str, Any]] = [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas", "priority": 1},
        {"name": "Team", "type": "string", "jsonPath": ".metadata.labels.team", "description": "owner"},
        {"name": "Zone", "type": "string", "jsonPath": ".metadata.labels['topology.kubernetes.io/zone']"},
        {"name": "First", "type": "string", "jsonPath": ".spec.items[0].name"},
        {"name": "Ready", "type": "boolean", "jsonPath": ".status.ready"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Weird", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    ]
    obj = {
        "metadata": {
            "name": "w1",
            "creationTimestamp": _ts(90),
            "labels": {"team": "t", "topology.kubernetes.io/zone": "z1"},
        },
        "spec": {"replicas": 3.0, "items": [{"name": "i0"}]},
        "status": {"ready": True},
    }
    table = to_table("Widget", [obj], now=NOW, resource_version="1", printer_columns=columns)
    defs = table["columnDefinitions"]
    assert [d["name"] for d in defs] == [
        "Name",
        "Phase",
        "Replicas",
        "Team",
        "Zone",
        "First",
        "Ready",
        "Age",
        "Weird",
    ]
    assert defs[2]["priority"] == 1 and defs[2]["type"] == "integer"
    assert defs[1]["description"] == "Custom resource definition column (in JSONPath format): .status.phase"
    assert defs[3]["description"] == "owner"
    assert table["rows"][0]["cells"] == ["w1", None, 3, "t", "z1", "i0", True, "90s", None]


def test_custom_resource_default_age_column() -> None:
    """Without additionalPrinterColumns the CRD handler adds Age (.metadata.creationTimestamp, date)."""
    table = to_table(
        "Widget",
        [{"metadata": {"name": "w", "creationTimestamp": _ts(5)}}],
        now=NOW,
        resource_version="1",
        printer_columns=[],
    )
    assert [d["name"] for d in table["columnDefinitions"]] == ["Name", "Age"]
    assert table["columnDefinitions"][1]["type"] == "date"
    assert table["rows"][0]["cells"] == ["w", "5s"]


def test_custom_columns_with_escaped_dots_and_filters() -> None:
    """client-go ``util/jsonpath`` (the apiextensions tableconvertor's evaluator): ``\\.`` escapes a
    dot inside a field name (``parser.go`` ``advance``/``parseField``), ``[?(@.f==lit)]`` keeps the
    list elements that compare equal (``parseFilter``, ``!=`` the others), and the cell is the first
    result (``tableconvertor.go``: ``results[0][0]``). Karpenter's NodeClaim and NodePool columns use
    both."""
    columns: list[dict[str, Any]] = [
        {
            "name": "Type",
            "type": "string",
            "jsonPath": ".metadata.labels.node\\.kubernetes\\.io/instance-type",
        },
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "NotReady", "type": "string", "jsonPath": ".status.conditions[?(@.type!='Ready')].type"},
        {"name": "Port", "type": "integer", "jsonPath": ".spec.ports[?(@.port==80)].target"},
        {"name": "Nested", "type": "string", "jsonPath": '.spec.ports[?(@.meta.name=="b")].target'},
        {"name": "Absent", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Drifted")].status'},
    ]
    obj = {
        "metadata": {"name": "c1", "labels": {"node.kubernetes.io/instance-type": "m5.large"}},
        "spec": {"ports": [{"port": "80", "target": 1}, {"port": 80, "target": 2, "meta": {"name": "b"}}]},
        "status": {
            "conditions": [
                {"type": "Launched", "status": "True"},
                {"type": "Ready", "status": "False"},
                {"type": "Registered", "status": "True"},
            ]
        },
    }
    table = to_table("NodeClaim", [obj], now=NOW, resource_version="1", printer_columns=columns)
    assert table["rows"][0]["cells"] == ["c1", "m5.large", "False", "Launched", 2, "2", None]
