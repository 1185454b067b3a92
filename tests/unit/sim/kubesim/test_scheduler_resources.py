"""The scheduler's pure resource and host-port accounting (controllers/scheduler/resources.py, ports.py)."""

from __future__ import annotations

from collections import Counter

from kubespot.sim.kubesim.controllers.scheduler.nodes import Usage
from kubespot.sim.kubesim.controllers.scheduler.ports import conflicts, host_ports
from kubespot.sim.kubesim.controllers.scheduler.resources import allocatable_of, insufficient, pod_request


def _c(name: str, restart: str | None = None, **requests: str) -> dict[str, object]:
    c: dict[str, object] = {"name": name, "resources": {"requests": requests}}
    if restart:
        c["restartPolicy"] = restart
    return c


def test_requests_follow_pod_requests_with_sidecars_init_containers_and_overhead() -> None:
    """k8s.io/component-helpers resource/helpers.go PodRequests: sidecars add to the app sum and to
    every later init container; the pod takes the larger of the sum and the largest init container;
    overhead on top. Scalars (nvidia.com/gpu, hugepages-2Mi) and ephemeral-storage count alike."""
    spec = {
        "containers": [_c("app", cpu="100m", **{"nvidia.com/gpu": "1", "ephemeral-storage": "1Gi"})],
        "initContainers": [
            _c("init1", cpu="500m"),
            _c("sidecar", "Always", cpu="200m", **{"hugepages-2Mi": "4Mi"}),
            _c("init2", cpu="400m", **{"nvidia.com/gpu": "2"}),
        ],
        "overhead": {"cpu": "50m"},
    }
    r = pod_request(spec)
    # app sum 100m + sidecar 200m = 300m; init2 with the sidecar before it 600m wins; + 50m overhead.
    assert r.cpu == 650
    assert r.eph == 1024**3
    assert dict(r.scalars) == {"hugepages-2Mi": 4 * 1024**2, "nvidia.com/gpu": 2}
    # Scoring counts 100m / 200Mi for a container without requests (schedutil.DefaultMilliCPURequest).
    assert pod_request({"containers": [{"name": "x"}]}).nz_cpu == 100


def test_limits_default_missing_requests_and_every_insufficient_resource_is_reported() -> None:
    """pkg/scheduler/framework/plugins/noderesources/fit.go fitsRequest: one "Insufficient <name>"
    per resource short on the node (pods first), zero requests never fail."""
    spec = {
        "containers": [
            {"name": "a", "resources": {"limits": {"cpu": "2", "example.com/foo": "3"}, "requests": {}}}
        ]
    }
    req = pod_request(spec)
    alloc = allocatable_of({"cpu": "1", "memory": "1Gi", "pods": "1", "example.com/foo": "2"})
    used = Usage(pods=1)
    assert insufficient(req, alloc, used) == [
        "Too many pods",
        "Insufficient cpu",
        "Insufficient example.com/foo",
    ]
    assert insufficient(pod_request({"containers": [{"name": "b"}]}), alloc, Usage()) == []


def test_host_ports_conflict_like_host_port_info() -> None:
    """pkg/scheduler/framework/types.go HostPortInfo.CheckConflict: 0.0.0.0 conflicts with any IP on
    the same protocol and port; different protocols never conflict; containerPort alone is no host port."""
    spec = {
        "containers": [
            {"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}]},
        ]
    }
    wanted = host_ports(spec)
    assert wanted == (("TCP", "0.0.0.0", 8080),)
    assert conflicts(wanted, Counter({("TCP", "10.0.0.1", 8080): 1}))
    assert not conflicts(wanted, Counter({("UDP", "0.0.0.0", 8080): 1}))
    specific = (("TCP", "10.0.0.2", 8080),)
    assert conflicts(specific, Counter({("TCP", "0.0.0.0", 8080): 1}))
    assert not conflicts(specific, Counter({("TCP", "10.0.0.1", 8080): 1}))
