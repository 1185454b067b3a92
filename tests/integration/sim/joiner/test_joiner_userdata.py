"""What the joiner reads from user data, and what the kubelet would refuse to start with (pure)."""

from __future__ import annotations

import base64

from userdata_samples import AL2_SCRIPT, AL2023_MIME, BOTTLEROCKET_TOML

from kubespot.sim.joiner import parse
from kubespot.sim.joiner.capacity import InstanceTypeFacts, resources
from kubespot.sim.joiner.kubelet_flags import refusal


def test_al2023_nodeconfig_parts_merge_in_order() -> None:
    """nodeadm merges every NodeConfig part; Karpenter's last (aws:pkg/providers/amifamily/bootstrap
    nodeadm.go ``Nodeadm.Script``); repeated ``--node-labels`` add up, later keys win
    (k8s.io/component-base cli/flag ``MapStringString.Set``); ``registerWithTaints`` and ``maxPods``
    from the kubelet config."""
    boot = parse(AL2023_MIME.encode())
    assert (boot.family, boot.problem, boot.refusal) == ("AL2023", "", "")
    assert boot.labels == {
        "karpenter.sh/capacity-type": "spot",
        "karpenter.sh/do-not-sync-taints": "true",
        "karpenter.sh/nodepool": "default",
        "team": "checkout",  # the generated part's value wins over the custom part's "payments"
    }
    assert boot.taints == [
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
        {"key": "dedicated", "value": "payments", "effect": "NoSchedule"},
    ]
    assert boot.max_pods == 17


def test_al2023_base64_part_and_bare_nodeconfig() -> None:
    """A base64-encoded MIME part is decoded as email does; a bare NodeConfig (no MIME) is read too."""
    body = (
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"
        "spec:\n  kubelet:\n    flags: ['--node-labels=a=1']\n"
    )
    mime = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="XX"\n\n--XX\n'
        "Content-Type: application/node.eks.aws\nContent-Transfer-Encoding: base64\n\n"
        f"{base64.b64encode(body.encode()).decode()}\n--XX--\n"
    )
    assert parse(mime.encode()).labels == {"a": "1"}
    assert parse(body.encode()).labels == {"a": "1"}


def test_al2_bootstrap_kubelet_extra_args() -> None:
    """AL2: ``/etc/eks/bootstrap.sh ... --kubelet-extra-args '--node-labels=... --register-with-taints=...'``
    (aws:pkg/providers/amifamily/bootstrap eksbootstrap.go ``EKS.Script``); taints as k8s
    pkg/util/taints ``parseTaint`` reads ``key=value:Effect`` and ``key:Effect``."""
    boot = parse(AL2_SCRIPT.encode())
    assert (boot.family, boot.problem, boot.refusal) == ("AL2", "", "")
    assert boot.labels == {"karpenter.sh/capacity-type": "on-demand", "karpenter.sh/nodepool": "db"}
    assert boot.taints == [
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
        {"key": "db", "value": "only", "effect": "NoSchedule"},
    ]
    assert boot.max_pods == 20


def test_bottlerocket_toml_settings() -> None:
    """Bottlerocket: ``settings.kubernetes.node-labels``, ``node-taints`` (a list of "value:Effect" per
    key, the unregistered taint as ":NoExecute") and ``max-pods`` (aws:pkg/providers/amifamily/bootstrap
    bottlerocket.go ``Bottlerocket.Script``)."""
    boot = parse(BOTTLEROCKET_TOML.encode())
    assert (boot.family, boot.problem, boot.refusal) == ("Bottlerocket", "", "")
    assert boot.labels == {"karpenter.sh/capacity-type": "spot", "karpenter.sh/nodepool": "br"}
    assert boot.taints == [
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
        {"key": "gpu", "value": "true", "effect": "NoSchedule"},
        {"key": "gpu", "value": "true", "effect": "NoExecute"},
    ]
    assert boot.max_pods == 11


def test_unreadable_user_data_is_a_problem_not_a_refusal() -> None:
    """No known family (or none at all): the node joins without extra labels, the reason is kept."""
    for data in (b"#!/bin/bash\necho hello\n", b"\xff\xfe", None, b"key: [unclosed"):
        boot = parse(data)
        assert boot.problem and not boot.refusal and not boot.labels and not boot.taints, data


def test_malformed_kubelet_flags_are_refusals() -> None:
    """A label without ``=`` or a taint with an unknown effect fails the kubelet's flag parsing."""
    bad_label = "kind: NodeConfig\nspec:\n  kubelet:\n    flags: ['--node-labels=a=1,oops']\n"
    bad_taint = "kind: NodeConfig\nspec:\n  kubelet:\n    flags: ['--register-with-taints=a=b:Sometimes']\n"
    assert "must be formatted as key=value" in parse(bad_label.encode()).refusal
    assert "invalid taint spec: a=b:Sometimes" in parse(bad_taint.encode()).refusal


def test_kubelet_refuses_labels_in_kubernetes_domains() -> None:
    """cmd/kubelet/app/options/options.go ``ValidateKubeletFlags`` with pkg/kubelet/apis
    well_known_labels.go ``IsKubeletLabel``: kubernetes.io / k8s.io labels (and subdomains) only
    from the allowed set or the kubelet.kubernetes.io / node.kubernetes.io (sub)domains."""
    allowed = {
        "node.kubernetes.io/instance-type": "m5.large",
        "example.node.kubernetes.io/role": "web",
        "kubelet.kubernetes.io/x": "1",
        "topology.kubernetes.io/zone": "us-east-1a",
        "karpenter.sh/nodepool": "default",
        "kubernetes.io.example.com/x": "other",  # a different domain
    }
    assert refusal(allowed) == ""
    message = refusal({**allowed, "node-role.kubernetes.io/worker": "", "x.k8s.io/y": "z"})
    assert message.startswith(
        "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: "
        "[node-role.kubernetes.io/worker x.k8s.io/y]\n--node-labels in the 'kubernetes.io' namespace "
        "must begin with an allowed prefix (kubelet.kubernetes.io, node.kubernetes.io)"
    )
    assert refusal({"node-restriction.kubernetes.io/pool": "a"}).startswith("unknown 'kubernetes.io'")
    assert refusal({"bad key!": "v"}).startswith("invalid node labels: 'bad key!'")


def test_capacity_from_instance_type_and_max_pods() -> None:
    """Pods: the user data's maxPods, else the EKS AMI's ENI formula (m5.large: 3 x (10 - 1) + 2 = 29);
    allocatable CPU less the AMI's kube-reserved (70m for 2 vCPUs)."""
    m5 = InstanceTypeFacts("m5.large", vcpu=2, memory_mib=8192, arch="amd64", enis=3, ipv4_per_eni=10)
    capacity, allocatable = resources(m5, None)
    assert (capacity["cpu"], capacity["pods"], allocatable["cpu"], allocatable["pods"]) == (
        "2",
        "29",
        "1930m",
        "29",
    )
    assert resources(m5, 110)[0]["pods"] == "110"
    memory = int(capacity["memory"].removesuffix("Ki"))
    assert 7_500_000 < memory < 8192 * 1024
    assert int(allocatable["memory"].removesuffix("Ki")) == memory - (11 * 29 + 255 + 100) * 1024
