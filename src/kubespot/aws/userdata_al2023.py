"""AL2023 user data: the user's parts, then Karpenter's nodeadm ``NodeConfig`` last (pure).

As aws/karpenter-provider-aws ``pkg/providers/amifamily/bootstrap/nodeadm.go`` (``Nodeadm.Script``,
``getNodeConfigYAML``, ``generateInlineKubeletConfiguration``, ``parseUserData``) and its golden files
``pkg/providers/launchtemplate/testdata/al2023_*``: a MIME archive whose parts are the user's
``spec.userData`` (a MIME archive kept part by part with only its Content-Type header, a YAML
mapping as one NodeConfig part, anything else as one shell-script part) and then the generated
NodeConfig. nodeadm merges NodeConfigs in order, so the last one (Karpenter's cluster details,
kubelet config, taints and labels) wins over what the user wrote.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import yaml

from kubespot.cloud.errors import NodeClassNotReadyError

from .userdata_mime import NODE_CONFIG, SHELL_SCRIPT, Part, is_mime, parse_archive, serialize
from .userdata_options import BootstrapOptions, UserDataError, grace_periods, node_labels_arg

__all__ = ["render_al2023"]

HEADER = "# Karpenter Generated NodeConfig\n"


def _custom_parts(custom: str | None) -> list[Part]:
    if not custom:
        return []
    if is_mime(custom):
        # Only the Content-Type survives (mime.Archive keeps entries of type and content).
        return [Part.of(p.content_type, p.body) for p in parse_archive(custom)]
    try:
        # sigs.k8s.io/yaml into a map: a mapping, or a document that is empty or only comments.
        doc = yaml.safe_load(custom)
    except yaml.YAMLError:
        doc = False
    if doc is None or isinstance(doc, dict):
        return [Part.of(NODE_CONFIG, custom)]
    return [Part.of(SHELL_SCRIPT, custom)]


def _kubelet_config(opts: BootstrapOptions) -> dict[str, Any]:
    """The kubelet block as KubeletConfiguration JSON keys, plus ``registerWithTaints``."""
    k = opts.kubelet
    pairs: list[tuple[str, Any]] = [
        ("clusterDNS", list(k.cluster_dns) if k.cluster_dns else None),
        ("maxPods", k.max_pods),
        ("podsPerCore", k.pods_per_core),
        ("systemReserved", dict(k.system_reserved) or None),
        ("kubeReserved", dict(k.kube_reserved) or None),
        ("evictionHard", dict(k.eviction_hard) or None),
        ("evictionSoft", dict(k.eviction_soft) or None),
        ("evictionSoftGracePeriod", grace_periods(k) or None),
        ("evictionMaxPodGracePeriod", k.eviction_max_pod_grace_period),
        ("imageGCHighThresholdPercent", k.image_gc_high_threshold_percent),
        ("imageGCLowThresholdPercent", k.image_gc_low_threshold_percent),
        ("cpuCFSQuota", k.cpu_cfs_quota),
    ]
    config = {key: value for key, value in pairs if value is not None}
    # corev1.Taint as JSON: value omitted when empty.
    config["registerWithTaints"] = [
        {"effect": t.effect, "key": t.key, **({"value": t.value} if t.value else {})} for t in opts.taints
    ]
    return config


def _ca(bundle: str) -> str:
    # The NodeConfig field is bytes: Karpenter decodes the bundle and YAML prints it base64 again,
    # so a bundle that is not base64 fails here, not on the node.
    try:
        return base64.b64encode(base64.b64decode(bundle, validate=True)).decode()
    except (binascii.Error, ValueError) as e:
        raise UserDataError(f"decoding CABundle, {e}") from e


def node_config(opts: BootstrapOptions) -> str:
    """Karpenter's NodeConfig document, keys sorted as Go's YAML marshalling prints them."""
    cluster: dict[str, Any] = {
        "apiServerEndpoint": opts.cluster.endpoint,
        "name": opts.cluster.name,
    }
    if opts.cluster.ca_bundle:
        cluster["certificateAuthority"] = _ca(opts.cluster.ca_bundle)
    if not opts.cluster.cidr:
        # nodeadm needs the service CIDR; Karpenter reports the NodeClass as not ready.
        raise NodeClassNotReadyError("resolving cluster CIDR")
    cluster["cidr"] = opts.cluster.cidr
    kubelet: dict[str, Any] = {"config": _kubelet_config(opts)}
    if arg := node_labels_arg(opts.labels):
        kubelet["flags"] = [arg]
    doc = {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "metadata": {},
        "spec": {
            "cluster": cluster,
            "containerd": {},
            "instance": {"localStorage": {"strategy": "RAID0"} if opts.instance_store_raid0 else {}},
            "kubelet": kubelet,
        },
    }
    # width: never fold the long --node-labels flag over lines.
    return HEADER + yaml.safe_dump(doc, sort_keys=True, default_flow_style=False, width=1 << 30)


def render_al2023(opts: BootstrapOptions) -> str:
    generated = node_config(opts)  # first, as Karpenter: a missing CIDR is reported before bad user data
    return serialize([*_custom_parts(opts.custom), Part.of(NODE_CONFIG, generated)])
