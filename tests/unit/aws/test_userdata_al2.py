"""AL2 (``bootstrap.sh`` in MIME) and Windows (PowerShell) user data (pure).

Sources (aws/karpenter-provider-aws v1.14.1): ``pkg/providers/amifamily/bootstrap/eksbootstrap.go``
``EKS.Script`` / ``eksBootstrapScript`` / ``mergeCustomUserData`` / ``mimeify`` /
``copyCustomUserDataParts`` / ``isIPv6``; ``bootstrap/bootstrap.go`` ``kubeletExtraArgs`` /
``nodeLabelArg`` / ``nodeTaintArg`` / ``joinParameterArgs``; ``bootstrap/windows.go``
``Windows.Script``; the shapes of the golden files ``pkg/providers/launchtemplate/testdata/al2_*``
and ``windows_userdata_merged.golden`` (our own inputs).
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from kubespot.aws.userdata import ClusterInfo, UserDataError, render_user_data
from kubespot.aws.userdata_al2 import is_ipv6
from kubespot.aws.userdata_mime import SHELL_SCRIPT, parse_archive
from kubespot.model.capacity import AMIFamily
from kubespot.scheduling.api.nodeclass import Kubelet
from kubespot.scheduling.taints import Taint

CA = base64.b64encode(b"my-ca\n").decode()  # bXktY2EK
CLUSTER = ClusterInfo("shop", "https://shop.example", CA, "", "10.100.0.10")
LABELS = {
    "karpenter.sh/capacity-type": "on-demand",
    "team": "web",
    "node.kubernetes.io/instance-type": "m5.large",
}


def render(family: AMIFamily = AMIFamily.AL2, custom: str | None = None, **kw: Any) -> str:
    args: dict[str, Any] = {
        "custom": custom,
        "cluster": CLUSTER,
        "kubelet": None,
        "labels": LABELS,
        "taints": (Taint("dedicated", "NoSchedule", "web"),),
        "max_pods": 29,
    }
    args.update(kw)
    return render_user_data(family, **args)


BOOTSTRAP = (
    "#!/bin/bash -xe\n"
    "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n"
    "/etc/eks/bootstrap.sh 'shop' --apiserver-endpoint 'https://shop.example' "
    "--b64-cluster-ca 'bXktY2EK' \\\n"
    "--dns-cluster-ip '10.100.0.10' \\\n"
    "--use-max-pods false \\\n"
    "--kubelet-extra-args '--node-labels=\"karpenter.sh/capacity-type=on-demand,"
    'karpenter.sh/do-not-sync-taints=true,team=web" '
    '--register-with-taints="dedicated=web:NoSchedule,karpenter.sh/unregistered:NoExecute" --max-pods=29\''
)


def test_without_user_data_one_bootstrap_part_golden() -> None:
    """al2_userdata_unmerged.golden's shape: MIME (boundary ``//``), one shell part; bootstrap.sh
    takes the cluster, endpoint and CA without ``=``, one argument per continued line, the kubelet
    flags (labels sorted, kubernetes.io dropped; taints as ``key=value:Effect``) in one quoted
    ``--kubelet-extra-args``."""
    assert render() == (
        "MIME-Version: 1.0\n"
        'Content-Type: multipart/mixed; boundary="//"\n'
        "\n"
        "--//\n"
        'Content-Type: text/x-shellscript; charset="us-ascii"\n'
        "\n" + BOOTSTRAP + "\n--//--\n"
    )


def test_plain_script_becomes_the_first_part() -> None:
    """eksbootstrap.go mimeify: user data that is not MIME is wrapped as one shell part, kept
    byte for byte, before Karpenter's (al2_no_mime_userdata_input → al2_userdata_merged)."""
    custom = "#!/bin/bash\necho 'custom'\n"
    parts = parse_archive(render(custom=custom))
    assert [(p.content_type, p.body) for p in parts] == [(SHELL_SCRIPT, custom), (SHELL_SCRIPT, BOOTSTRAP)]


def test_mime_user_data_keeps_every_header_of_its_parts() -> None:
    """eksbootstrap.go copyCustomUserDataParts: each part re-written with all its headers (names
    canonical, sorted as Go's CreatePart writes them); a ``Content-Type:``-first archive
    (al2_userdata_content_type_first_input) is recognised too."""
    custom = (
        'Content-Type: multipart/mixed; boundary="B"\n'
        "MIME-Version: 1.0\n"
        "\n"
        "--B\n"
        "content-type: text/cloud-config\n"
        'Content-Disposition: attachment; filename="c.cfg"\n'
        "\n"
        "#cloud-config\n"
        "packages: [jq]\n"
        "\n"
        "--B--"
    )
    text = render(custom=custom)
    assert (
        '--//\nContent-Disposition: attachment; filename="c.cfg"\nContent-Type: text/cloud-config\n\n'
        "#cloud-config\npackages: [jq]\n\n--//\n"
    ) in text
    assert len(parse_archive(text)) == 2


def test_quoted_printable_parts_are_decoded_as_gos_reader_does() -> None:
    """Go mime/multipart Reader.NextPart: a quoted-printable part is decoded and its
    Content-Transfer-Encoding header removed; the re-written part carries the plain text."""
    custom = (
        'Content-Type: multipart/mixed; boundary="B"\n\n--B\n'
        "Content-Type: text/x-shellscript\nContent-Transfer-Encoding: quoted-printable\n\n"
        "echo a=3Db\n--B--\n"
    )
    first = parse_archive(render(custom=custom))[0]
    assert first.body == "echo a=b"
    assert first.headers == (("Content-Type", "text/x-shellscript"),)


def test_broken_mime_is_a_user_data_error() -> None:
    """eksbootstrap.go getMultiPartReader: "user data is not in multipart MIME format"."""
    with pytest.raises(UserDataError, match="not multipart"):
        render(custom="MIME-Version: 1.0\nContent-Type: text/x-shellscript\n\necho hi\n")


def test_every_kubelet_setting_becomes_its_flag_in_karpenters_order() -> None:
    """bootstrap.go kubeletExtraArgs: labels, taints, max pods, pods per core, reserved, eviction
    (hard/soft with ``<``, grace periods as Go durations), max pod grace, image GC, CFS quota; the
    maps sorted (Karpenter walks Go maps, in random order)."""
    kubelet = Kubelet(
        max_pods=110,
        pods_per_core=10,
        system_reserved={"memory": "100Mi", "cpu": "100m"},
        kube_reserved={"cpu": "200m"},
        eviction_hard={"nodefs.available": "10%", "memory.available": "5%"},
        eviction_soft={"memory.available": "10%"},
        eviction_soft_grace_period={"memory.available": "120s"},
        eviction_max_pod_grace_period=60,
        image_gc_high_threshold_percent=85,
        image_gc_low_threshold_percent=80,
        cpu_cfs_quota=True,
    )
    line = next(x for x in render(kubelet=kubelet).splitlines() if x.startswith("--kubelet-extra-args"))
    assert line.split("' --")[0].split("--max-pods")[1] == (
        '=110 --pods-per-core=10 --system-reserved="cpu=100m,memory=100Mi" --kube-reserved="cpu=200m" '
        '--eviction-hard="memory.available<5%,nodefs.available<10%" --eviction-soft="memory.available<10%" '
        '--eviction-soft-grace-period="memory.available=2m0s" --eviction-max-pod-grace-period=60 '
        "--image-gc-high-threshold=85 --image-gc-low-threshold=80 --cpu-cfs-quota=true'"
    )


def test_ipv6_cluster_dns_adds_the_ip_family_and_raid0_the_local_disks() -> None:
    """eksbootstrap.go eksBootstrapScript: ``--ip-family ipv6`` before the DNS IP when that is not
    IPv4 (``net.ParseIP(ip).To4() == nil``); ``--local-disks raid0`` last for the RAID0 policy."""
    text = render(kubelet=Kubelet(cluster_dns=("fd00::a",)), instance_store_raid0=True)
    assert "\\\n--ip-family ipv6 \\\n--dns-cluster-ip 'fd00::a' \\\n" in text
    assert text.endswith("--max-pods=29' \\\n--local-disks raid0\n--//--\n")
    assert "--ip-family" not in render()


@pytest.mark.parametrize(
    ("ip", "v6"), [("10.0.0.10", False), ("fd00::10", True), ("::ffff:10.0.0.10", False), ("bogus", True)]
)
def test_is_ipv6_as_go_net_parse_ip_to4(ip: str, v6: bool) -> None:
    """eksbootstrap.go isIPv6: IPv4-mapped addresses count as IPv4; what does not parse is not."""
    assert is_ipv6(ip) is v6


def test_no_ca_bundle_leaves_the_argument_out() -> None:
    """eksbootstrap.go eksBootstrapScript: ``--b64-cluster-ca`` only with a CA bundle."""
    text = render(cluster=ClusterInfo("shop", "https://shop.example", "", "", None))
    assert "--b64-cluster-ca" not in text
    assert "--dns-cluster-ip" not in text


def test_windows_powershell_golden() -> None:
    """windows.go Windows.Script (windows_userdata_merged.golden's shape): one ``<powershell>``
    block, the user's lines first, then Start-EKSBootstrap.ps1 with cluster, endpoint, CA, the same
    kubelet flags as AL2 and the DNS IP last."""
    text = render(AMIFamily.WINDOWS2022, custom='Write-Host "custom"')
    assert text == (
        "<powershell>\n"
        'Write-Host "custom"\n'
        '[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"\n'
        "& $EKSBootstrapScriptFile -EKSClusterName 'shop' -APIServerEndpoint 'https://shop.example' "
        "-Base64ClusterCA 'bXktY2EK' -KubeletExtraArgs '--node-labels=\"karpenter.sh/capacity-type=on-demand,"
        'karpenter.sh/do-not-sync-taints=true,team=web" '
        '--register-with-taints="dedicated=web:NoSchedule,karpenter.sh/unregistered:NoExecute" '
        "--max-pods=29' -DNSClusterIP '10.100.0.10'\n"
        "</powershell>"
    )
    for family in (AMIFamily.WINDOWS2019, AMIFamily.WINDOWS2025):
        assert render(family, custom='Write-Host "custom"') == text


def test_only_line_feeds_end_lines_when_looking_for_delimiters() -> None:
    """Go mime/multipart reads lines up to ``\\n``: a form feed inside a line is content, so a
    boundary after one does not end the part."""
    script = "echo page\x0c--B--\n"
    custom = (
        'Content-Type: multipart/mixed; boundary="B"\n\n'
        f"--B\nContent-Type: text/x-shellscript\n\n{script}--B--\n"
    )
    assert parse_archive(render(custom=custom))[0].body == script.removesuffix("\n")
