"""AL2023 user data: the user's parts, then Karpenter's nodeadm NodeConfig last (pure).

Sources (aws/karpenter-provider-aws v1.14.1): ``pkg/providers/amifamily/bootstrap/nodeadm.go``
``Nodeadm.Script`` / ``getNodeConfigYAML`` / ``generateInlineKubeletConfiguration`` /
``parseUserData``; ``bootstrap/mime/mime.go`` ``NewArchive`` / ``Archive.Serialize``; the shapes of
the golden files ``pkg/providers/launchtemplate/testdata/al2023_*_merged.golden`` (our own inputs).
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from kubespot.aws.userdata import ClusterInfo, UserDataError, render_user_data
from kubespot.aws.userdata_mime import NODE_CONFIG, SHELL_SCRIPT, parse_archive
from kubespot.cloud.errors import NodeClassNotReadyError
from kubespot.model.capacity import AMIFamily
from kubespot.scheduling.api.nodeclass import Kubelet
from kubespot.scheduling.taints import Taint

CA = base64.b64encode(b"my-ca\n").decode()  # bXktY2EK
CLUSTER = ClusterInfo("shop", "https://shop.example", CA, "10.100.0.0/16", "10.100.0.10")
MULTIPART_B = 'Content-Type: multipart/mixed; boundary="b"\n\n'
LABELS = {
    "karpenter.sh/nodepool": "general",
    "karpenter.sh/capacity-type": "spot",
    "karpenter.k8s.aws/ec2nodeclass": "default",
    "team": "web",
    "kubernetes.io/os": "linux",
}


def render(custom: str | None = None, **kw: Any) -> str:
    args: dict[str, Any] = {
        "custom": custom,
        "cluster": CLUSTER,
        "kubelet": None,
        "labels": LABELS,
        "taints": (Taint("dedicated", "NoSchedule", "web"),),
        "max_pods": 29,
    }
    args.update(kw)
    return render_user_data(AMIFamily.AL2023, **args)


def generated(text: str) -> dict[str, Any]:
    parts = parse_archive(text)
    assert parts[-1].content_type == NODE_CONFIG
    assert parts[-1].body.startswith("# Karpenter Generated NodeConfig\n")
    doc = yaml.safe_load(parts[-1].body)
    assert isinstance(doc, dict)
    return doc


def test_without_user_data_one_generated_node_config_golden() -> None:
    """al2023_userdata_unmerged.golden's shape: a MIME archive (boundary ``//``) with one
    ``application/node.eks.aws`` part, the comment line, then the NodeConfig with sorted keys,
    ``metadata: {}``, the decoded-and-re-encoded CA, the CIDR, kubelet config with
    ``registerWithTaints`` and one ``--node-labels`` flag, sorted, without kubernetes.io labels."""
    assert render() == (
        "MIME-Version: 1.0\n"
        'Content-Type: multipart/mixed; boundary="//"\n'
        "\n"
        "--//\n"
        "Content-Type: application/node.eks.aws\n"
        "\n"
        "# Karpenter Generated NodeConfig\n"
        "apiVersion: node.eks.aws/v1alpha1\n"
        "kind: NodeConfig\n"
        "metadata: {}\n"
        "spec:\n"
        "  cluster:\n"
        "    apiServerEndpoint: https://shop.example\n"
        "    certificateAuthority: bXktY2EK\n"
        "    cidr: 10.100.0.0/16\n"
        "    name: shop\n"
        "  containerd: {}\n"
        "  instance:\n"
        "    localStorage: {}\n"
        "  kubelet:\n"
        "    config:\n"
        "      clusterDNS:\n"
        "      - 10.100.0.10\n"
        "      maxPods: 29\n"
        "      registerWithTaints:\n"
        "      - effect: NoSchedule\n"
        "        key: dedicated\n"
        "        value: web\n"
        "      - effect: NoExecute\n"
        "        key: karpenter.sh/unregistered\n"
        "    flags:\n"
        '    - --node-labels="karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=spot,'
        'karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=general,team=web"\n'
        "\n"
        "--//--\n"
    )


def test_mime_user_data_keeps_its_parts_in_order_before_karpenters() -> None:
    """nodeadm.go parseUserData: MIME user data is split into its parts (the Content-Type of each
    kept, CRs removed) and Karpenter's NodeConfig appended last (al2023_mime_userdata_merged)."""
    custom = (
        "MIME-Version: 1.0\r\n"
        'Content-Type: multipart/mixed; boundary="==XYZ=="\r\n'
        "\r\n"
        "preamble is ignored\r\n"
        "--==XYZ==\r\n"
        "Content-Type: application/node.eks.aws\r\n"
        "\r\n"
        "apiVersion: node.eks.aws/v1alpha1\r\n"
        "kind: NodeConfig\r\n"
        "spec:\r\n"
        "  kubelet:\r\n"
        "    config:\r\n"
        "      shutdownGracePeriod: 30s\r\n"
        "--==XYZ==\r\n"
        'Content-Type: text/x-shellscript; charset="us-ascii"\r\n'
        "\r\n"
        "#!/bin/bash\r\n"
        "echo hi\r\n"
        "--==XYZ==--\r\n"
    )
    text = render(custom)
    assert "\r" not in text
    parts = parse_archive(text)
    assert [p.content_type for p in parts] == [NODE_CONFIG, SHELL_SCRIPT, NODE_CONFIG]
    assert parts[0].body.endswith("shutdownGracePeriod: 30s")
    assert parts[1].body == "#!/bin/bash\necho hi"
    assert generated(text)["spec"]["cluster"]["name"] == "shop"


@pytest.mark.parametrize(
    ("custom", "content_type"),
    [
        ("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n", NODE_CONFIG),
        ("#!/bin/bash\necho hello\n", SHELL_SCRIPT),
        ("- a list\n- is no NodeConfig\n", SHELL_SCRIPT),
        ("key: [unclosed\n", SHELL_SCRIPT),
        ("# only a comment\n", NODE_CONFIG),  # sigs.k8s.io/yaml reads null into a map: no error
    ],
)
def test_plain_user_data_is_one_part_yaml_mapping_or_shell(custom: str, content_type: str) -> None:
    """nodeadm.go parseUserData: not MIME → one part, ``application/node.eks.aws`` when it reads
    as a YAML mapping (yaml.Unmarshal into map[string]any succeeds), a shell script otherwise."""
    parts = parse_archive(render(custom))
    assert len(parts) == 2
    assert parts[0].content_type == content_type
    assert parts[0].body == custom


def test_kubelet_block_lands_as_kubelet_config_json_keys() -> None:
    """nodeadm.go generateInlineKubeletConfiguration: the EC2NodeClass kubelet block marshalled with
    its JSON keys (KubeletConfiguration's), durations as Go prints them, plus registerWithTaints."""
    kubelet = Kubelet(
        cluster_dns=("10.0.0.53",),
        max_pods=110,
        pods_per_core=10,
        system_reserved={"cpu": "100m", "memory": "100Mi"},
        kube_reserved={"cpu": "200m"},
        eviction_hard={"memory.available": "5%"},
        eviction_soft={"memory.available": "10%"},
        eviction_soft_grace_period={"memory.available": "90s"},
        eviction_max_pod_grace_period=60,
        image_gc_high_threshold_percent=85,
        image_gc_low_threshold_percent=80,
        cpu_cfs_quota=False,
    )
    config = generated(render(kubelet=kubelet))["spec"]["kubelet"]["config"]
    assert config == {
        "clusterDNS": ["10.0.0.53"],
        "maxPods": 110,
        "podsPerCore": 10,
        "systemReserved": {"cpu": "100m", "memory": "100Mi"},
        "kubeReserved": {"cpu": "200m"},
        "evictionHard": {"memory.available": "5%"},
        "evictionSoft": {"memory.available": "10%"},
        "evictionSoftGracePeriod": {"memory.available": "1m30s"},
        "evictionMaxPodGracePeriod": 60,
        "imageGCHighThresholdPercent": 85,
        "imageGCLowThresholdPercent": 80,
        "cpuCFSQuota": False,
        "registerWithTaints": [
            {"effect": "NoSchedule", "key": "dedicated", "value": "web"},
            {"effect": "NoExecute", "key": "karpenter.sh/unregistered"},
        ],
    }


def test_raid0_sets_the_local_storage_strategy() -> None:
    """nodeadm.go getNodeConfigYAML: instanceStorePolicy RAID0 → spec.instance.localStorage.strategy."""
    doc = generated(render(instance_store_raid0=True))
    assert doc["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}


def test_a_long_label_flag_stays_on_one_line() -> None:
    """The flag is one YAML string (Go's marshaller does not fold it): a reader taking lines, as
    nodeadm's users' scripts do, sees it whole."""
    many = {f"example.com/label-{i:03d}": "x" * 40 for i in range(20)}
    text = render(labels=many)
    flag = next(line for line in text.splitlines() if "--node-labels=" in line)
    assert flag.count("example.com/label-") == 20


def test_no_cluster_cidr_is_node_class_not_ready() -> None:
    """nodeadm.go getNodeConfigYAML: without the cluster CIDR, NewNodeClassNotReadyError
    ("resolving cluster CIDR"), checked before the user data is parsed."""
    no_cidr = ClusterInfo("shop", "https://shop.example", CA, "")
    with pytest.raises(NodeClassNotReadyError, match="cluster CIDR"):
        render("MIME-Version: 1.0\nbroken", cluster=no_cidr)


def test_a_ca_bundle_that_is_no_base64_is_a_user_data_error() -> None:
    """nodeadm.go getNodeConfigYAML: "decoding CABundle" when the bundle does not decode."""
    bad = ClusterInfo("shop", "https://shop.example", "not base64!", "10.100.0.0/16")
    with pytest.raises(UserDataError, match="CABundle"):
        render(cluster=bad)


@pytest.mark.parametrize(
    ("custom", "why"),
    [
        ("MIME-Version: 1.0\n\n--x\n\nbody\n--x--\n", "no Content-Type"),
        ("Content-Type: text/plain\n\nhello\n", "not multipart"),
        ("Content-Type: multipart/mixed\n\n--x\n\nbody\n--x--\n", "no boundary"),
        (
            f"{MULTIPART_B}--b\nContent-Type: text/x-shellscript\n\necho hi\n",
            "truncated",
        ),
        ('Content-Type: multipart/mixed; boundary="b"\n\nno delimiter anywhere\n', "no part delimited"),
        (
            'Content-Type: multipart/mixed; boundary="b"\n\n--b\nnot a header line\n--b--\n',
            "malformed MIME part",
        ),
    ],
)
def test_broken_mime_user_data_is_a_user_data_error(custom: str, why: str) -> None:
    """mime.go NewArchive / getReader: no Content-Type, not multipart, a part without its header
    block or a body that runs into the end fail ("parsing custom UserData"). An archive without any
    delimiter, which Go's reader reads as empty, is an error here too (kubespot: a user's user data
    must not vanish silently)."""
    with pytest.raises(UserDataError, match=why):
        render(custom)


def test_a_final_delimiter_without_closing_dashes_ends_the_archive() -> None:
    """al2023_mime_userdata_input.golden ends with ``--//`` and no ``--//--``: Go's reader finds no
    part headers after it and stops (io.EOF), so Karpenter accepts it and so does kubespot."""
    custom = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n'
        "--//\nContent-Type: text/x-shellscript\n\necho a\n--//\n"
    )
    parts = parse_archive(render(custom))
    assert [p.body for p in parts[:-1]] == ["echo a"]


def test_taint_values_that_look_like_other_yaml_types_stay_strings() -> None:
    """corev1.Taint's value is a string: YAML written for nodeadm (which reads it through
    sigs.k8s.io/yaml, YAML 1.1 resolvers) must quote ``true``, ``0x1F`` or ``1.5`` so they stay
    strings in ``registerWithTaints``."""
    taints = [Taint(f"k{i}", "NoSchedule", v) for i, v in enumerate(["true", "0x1F", "1.5", "null", "~"])]
    config = generated(render(taints=taints))["spec"]["kubelet"]["config"]
    assert [t.get("value") for t in config["registerWithTaints"][:-1]] == ["true", "0x1F", "1.5", "null", "~"]
