"""The controller part of the Helm chart (deploy/helm/kubespot): `kubespot controller` as a Deployment.

Checked on parsed YAML, never on text: which workloads each mode renders (``controller.enabled``,
NTH's ``enableSqsTerminationDraining``, ``daemonset.enabled``), the Deployment (replicas, spread,
probes, security, no host network), its PodDisruptionBudget, ServiceAccount (IRSA), ClusterRole
(exactly the controller's API calls) and the Role on its leader-election Lease, metrics Service and
ServiceMonitor. Every environment variable
the Deployment can render must be a real setting of ``ControllerSettings`` and load through the
controller's own settings loader. Then the rendered objects are created with ``kubectl create`` on
kubesim (and installed with ``helm install``), where the Deployment's pods come up.

As in test_helm_chart.py, kubesim serves no RBAC API and no Prometheus Operator CRDs: the RBAC kinds,
PodMonitor and ServiceMonitor are registered as custom resources first.
"""

from __future__ import annotations

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
    resolved_env,
    run_helm,
    values_args,
)

from kubespot.config.controller import ControllerSettings
from kubespot.config.loader import load, specs
from kubespot.controllers.response.response_actions import enabled_actions
from kubespot.sim.kubesim.testing import node

NTH_QUEUE = FIXTURES / "nth-queue-values.yaml"
CONTROLLER_EVERYTHING = FIXTURES / "controller-everything-on.yaml"
CONTROLLER = f"{RELEASE}-kubespot-controller"
#: The controller's Deployment.
CONTROLLER_POD = Workload("Deployment", CONTROLLER)
pod_spec, container, env_of, plain_env = (
    CONTROLLER_POD.pod_spec,
    CONTROLLER_POD.container,
    CONTROLLER_POD.env,
    CONTROLLER_POD.plain_env,
)
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/prod-kubespot-interruptions"
ROLE_ARN = "arn:aws:iam::123456789012:role/prod-kubespot-controller"
IRSA = "eks.amazonaws.com/role-arn"
#: --set key of the controller's IRSA annotation (dots in the annotation escaped).
IRSA_KEY = "controller.serviceAccount.annotations." + IRSA.replace(".", "\\.")
#: The smallest values that turn the controller on.
ON = {"controller.enabled": "true", "queueURL": QUEUE_URL}

#: Exactly the calls of src/kubespot/kube/client.py and kube/events.py: the node index lists and
#: watches nodes, handlers get and patch them; pods are listed, watched, read and deleted; evictions
#: created; core/v1 events created and patched.
CONTROLLER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]
#: With controller.nodeCleanup.enabled the clean-up also deletes nodes.
CLEANUP_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch", "delete"]},
    *CONTROLLER_RULES[1:],
]
#: everything-on sets pdbDeadlineAction: keep: no pod is ever deleted, so delete is not granted.
CLEANUP_RULES_KEEP = [
    {**r, "verbs": ["get", "list", "watch"]} if r["resources"] == ["pods"] else r for r in CLEANUP_RULES
]
#: controller.provisioning.enabled: src/kubespot/kube/custom.py's calls on Karpenter's objects (one
#: list + watch each, the status written with a PUT to the status subresource).
PROVISIONING_RULES = [
    {"apiGroups": ["karpenter.sh"], "resources": ["nodepools"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["karpenter.sh"], "resources": ["nodepools/status"], "verbs": ["update"]},
    # patch: the EC2NodeClass termination finalizer (nodeclass_termination.py).
    {
        "apiGroups": ["karpenter.k8s.aws"],
        "resources": ["ec2nodeclasses"],
        "verbs": ["get", "list", "watch", "patch"],
    },
    {"apiGroups": ["karpenter.k8s.aws"], "resources": ["ec2nodeclasses/status"], "verbs": ["update"]},
    # NodeClaims: created and watched by the provisioner (issue 14); their finalizer and labels
    # patched, deleted and their status PUT by the NodeClaim controller.
    {
        "apiGroups": ["karpenter.sh"],
        "resources": ["nodeclaims"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims/status"], "verbs": ["update"]},
    # What a simulation reads.
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list"]},
    {
        "apiGroups": [""],
        "resources": ["persistentvolumeclaims", "persistentvolumes", "namespaces"],
        "verbs": ["list"],
    },
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["list"]},
    # The NodeClaim termination's wait for volumes to detach.
    {"apiGroups": ["storage.k8s.io"], "resources": ["volumeattachments"], "verbs": ["list"]},
]


def lease_rules(name: str) -> list[Obj]:
    """kube/leases.py's calls on the one Lease: created once, then read and replaced (renewals)."""
    return [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [name],
            "verbs": ["get", "update"],
        },
    ]


#: Controller settings the chart deliberately never renders: in-cluster credentials need no
#: kubeconfig or context, the webhook URL only ever reaches the pod as a file, and the uptime file
#: belongs to IMDS monitoring, which the controller does not do.
NOT_RENDERED = {
    "KUBESPOT_KUBECONFIG",
    "KUBESPOT_KUBE_CONTEXT",
    "KUBESPOT_WEBHOOK_URL",
    "KUBESPOT_IMDS_UPTIME_FROM_FILE",
    # AWS's two-minute notice is fixed; the setting exists for a simulated EC2 running faster.
    "KUBESPOT_QUEUE_INTERRUPTION_NOTICE",
}
#: What the chart renders for the controller whatever the values: the probes and metrics switches
#: (it builds the probes and ports from them) and the queue and API budget.
ALWAYS = {
    "KUBESPOT_OBSERVABILITY_ENABLE_PROBES_SERVER",
    "KUBESPOT_OBSERVABILITY_PROBES_SERVER_PORT",
    "KUBESPOT_OBSERVABILITY_PROBES_SERVER_ENDPOINT",
    "KUBESPOT_OBSERVABILITY_ENABLE_PROMETHEUS_SERVER",
    "KUBESPOT_QUEUE_URL",
    "KUBESPOT_KUBE_API_QPS",
    "KUBESPOT_KUBE_API_BURST",
    # The Lease is always named by the chart, so its Role can name it too.
    "KUBESPOT_LEADER_ELECTION_LEASE_NAME",
    # enableASGLifecycleDraining: true, NTH's chart default (shared with the agent).
    "KUBESPOT_IMDS_ASG_LIFECYCLE_DRAINING",
}
#: From the Downward API, whatever the values: the replica's identity and its Lease's namespace.
DOWNWARD = {"KUBESPOT_POD_NAME": "metadata.name", "KUBESPOT_POD_NAMESPACE": "metadata.namespace"}


# --- helm ------------------------------------------------------------------------------------------


def deployment(objs: list[Obj]) -> Obj:
    return only(objs, "Deployment", CONTROLLER)


def controller_setting_envs() -> set[str]:
    return {s.env for s in specs(ControllerSettings)}


# --- lint ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "sets"),
    [
        ([], ON),
        ([NTH_QUEUE], None),
        ([EVERYTHING_ON, CONTROLLER_EVERYTHING], None),
        ([], {**ON, "daemonset.enabled": "false", "controller.podAntiAffinity": "soft"}),
    ],
    ids=["controller", "nth-queue", "everything", "controller-only-soft"],
)
def test_helm_lint_passes_with_the_controller(
    helm: str, files: list[Path], sets: dict[str, str] | None
) -> None:
    res = run_helm(helm, "lint", "--strict", str(CHART), *values_args(files, sets))
    assert "0 chart(s) failed" in res.stdout


# --- which workloads -------------------------------------------------------------------------------


def test_controller_is_off_by_default(helm: str) -> None:
    assert kinds(render(helm)) == ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "ServiceAccount"]


def test_controller_enabled_adds_it_beside_the_agents(helm: str) -> None:
    objs = render(helm, sets=ON)
    assert kinds(objs) == [
        "ClusterRole",
        "ClusterRole",
        "ClusterRoleBinding",
        "ClusterRoleBinding",
        "DaemonSet",
        "Deployment",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "ServiceAccount",
        "ServiceAccount",
    ]
    names = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert ("DaemonSet", f"{RELEASE}-kubespot") in names
    assert ("ServiceAccount", CONTROLLER) in names
    assert ("ClusterRole", CONTROLLER) in names


def test_nth_queue_mode_renders_the_deployment_and_no_daemonset(helm: str) -> None:
    """NTH runs either its DaemonSet or its Deployment: enableSqsTerminationDraining picks the latter."""
    objs = render(helm, NTH_QUEUE)
    assert "DaemonSet" not in kinds(objs)
    assert "PodMonitor" not in kinds(objs)
    assert kinds(objs) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
    ]
    # The agent's own RBAC is gone with it: every object left is the controller's.
    for obj in objs:
        assert obj["metadata"]["labels"]["app.kubernetes.io/component"] == "controller"


def test_queue_mode_can_keep_the_daemonset(helm: str) -> None:
    objs = render(helm, NTH_QUEUE, sets={"daemonset.enabled": "true"})
    assert {"DaemonSet", "Deployment"} <= set(kinds(objs))
    # Both service accounts: the agent's keeps NTH's name, the controller gets its own.
    accounts = {o["metadata"]["name"] for o in objs if o["kind"] == "ServiceAccount"}
    assert accounts == {"aws-node-termination-handler", CONTROLLER}
    assert pod_spec(objs)["serviceAccountName"] == CONTROLLER


def test_controller_alone_without_nth_switch(helm: str) -> None:
    objs = render(helm, sets={**ON, "daemonset.enabled": "false"})
    assert "DaemonSet" not in kinds(objs)
    assert "Deployment" in kinds(objs)


def test_selectors_of_agent_and_controller_never_overlap(helm: str) -> None:
    objs = render(helm, sets={**ON, "enablePrometheusServer": "true", "podMonitor.create": "true"})
    agent_selector = only(objs, "DaemonSet")["spec"]["selector"]["matchLabels"]
    controller_labels = deployment(objs)["spec"]["template"]["metadata"]["labels"]
    assert not agent_selector.items() <= controller_labels.items()
    pod_monitor = only(objs, "PodMonitor")["spec"]["selector"]["matchLabels"]
    assert not pod_monitor.items() <= controller_labels.items()
    controller_selector = deployment(objs)["spec"]["selector"]["matchLabels"]
    agent_labels = only(objs, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert not controller_selector.items() <= agent_labels.items()


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        ({"enableSqsTerminationDraining": "true"}, "queue-processor"),
        ({"enableSqsTerminationDraining": "true"}, "queueURL"),
        ({"controller.enabled": "true"}, "needs queueURL"),
        ({"daemonset.enabled": "false"}, "would run nothing"),
        ({**ON, "serviceMonitor.create": "true"}, "enablePrometheusServer"),
        (
            {**ON, "serviceAccount.name": "shared", "controller.serviceAccount.name": "shared"},
            "same name",
        ),
    ],
)
def test_controller_values_that_cannot_work_stop_the_release(
    helm: str, sets: dict[str, str], message: str
) -> None:
    assert message in render_fails(helm, sets=sets)


# --- the Deployment --------------------------------------------------------------------------------


def test_deployment_runs_two_spread_replicas_of_the_controller(helm: str) -> None:
    objs = render(helm, sets=ON)
    dep = deployment(objs)
    assert dep["metadata"]["namespace"] == NS
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }
    selector = dep["spec"]["selector"]["matchLabels"]
    assert selector.items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    spec = pod_spec(objs)
    # Two replicas never share a node; zones are spread when possible.
    (term,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": selector}}
    assert spec["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector},
        }
    ]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert "tolerations" not in spec  # an ordinary workload: no tolerate-everything
    assert spec.get("hostNetwork", False) is False
    assert "hostPID" not in spec
    c = container(objs)
    assert c["command"] == ["kubespot", "controller"]
    assert c["image"] == "ghcr.io/kubespot/kubespot:0.1.0"
    assert c["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "384Mi"}}
    assert all("hostPort" not in p for p in c["ports"])


def test_anti_affinity_can_be_softened_or_replaced(helm: str, tmp_path: Path) -> None:
    soft = pod_spec(render(helm, sets={**ON, "controller.podAntiAffinity": "soft"}))["affinity"]
    (preferred,) = soft["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["weight"] == 100
    assert preferred["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert "affinity" not in pod_spec(render(helm, sets={**ON, "controller.podAntiAffinity": "none"}))
    own = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}}
    values = tmp_path / "affinity.yaml"
    values.write_text(yaml.safe_dump({"controller": {"affinity": own}}))
    assert pod_spec(render(helm, values, sets=ON))["affinity"] == own


def test_tolerations_and_node_selector_are_the_controllers_own(helm: str, tmp_path: Path) -> None:
    values = tmp_path / "placement.yaml"
    tolerations = [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
    ]
    values.write_text(
        yaml.safe_dump(
            {
                "controller": {
                    "tolerations": tolerations,
                    "nodeSelector": {"karpenter.sh/capacity-type": "on-demand"},
                },
                # The agent's placement values never reach the controller.
                "nodeSelector": {"karpenter.sh/capacity-type": "spot"},
                "daemonsetTolerations": [{"operator": "Exists"}],
            }
        )
    )
    spec = pod_spec(render(helm, values, sets=ON))
    assert spec["tolerations"] == tolerations
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux", "karpenter.sh/capacity-type": "on-demand"}


def test_security_context_is_restricted_like_the_agents(helm: str) -> None:
    objs = render(helm, sets=ON)
    pod = pod_spec(objs)["securityContext"]
    assert pod["runAsNonRoot"] is True
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container(objs)["securityContext"]
    assert sc == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    mounts = {m["name"]: m["mountPath"] for m in container(objs)["volumeMounts"]}
    assert mounts == {"tmp": "/tmp"}
    # NTH's runAsUserID is mapped here too.
    assert container(render(helm, NTH_QUEUE))["securityContext"]["runAsUser"] == 1001


def test_probes_target_the_probes_server(helm: str) -> None:
    for sets, port, path in [
        (ON, 8080, "/healthz"),
        ({**ON, "probesServerPort": "8181", "probesServerEndpoint": "/livez"}, 8181, "/livez"),
    ]:
        objs = render(helm, sets=sets)
        c = container(objs)
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports["http-probes"] == port
        for probe in ("livenessProbe", "readinessProbe"):
            assert c[probe]["httpGet"] == {"path": path, "port": "http-probes"}
        assert c["livenessProbe"]["periodSeconds"] == 40
        env = plain_env(objs)
        assert env["KUBESPOT_OBSERVABILITY_ENABLE_PROBES_SERVER"] == "true"
        assert env["KUBESPOT_OBSERVABILITY_PROBES_SERVER_PORT"] == str(port)
        assert env["KUBESPOT_OBSERVABILITY_PROBES_SERVER_ENDPOINT"] == path
    # The agent's switch: the controller always serves its probes, as NTH's Deployment does
    # (it renders ENABLE_PROBES_SERVER "true" whatever enableProbesServer says).
    off = render(helm, sets={**ON, "enableProbesServer": "false"})
    assert "livenessProbe" in container(off)
    assert plain_env(off)["KUBESPOT_OBSERVABILITY_ENABLE_PROBES_SERVER"] == "true"


def test_defaults_render_only_the_chart_choices(helm: str) -> None:
    """Unset values leave the controller's defaults; the chart sets probes, metrics, queue and API budget."""
    objs = render(helm, sets=ON)
    env = plain_env(objs)
    assert set(env) == ALWAYS
    assert env["KUBESPOT_QUEUE_URL"] == QUEUE_URL
    assert env["KUBESPOT_LEADER_ELECTION_LEASE_NAME"] == CONTROLLER
    downward = {n: e["valueFrom"]["fieldRef"]["fieldPath"] for n, e in env_of(objs).items() if n in DOWNWARD}
    assert downward == DOWNWARD
    # Karpenter's budget for a cluster-wide controller, not the agent's 50/100.
    assert (env["KUBESPOT_KUBE_API_QPS"], env["KUBESPOT_KUBE_API_BURST"]) == ("200", "300")


def test_nth_queue_values_produce_the_matching_controller_env(helm: str) -> None:
    objs = render(helm, NTH_QUEUE)
    env = plain_env(objs)
    expected = {
        "KUBESPOT_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/123456789012/prod-nth-queue",
        "KUBESPOT_AWS_REGION": "eu-west-1",
        "KUBESPOT_QUEUE_CHECK_TAG_BEFORE_DRAINING": "false",
        "KUBESPOT_QUEUE_MANAGED_TAG": "aws-node-termination-handler/managed",
        "KUBESPOT_QUEUE_USE_PROVIDER_ID": "true",
        "KUBESPOT_QUEUE_DELETE_IF_NODE_NOT_FOUND": "true",
        "KUBESPOT_QUEUE_COMPLETE_LIFECYCLE_ACTION_DELAY": "5",
        "KUBESPOT_QUEUE_HEARTBEAT_INTERVAL": "30",
        "KUBESPOT_QUEUE_HEARTBEAT_UNTIL": "600",
        # NTH's queue mode ignores the IMDS-only switches: every rebalance message is cordoned and
        # drained (NTH's draincordon handler), so both are on whatever the file says.
        "KUBESPOT_IMDS_REBALANCE_MONITORING": "true",
        "KUBESPOT_IMDS_REBALANCE_DRAINING": "true",
        "KUBESPOT_NODE_ACTIONS_TAINT_NODE": "true",
        "KUBESPOT_DRAIN_DELETE_LOCAL_DATA": "true",
        "KUBESPOT_DRAIN_POD_TERMINATION_GRACE_PERIOD": "-1",
        "KUBESPOT_DRAIN_NODE_TERMINATION_GRACE_PERIOD": "120",
        "KUBESPOT_OBSERVABILITY_JSON_LOGGING": "true",
        "KUBESPOT_OBSERVABILITY_EMIT_KUBERNETES_EVENTS": "true",
        "KUBESPOT_OBSERVABILITY_ENABLE_PROMETHEUS_SERVER": "true",
        "KUBESPOT_OBSERVABILITY_PROMETHEUS_SERVER_PORT": "9092",
        # NTH's kubeApiQps 5 / 10 is an agent's budget: the controller keeps its own.
        "KUBESPOT_KUBE_API_QPS": "200",
        "KUBESPOT_KUBE_API_BURST": "300",
    }
    assert {k: env.get(k) for k in expected} == expected
    # NTH's "" means "the default"; IMDS-only values never reach the controller.
    for unset in ("KUBESPOT_AWS_ENDPOINT_URL", "KUBESPOT_IMDS_TRIES"):
        assert unset not in env
    # NTH's queue processor acts on every spot, scheduled and ASG message whatever the IMDS switches say.
    for on in ("SPOT_INTERRUPTION", "SCHEDULED_EVENT", "ASG_LIFECYCLE"):
        assert env[f"KUBESPOT_IMDS_{on}_DRAINING"] == "true"
    assert "KUBESPOT_NODE_NAME" not in env  # no Downward API: the controller serves every node


def test_older_nth_names_do_nothing_as_in_nths_chart(helm: str) -> None:
    # NTH's chart renders CHECK_ASG_TAG_BEFORE_DRAINING/MANAGED_ASG_TAG beside the newer names, whose
    # chart defaults are always set, and NTH's config.go prefers the newer: an older value set alone
    # changes nothing in NTH, and so in kubespot (review of issue 10).
    env = plain_env(
        render(helm, sets={**ON, "checkASGTagBeforeDraining": "false", "managedAsgTag": "team/managed"})
    )
    assert "KUBESPOT_QUEUE_CHECK_TAG_BEFORE_DRAINING" not in env  # the default (true), as NTH's
    assert "KUBESPOT_QUEUE_MANAGED_TAG" not in env
    both = plain_env(render(helm, sets={**ON, "managedAsgTag": "old/tag", "managedTag": "new/tag"}))
    assert both["KUBESPOT_QUEUE_MANAGED_TAG"] == "new/tag"


def test_replicas_and_pod_disruption_budget(helm: str) -> None:
    objs = render(helm, sets=ON)
    pdb = only(objs, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["metadata"]["name"] == CONTROLLER
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deployment(objs)["spec"]["selector"]["matchLabels"]
    # NTH's replicas wins; with one replica there is no budget (as in NTH's chart).
    single = render(helm, sets={**ON, "replicas": "1"})
    assert deployment(single)["spec"]["replicas"] == 1
    assert "PodDisruptionBudget" not in kinds(single)
    three = render(helm, sets={**ON, "controller.replicas": "3", "podDisruptionBudget.minAvailable": "2"})
    assert deployment(three)["spec"]["replicas"] == 3
    assert only(three, "PodDisruptionBudget")["spec"] == {
        "minAvailable": 2,
        "selector": {"matchLabels": deployment(three)["spec"]["selector"]["matchLabels"]},
    }


# --- service account and RBAC ----------------------------------------------------------------------


def test_service_account_carries_the_irsa_annotation(helm: str) -> None:
    objs = render(helm, sets={**ON, IRSA_KEY: ROLE_ARN})
    sa = only(objs, "ServiceAccount", CONTROLLER)
    assert sa["metadata"]["annotations"] == {IRSA: ROLE_ARN}
    assert sa["metadata"]["namespace"] == NS
    assert pod_spec(objs)["serviceAccountName"] == CONTROLLER
    # The agents get no AWS role from the controller's value.
    assert "annotations" not in only(objs, "ServiceAccount", f"{RELEASE}-kubespot")["metadata"]


def test_nth_service_account_naming_is_kept_in_queue_mode(helm: str) -> None:
    """An NTH queue-mode role trusts system:serviceaccount:<ns>:<NTH's serviceAccount.name>."""
    objs = render(helm, NTH_QUEUE)
    sa = only(objs, "ServiceAccount")
    assert sa["metadata"]["name"] == "aws-node-termination-handler"
    assert sa["metadata"]["annotations"] == {IRSA: "arn:aws:iam::123456789012:role/prod-nth"}
    assert pod_spec(objs)["serviceAccountName"] == "aws-node-termination-handler"
    binding = only(objs, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "aws-node-termination-handler", "namespace": NS}
    ]
    # controller.serviceAccount.annotations win over NTH's.
    other = "arn:aws:iam::123456789012:role/other"
    assert only(render(helm, NTH_QUEUE, sets={IRSA_KEY: other}), "ServiceAccount")["metadata"][
        "annotations"
    ] == {IRSA: other}


def test_existing_service_account_and_rbac(helm: str) -> None:
    objs = render(
        helm,
        sets={
            **ON,
            "daemonset.enabled": "false",
            "controller.serviceAccount.create": "false",
            "controller.serviceAccount.name": "mine",
            "rbac.create": "false",
        },
    )
    assert kinds(objs) == ["Deployment", "PodDisruptionBudget"]
    assert pod_spec(objs)["serviceAccountName"] == "mine"


def test_cluster_role_is_exactly_what_the_controller_calls(helm: str) -> None:
    objs = render(helm, sets=ON)
    role = only(objs, "ClusterRole", CONTROLLER)
    assert role["rules"] == CONTROLLER_RULES
    binding = only(objs, "ClusterRoleBinding", CONTROLLER)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": CONTROLLER,
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": CONTROLLER, "namespace": NS}]
    # The agent's role is unchanged: no list/watch on nodes for a per-node agent.
    agent = only(objs, "ClusterRole", f"{RELEASE}-kubespot")
    assert agent["rules"][0] == {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}


def test_lease_role_follows_leader_election(helm: str) -> None:
    objs = render(helm, sets=ON)
    role = only(objs, "Role", CONTROLLER)
    assert role["metadata"]["namespace"] == NS
    assert role["rules"] == lease_rules(CONTROLLER)
    binding = only(objs, "RoleBinding", CONTROLLER)
    assert binding["metadata"]["namespace"] == NS
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": CONTROLLER}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": CONTROLLER, "namespace": NS}]
    # Another lease name and namespace: the Role follows them, the pod is told both.
    moved = render(
        helm,
        sets={
            **ON,
            "controller.leaderElection.leaseName": "mine",
            "controller.leaderElection.namespace": "ops",
        },
    )
    assert only(moved, "Role", CONTROLLER)["metadata"]["namespace"] == "ops"
    assert only(moved, "Role", CONTROLLER)["rules"] == lease_rules("mine")
    assert only(moved, "RoleBinding", CONTROLLER)["subjects"][0]["namespace"] == NS
    env = plain_env(moved)
    assert env["KUBESPOT_LEADER_ELECTION_LEASE_NAME"] == "mine"
    assert env["KUBESPOT_LEADER_ELECTION_NAMESPACE"] == "ops"
    # Election off: no Role, and the controller is told.
    off = render(helm, sets={**ON, "controller.leaderElection.enabled": "false"})
    assert not {"Role", "RoleBinding"} & set(kinds(off))
    assert plain_env(off)["KUBESPOT_LEADER_ELECTION_ENABLED"] == "false"


def test_status_configmap_role_only_with_provisioning_and_only_in_the_release_namespace(helm: str) -> None:
    """Review 15a #6. Cluster Autoscaler's chart (charts/cluster-autoscaler/templates/role.yaml)
    grants create on configmaps and get/update on its cluster-autoscaler-status by name, in its own
    namespace: so does kubespot's for the status ConfigMap the leader keeps, with provisioning on."""
    status = f"{CONTROLLER}-status"
    assert not [o for o in render(helm, sets=ON) if o["metadata"]["name"] == status]
    objs = render(
        helm,
        sets={**ON, "controller.provisioning.enabled": "true", "controller.leaderElection.namespace": "ops"},
    )
    role = only(objs, "Role", status)
    assert role["metadata"]["namespace"] == NS
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["kubespot-status"],
            "verbs": ["get", "update"],
        },
    ]
    binding = only(objs, "RoleBinding", status)
    assert binding["metadata"]["namespace"] == NS
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": status}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": CONTROLLER, "namespace": NS}]
    named = render(
        helm,
        sets={
            **ON,
            "controller.provisioning.enabled": "true",
            "controller.provisioning.statusConfigMap": "mine",
        },
    )
    assert only(named, "Role", status)["rules"][1]["resourceNames"] == ["mine"]
    assert plain_env(named)["KUBESPOT_PROVISIONING_STATUS_CONFIGMAP"] == "mine"


def test_nodes_may_be_deleted_only_with_node_cleanup(helm: str) -> None:
    assert only(render(helm, sets=ON), "ClusterRole", CONTROLLER)["rules"] == CONTROLLER_RULES
    objs = render(helm, sets={**ON, "controller.nodeCleanup.enabled": "true"})
    assert only(objs, "ClusterRole", CONTROLLER)["rules"] == CLEANUP_RULES
    assert plain_env(objs)["KUBESPOT_NODE_CLEANUP_ENABLED"] == "true"
    # The agent never gets delete on nodes.
    agent = only(objs, "ClusterRole", f"{RELEASE}-kubespot")
    assert "delete" not in agent["rules"][0]["verbs"]


def test_karpenter_objects_readable_and_their_status_writable_only_with_provisioning(helm: str) -> None:
    """aws/karpenter-provider-aws charts/karpenter/templates/clusterrole-core.yaml and
    clusterrole.yaml grant Karpenter get/list/watch on nodepools and ec2nodeclasses and
    update/patch on them and their status (it also writes finalizers and hashes); kubespot only
    writes the status, with a PUT (update), and only when controller.provisioning.enabled."""
    assert only(render(helm, sets=ON), "ClusterRole", CONTROLLER)["rules"] == CONTROLLER_RULES
    objs = render(helm, sets={**ON, "controller.provisioning.enabled": "true"})
    # The NodeClaim controller deletes Nodes (drained ones, those of collected instances).
    assert only(objs, "ClusterRole", CONTROLLER)["rules"] == CLEANUP_RULES + PROVISIONING_RULES
    assert plain_env(objs)["KUBESPOT_PROVISIONING_ENABLED"] == "true"
    # Without a queue the controller still has work: the release renders.
    alone = render(helm, sets={"controller.enabled": "true", "controller.provisioning.enabled": "true"})
    assert only(alone, "ClusterRole", CONTROLLER)["rules"] == CLEANUP_RULES + PROVISIONING_RULES


# --- metrics ---------------------------------------------------------------------------------------


def test_metrics_service_and_service_monitor_only_when_enabled(helm: str) -> None:
    assert not {"Service", "ServiceMonitor"} & set(kinds(render(helm, sets=ON)))
    metrics_only = render(helm, sets={**ON, "enablePrometheusServer": "true"})
    assert "Service" in kinds(metrics_only)
    assert "ServiceMonitor" not in kinds(metrics_only)
    objs = render(
        helm,
        sets={
            **ON,
            "enablePrometheusServer": "true",
            "prometheusServerPort": "9100",
            "serviceMonitor.create": "true",
            "serviceMonitor.labels.release": "prometheus",
        },
    )
    svc = only(objs, "Service")
    assert svc["spec"]["ports"] == [
        {"name": "http-metrics", "port": 9100, "targetPort": "http-metrics", "protocol": "TCP"}
    ]
    assert svc["spec"]["selector"] == deployment(objs)["spec"]["selector"]["matchLabels"]
    assert {"name": "http-metrics", "containerPort": 9100, "protocol": "TCP"} in container(objs)["ports"]
    sm = only(objs, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["namespace"] == NS
    assert sm["metadata"]["labels"]["release"] == "prometheus"
    # A ServiceMonitor selects Services by their labels, then scrapes the named port.
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] == "http-metrics"
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NS]}
    # The controller's ServiceMonitor is ignored while the controller is off (as in NTH's chart).
    assert "ServiceMonitor" not in kinds(
        render(helm, sets={"enablePrometheusServer": "true", "serviceMonitor.create": "true"})
    )


# --- settings names --------------------------------------------------------------------------------


def test_every_env_var_the_controller_renders_is_a_controller_setting(helm: str) -> None:
    objs = render(helm, EVERYTHING_ON, CONTROLLER_EVERYTHING)
    rendered = set(env_of(objs))
    known = controller_setting_envs()
    assert rendered - known == set(), "the chart renders env vars that are no controller setting"
    # And the chart keeps up: every controller setting but the deliberate exceptions has a value.
    missing = known - rendered - NOT_RENDERED
    assert missing == set(), f"controller settings with no chart value (values.yaml, _helpers.tpl): {missing}"
    assert rendered & NOT_RENDERED == set()


def _controller_env(objs: list[Obj]) -> dict[str, str]:
    """The environment the controller would see, secretKeyRefs read from the chart's Secret."""
    # The Downward API, as the kubelet would fill it in.
    fields = {"metadata.name": f"{CONTROLLER}-0", "metadata.namespace": NS}
    return resolved_env(objs, env_of(objs), lambda _, e: fields[e["valueFrom"]["fieldRef"]["fieldPath"]])


def test_rendered_env_loads_through_the_controllers_settings_loader(helm: str) -> None:
    settings = load(
        ControllerSettings, env=_controller_env(render(helm, EVERYTHING_ON, CONTROLLER_EVERYTHING))
    )
    assert (
        settings.queue.url == "https://sqs.us-east-1.amazonaws.com/123456789012/test-kubespot-interruptions"
    )
    assert settings.queue.receivers == 6
    assert settings.queue.max_in_flight == 500
    assert settings.queue.wait_time == 10
    assert settings.queue.visibility_timeout == 60
    assert settings.queue.malformed_action == "delete"
    assert settings.queue.check_tag_before_draining is False
    assert settings.queue.managed_tag == "example.com/kubespot"
    assert settings.queue.heartbeat_interval == 20.0
    assert settings.aws.region == "us-east-1"
    assert settings.aws.endpoint_url == "http://127.0.0.1:5000"
    assert settings.aws.max_concurrency == 16
    assert settings.kube.qps == 150.5
    assert settings.kube.burst == 250
    assert settings.webhook.url is None
    assert settings.webhook.url_file == "/etc/kubespot/webhook-url/url"
    assert settings.observability.probes_server_port == 8181
    assert (settings.pod_name, settings.pod_namespace) == (f"{CONTROLLER}-0", NS)
    le = settings.leader_election
    assert (le.enabled, le.lease_name, le.namespace) == (True, "test-lease", "default")
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (20.0, 12.5, 3.0)
    cleanup = settings.node_cleanup
    assert (cleanup.enabled, cleanup.interval, cleanup.not_ready_for) == (True, 30.0, 600.0)
    prov = settings.provisioning
    assert (prov.enabled, prov.nodeclass_resync_interval, prov.retry_base, prov.retry_cap) == (
        True,
        120.0,
        1.5,
        60.0,
    )
    assert (prov.stuck_after, prov.kubernetes_version) == (600.0, "1.31")
    assert prov.status_configmap == "kubespot-status-prod"
    nth = load(ControllerSettings, env=_controller_env(render(helm, NTH_QUEUE)))
    assert nth.queue.delete_if_node_not_found is True
    assert nth.aws.region == "eu-west-1"
    assert nth.kube.qps == 200


def test_webhook_secret_reaches_the_controller_as_a_file(helm: str) -> None:
    objs = render(helm, EVERYTHING_ON, CONTROLLER_EVERYTHING)
    mounts = {m["name"]: m for m in container(objs)["volumeMounts"]}
    assert mounts["webhook-url"]["mountPath"] == "/etc/kubespot/webhook-url"
    volumes = {v["name"]: v for v in pod_spec(objs)["volumes"]}
    assert volumes["webhook-url"]["secret"]["secretName"] == f"{RELEASE}-kubespot-webhook"
    assert "uptime" not in volumes  # IMDS-only: no hostPath for the controller
    assert "checksum/webhook-secret" in deployment(objs)["spec"]["template"]["metadata"]["annotations"]
    assert "plain-secret-token" not in yaml.safe_dump(deployment(objs))


# --- on kubesim ------------------------------------------------------------------------------------


LINUX = {"kubernetes.io/os": "linux"}
NODES: list[Obj] = [
    node("ondemand-a", labels={**LINUX, "topology.kubernetes.io/zone": "eu-west-1a"}),
    node("ondemand-b", labels={**LINUX, "topology.kubernetes.io/zone": "eu-west-1b"}),
    node("spot-a", labels={**LINUX, "karpenter.sh/capacity-type": "spot"}),
    node("windows-a", labels={"kubernetes.io/os": "windows"}),
]


class ControllerCluster(Cluster):
    def controller_pods(self, want: int) -> list[Obj]:
        """The controller's pods once ``want`` of them run and are Ready (or what there is after 10 s)."""
        selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/name=kubespot-controller"
        pods: list[Obj] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pods = [p for p in self.pods(selector) if _ready(p)]
            if len(pods) == want:
                return pods
            time.sleep(0.1)
        return pods


def _ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return status.get("phase") == "Running" and conditions.get("Ready") == "True"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ControllerCluster]:
    with kubesim_cluster(tmp_path, NODES, ControllerCluster) as cluster:
        assert isinstance(cluster, ControllerCluster)
        yield cluster


@pytest.mark.slow
@pytest.mark.parametrize(
    ("files", "sets", "replicas", "rules"),
    [
        ([], {**ON, "enablePrometheusServer": "true", "serviceMonitor.create": "true"}, 2, CONTROLLER_RULES),
        ([NTH_QUEUE], None, 2, CONTROLLER_RULES),
        ([EVERYTHING_ON, CONTROLLER_EVERYTHING], None, 3, CLEANUP_RULES_KEEP + PROVISIONING_RULES),
    ],
    ids=["controller", "nth-queue", "everything"],
)
def test_rendered_controller_objects_create_on_kubesim(
    helm: str,
    cluster: ControllerCluster,
    files: list[Path],
    sets: dict[str, str] | None,
    replicas: int,
    rules: list[Obj],
) -> None:
    objs = render(helm, *files, sets=sets)
    assert_created(cluster, objs, cluster.create(objs))
    role = cluster.get("clusterrole", CONTROLLER, None)
    assert role["rules"] == rules
    lease_role = only(objs, "Role", CONTROLLER)
    assert (
        cluster.get("role", CONTROLLER, lease_role["metadata"]["namespace"])["rules"] == lease_role["rules"]
    )
    pods = cluster.controller_pods(replicas)
    assert len(pods) == replicas, f"{len(pods)} of {replicas} controller pods came up"
    for pod in pods:
        assert pod["spec"]["nodeName"] != "windows-a"
        assert pod["spec"].get("hostNetwork", False) is False
        assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
        assert pod["spec"]["containers"][0]["command"] == ["kubespot", "controller"]
    dep = cluster.get("deployment", CONTROLLER, NS)
    assert dep["spec"]["replicas"] == replicas


@pytest.mark.slow
def test_helm_install_nth_queue_values_on_kubesim(helm: str, cluster: ControllerCluster) -> None:
    """A real `helm install` of an NTH queue-mode values file: the controller alone, with its notes."""
    res = helm_install(helm, cluster, NTH_QUEUE)
    assert "STATUS: deployed" in res.stdout
    assert f"Deployment {NS}/{CONTROLLER}" in res.stdout
    assert "IRSA role arn:aws:iam::123456789012:role/prod-nth" in res.stdout
    assert "DaemonSet" not in res.stdout
    assert len(cluster.controller_pods(2)) == 2


# --- AWS response actions --------------------------------------------------------------------------


def test_response_actions_reach_the_controller(helm: str) -> None:
    settings = load(
        ControllerSettings, env=_controller_env(render(helm, EVERYTHING_ON, CONTROLLER_EVERYTHING))
    )
    lb, iso, pub = settings.loadbalancer, settings.isolation, settings.publish
    assert (
        lb.enabled and lb.classic and {k.value for k in lb.kinds} == {"spot-itn", "asg-lifecycle-termination"}
    )
    assert (lb.target_group_tag_key, lb.target_group_tag_value) == ("elbv2.k8s.aws/cluster", "test")
    assert (lb.settle, lb.max_delay, lb.index_ttl) == (3.0, 20.5, 60.0)
    assert iso.enabled and iso.quarantine_group == "sg-0123456789abcdef0"
    assert {k.value for k in iso.kinds} == {"spot-itn"}
    assert pub.sns_topic_arn == "arn:aws:sns:us-east-1:123456789012:kubespot-summaries"
    assert (pub.event_bus, pub.source, pub.detail_type) == ("ops", "example.kubespot", "Interruption handled")
    # Off by default: nothing rendered.
    env = plain_env(render(helm, sets=ON))
    assert not any(
        n.startswith(("KUBESPOT_LOADBALANCER_", "KUBESPOT_ISOLATION_", "KUBESPOT_PUBLISH_")) for n in env
    )


@pytest.mark.parametrize(
    "action",
    [
        {"controller.loadBalancer.enabled": "true"},
        {"controller.isolation.enabled": "true", "controller.isolation.quarantineGroup": "quarantine"},
        {"controller.publish.eventBus": "default"},
    ],
)
def test_a_response_action_lets_the_controller_run_without_a_queue(helm: str, action: dict[str, str]) -> None:
    objs = render(helm, sets={"controller.enabled": "true", **action})
    env = _controller_env(objs)
    assert "KUBESPOT_QUEUE_URL" not in env
    # The controller accepts it: the queue is optional once an action is on.
    settings = load(ControllerSettings, env=env)
    assert settings.queue.url == "" and enabled_actions(settings)
