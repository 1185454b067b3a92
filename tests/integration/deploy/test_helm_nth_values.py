"""NTH users' values files, rendered by the kubespot chart: NTH's placement, env and ServiceAccount.

The inputs are NTH's own full values.yaml (tests/fixtures/helm/nth/nth-full-values.yaml, with its
origin) and values files written the way NTH's docs and blog posts write them: spot nodes picked by
``karpenter.sh/capacity-type: spot`` or ``lifecycle: Ec2Spot``, queue mode with IRSA. What NTH
does with each value is read from NTH's chart templates (aws/aws-node-termination-handler at
62a8761, config/helm/aws-node-termination-handler/templates/daemonset.linux.yaml and
deployment.yaml): one node selector, affinity and toleration list is used, the first non-empty of
``linux…`` > plain > ``daemonset…``; a null terminationGracePeriodSeconds is not rendered; the
Deployment takes the top-level pod values; its ServiceAccount is the chart's fullname,
``<release>-aws-node-termination-handler``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helm_support import (
    CHART,
    FIXTURES,
    NS,
    RELEASE,
    Cluster,
    Obj,
    Workload,
    kubesim_cluster,
    only,
    render_fails,
    resolved_env,
    run_helm,
    values_args,
)
from helm_support import render as render_chart

from kubespot.config.agent import AgentSettings
from kubespot.config.controller import ControllerSettings
from kubespot.config.loader import load
from kubespot.sim.kubesim.testing import node

NTH = FIXTURES / "nth"
FULL = NTH / "nth-full-values.yaml"
KUBE = "1.30.0"
BASE_TERMS = [
    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["fargate"]},
]
DEFAULT_IMAGE = "ghcr.io/kubespot/kubespot"


def render(helm: str, *files: Path, sets: dict[str, str] | None = None) -> list[Obj]:
    return render_chart(helm, *files, sets=sets, kube=KUBE)


def fails(helm: str, *files: Path, sets: dict[str, str] | None = None, kube: str = KUBE) -> str:
    return render_fails(helm, *files, sets=sets, kube=kube)


def pod(objs: list[Obj], kind: str) -> Obj:
    return Workload(kind).pod_spec(objs)


def env(objs: list[Obj], kind: str) -> dict[str, str]:
    """The container's environment as the process sees it (Downward API faked, Secrets read)."""
    return resolved_env(objs, Workload(kind).env(objs), lambda _name, _entry: "node-a")


@pytest.mark.parametrize(
    "name", ["imds-karpenter-spot", "imds-ec2spot-nodegroup", "queue-irsa", "queue-pod", "variant-probes"]
)
def test_helm_lint_passes_with_nths_values_files(helm: str, name: str) -> None:
    # NTH's full values.yaml is left out: helm lint assumes Kubernetes 1.20, where its
    # rbac.pspEnabled: true is refused (tested below with --kube-version).
    res = run_helm(helm, "lint", "--strict", str(CHART), *values_args([NTH / f"{name}.yaml"], None))
    assert "0 chart(s) failed" in res.stdout


# --- NTH's own full values.yaml ------------------------------------------------------------------


def test_nths_full_values_render_nths_imds_daemonset(helm: str) -> None:
    objs = render(helm, FULL)
    assert not [o for o in objs if o["kind"] == "Deployment"]
    spec = pod(objs, "DaemonSet")
    c = spec["containers"][0]
    # NTH's default image means "the project's image": kubespot's, never NTH's with kubespot's command.
    assert c["image"].startswith(DEFAULT_IMAGE + ":")
    # terminationGracePeriodSeconds: (null) is not rendered: Kubernetes' 30 s, as NTH.
    assert "terminationGracePeriodSeconds" not in spec
    assert "nodeSelector" not in spec
    assert spec["tolerations"] == [{"operator": "Exists"}]
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert BASE_TERMS[1] in term["matchExpressions"]
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    # NTH's chart: probes server off (no port), ASG lifecycle draining on.
    assert "ports" not in c and "livenessProbe" not in c
    e = env(objs, "DaemonSet")
    assert e["KUBESPOT_IMDS_ASG_LIFECYCLE_DRAINING"] == "true"
    assert e["KUBESPOT_OBSERVABILITY_ENABLE_PROBES_SERVER"] == "false"
    assert only(objs, "DaemonSet")["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == "25%"
    s = load(AgentSettings, env=e)
    assert s.monitors.asg_lifecycle_draining is True
    assert s.monitors.spot_interruption_draining and s.monitors.scheduled_event_draining
    assert not s.monitors.rebalance_monitoring and not s.observability.enable_probes_server
    assert s.drain.pod_termination_grace_period == -1 and s.drain.node_termination_grace_period == 120


def test_psp_enabled_fails_only_where_the_psp_api_still_exists(helm: str) -> None:
    # NTH creates its PodSecurityPolicy only below 1.25 (templates/psp.yaml); kubespot ships none.
    assert "rbac.pspEnabled" in fails(helm, FULL, kube="1.24.0")


def test_a_users_affinity_and_tolerations_win_over_nths_daemonset_defaults(helm: str) -> None:
    spec = pod(render(helm, FULL, NTH / "variant-affinity.yaml"), "DaemonSet")
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        *BASE_TERMS,
    ]
    assert spec["tolerations"] == [{"key": "spot-only", "operator": "Exists", "effect": "NoSchedule"}]


def test_probes_dns_and_linux_tolerations_as_nth_renders_them(helm: str) -> None:
    objs = render(helm, FULL, NTH / "variant-probes.yaml")
    spec = pod(objs, "DaemonSet")
    c = spec["containers"][0]
    assert c["ports"] == [{"name": "http-probes", "containerPort": 8091, "hostPort": 8091, "protocol": "TCP"}]
    assert c["livenessProbe"]["httpGet"] == {"path": "/livez", "port": 8091}
    assert (c["livenessProbe"]["initialDelaySeconds"], c["livenessProbe"]["periodSeconds"]) == (5, 5)
    e = env(objs, "DaemonSet")
    assert (
        e["KUBESPOT_OBSERVABILITY_PROBES_SERVER_PORT"],
        e["KUBESPOT_OBSERVABILITY_PROBES_SERVER_ENDPOINT"],
    ) == (
        "8091",
        "/livez",
    )
    assert spec["dnsConfig"] == {"options": [{"name": "ndots", "value": "2"}]}
    assert spec["dnsPolicy"] == "Default"
    assert spec["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}
    ]


# --- The docs' and blogs' IMDS-mode files ---------------------------------------------------------


def test_karpenter_spot_selector_places_the_agent_on_spot_nodes(helm: str) -> None:
    spec = pod(render(helm, NTH / "imds-karpenter-spot.yaml"), "DaemonSet")
    assert spec["nodeSelector"] == {"karpenter.sh/capacity-type": "spot"}
    assert spec["tolerations"] == [{"operator": "Exists"}]


def test_ec2spot_node_groups_use_one_selector_never_two_anded(helm: str) -> None:
    objs = render(helm, NTH / "imds-ec2spot-nodegroup.yaml")
    assert pod(objs, "DaemonSet")["nodeSelector"] == {"lifecycle": "Ec2Spot"}
    linux = render(helm, NTH / "imds-ec2spot-nodegroup.yaml", sets={"linuxNodeSelector.pool": "spot-a"})
    assert pod(linux, "DaemonSet")["nodeSelector"] == {"pool": "spot-a"}
    e = env(objs, "DaemonSet")
    assert e["KUBESPOT_WEBHOOK_URL_FILE"] == "/etc/kubespot/webhook-url/url"


# --- Queue mode ---------------------------------------------------------------------------------


def test_queue_mode_with_irsa_keeps_nths_service_account_name(helm: str) -> None:
    objs = render(helm, NTH / "queue-irsa.yaml")
    assert not [o for o in objs if o["kind"] == "DaemonSet"]
    name = f"{RELEASE}-aws-node-termination-handler"
    assert pod(objs, "Deployment")["serviceAccountName"] == name
    sa = only(objs, "ServiceAccount", name)
    assert sa["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/nth-queue-processor"
    }
    binding = only(objs, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": NS}]
    s = load(ControllerSettings, env=env(objs, "Deployment"))
    assert s.queue.url == "https://sqs.eu-west-1.amazonaws.com/123456789012/nth-queue"
    assert s.queue.check_tag_before_draining is False
    # NTH's queue processor cordons and drains on every rebalance message and never undoes it; the
    # IMDS-only switches do not gate its messages.
    assert s.monitors.rebalance_draining and s.monitors.rebalance_monitoring
    assert s.monitors.spot_interruption_draining and s.monitors.scheduled_event_draining
    assert s.monitors.asg_lifecycle_draining
    assert s.node_actions.rebalance_undo_after == 0


def test_queue_mode_ignores_imds_only_switches_as_nth(helm: str) -> None:
    objs = render(helm, FULL, NTH / "queue-irsa.yaml")
    s = load(ControllerSettings, env=env(objs, "Deployment"))
    assert s.monitors.rebalance_draining  # NTH's values.yaml has enableRebalanceDraining: false (IMDS only)


def test_queue_mode_pod_values_go_to_the_controller(helm: str) -> None:
    objs = render(helm, NTH / "queue-pod.yaml")
    dep = only(objs, "Deployment")
    spec = dep["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {
        "kubernetes.io/os": "linux",
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
    }
    assert spec["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "node-role", "operator": "In", "values": ["system"]}]}
        ]
    }
    (spread,) = spec["topologySpreadConstraints"]
    assert (spread["topologyKey"], spread["whenUnsatisfiable"]) == ("kubernetes.io/hostname", "DoNotSchedule")
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    assert dep["spec"]["replicas"] == 1
    c = spec["containers"][0]
    assert c["resources"] == {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
    assert spec["priorityClassName"] == "platform-critical"
    assert dep["spec"]["template"]["metadata"]["labels"]["team"] == "platform"
    assert dep["spec"]["template"]["metadata"]["annotations"]["example.com/owner"] == "platform"
    e = env(objs, "Deployment")
    assert e["HTTPS_PROXY"] == "http://proxy.internal:3128"
    assert spec["terminationGracePeriodSeconds"] == 45
    assert spec["dnsConfig"] == {"options": [{"name": "ndots", "value": "2"}]}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert (c["livenessProbe"]["initialDelaySeconds"], c["livenessProbe"]["periodSeconds"]) == (5, 5)
    assert e["KUBESPOT_OBSERVABILITY_PROBES_SERVER_PORT"] == "8091"
    assert c["ports"][0]["containerPort"] == 8091


# --- Values kubespot cannot honour stop the render ------------------------------------------------


@pytest.mark.parametrize(
    ("sets", "named"),
    [
        (
            {"image.repository": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/aws-node-termination-handler"},
            "image.repository",
        ),
        (
            {
                "image.repository": "public.ecr.aws/aws-ec2/aws-node-termination-handler",
                "image.tag": "v1.25.6",
            },
            "image.repository",
        ),
        ({"image.tag": "v1.25.6"}, "image.tag"),
        ({"targetNodeOs": "linux windows"}, "targetNodeOs"),
    ],
)
def test_nth_values_kubespot_cannot_honour_fail_naming_the_value(
    helm: str, sets: dict[str, str], named: str
) -> None:
    assert named in fails(helm, sets=sets)


def test_a_kubespot_mirror_renders(helm: str) -> None:
    objs = render(helm, sets={"image.repository": "registry.internal/kubespot", "image.tag": "0.1.0"})
    assert pod(objs, "DaemonSet")["containers"][0]["image"] == "registry.internal/kubespot:0.1.0"


# --- RBAC and the own-node policy ------------------------------------------------------------------


def _pod_verbs(role: Obj) -> list[str]:
    (rule,) = [r for r in role["rules"] if r["resources"] == ["pods"]]
    verbs: list[str] = rule["verbs"]
    return verbs


def test_pod_delete_is_granted_only_when_the_deadline_action_deletes(helm: str) -> None:
    both = {"controller.enabled": "true", "queueURL": "q"}
    for role in [o for o in render(helm, sets=both) if o["kind"] == "ClusterRole"]:
        assert "delete" in _pod_verbs(role)
    for role in [
        o for o in render(helm, sets={**both, "pdbDeadlineAction": "keep"}) if o["kind"] == "ClusterRole"
    ]:
        assert _pod_verbs(role) == ["get", "list", "watch"]


def test_own_node_policy_is_off_by_default_and_binds_the_agents_account(helm: str) -> None:
    assert not [o for o in render(helm) if "ValidatingAdmissionPolicy" in o["kind"]]
    objs = render(helm, sets={"nodeRestrictionPolicy.enabled": "true"})
    policy = only(objs, "ValidatingAdmissionPolicy")
    binding = only(objs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    (cond,) = policy["spec"]["matchConditions"]
    assert (
        cond["expression"] == f'request.userInfo.username == "system:serviceaccount:{NS}:{RELEASE}-kubespot"'
    )
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["UPDATE"] and "nodes" in rule["resources"]
    assert "authentication.kubernetes.io/node-name" in policy["spec"]["variables"][0]["expression"]
    assert "object.metadata.name" in policy["spec"]["validations"][0]["expression"]


# --- Placement on kubesim: the DaemonSet controller places the agents NTH's chart would -----------

LINUX = {"kubernetes.io/os": "linux"}
PLACEMENT_NODES: list[Obj] = [
    node("karpenter-spot", labels={**LINUX, "karpenter.sh/capacity-type": "spot"}),
    node(
        "karpenter-spot-only",
        labels={**LINUX, "karpenter.sh/capacity-type": "spot"},
        taints=[{"key": "spot-only", "value": "true", "effect": "NoSchedule"}],
    ),
    node("ec2spot-group", labels={**LINUX, "lifecycle": "Ec2Spot"}),
    node("ondemand", labels={**LINUX, "karpenter.sh/capacity-type": "on-demand"}),
    node(
        "fargate-ip-10-0-0-9",
        labels={**LINUX, "eks.amazonaws.com/compute-type": "fargate"},
        taints=[{"key": "eks.amazonaws.com/compute-type", "value": "fargate", "effect": "NoSchedule"}],
    ),
]


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with kubesim_cluster(tmp_path, PLACEMENT_NODES) as c:
        yield c


def placed(cluster: Cluster) -> set[str]:
    """Nodes with an agent once the DaemonSet controller has placed them all."""
    deadline = time.monotonic() + 10
    names: set[str] = set()
    while time.monotonic() < deadline:
        names = {p["spec"]["nodeName"] for p in cluster.pods(f"app.kubernetes.io/instance={RELEASE}")}
        ds = cluster.get("daemonset", f"{RELEASE}-kubespot", NS)
        desired = (ds.get("status") or {}).get("desiredNumberScheduled")
        if desired is not None and len(names) == desired:
            return names
        time.sleep(0.1)
    raise AssertionError(f"agents not placed in time: {sorted(names)}")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ([NTH / "imds-ec2spot-nodegroup.yaml"], {"ec2spot-group"}),
        ([NTH / "imds-karpenter-spot.yaml"], {"karpenter-spot", "karpenter-spot-only"}),
        ([FULL], {"karpenter-spot", "karpenter-spot-only", "ec2spot-group", "ondemand"}),
        # The user's spot-only affinity and their one toleration: the tainted spot node is kept,
        # the untainted one too, nothing else.
        ([FULL, NTH / "variant-affinity.yaml"], {"karpenter-spot", "karpenter-spot-only"}),
    ],
    ids=["ec2spot", "karpenter", "nth-full", "nth-full-user-affinity"],
)
def test_agents_land_where_nths_chart_puts_them(
    helm: str, cluster: Cluster, files: list[Path], expected: set[str]
) -> None:
    cluster.create(render(helm, *files))
    assert placed(cluster) == expected
