"""Contract: the joiner reads the user data the product renders (kubespot.aws.userdata) as a kubelet would.

The simulator never imports the product; this test joins them, so a change in either that breaks
the other's reading of user data fails here rather than in the sandbox.
"""

from __future__ import annotations

import pytest

from kubespot.aws.userdata import ClusterInfo, render_user_data
from kubespot.model.capacity import AMIFamily
from kubespot.scheduling.taints import Taint
from kubespot.sim.joiner import parse
from kubespot.sim.joiner.kubelet_flags import refusal

CLUSTER = ClusterInfo(
    name="demo", endpoint="https://demo.example", ca_bundle="Q0E=", cidr="10.100.0.0/16", dns_ip="10.100.0.10"
)
LABELS = {
    "karpenter.sh/nodepool": "default",
    "karpenter.sh/capacity-type": "spot",
    "team": "checkout",
    "node-role.kubernetes.io/worker": "",  # dropped by the product (RejectForbiddenLabels)
}


@pytest.mark.parametrize("family", [AMIFamily.AL2023, AMIFamily.AL2, AMIFamily.BOTTLEROCKET])
def test_the_kubelet_gets_the_claims_labels_taints_and_max_pods(family: AMIFamily) -> None:
    """Karpenter's renderings (aws:pkg/providers/amifamily/bootstrap nodeadm.go, eksbootstrap.go,
    bottlerocket.go) read back: the NodeClaim's labels with ``karpenter.sh/do-not-sync-taints``,
    its taints then ``karpenter.sh/unregistered:NoExecute``, the launch group's max pods; and
    nothing the kubelet would refuse to start with (cmd/kubelet ``ValidateKubeletFlags``)."""
    custom = "#!/bin/bash\necho custom\n" if family is not AMIFamily.BOTTLEROCKET else None
    text = render_user_data(
        family,
        custom,
        CLUSTER,
        None,
        LABELS,
        [Taint("dedicated", "NoSchedule", "payments")],
        max_pods=29,
    )
    boot = parse(text.encode())
    assert (boot.family, boot.problem, boot.refusal) == (str(family), "", "")
    assert boot.labels == {
        "karpenter.sh/nodepool": "default",
        "karpenter.sh/capacity-type": "spot",
        "karpenter.sh/do-not-sync-taints": "true",
        "team": "checkout",
    }
    assert boot.taints == [
        {"key": "dedicated", "value": "payments", "effect": "NoSchedule"},
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
    ]
    assert boot.max_pods == 29
    assert refusal(boot.labels) == ""
