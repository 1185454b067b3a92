"""Every default against aws-node-termination-handler's documented one, and every NTH name accepted.

The expected values are copied from FACTS.md ("The reference handler"), not from the settings code,
so a changed default fails here until someone decides the difference is deliberate and says why.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubespot.config.agent import AgentSettings
from kubespot.config.loader import InvalidSetting, Spec, is_pairs, load, plain, specs
from kubespot.config.queue import QueueSettings
from kubespot.config.webhook import DEFAULT_TEMPLATE

NTH_TEMPLATE = (
    '{"text":"[NTH][Instance Interruption] EventID: {{ .EventID }} - Kind: {{ .Kind }} - Instance: '
    "{{ .InstanceID }} - Node: {{ .NodeName }} - Description: {{ .Description }} - Start Time: "
    '{{ .StartTime }}"}'
)

#: NTH's env var = default, as FACTS.md lists them (None: no default documented / unset).
NTH_DEFAULTS: dict[str, Any] = {
    "DRY_RUN": False,
    "INSTANCE_METADATA_URL": "http://169.254.169.254",
    "DELETE_LOCAL_DATA": True,
    "IGNORE_DAEMON_SETS": True,
    "POD_TERMINATION_GRACE_PERIOD": -1,
    "NODE_TERMINATION_GRACE_PERIOD": 120,
    "CORDON_ONLY": False,
    "TAINT_NODE": False,
    "TAINT_EFFECT": "NoSchedule",
    "ENABLE_OUT_OF_SERVICE_TAINT": False,
    "EXCLUDE_FROM_LOAD_BALANCERS": False,
    "ENABLE_SPOT_INTERRUPTION_DRAINING": True,
    "ENABLE_SCHEDULED_EVENT_DRAINING": True,
    "ENABLE_REBALANCE_MONITORING": False,
    "ENABLE_REBALANCE_DRAINING": False,
    "ENABLE_ASG_LIFECYCLE_DRAINING": False,
    "METADATA_TRIES": 3,
    "WEBHOOK_URL": None,
    "WEBHOOK_HEADERS": {"Content-type": "application/json"},
    "WEBHOOK_TEMPLATE": NTH_TEMPLATE,
    "WEBHOOK_TEMPLATE_FILE": None,
    "WEBHOOK_PROXY": None,
    "JSON_LOGGING": False,
    "LOG_LEVEL": "info",
    "ENABLE_PROMETHEUS_SERVER": False,
    "PROMETHEUS_SERVER_PORT": 9092,
    "ENABLE_PROBES_SERVER": False,
    "PROBES_SERVER_PORT": 8080,
    "PROBES_SERVER_ENDPOINT": "/healthz",
    "EMIT_KUBERNETES_EVENTS": False,
    "KUBERNETES_EVENTS_EXTRA_ANNOTATIONS": {},
    "KUBE_API_QPS": 5,
    "KUBE_API_BURST": 10,
}
#: Where kubespot deliberately differs (the setting's doc must say why): NTH name -> kubespot default.
DELIBERATE: dict[str, Any] = {"KUBE_API_QPS": 50.0, "KUBE_API_BURST": 100}
#: NTH names with no fixed default value in FACTS.md.
NO_DEFAULT = {"NODE_NAME", "UPTIME_FROM_FILE", "POD_NAME", "NAMESPACE"}
#: NTH's deprecated names, read when the newer name is absent (NTH pkg/config/config.go).
DEPRECATED = {"GRACE_PERIOD"}
#: NTH's queue-processor settings: read by `kubespot controller`, not the agent.
QUEUE_MODE = {
    "ENABLE_SQS_TERMINATION_DRAINING",
    "QUEUE_URL",
    "AWS_REGION",
    "AWS_ENDPOINT",
    "WORKERS",
    "CHECK_TAG_BEFORE_DRAINING",
    "MANAGED_TAG",
    "USE_PROVIDER_ID",
    "COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS",
    "DELETE_SQS_MSG_IF_NODE_NOT_FOUND",
    "HEARTBEAT_INTERVAL",
    "HEARTBEAT_UNTIL",
    "SQS_MSG_VISIBILITY_TIMEOUT_SEC",
    "CHECK_ASG_TAG_BEFORE_DRAINING",
    "MANAGED_ASG_TAG",
}
FACTS_NAMES = set(NTH_DEFAULTS) | NO_DEFAULT | QUEUE_MODE | DEPRECATED

#: One non-default value per NTH name, as a user would write it in an env block, and what it gives.
ALIAS_VALUES: dict[str, tuple[str, Any]] = {
    "NODE_NAME": ("ip-10-0-0-1.ec2.internal", "ip-10-0-0-1.ec2.internal"),
    "POD_NAME": ("aws-node-termination-handler-x7k2p", "aws-node-termination-handler-x7k2p"),
    "NAMESPACE": ("kube-system", "kube-system"),
    "GRACE_PERIOD": ("45", 45),
    "DRY_RUN": ("true", True),
    "INSTANCE_METADATA_URL": ("http://127.0.0.1:1338", "http://127.0.0.1:1338"),
    "DELETE_LOCAL_DATA": ("false", False),
    "IGNORE_DAEMON_SETS": ("false", False),
    "POD_TERMINATION_GRACE_PERIOD": ("30", 30),
    "NODE_TERMINATION_GRACE_PERIOD": ("240", 240),
    "CORDON_ONLY": ("true", True),
    "TAINT_NODE": ("true", True),
    "TAINT_EFFECT": ("NoExecute", "NoExecute"),
    "ENABLE_OUT_OF_SERVICE_TAINT": ("true", True),
    "EXCLUDE_FROM_LOAD_BALANCERS": ("true", True),
    "ENABLE_SPOT_INTERRUPTION_DRAINING": ("false", False),
    "ENABLE_SCHEDULED_EVENT_DRAINING": ("false", False),
    "ENABLE_REBALANCE_MONITORING": ("true", True),
    "ENABLE_REBALANCE_DRAINING": ("true", True),
    "ENABLE_ASG_LIFECYCLE_DRAINING": ("true", True),
    "METADATA_TRIES": ("5", 5),
    "UPTIME_FROM_FILE": ("/host/proc/uptime", "/host/proc/uptime"),
    "WEBHOOK_URL": ("https://hooks.slack.com/services/T0/B0/x", "https://hooks.slack.com/services/T0/B0/x"),
    "WEBHOOK_HEADERS": ('{"Content-type":"text/plain","X-Team":"sre"}',
                        {"Content-type": "text/plain", "X-Team": "sre"}),
    "WEBHOOK_TEMPLATE": ('{"text":"{{ .NodeName }}"}', '{"text":"{{ .NodeName }}"}'),
    "WEBHOOK_TEMPLATE_FILE": ("/etc/kubespot/template.json", "/etc/kubespot/template.json"),
    "WEBHOOK_PROXY": ("http://proxy.internal:3128", "http://proxy.internal:3128"),
    "JSON_LOGGING": ("true", True),
    "LOG_LEVEL": ("debug", "debug"),
    "ENABLE_PROMETHEUS_SERVER": ("true", True),
    "PROMETHEUS_SERVER_PORT": ("9100", 9100),
    "ENABLE_PROBES_SERVER": ("true", True),
    "PROBES_SERVER_PORT": ("8081", 8081),
    "PROBES_SERVER_ENDPOINT": ("/livez", "/livez"),
    "EMIT_KUBERNETES_EVENTS": ("true", True),
    "KUBERNETES_EVENTS_EXTRA_ANNOTATIONS": ("first=annotation,sample.io/number=two",
                                            {"first": "annotation", "sample.io/number": "two"}),
    "KUBE_API_QPS": ("20", 20.0),
    "KUBE_API_BURST": ("40", 40),
}  # fmt: skip


def _by_alias() -> dict[str, Spec]:
    return {name: s for s in specs(AgentSettings) for name in s.nth}


def _value(settings: AgentSettings, spec: Spec) -> Any:
    obj: Any = settings
    for part in spec.path.split("."):
        obj = getattr(obj, part)
    return plain(obj, pairs=is_pairs(spec.type))


def test_declared_aliases_are_names_the_reference_handler_really_uses() -> None:
    assert set(_by_alias()) <= FACTS_NAMES


def test_every_node_mode_setting_of_the_reference_handler_is_accepted() -> None:
    assert set(_by_alias()) >= FACTS_NAMES - QUEUE_MODE


def test_the_template_default_is_the_reference_handlers() -> None:
    assert DEFAULT_TEMPLATE == NTH_TEMPLATE


@pytest.mark.parametrize("nth", sorted(NTH_DEFAULTS))
def test_default_matches_the_reference_handler(nth: str) -> None:
    spec = _by_alias()[nth]
    actual = _value(load(AgentSettings, env={"NODE_NAME": "n"}), spec)
    if nth in DELIBERATE:
        assert actual == DELIBERATE[nth]
        assert str(NTH_DEFAULTS[nth]) in spec.doc and "reference handler" in spec.doc, (
            f"{spec.path} differs from NTH on purpose; its doc must give NTH's value and say why"
        )
    else:
        assert actual == NTH_DEFAULTS[nth]


@pytest.mark.parametrize("nth", sorted(ALIAS_VALUES))
def test_each_reference_handler_name_is_accepted(nth: str) -> None:
    raw, expected = ALIAS_VALUES[nth]
    env = {"NODE_NAME": "n", nth: raw}
    spec = _by_alias()[nth]
    assert _value(load(AgentSettings, env=env), spec) == expected


def test_alias_table_covers_every_declared_alias() -> None:
    assert set(ALIAS_VALUES) == set(_by_alias())


def test_node_name_is_required_and_has_no_default() -> None:
    assert _by_alias()["NODE_NAME"].required


def test_the_interruption_notice_is_aws_two_minutes_and_must_be_positive() -> None:
    """EC2 User Guide, "Spot Instance interruption notices": two minutes; a simulated EC2 may run
    faster (the sandbox), never in zero time."""
    assert QueueSettings().interruption_notice == 120.0
    assert QueueSettings(interruption_notice=12.0).interruption_notice == 12.0
    for bad in (0.0, -1.0):
        with pytest.raises(InvalidSetting, match="interruption_notice"):
            QueueSettings(interruption_notice=bad)


def test_the_interruption_notice_is_never_longer_than_ec2s_two_minutes() -> None:
    """EC2 User Guide, "Spot Instance interruption notices": the notice is a fixed two minutes, and
    neither aws-node-termination-handler nor Karpenter (aws/karpenter-provider-aws
    pkg/controllers/interruption/controller.go handleMessage) lets it be changed. A longer one would
    let drains run past the instance's real end (pods killed hard after a full grace), and a huge
    one cannot even be added to a warning's time."""
    assert QueueSettings(interruption_notice=120.0).interruption_notice == 120.0
    for bad in (120.5, 600.0, 1e12, 1e14):
        with pytest.raises(InvalidSetting, match=r"interruption_notice.*simulated EC2"):
            QueueSettings(interruption_notice=bad)
