"""What every family's user data is built from: labels, taints, kubelet defaults, Custom (pure).

Sources (aws/karpenter-provider-aws v1.14.1): ``pkg/providers/amifamily/resolver.go``
``resolveLaunchTemplates`` (maxPods default, unregistered taint), ``defaultClusterDNS``,
``RejectForbiddenLabels`` / ``isRestrictedLabel``; ``pkg/providers/launchtemplate/launchtemplate.go``
``InjectDoNotSyncTaintsLabel``; ``pkg/providers/amifamily/bootstrap/custom.go`` ``Custom.Script``;
``bootstrap/bootstrap.go`` ``kubeletExtraArgs``; Go ``time.Duration.String`` for the grace periods.
"""

from __future__ import annotations

import base64

import pytest

from kubespot.aws.userdata import (
    DO_NOT_SYNC_TAINTS,
    UNREGISTERED_TAINT,
    ClusterInfo,
    UserDataError,
    kubelet_labels,
    render_user_data,
    user_data_taints,
)
from kubespot.aws.userdata_options import go_duration
from kubespot.model.capacity import AMIFamily
from kubespot.scheduling.api.nodeclass import Kubelet
from kubespot.scheduling.taints import Taint

CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
CLUSTER = ClusterInfo(
    "prod", "https://ABC.gr7.eu-west-1.eks.amazonaws.com", CA, "172.20.0.0/16", "172.20.0.10"
)
NON_CUSTOM = [f for f in AMIFamily if f is not AMIFamily.CUSTOM]


def render(family: AMIFamily, **kw: object) -> str:
    args: dict[str, object] = {
        "custom": None,
        "cluster": CLUSTER,
        "kubelet": None,
        "labels": {"karpenter.sh/capacity-type": "spot"},
        "taints": (),
        "max_pods": 58,
    }
    args.update(kw)
    return render_user_data(family, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "kept"),
    [
        ("team", True),
        ("example.com/team", True),
        ("karpenter.sh/capacity-type", True),
        ("karpenter.k8s.aws/ec2nodeclass", True),
        ("kubernetes.io/arch", False),
        ("node.kubernetes.io/instance-type", False),
        ("topology.kubernetes.io/zone", False),
        ("node-restriction.kubernetes.io/tier", False),
        ("k8s.io/anything", False),
        ("foo.k8s.io/bar", False),
        ("notkubernetes.io/x", True),  # a suffix of the domain, not a subdomain
    ],
)
def test_kubelet_labels_drops_the_kubernetes_domains(key: str, kept: bool) -> None:
    """resolver.go RejectForbiddenLabels / isRestrictedLabel: a label whose domain is, or is under,
    kubernetes.io, k8s.io or node-restriction.kubernetes.io is dropped (kubelet sets the
    well-known ones itself; kubernetes cmd/kubelet/app/options/options.go ValidateKubeletFlags
    refuses to start with unknown ones, plugin/pkg/admission/noderestriction the rest)."""
    assert (key in kubelet_labels({key: "v"})) is kept


def test_unregistered_taint_appended_once_matched_on_key_and_effect() -> None:
    """resolver.go resolveLaunchTemplates: NodeClaim taints then startup taints, plus
    ``karpenter.sh/unregistered:NoExecute`` unless one matches it (corev1 ``MatchTaint``: key and
    effect, the value ignored)."""
    given = (Taint("dedicated", "NoSchedule", "gpu"), Taint("cilium/agent-not-ready", "NoExecute"))
    assert user_data_taints(given) == (*given, UNREGISTERED_TAINT)
    with_value = (Taint("karpenter.sh/unregistered", "NoExecute", "x"),)
    assert user_data_taints(with_value) == with_value
    other_effect = (Taint("karpenter.sh/unregistered", "NoSchedule"),)
    assert user_data_taints(other_effect) == (*other_effect, UNREGISTERED_TAINT)


@pytest.mark.parametrize("family", NON_CUSTOM)
def test_every_family_but_custom_registers_with_the_unregistered_taint_and_do_not_sync(
    family: AMIFamily,
) -> None:
    """launchtemplate.go InjectDoNotSyncTaintsLabel (every family but Custom) and the resolver's
    unregistered taint: both reach the user data whatever the family."""
    text = render(family, labels={"team": "a", "kubernetes.io/arch": "arm64"})
    assert f"{DO_NOT_SYNC_TAINTS}=true" in text or f'"{DO_NOT_SYNC_TAINTS}" = "true"' in text
    assert "karpenter.sh/unregistered" in text
    assert "kubernetes.io/arch" not in text


def test_custom_is_passed_through_unchanged() -> None:
    """bootstrap/custom.go Custom.Script: the user data as written, nothing added (no unregistered
    taint, no labels: the user's image must register them itself)."""
    custom = "#!/bin/bash\n/opt/join --cluster prod\r\n"
    assert render(AMIFamily.CUSTOM, custom=custom, taints=[Taint("a", "NoSchedule")]) == custom
    assert render(AMIFamily.CUSTOM, custom=None) == ""


def test_max_pods_comes_from_the_launch_group_unless_the_kubelet_block_sets_it() -> None:
    """resolver.go resolveLaunchTemplates: ``kubelet.maxPods`` when set, else the group's pods."""
    assert "--max-pods=58" in render(AMIFamily.AL2)
    assert "--max-pods=20" in render(AMIFamily.AL2, kubelet=Kubelet(max_pods=20))


def test_cluster_dns_from_the_kubelet_block_wins_over_the_cluster_dns_ip() -> None:
    """resolver.go defaultClusterDNS: the cluster's kube-dns IP only when ``clusterDNS`` is unset."""
    assert "--dns-cluster-ip '172.20.0.10'" in render(AMIFamily.AL2)
    given = render(AMIFamily.AL2, kubelet=Kubelet(cluster_dns=("10.0.0.53", "10.0.0.54")))
    assert "--dns-cluster-ip '10.0.0.53'" in given
    no_dns = ClusterInfo("prod", "https://x", CA, "172.20.0.0/16", None)
    assert "--dns-cluster-ip" not in render(AMIFamily.AL2, cluster=no_dns)


@pytest.mark.parametrize(
    ("given", "go"),
    [
        ("90s", "1m30s"),
        ("1h", "1h0m0s"),
        ("2m", "2m0s"),
        ("1.5s", "1.5s"),
        ("300ms", "300ms"),
        ("1500us", "1.5ms"),
        ("0", "0s"),
        ("1h90m", "2h30m0s"),
        ("-30s", "-30s"),
    ],
)
def test_grace_periods_are_printed_as_go_prints_a_duration(given: str, go: str) -> None:
    """metav1.Duration round trip (Go time.ParseDuration then Duration.String), which is what
    Karpenter writes for ``evictionSoftGracePeriod``."""
    assert go_duration(given) == go


def test_a_grace_period_that_is_no_duration_is_a_user_data_error() -> None:
    """time.ParseDuration refuses it (the CRD would have refused the EC2NodeClass)."""
    kubelet = Kubelet(
        eviction_soft={"memory.available": "500Mi"}, eviction_soft_grace_period={"memory.available": "soon"}
    )
    with pytest.raises(UserDataError, match="invalid duration"):
        render(AMIFamily.AL2023, kubelet=kubelet)
