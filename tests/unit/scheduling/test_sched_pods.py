"""A pod as the simulation reads it.

Requests follow k8s.io/component-helpers ``resource/helpers.go`` ``PodRequests`` (init containers,
restartable sidecars, overhead) and the API server's defaulting of requests from limits
(pkg/apis/core/v1/defaults.go ``SetDefaults_ResourceList`` via ``defaultContainerResourceRequirements``);
node requirements follow Karpenter's ``NewPodRequirements`` (pkg/scheduling/requirements.go).
"""

from __future__ import annotations

from typing import Any

from kubespot.model.quantity import MIB
from kubespot.scheduling.labels import ZONE
from kubespot.scheduling.pods import PodView, host_ports, node_requirements, pod_requests


def c(cpu: str | None = None, memory: str | None = None, **extra: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    return {"name": "c", "resources": {"requests": requests}, **extra}


def test_app_containers_add_up() -> None:
    assert pod_requests({"containers": [c("100m", "64Mi"), c("250m")]}) == {
        "cpu": 350,
        "memory": 64 * MIB,
    }


def test_an_init_container_bigger_than_the_app_sets_the_request() -> None:
    spec = {"containers": [c("100m")], "initContainers": [c("1"), c("200m")]}
    assert pod_requests(spec) == {"cpu": 1000}


def test_sidecars_run_beside_later_init_containers_and_the_app() -> None:
    sidecar = c("300m", restartPolicy="Always")
    spec = {"containers": [c("100m")], "initContainers": [sidecar, c("500m")]}
    # The init container runs with the sidecar (800m); afterwards app + sidecar = 400m.
    assert pod_requests(spec) == {"cpu": 800}
    spec = {"containers": [c("1")], "initContainers": [c("500m"), sidecar]}
    assert pod_requests(spec) == {"cpu": 1300}


def test_overhead_is_added_and_limits_stand_in_for_missing_requests() -> None:
    spec = {
        "containers": [{"name": "a", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": 1}}}],
        "overhead": {"cpu": "250m", "memory": "120Mi"},
    }
    assert pod_requests(spec) == {"cpu": 2250, "nvidia.com/gpu": 1, "memory": 120 * MIB}


def test_requirements_take_the_selector_the_first_required_term_and_the_heaviest_preference() -> None:
    def expr(key: str, *values: str) -> dict[str, Any]:
        return {"key": key, "operator": "In", "values": list(values)}

    spec = {
        "nodeSelector": {"kubernetes.io/arch": "arm64"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [expr(ZONE, "a", "b")]},
                        {"matchExpressions": [expr(ZONE, "c")]},
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [expr(ZONE, "b")]}},
                    {"weight": 50, "preference": {"matchExpressions": [expr(ZONE, "a")]}},
                ],
            }
        },
    }
    assert node_requirements(spec)[ZONE].values == {"a"}
    strict = node_requirements(spec, preferences=False)
    assert strict[ZONE].values == {"a", "b"} and strict["kubernetes.io/arch"].values == {"arm64"}


def test_view_and_host_ports() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}},
        "spec": {"containers": [c("1", ports=[{"containerPort": 80, "hostPort": 8080}])]},
    }
    view = PodView.of(pod)
    assert view.key == "ns/p" and view.requests == {"cpu": 1000}
    assert view.ports == {("0.0.0.0", "TCP", 8080)} == host_ports(pod["spec"])
