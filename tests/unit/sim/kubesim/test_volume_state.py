"""VolumeBinding / VolumeZone state for a pod's claims (controllers/scheduler/volumes.py), pure."""

from __future__ import annotations

from typing import Any

from kubespot.sim.kubesim.controllers.scheduler.nodes import Usage, node_info
from kubespot.sim.kubesim.controllers.scheduler.volumes import REASON_ZONE_CONFLICT, pre_filter
from kubespot.sim.kubesim.testing import node


def test_volume_zone_matches_beta_labels_to_ga_and_passes_nodes_without_zone_labels() -> None:
    """pkg/scheduler/framework/plugins/volumezone/volume_zone.go Filter: a node with no topology
    label is fine; a PV's beta zone label is compared with the node's GA label; "__" separates
    several allowed zones."""
    objects: dict[tuple[str, str], Any] = {
        ("persistentvolumeclaims", "data"): {"metadata": {"name": "data"}, "spec": {"volumeName": "pv"}},
        ("persistentvolumes", "pv"): {
            "metadata": {"name": "pv", "labels": {"failure-domain.beta.kubernetes.io/zone": "a__b"}},
            "spec": {},
        },
    }
    state = pre_filter(lambda plural, ns, name: objects.get((plural, name)), "default", ("data",))
    assert state is not None and not state.pre_filter

    def on(name: str, labels: dict[str, str]) -> str | None:
        return state.reason(node_info(node(name, labels=labels, ready=True), Usage()))

    assert on("plain", {}) is None
    assert on("in-b", {"topology.kubernetes.io/zone": "b"}) is None
    assert on("in-c", {"topology.kubernetes.io/zone": "c"}) == REASON_ZONE_CONFLICT
