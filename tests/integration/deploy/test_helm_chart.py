"""The agent's Helm chart (deploy/helm/kubespot): lint, render, settings names, and a run on kubesim.

Rendering is checked on parsed YAML, never on text. Every environment variable the chart can render
must be a real setting of ``AgentSettings`` and must load through the agent's own settings loader,
so the chart cannot drift from the settings code. The rendered objects are then created with
``kubectl create`` on kubesim (and installed with ``helm install``), where the DaemonSet controller
places one agent pod per eligible node.

kubesim's stand-ins for the RBAC and Prometheus Operator kinds are explained in ``helm_support``.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from helm_support import (
    CHART,
    EVERYTHING_ON,
    FIXTURES,
    NS,
    RELEASE,
    Cluster,
    Obj,
    Workload,
    assert_created,
    helm_install,
    kinds,
    kubesim_cluster,
    only,
    render,
    render_fails,
    render_text,
    resolved_env,
    run_helm,
    values_args,
)

from kubespot.config.agent import AgentSettings
from kubespot.config.loader import load, specs
from kubespot.sim.kubesim.testing import node

NTH_VALUES = FIXTURES / "nth-values.yaml"

DOWNWARD = {
    "KUBESPOT_NODE_NAME": "spec.nodeName",
    "KUBESPOT_POD_NAME": "metadata.name",
    "KUBESPOT_POD_NAMESPACE": "metadata.namespace",
}
#: Settings the chart deliberately never renders: in-cluster credentials need no kubeconfig or
#: context, and the webhook URL only ever reaches the pod as a file (KUBESPOT_WEBHOOK_URL_FILE).
NOT_RENDERED = {"KUBESPOT_KUBECONFIG", "KUBESPOT_KUBE_CONTEXT", "KUBESPOT_WEBHOOK_URL"}
RBAC_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]
RBAC_RULES_KEEP = [
    {**r, "verbs": ["get", "list", "watch"]} if r["resources"] == ["pods"] else r for r in RBAC_RULES
]
#: The agent's DaemonSet.
AGENT = Workload("DaemonSet")
pod_spec, container, env_of, plain_env = AGENT.pod_spec, AGENT.container, AGENT.env, AGENT.plain_env
WEBHOOK_URL = "https://hooks.example.com/services/T000/B000/plain-secret-token"


# --- helm ------------------------------------------------------------------------------------------


def setting_envs() -> set[str]:
    return {s.env for s in specs(AgentSettings)}


# --- lint ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("files", [[], [NTH_VALUES], [EVERYTHING_ON]], ids=["defaults", "nth", "everything"])
def test_helm_lint_passes(helm: str, files: list[Path]) -> None:
    res = run_helm(helm, "lint", "--strict", str(CHART), *values_args(files, None))
    assert "0 chart(s) failed" in res.stdout


# --- the DaemonSet ---------------------------------------------------------------------------------


def test_default_render_is_the_agent_daemonset_and_its_rbac(helm: str) -> None:
    objs = render(helm)
    assert kinds(objs) == ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "ServiceAccount"]
    ds = only(objs, "DaemonSet")
    assert ds["metadata"]["namespace"] == NS
    assert ds["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    assert ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"]
    spec = pod_spec(objs)
    assert spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["tolerations"] == [{"operator": "Exists"}]
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["serviceAccountName"] == only(objs, "ServiceAccount")["metadata"]["name"]
    assert "nodeSelector" not in spec  # every Linux node, as NTH's chart
    c = container(objs)
    assert c["command"] == ["kubespot", "agent"]
    assert c["image"] == "ghcr.io/kubespot/kubespot:0.1.0"  # tag defaults to appVersion
    assert c["resources"] == {"requests": {"cpu": "10m", "memory": "56Mi"}, "limits": {"memory": "96Mi"}}


def test_security_context_is_restricted(helm: str) -> None:
    objs = render(helm)
    pod = pod_spec(objs)["securityContext"]
    assert pod["runAsNonRoot"] is True
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container(objs)["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] == 1000
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    # A read-only root needs a writable /tmp for Python and its libraries.
    mounts = {m["name"]: m["mountPath"] for m in container(objs)["volumeMounts"]}
    assert mounts["tmp"] == "/tmp"


def test_identity_comes_from_the_downward_api(helm: str) -> None:
    env = env_of(render(helm))
    for name, field in DOWNWARD.items():
        assert env[name]["valueFrom"] == {"fieldRef": {"fieldPath": field}}


def test_affinity_requires_linux_and_excludes_fargate(helm: str, tmp_path: Path) -> None:
    base = [
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["fargate"]},
    ]
    terms = pod_spec(render(helm))["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": base}]
    # Terms of the user's own are ORed: each one keeps the Linux/non-Fargate requirement.
    zones = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}
    arch = {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
    user = tmp_path / "affinity.yaml"
    user_terms = [{"matchExpressions": [zones]}, {"matchExpressions": [arch]}]
    user_affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": user_terms}}
    }
    user.write_text(yaml.safe_dump({"affinity": user_affinity}))
    spec = pod_spec(render(helm, user))
    required = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["nodeSelectorTerms"] == [
        {"matchExpressions": [zones, *base]},
        {"matchExpressions": [arch, *base]},
    ]


def test_liveness_probe_targets_the_configured_probes_server(helm: str) -> None:
    on = {"enableProbesServer": "true"}
    for sets, port, path in [
        (on, 8080, "/healthz"),
        ({**on, "probesServerPort": "8181", "probesServerEndpoint": "/livez"}, 8181, "/livez"),
    ]:
        objs = render(helm, sets=sets)
        c = container(objs)
        assert c["livenessProbe"]["httpGet"] == {"path": path, "port": port}
        env = plain_env(objs)
        assert env["KUBESPOT_OBSERVABILITY_ENABLE_PROBES_SERVER"] == "true"
        assert env["KUBESPOT_OBSERVABILITY_PROBES_SERVER_PORT"] == str(port)
        assert env["KUBESPOT_OBSERVABILITY_PROBES_SERVER_ENDPOINT"] == path
        assert {"name": "http-probes", "containerPort": port, "hostPort": port, "protocol": "TCP"} in c[
            "ports"
        ]


def test_probes_server_is_off_by_default_as_in_nths_chart(helm: str) -> None:
    # NTH's values.yaml: enableProbesServer: false (IMDS mode); no port is bound on the node.
    objs = render(helm)
    assert "livenessProbe" not in container(objs) and "ports" not in container(objs)
    assert plain_env(objs)["KUBESPOT_OBSERVABILITY_ENABLE_PROBES_SERVER"] == "false"


def test_unset_settings_leave_the_agent_defaults(helm: str) -> None:
    """Only the chart's own choices appear (probes and metrics off, and ASG lifecycle draining on:
    NTH's chart default, where its code's default is off); everything else is the agent's."""
    env = env_of(render(helm))
    assert set(env) == {
        *DOWNWARD,
        "KUBESPOT_OBSERVABILITY_ENABLE_PROBES_SERVER",
        "KUBESPOT_OBSERVABILITY_ENABLE_PROMETHEUS_SERVER",
        "KUBESPOT_IMDS_ASG_LIFECYCLE_DRAINING",
    }
    assert env["KUBESPOT_IMDS_ASG_LIFECYCLE_DRAINING"]["value"] == "true"


def test_metrics_port_is_exposed_only_when_enabled(helm: str) -> None:
    assert "ports" not in container(render(helm))
    c = container(render(helm, sets={"enablePrometheusServer": "true", "prometheusServerPort": "9100"}))
    assert {"name": "http-metrics", "containerPort": 9100, "hostPort": 9100, "protocol": "TCP"} in c["ports"]


# --- NTH values ------------------------------------------------------------------------------------


def test_nth_values_file_produces_the_matching_kubespot_env(helm: str) -> None:
    objs = render(helm, NTH_VALUES)
    env = plain_env(objs)
    expected = {
        "KUBESPOT_IMDS_SPOT_INTERRUPTION_DRAINING": "true",
        "KUBESPOT_IMDS_SCHEDULED_EVENT_DRAINING": "true",
        "KUBESPOT_IMDS_REBALANCE_MONITORING": "true",
        "KUBESPOT_IMDS_REBALANCE_DRAINING": "false",
        "KUBESPOT_IMDS_ASG_LIFECYCLE_DRAINING": "false",
        "KUBESPOT_NODE_ACTIONS_TAINT_NODE": "true",
        "KUBESPOT_NODE_ACTIONS_TAINT_EFFECT": "PreferNoSchedule",
        "KUBESPOT_NODE_ACTIONS_CORDON_ONLY": "false",
        "KUBESPOT_NODE_ACTIONS_DRY_RUN": "false",
        "KUBESPOT_NODE_ACTIONS_EXCLUDE_FROM_LOAD_BALANCERS": "true",
        "KUBESPOT_NODE_ACTIONS_ENABLE_OUT_OF_SERVICE_TAINT": "false",
        "KUBESPOT_DRAIN_POD_TERMINATION_GRACE_PERIOD": "45",  # from NTH's deprecated gracePeriod
        "KUBESPOT_DRAIN_NODE_TERMINATION_GRACE_PERIOD": "240",
        "KUBESPOT_IMDS_TRIES": "5",
        "KUBESPOT_OBSERVABILITY_JSON_LOGGING": "true",
        "KUBESPOT_OBSERVABILITY_LOG_LEVEL": "debug",
        "KUBESPOT_OBSERVABILITY_EMIT_KUBERNETES_EVENTS": "true",
        "KUBESPOT_OBSERVABILITY_KUBERNETES_EVENTS_EXTRA_ANNOTATIONS": "team=platform,cost-center=42",
        "KUBESPOT_KUBE_API_QPS": "20",
        "KUBESPOT_KUBE_API_BURST": "40",
        "KUBESPOT_OBSERVABILITY_ENABLE_PROMETHEUS_SERVER": "true",
        "KUBESPOT_OBSERVABILITY_PROMETHEUS_SERVER_PORT": "9092",
        "KUBESPOT_WEBHOOK_URL_FILE": "/etc/kubespot/webhook-url/url",
    }
    assert {k: env.get(k) for k in expected} == expected
    # NTH's "" means "the default": nothing is rendered for it.
    for unset in (
        "KUBESPOT_DRAIN_DELETE_LOCAL_DATA",
        "KUBESPOT_DRAIN_IGNORE_DAEMON_SETS",
        "KUBESPOT_IMDS_URL",
    ):
        assert unset not in env
    spec = pod_spec(objs)
    assert spec["nodeSelector"] == {"karpenter.sh/capacity-type": "spot"}  # daemonsetNodeSelector
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]  # image.pullSecrets
    assert spec["serviceAccountName"] == "node-termination-handler"
    assert container(objs)["securityContext"]["runAsUser"] == 1001  # securityContext.runAsUserID
    assert "runAsUserID" not in container(objs)["securityContext"]
    probe = container(objs)["livenessProbe"]
    assert (probe["initialDelaySeconds"], probe["periodSeconds"]) == (5, 5)
    assert only(objs, "DaemonSet")["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": 1}


def test_nth_webhook_secret_name_is_mounted_with_nths_key(helm: str) -> None:
    objs = render(helm, NTH_VALUES)
    volumes = {v["name"]: v for v in pod_spec(objs)["volumes"]}
    assert volumes["webhook-url"]["secret"]["secretName"] == "nth-webhook"
    assert volumes["webhook-url"]["secret"]["items"] == [{"key": "webhookurl", "path": "url"}]
    mounts = {m["name"]: m for m in container(objs)["volumeMounts"]}
    assert mounts["webhook-url"] == {
        "name": "webhook-url",
        "mountPath": "/etc/kubespot/webhook-url",
        "readOnly": True,
    }
    # NTH's webhookHeaders, a credential carrier, arrive through the chart's Secret.
    headers = env_of(objs)["KUBESPOT_WEBHOOK_HEADERS"]
    assert headers["valueFrom"]["secretKeyRef"]["key"] == "webhookheaders"
    secret = only(objs, "Secret")
    assert set(secret["data"]) == {"webhookheaders"}  # the URL stays in the user's own Secret


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        ({"enableSqsTerminationDraining": "true"}, "queue-processor"),
        ({"targetNodeOs": "linux windows"}, "Linux nodes only"),
        ({"podMonitor.create": "true"}, "enablePrometheusServer"),
        ({"webhookTemplateConfigMapName": "tpl"}, "webhookTemplateConfigMapKey"),
        (
            {"enablePrometheusServer": "true", "enableProbesServer": "true", "prometheusServerPort": "8080"},
            "must differ",
        ),
    ],
)
def test_values_that_cannot_work_stop_the_release(helm: str, sets: dict[str, str], message: str) -> None:
    assert message in render_fails(helm, sets=sets)


# --- webhook URL as a secret -----------------------------------------------------------------------


def test_webhook_url_never_appears_in_the_pod_spec(helm: str) -> None:
    objs = render(helm, sets={"webhookURL": WEBHOOK_URL})
    ds = only(objs, "DaemonSet")
    assert WEBHOOK_URL not in yaml.safe_dump(ds)
    env = env_of(objs)
    assert "KUBESPOT_WEBHOOK_URL" not in env
    assert all(WEBHOOK_URL not in str(e.get("value", "")) for e in env.values())
    assert env["KUBESPOT_WEBHOOK_URL_FILE"]["value"] == "/etc/kubespot/webhook-url/url"
    secret = only(objs, "Secret")
    assert secret["metadata"]["name"] == f"{RELEASE}-kubespot-webhook"
    assert base64.b64decode(secret["data"]["webhookurl"]).decode() == WEBHOOK_URL
    volume = next(v for v in pod_spec(objs)["volumes"] if v["name"] == "webhook-url")
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    # A changed URL rolls nothing (the file is re-read at each send) but headers/proxy do: checksum.
    assert "checksum/webhook-secret" in ds["spec"]["template"]["metadata"]["annotations"]


def test_existing_secret_wins_over_an_inline_url_as_in_nth(helm: str) -> None:
    objs = render(helm, sets={"webhookURL": WEBHOOK_URL, "webhookURLSecretName": "mine"})
    assert "Secret" not in kinds(objs)
    assert WEBHOOK_URL not in render_text(
        helm, sets={"webhookURL": WEBHOOK_URL, "webhookURLSecretName": "mine"}
    )
    volume = next(v for v in pod_spec(objs)["volumes"] if v["name"] == "webhook-url")
    assert volume["secret"]["secretName"] == "mine"


def test_no_webhook_no_secret_no_mount(helm: str) -> None:
    objs = render(helm)
    assert "Secret" not in kinds(objs)
    assert [v["name"] for v in pod_spec(objs)["volumes"]] == ["tmp"]


# --- PodMonitor ------------------------------------------------------------------------------------


def test_pod_monitor_only_when_enabled(helm: str) -> None:
    assert "PodMonitor" not in kinds(render(helm, sets={"enablePrometheusServer": "true"}))
    objs = render(helm, sets={"enablePrometheusServer": "true", "podMonitor.create": "true"})
    pm = only(objs, "PodMonitor")
    assert pm["apiVersion"] == "monitoring.coreos.com/v1"
    assert pm["metadata"]["namespace"] == NS
    assert pm["spec"]["selector"]["matchLabels"] == only(objs, "DaemonSet")["spec"]["selector"]["matchLabels"]
    assert pm["spec"]["namespaceSelector"] == {"matchNames": [NS]}
    endpoint = pm["spec"]["podMetricsEndpoints"][0]
    assert endpoint["port"] == "http-metrics"
    assert "http-metrics" in [p["name"] for p in container(objs)["ports"]]
    elsewhere = render(
        helm,
        sets={
            "enablePrometheusServer": "true",
            "podMonitor.create": "true",
            "podMonitor.namespace": "monitoring",
        },
    )
    assert only(elsewhere, "PodMonitor")["metadata"]["namespace"] == "monitoring"


# --- RBAC ------------------------------------------------------------------------------------------


def test_rbac_rules_are_exactly_what_the_agent_needs(helm: str) -> None:
    objs = render(helm)
    role = only(objs, "ClusterRole")
    assert role["rules"] == RBAC_RULES
    binding = only(objs, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    sa = only(objs, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NS}
    ]


def test_service_account_and_rbac_can_be_brought_by_the_user(helm: str) -> None:
    objs = render(
        helm, sets={"serviceAccount.create": "false", "serviceAccount.name": "agent", "rbac.create": "false"}
    )
    assert kinds(objs) == ["DaemonSet"]
    assert pod_spec(objs)["serviceAccountName"] == "agent"


# --- settings names --------------------------------------------------------------------------------


def test_every_env_var_the_chart_renders_is_a_setting(helm: str) -> None:
    objs = render(helm, EVERYTHING_ON)
    rendered = set(env_of(objs))
    known = setting_envs()
    assert set(DOWNWARD) <= known
    assert rendered - known == set(), "the chart renders env vars that are no setting"
    # And the chart keeps up: every setting but the deliberate exceptions has a chart value.
    missing = known - rendered - NOT_RENDERED
    assert missing == set(), (
        f"settings with no chart value (add them to values.yaml and _helpers.tpl): {missing}"
    )


def _agent_env(objs: list[Obj]) -> dict[str, str]:
    """The environment the agent would see: Downward API faked, secretKeyRefs read from the Secret."""
    return resolved_env(objs, env_of(objs), lambda name, _: "node-a" if name == "KUBESPOT_NODE_NAME" else "x")


@pytest.mark.parametrize("values", [EVERYTHING_ON, NTH_VALUES], ids=["everything", "nth"])
def test_rendered_env_loads_through_the_agents_settings_loader(helm: str, values: Path) -> None:
    settings = load(AgentSettings, env=_agent_env(render(helm, values)))
    assert settings.node_name == "node-a"
    assert settings.webhook.url is None
    assert settings.webhook.url_file == "/etc/kubespot/webhook-url/url"
    if values == EVERYTHING_ON:
        assert settings.monitors.rebalance_draining is True
        assert settings.monitors.scheduled_lead_time == 600.0
        assert settings.drain.critical_last == ("system-node-critical",)
        assert settings.drain.pdb_deadline_action == "keep"
        assert settings.kube.qps == 25.5
        assert ("Authorization", "Bearer header-secret-token") in settings.webhook.headers
        assert settings.webhook.proxy == "http://user:proxy-secret@proxy.internal:3128"
        assert settings.webhook.template_file == "/etc/kubespot/webhook-template/template.json"
        assert settings.observability.kubernetes_events_extra_annotations == (
            ("team", "platform"),
            ("tier", "spot"),
        )
        assert settings.monitors.uptime_from_file == "/host/proc/uptime"
    else:
        assert settings.node_actions.taint_effect == "PreferNoSchedule"
        assert settings.monitors.rebalance_monitoring is True
        assert settings.drain.pod_termination_grace_period == 45
        assert settings.drain.delete_local_data is True  # NTH's "" left the default


def test_extra_env_in_both_forms(helm: str) -> None:
    as_map = env_of(render(helm, sets={"extraEnv.HTTPS_PROXY": "http://proxy:3128"}))
    assert as_map["HTTPS_PROXY"] == {"name": "HTTPS_PROXY", "value": "http://proxy:3128"}
    as_list = env_of(render(helm, sets={"extraEnv[0].name": "TZ", "extraEnv[0].value": "UTC"}))
    assert as_list["TZ"] == {"name": "TZ", "value": "UTC"}


# --- on kubesim ------------------------------------------------------------------------------------


LINUX = {"kubernetes.io/os": "linux"}
SPOT = {**LINUX, "karpenter.sh/capacity-type": "spot"}
NODES: list[Obj] = [
    node("spot-a", labels=SPOT),
    node("spot-tainted", labels=SPOT, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoExecute"}]),
    node("ondemand-a", labels={**LINUX, "karpenter.sh/capacity-type": "on-demand"}),
    node(
        "ondemand-cordoned",
        labels={**LINUX, "karpenter.sh/capacity-type": "on-demand"},
        taints=[{"key": "kubespot.io/interruption", "value": "x", "effect": "NoSchedule"}],
        unschedulable=True,
    ),
    node(
        "fargate-ip-10-0-0-1",
        labels={**LINUX, "eks.amazonaws.com/compute-type": "fargate"},
        taints=[{"key": "eks.amazonaws.com/compute-type", "value": "fargate", "effect": "NoSchedule"}],
    ),
    node("windows-a", labels={"kubernetes.io/os": "windows"}),
]


class AgentCluster(Cluster):
    def agent_pods(self) -> dict[str, Obj]:
        """Agent pods by node, waiting until the DaemonSet controller has placed them all."""
        out: dict[str, Obj] = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pods = self.pods(f"app.kubernetes.io/instance={RELEASE}")
            out = {p["spec"]["nodeName"]: p for p in pods if p["spec"].get("nodeName")}
            ds = self.get("daemonset", f"{RELEASE}-kubespot", NS)
            desired = (ds.get("status") or {}).get("desiredNumberScheduled")
            if desired and len(out) == desired:
                return out
            time.sleep(0.1)
        return out


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[AgentCluster]:
    with kubesim_cluster(tmp_path, NODES, AgentCluster) as cluster:
        assert isinstance(cluster, AgentCluster)
        yield cluster


@pytest.mark.slow
@pytest.mark.parametrize(
    ("files", "expected_nodes"),
    [
        ([], {"spot-a", "spot-tainted", "ondemand-a", "ondemand-cordoned"}),
        ([NTH_VALUES], {"spot-a", "spot-tainted"}),
        ([EVERYTHING_ON], {"spot-a", "spot-tainted", "ondemand-a", "ondemand-cordoned"}),
    ],
    ids=["defaults", "nth", "everything"],
)
def test_rendered_objects_create_on_kubesim(
    helm: str, cluster: AgentCluster, files: list[Path], expected_nodes: set[str]
) -> None:
    objs = render(helm, *files)
    assert_created(cluster, objs, cluster.create(objs))
    role = cluster.get("clusterrole", f"{RELEASE}-kubespot", None)
    # everything-on sets pdbDeadlineAction: keep, so no pod is ever deleted and no delete is granted.
    assert role["rules"] == (RBAC_RULES_KEEP if EVERYTHING_ON in files else RBAC_RULES)
    pods = cluster.agent_pods()
    # One agent per Linux non-Fargate node the selector allows, tainted and cordoned ones included.
    assert set(pods) == expected_nodes
    for pod in pods.values():
        assert {"operator": "Exists"} in pod["spec"]["tolerations"]
        assert pod["spec"]["hostNetwork"] is True
        assert pod["spec"]["priorityClassName"] == "system-node-critical"
        names = {e["name"] for e in pod["spec"]["containers"][0]["env"]}
        assert set(DOWNWARD) <= names


@pytest.mark.slow
def test_helm_install_on_kubesim_prints_the_notes(helm: str, cluster: AgentCluster) -> None:
    """A real `helm install` (client-side apply; kubesim has no OpenAPI, so no schema validation)."""
    res = helm_install(helm, cluster, NTH_VALUES)
    assert "STATUS: deployed" in res.stdout
    assert f"DaemonSet {NS}/{RELEASE}-kubespot" in res.stdout
    assert "labelled karpenter.sh/capacity-type=spot" in res.stdout
    assert "Secret nth-webhook (key webhookurl)" in res.stdout
    assert set(cluster.agent_pods()) == {"spot-a", "spot-tainted"}
