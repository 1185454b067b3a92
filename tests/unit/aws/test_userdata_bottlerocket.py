"""Bottlerocket user data: the user's TOML with Karpenter's settings merged in (pure).

Sources (aws/karpenter-provider-aws v1.14.1): ``pkg/providers/amifamily/bootstrap/bottlerocket.go``
``Bottlerocket.Script``; ``bottlerocketsettings.go`` ``BottlerocketKubernetes`` (the known keys),
``UnmarshalTOML`` (unknown kubernetes keys logged, "Unknown parameter in userData K8s settings"),
``MarshalTOML``; the shapes of the golden files ``pkg/providers/launchtemplate/testdata/br_userdata_*``
(our own inputs, compared as parsed TOML since key quoting is the writer's choice).
"""

from __future__ import annotations

import logging
import tomllib
from typing import Any

import pytest

from kubespot.aws.userdata import ClusterInfo, UserDataError, render_user_data
from kubespot.model.capacity import AMIFamily
from kubespot.scheduling.api.nodeclass import Kubelet
from kubespot.scheduling.taints import Taint

CLUSTER = ClusterInfo("shop", "https://shop.example", "bXktY2EK", "", "10.100.0.10")
LABELS = {"karpenter.sh/capacity-type": "spot", "team": "web", "kubernetes.io/arch": "arm64"}
TAINTS = (
    Taint("dedicated", "NoSchedule", "web"),
    Taint("dedicated", "NoExecute", "db"),
    Taint("gpu", "NoSchedule"),
)


def render(custom: str | None = None, **kw: Any) -> str:
    args: dict[str, Any] = {
        "custom": custom,
        "cluster": CLUSTER,
        "kubelet": None,
        "labels": LABELS,
        "taints": TAINTS,
        "max_pods": 29,
    }
    args.update(kw)
    return render_user_data(AMIFamily.BOTTLEROCKET, **args)


def settings(text: str) -> dict[str, Any]:
    doc = tomllib.loads(text)
    assert list(doc) == ["settings"]
    out = doc["settings"]
    assert isinstance(out, dict)
    return out


USER = """
[settings.kubernetes]
"not-a-setting" = "dropped"
api-server = "https://stale"
cluster-name = "stale"
cluster-certificate = "c3RhbGUK"
cloud-provider = "external"
max-pods = 500
allowed-unsafe-sysctls = ["net.core.somaxconn"]

[settings.kubernetes.eviction-hard]
"memory.available" = "12%"

[settings.kubernetes.labels]
"also" = "dropped"

[settings.kubernetes.node-labels]
"team" = "from-user-data"
"rack" = "r1"

[settings.kubernetes.node-taints]
"user" = ["x:NoSchedule"]

[settings.network]
hostname = "node.local"
no-proxy = ["localhost"]

[settings.ntp]
time-servers = ["169.254.169.123"]

[settings.bootstrap-commands.010-tune]
commands = [["sysctl", "-w", "vm.max_map_count=262144"]]
mode = "always"
essential = false
"""


def test_without_user_data_karpenters_settings_golden() -> None:
    """br_userdata_unmerged.golden's shape: only ``settings.kubernetes``: cluster name, API server,
    certificate (the bundle as given), cluster DNS IP, max pods, node labels (kubernetes.io dropped,
    do-not-sync added) and node taints as ``key = ["value:Effect", …]`` with the unregistered
    taint as ``[":NoExecute"]``."""
    assert settings(render()) == {
        "kubernetes": {
            "api-server": "https://shop.example",
            "cluster-certificate": "bXktY2EK",
            "cluster-name": "shop",
            "cluster-dns-ip": "10.100.0.10",
            "node-labels": {
                "karpenter.sh/capacity-type": "spot",
                "karpenter.sh/do-not-sync-taints": "true",
                "team": "web",
            },
            "node-taints": {
                "dedicated": ["web:NoSchedule", "db:NoExecute"],
                "gpu": [":NoSchedule"],
                "karpenter.sh/unregistered": [":NoExecute"],
            },
            "max-pods": 29,
        }
    }


def test_user_settings_are_merged_as_karpenter_merges_them(caplog: pytest.LogCaptureFixture) -> None:
    """bottlerocket.go Script (br_userdata_merged.golden's shape): other settings tables kept as
    written; cluster name, API server and certificate overwritten; node labels merged, Karpenter's
    winning; max pods overwritten; node taints replaced; known keys the NodeClass does not set kept;
    unknown kubernetes keys dropped and logged."""
    with caplog.at_level(logging.WARNING, logger="kubespot.aws.userdata_bottlerocket"):
        out = settings(render(USER))
    assert out["network"] == {"hostname": "node.local", "no-proxy": ["localhost"]}
    assert out["ntp"] == {"time-servers": ["169.254.169.123"]}
    assert out["bootstrap-commands"] == {
        "010-tune": {
            "commands": [["sysctl", "-w", "vm.max_map_count=262144"]],
            "mode": "always",
            "essential": False,
        }
    }
    k8s = out["kubernetes"]
    assert (k8s["api-server"], k8s["cluster-name"], k8s["cluster-certificate"]) == (
        "https://shop.example",
        "shop",
        "bXktY2EK",
    )
    assert k8s["cloud-provider"] == "external"
    assert k8s["allowed-unsafe-sysctls"] == ["net.core.somaxconn"]
    assert k8s["eviction-hard"] == {"memory.available": "12%"}
    assert k8s["max-pods"] == 29
    assert k8s["node-labels"] == {
        "karpenter.sh/capacity-type": "spot",
        "karpenter.sh/do-not-sync-taints": "true",
        "rack": "r1",
        "team": "web",
    }
    assert "user" not in k8s["node-taints"]
    assert "not-a-setting" not in k8s and "labels" not in k8s
    dropped = sorted(r.getMessage() for r in caplog.records)
    assert dropped == [
        "Unknown parameter in userData K8s settings: settings.kubernetes.labels dropped",
        "Unknown parameter in userData K8s settings: settings.kubernetes.not-a-setting dropped",
    ]


def test_kubelet_block_overrides_the_users_values() -> None:
    """bottlerocket.go Script: reserved, eviction, grace periods (Go durations), max pod grace,
    image GC thresholds (strings in Bottlerocket's model) and ``cpu-cfs-quota-enforced`` from the
    NodeClass replace the user's; ``cluster-dns-ip`` is the first cluster DNS IP."""
    kubelet = Kubelet(
        cluster_dns=("10.0.0.53", "10.0.0.54"),
        max_pods=110,
        system_reserved={"cpu": "100m"},
        kube_reserved={"memory": "1Gi"},
        eviction_hard={"memory.available": "5%"},
        eviction_soft={"memory.available": "10%"},
        eviction_soft_grace_period={"memory.available": "90s"},
        eviction_max_pod_grace_period=60,
        image_gc_high_threshold_percent=85,
        image_gc_low_threshold_percent=80,
        cpu_cfs_quota=False,
    )
    k8s = settings(render(USER, kubelet=kubelet))["kubernetes"]
    assert {key: k8s[key] for key in k8s if key not in ("node-labels", "node-taints")} == {
        "api-server": "https://shop.example",
        "cloud-provider": "external",
        "cluster-certificate": "bXktY2EK",
        "cluster-name": "shop",
        "cluster-dns-ip": "10.0.0.53",
        "max-pods": 110,
        "eviction-hard": {"memory.available": "5%"},
        "eviction-soft": {"memory.available": "10%"},
        "eviction-soft-grace-period": {"memory.available": "1m30s"},
        "eviction-max-pod-grace-period": 60,
        "kube-reserved": {"memory": "1Gi"},
        "system-reserved": {"cpu": "100m"},
        "allowed-unsafe-sysctls": ["net.core.somaxconn"],
        "image-gc-high-threshold-percent": "85",
        "image-gc-low-threshold-percent": "80",
        "cpu-cfs-quota-enforced": False,
    }


def test_raid0_adds_the_instance_storage_bootstrap_command() -> None:
    """bottlerocket.go Script: RAID0 adds ``000-mount-instance-storage`` (init, then bind of
    containerd, kubelet and pod-log directories), essential, mode always, beside the user's."""
    commands = settings(render(USER, instance_store_raid0=True))["bootstrap-commands"]
    assert set(commands) == {"000-mount-instance-storage", "010-tune"}
    assert commands["000-mount-instance-storage"] == {
        "commands": [
            ["apiclient", "ephemeral-storage", "init"],
            [
                "apiclient",
                "ephemeral-storage",
                "bind",
                "--dirs",
                "/var/lib/containerd",
                "/var/lib/kubelet",
                "/var/log/pods",
            ],
        ],
        "mode": "always",
        "essential": True,
    }


def test_no_ca_bundle_drops_the_users_certificate() -> None:
    """bottlerocket.go Script assigns ``cluster-certificate`` from the bundle unconditionally: with
    none, the user's (possibly stale) certificate does not survive."""
    none = ClusterInfo("shop", "https://shop.example", "", "")
    assert "cluster-certificate" not in settings(render(USER, cluster=none))["kubernetes"]


def test_karpenters_keys_come_in_its_model_order() -> None:
    """bottlerocketsettings.go BottlerocketKubernetes: the fields are written in the struct's order
    (api-server … cluster-dns-ip, then node labels and taints, max pods …), so the same options
    give the same text."""
    k8s = settings(render(USER))["kubernetes"]
    assert list(k8s)[:5] == [
        "api-server",
        "cloud-provider",
        "cluster-certificate",
        "cluster-name",
        "cluster-dns-ip",
    ]
    assert render(USER) == render(USER)


@pytest.mark.parametrize(
    ("custom", "why"),
    [
        ("[settings.kubernetes\nmax-pods = 1", "not TOML"),
        ("settings = 5", "settings is not a table"),
        ("[settings]\nkubernetes = 5", "settings.kubernetes is not a table"),
        ('[settings.kubernetes]\nmax-pods = "10"', "max-pods must be of type integer"),
        ("[settings.kubernetes]\nnode-labels = { a = 1 }", "node-labels must be of type table of strings"),
        (
            '[settings.kubernetes.node-taints]\na = "x:NoSchedule"',
            "node-taints must be of type table of string arrays",
        ),
    ],
)
def test_malformed_user_data_is_a_user_data_error(custom: str, why: str) -> None:
    """bottlerocket.go Script: "invalid UserData" when the TOML does not parse or a known setting
    has the wrong type (go-toml refuses to decode it into the typed struct)."""
    with pytest.raises(UserDataError, match=why):
        render(custom)


def test_only_settings_survive(caplog: pytest.LogCaptureFixture) -> None:
    """bottlerocketsettings.go BottlerocketConfig: only ``settings`` is modelled, so other
    top-level tables are not written back (logged here so the loss is visible)."""
    with caplog.at_level(logging.WARNING):
        doc = tomllib.loads(render('[other]\nx = 1\n[settings.ntp]\ntime-servers = ["a"]\n'))
    assert list(doc) == ["settings"]
    assert doc["settings"]["ntp"] == {"time-servers": ["a"]}
    assert any("other" in r.getMessage() for r in caplog.records)
