"""The agent's composed settings: identity, naming scheme, secrets, webhook files, import weight."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from kubespot.config.agent import AgentSettings
from kubespot.config.loader import SettingsError, load, redacted, specs
from kubespot.config.node import NodeActionSettings
from kubespot.config.observability import ObservabilitySettings
from kubespot.config.webhook import WebhookSettings
from support.imports import loaded_by

SECRET_URL = "https://hooks.slack.com/services/T000/B000/XXXXSECRET"


def test_missing_node_name_is_a_clear_error() -> None:
    with pytest.raises(SettingsError) as info:
        load(AgentSettings, env={})
    assert [p.setting for p in info.value.problems] == ["node_name"]
    assert "required but not set: set --node-name, KUBESPOT_NODE_NAME or NODE_NAME" in str(info.value)


def test_identity_from_env_and_flags() -> None:
    env = {
        "NODE_NAME": "from-nth",
        "KUBESPOT_POD_NAME": "kubespot-abcde",
        "KUBESPOT_POD_NAMESPACE": "kube-system",
    }
    s = load(AgentSettings, env=env)
    assert (s.node_name, s.pod_name, s.pod_namespace) == ("from-nth", "kubespot-abcde", "kube-system")
    assert load(AgentSettings, argv=["--node-name", "from-flag"], env=env).node_name == "from-flag"


def test_every_setting_has_a_documented_unique_kubespot_name() -> None:
    all_specs = specs(AgentSettings)
    for kind, names in {
        "env": [s.env for s in all_specs],
        "flag": [s.flag for s in all_specs if s.flag],
        "nth": [n for s in all_specs for n in s.nth],
    }.items():
        dupes = [n for n, c in Counter(names).items() if c > 1]
        assert not dupes, f"{kind} names used twice: {dupes}"
    assert all(s.env.startswith("KUBESPOT_") for s in all_specs)
    assert all(len(s.doc) >= 20 for s in all_specs), [s.path for s in all_specs if len(s.doc) < 20]


def test_own_groups_follow_the_env_scheme() -> None:
    # KUBESPOT_<GROUP>_<FIELD>, the group being the attribute name in AgentSettings.
    for s in specs(AgentSettings):
        if s.path.split(".")[0] in ("node_actions", "observability", "webhook") or "." not in s.path:
            assert s.env == "KUBESPOT_" + s.path.upper().replace(".", "_")


def test_secrets_are_redacted_and_never_printed() -> None:
    env = {
        "NODE_NAME": "n",
        "WEBHOOK_URL": SECRET_URL,
        "WEBHOOK_HEADERS": '{"Authorization": "Bearer SECRET"}',
        "WEBHOOK_PROXY": "http://user:SECRET@proxy:3128",
    }
    s = load(AgentSettings, env=env)
    shown = redacted(s)
    assert shown["webhook"]["url"] == "<redacted>"
    assert shown["webhook"]["headers"] == {"Authorization": "<redacted>"}
    assert shown["webhook"]["proxy"] == "<redacted>"
    assert "SECRET" not in json.dumps(shown)
    assert "SECRET" not in repr(s)
    assert s.webhook.read_url() == SECRET_URL  # the value itself is intact


def test_bad_secret_is_reported_without_its_value() -> None:
    with pytest.raises(SettingsError) as info:
        load(AgentSettings, env={"NODE_NAME": "n", "WEBHOOK_URL": "hooks.slack.com/SECRET"})
    assert "webhook.url" in str(info.value) and "SECRET" not in str(info.value)


def test_webhook_url_from_a_mounted_secret_file(tmp_path: Path) -> None:
    f = tmp_path / "url"
    f.write_text(SECRET_URL + "\n")
    s = load(AgentSettings, env={"NODE_NAME": "n", "KUBESPOT_WEBHOOK_URL_FILE": str(f)})
    assert s.webhook.enabled and s.webhook.read_url() == SECRET_URL
    f.write_text("not a url SECRET")
    with pytest.raises(SettingsError) as info:
        s.webhook.read_url()
    assert "webhook.url_file" in str(info.value) and "SECRET" not in str(info.value)


def test_webhook_url_and_url_file_are_exclusive(tmp_path: Path) -> None:
    env = {"NODE_NAME": "n", "WEBHOOK_URL": SECRET_URL, "KUBESPOT_WEBHOOK_URL_FILE": str(tmp_path / "u")}
    with pytest.raises(SettingsError, match=r"webhook\.url_file"):
        load(AgentSettings, env=env)


def test_template_file_replaces_the_template(tmp_path: Path) -> None:
    f = tmp_path / "t.json"
    f.write_text('{"text": "{{ .NodeName }}"}')
    assert WebhookSettings(template_file=str(f)).read_template() == '{"text": "{{ .NodeName }}"}'
    assert WebhookSettings().read_template() == WebhookSettings().template
    with pytest.raises(SettingsError, match=r"webhook\.template_file"):
        WebhookSettings(template_file=str(tmp_path / "missing")).read_template()


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({"TAINT_EFFECT": "NoWay"}, "node_actions.taint_effect"),
        ({"KUBESPOT_NODE_ACTIONS_REBALANCE_UNDO_AFTER": "-5"}, "node_actions.rebalance_undo_after"),
        ({"PROMETHEUS_SERVER_PORT": "70000"}, "observability.prometheus_server_port"),
        ({"PROBES_SERVER_ENDPOINT": "healthz"}, "observability.probes_server_endpoint"),
        ({"LOG_LEVEL": "chatty"}, "observability.log_level"),
        ({"WEBHOOK_HEADERS": "[1, 2]"}, "webhook.headers"),
        ({"METADATA_TRIES": "0"}, "imds.tries"),
        ({"NODE_TERMINATION_GRACE_PERIOD": "0"}, "drain.node_termination_grace_period"),
        ({"KUBE_API_BURST": "0"}, "kube.burst"),
    ],
)
def test_invalid_values_name_the_setting(env: dict[str, str], setting: str) -> None:
    with pytest.raises(SettingsError) as info:
        load(AgentSettings, env={"NODE_NAME": "n", **env})
    (problem,) = info.value.problems
    assert problem.setting == setting
    assert next(iter(env)) in problem.source


def test_same_port_for_metrics_and_probes_is_refused() -> None:
    with pytest.raises(ValueError, match="probes_server_port"):
        ObservabilitySettings(
            enable_prometheus_server=True, enable_probes_server=True, prometheus_server_port=8080
        )


def test_rebalance_undo_takes_a_duration() -> None:
    env = {"NODE_NAME": "n", "KUBESPOT_NODE_ACTIONS_REBALANCE_UNDO_AFTER": "45m"}
    assert load(AgentSettings, env=env).node_actions.rebalance_undo_after == 2700.0
    assert NodeActionSettings().rebalance_undo_after == 1800.0


def test_loading_the_agent_settings_stays_light() -> None:
    # The agent runs on every node (FACTS.md: pydantic +10 MB); YAML only loads for a YAML file.
    code = (
        "from kubespot.config.agent import AgentSettings;"
        "from kubespot.config.loader import load;"
        "load(AgentSettings, env={'NODE_NAME': 'n'})"
    )
    assert loaded_by(code, {"yaml", "pydantic", "boto3", "kubernetes", "aiohttp", "lightkube"}) == []
