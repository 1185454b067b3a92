"""Named notification targets and HTTP calls: env and file forms, precedence, validation, secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubespot.actions.http_call import check_calls
from kubespot.config.http_calls import HttpCall, HttpCallSettings, http_calls
from kubespot.config.loader import SettingsError
from kubespot.config.notify import (
    NotifySettings,
    NotifyTarget,
    notify_targets,
    parse_template_key,
    webhook_target,
)
from kubespot.config.webhook import DEFAULT_TEMPLATE, WebhookSettings
from kubespot.model import Kind
from kubespot.model.summary import Stage

SECRET = "https://hooks.slack.com/services/T000/B000/SECRETTOKEN"


def targets(
    env: dict[str, str], *, file: Path | None = None, webhook: WebhookSettings | None = None
) -> tuple[NotifyTarget, ...]:
    settings = NotifySettings(targets_file=str(file) if file else None)
    return notify_targets(settings, webhook or WebhookSettings(), env=env)


def problems(err: pytest.ExceptionInfo[SettingsError]) -> dict[str, str]:
    return {p.setting: p.reason for p in err.value.problems}


# --- the environment form -----------------------------------------------------------------------------


def test_targets_from_indexed_environment_variables() -> None:
    env = {
        "KUBESPOT_NOTIFY_OPS_TEAM_URL": SECRET,
        "KUBESPOT_NOTIFY_OPS_TEAM_FORMAT": "Slack",
        "KUBESPOT_NOTIFY_OPS_TEAM_STAGES": "started,failed",
        "KUBESPOT_NOTIFY_AUTOMATION_URL_FILE": "/secrets/auto/url",
        "KUBESPOT_NOTIFY_AUTOMATION_HEADER_FILES": '{"Authorization": "/secrets/auto/token"}',
        "KUBESPOT_NOTIFY_AUTOMATION_KINDS": "spot-itn, SCHEDULED_MAINTENANCE",
        "KUBESPOT_NOTIFY_AUTOMATION_TIMEOUT": "2s",
        # The group's own settings are not targets.
        "KUBESPOT_NOTIFY_QUEUE_SIZE": "10",
        "KUBESPOT_NOTIFY_TARGETS_FILE": "",
        "KUBESPOT_OTHER": "x",
    }
    automation, ops = targets(env)
    assert (ops.name, ops.format, ops.url) == ("ops_team", "slack", SECRET)
    assert ops.stages == frozenset({Stage.STARTED, Stage.FAILED})
    assert automation.format == "json"  # the default for a named target
    assert automation.url_file == "/secrets/auto/url"
    assert automation.header_files == (("Authorization", "/secrets/auto/token"),)
    assert automation.kinds == frozenset({Kind.SPOT_INTERRUPTION, Kind.SCHEDULED_MAINTENANCE})
    assert automation.timeout == 2.0
    assert automation.stages == frozenset(Stage)  # every stage by default


def test_the_webhook_comes_first_and_its_name_is_reserved() -> None:
    webhook = WebhookSettings(url=SECRET)
    first, second = targets({"KUBESPOT_NOTIFY_CHAT_URL": SECRET}, webhook=webhook)
    assert (first.name, first.path, second.path) == ("webhook", "webhook", "notify.chat")
    with pytest.raises(SettingsError) as err:
        targets({"KUBESPOT_NOTIFY_WEBHOOK_URL": SECRET})
    assert "belongs to the WEBHOOK_* settings" in problems(err)["notify.webhook"]


def test_unknown_fields_are_errors_with_a_suggestion(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as err:
        targets({"KUBESPOT_NOTIFY_SLACK_ULR": SECRET})
    (problem,) = err.value.problems
    assert problem.source == "env KUBESPOT_NOTIFY_SLACK_ULR"
    assert "did you mean KUBESPOT_NOTIFY_<NAME>_URL" in problem.reason
    file = tmp_path / "targets.yaml"
    file.write_text("slack:\n  url: https://h.test/x\n  formt: slack\n")
    with pytest.raises(SettingsError) as err:
        targets({}, file=file)
    assert problems(err) == {"notify.slack.formt": "unknown setting; did you mean format?"}


# --- the file form ------------------------------------------------------------------------------------


def test_targets_from_a_file_with_the_environment_winning(tmp_path: Path) -> None:
    file = tmp_path / "targets.yaml"
    file.write_text(
        "slack:\n"
        "  format: slack\n"
        "  url_file: /secrets/slack/url\n"
        "  stages: [started, finished, failed]\n"
        "automation:\n"
        "  url: https://automation.test/hook\n"
        "  headers: {X-Source: kubespot}\n"
        "  templates:\n"
        '    finished: \'{"done": "{{ .EventID }}"}\'\n'
        '    spot-itn/failed: \'{"failed": "{{ .Error }}"}\'\n'
        "  attempts: 5\n"
    )
    automation, slack = targets({"KUBESPOT_NOTIFY_AUTOMATION_ATTEMPTS": "2"}, file=file)
    assert slack.format == "slack" and slack.url_file == "/secrets/slack/url"
    assert automation.headers == (("X-Source", "kubespot"),)
    assert automation.attempts == 2  # the environment wins, field by field
    assert dict(automation.templates) == {
        "finished": '{"done": "{{ .EventID }}"}',
        "spot-itn/failed": '{"failed": "{{ .Error }}"}',
    }


def test_a_json_file_works_too(tmp_path: Path) -> None:
    file = tmp_path / "targets.json"
    file.write_text(json.dumps({"chime": {"format": "chime", "url": "https://chime.test/x"}}))
    (chime,) = targets({}, file=file)
    assert chime.format == "chime"


# --- validation ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "setting", "reason"),
    [
        (
            {"KUBESPOT_NOTIFY_X_URL": "hooks.slack.com/x"},
            "notify.x.url",
            "must be an http:// or https:// URL",
        ),
        ({"KUBESPOT_NOTIFY_X_URL": "https:///x"}, "notify.x.url", "must name a host after the scheme"),
        ({"KUBESPOT_NOTIFY_X_FORMAT": "slack"}, "notify.x.url", "set url or url_file"),
        (
            {"KUBESPOT_NOTIFY_X_URL": SECRET, "KUBESPOT_NOTIFY_X_FORMAT": "discord"},
            "notify.x.format",
            "expected one of",
        ),
        (
            {"KUBESPOT_NOTIFY_X_URL": SECRET, "KUBESPOT_NOTIFY_X_FORMAT": "template"},
            "notify.x.template",
            "needs template",
        ),
        (
            {"KUBESPOT_NOTIFY_X_URL": SECRET, "KUBESPOT_NOTIFY_X_STAGES": "started,done"},
            "notify.x.stages",
            "expected one of",
        ),
        (
            {"KUBESPOT_NOTIFY_X_URL": SECRET, "KUBESPOT_NOTIFY_X_KINDS": "spot"},
            "notify.x.kinds",
            "expected one of",
        ),
        (
            {"KUBESPOT_NOTIFY_X_URL": SECRET, "KUBESPOT_NOTIFY_X_TIMEOUT": "0"},
            "notify.x.timeout",
            "must be positive",
        ),
        (
            {"KUBESPOT_NOTIFY_X_URL": SECRET, "KUBESPOT_NOTIFY_X_PROXY": "proxy:3128"},
            "notify.x.proxy",
            "http://",
        ),
        (
            {"KUBESPOT_NOTIFY_X_URL": SECRET, "KUBESPOT_NOTIFY_X_TEMPLATES": '{"finishd": "x"}'},
            "notify.x.templates",
            "'finishd' is no stage",
        ),
        (
            {
                "KUBESPOT_NOTIFY_X_URL": SECRET,
                "KUBESPOT_NOTIFY_X_HEADERS": '{"Authorization": "a"}',
                "KUBESPOT_NOTIFY_X_HEADER_FILES": '{"authorization": "/f"}',
            },
            "notify.x.header_files",
            "also set in headers",
        ),
    ],
)
def test_bad_values_name_the_setting(env: dict[str, str], setting: str, reason: str) -> None:
    with pytest.raises(SettingsError) as err:
        targets(env)
    assert setting in problems(err), problems(err)
    assert reason in problems(err)[setting]


def test_every_problem_is_reported_at_once_and_secrets_never_shown() -> None:
    env = {
        "KUBESPOT_NOTIFY_A_URL": "ftp://SECRET-A",
        "KUBESPOT_NOTIFY_B_URL": SECRET,
        "KUBESPOT_NOTIFY_B_HEADERS": "not json SECRET-B",
        "KUBESPOT_NOTIFY_C_URL": SECRET,
        "KUBESPOT_NOTIFY_C_ATTEMPTS": "many",
    }
    with pytest.raises(SettingsError) as err:
        targets(env)
    assert set(problems(err)) == {"notify.a.url", "notify.b.headers", "notify.c.attempts"}
    assert "SECRET" not in str(err.value)
    assert "<redacted>" in str(err.value)
    assert "'many'" in str(err.value)  # not a secret: shown


def test_targets_repr_redacts_secrets() -> None:
    (t,) = targets({"KUBESPOT_NOTIFY_X_URL": SECRET, "KUBESPOT_NOTIFY_X_HEADERS": '{"Authorization": "tok"}'})
    assert "SECRETTOKEN" not in repr(t) and "tok'" not in repr(t)
    assert "Authorization" in repr(t)


@pytest.mark.parametrize(
    ("key", "parsed"),
    [
        ("finished", (None, Stage.FINISHED)),
        ("spot-itn", (Kind.SPOT_INTERRUPTION, None)),
        ("Rebalance_Recommendation/STARTED", (Kind.REBALANCE_RECOMMENDATION, Stage.STARTED)),
        ("failed/asg-lifecycle-termination", (Kind.ASG_LIFECYCLE, Stage.FAILED)),
    ],
)
def test_template_keys(key: str, parsed: tuple[Kind | None, Stage | None]) -> None:
    assert parse_template_key(key) == parsed


@pytest.mark.parametrize("key", ["", "a/b/c", "finished/started", "spot-itn/scheduled-maintenance", "x"])
def test_bad_template_keys(key: str) -> None:
    with pytest.raises(ValueError, match="template key"):
        parse_template_key(key)


# --- the webhook as a target --------------------------------------------------------------------------


def test_webhook_defaults_map_to_one_nth_message_at_start() -> None:
    t = webhook_target(WebhookSettings(url=SECRET))
    assert (t.format, t.template, t.stages) == ("template", DEFAULT_TEMPLATE, frozenset({Stage.STARTED}))
    assert t.kinds == frozenset()


def test_webhook_builtin_format_unless_the_template_was_changed() -> None:
    assert webhook_target(WebhookSettings(url=SECRET, format="slack")).template is None
    custom = webhook_target(WebhookSettings(url=SECRET, format="slack", template='{"t": "{{ .EventID }}"}'))
    assert custom.template == '{"t": "{{ .EventID }}"}'


def test_webhook_new_settings_are_validated() -> None:
    from kubespot.config.agent import AgentSettings
    from kubespot.config.loader import load

    env = {
        "NODE_NAME": "n",
        "KUBESPOT_WEBHOOK_FORMAT": "teams",
        "KUBESPOT_WEBHOOK_STAGES": "started,finished",
    }
    webhook = load(AgentSettings, env=env).webhook
    assert webhook.format == "teams" and webhook.stages == frozenset({Stage.STARTED, Stage.FINISHED})
    with pytest.raises(SettingsError, match=r"webhook\.format"):
        load(AgentSettings, env={"NODE_NAME": "n", "KUBESPOT_WEBHOOK_FORMAT": "irc"})


def test_headers_get_a_json_content_type_unless_set(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("Bearer abc\n")
    t = NotifyTarget(name="x", url=SECRET, header_files=(("Authorization", str(token)),))
    assert t.read_headers() == [("Authorization", "Bearer abc"), ("Content-Type", "application/json")]
    plain = NotifyTarget(name="x", url=SECRET, headers=(("content-type", "text/plain"),))
    assert plain.read_headers() == [("content-type", "text/plain")]
    token.unlink()
    with pytest.raises(SettingsError) as err:
        t.read_headers()
    assert problems(err) == {"notify.x.header_files": "cannot read: No such file or directory"}


# --- HTTP calls ---------------------------------------------------------------------------------------

DATADOG = {
    "KUBESPOT_HTTP_CALL_DATADOG_URL": "https://api.datadoghq.com/api/v2/downtime",
    "KUBESPOT_HTTP_CALL_DATADOG_HEADER_FILES": '{"DD-API-KEY": "/dd/api", "DD-APPLICATION-KEY": "/dd/app"}',
    "KUBESPOT_HTTP_CALL_DATADOG_BODY": '{"scope": "host:{{ .InstanceID }}"}',
    "KUBESPOT_HTTP_CALL_DATADOG_KINDS": "spot-itn",
}


def test_http_calls_from_the_environment_and_a_file(tmp_path: Path) -> None:
    file = tmp_path / "calls.yaml"
    file.write_text(
        "ticket:\n  method: put\n  url: https://tickets.test/hosts/{{ .InstanceID }}\n  stage: post-drain\n"
    )
    datadog, ticket = http_calls(
        HttpCallSettings(file=str(file)), env={**DATADOG, "KUBESPOT_HTTP_CALLS_FILE": "x"}
    )
    assert (datadog.name, datadog.method, datadog.stage, datadog.attempts) == (
        "datadog",
        "POST",
        "pre-drain",
        2,
    )
    assert datadog.action == "http:datadog"
    assert datadog.wants(Kind.SPOT_INTERRUPTION, "pre-drain")
    assert not datadog.wants(Kind.REBALANCE_RECOMMENDATION, "pre-drain")
    assert not datadog.wants(Kind.SPOT_INTERRUPTION, "post-drain")
    assert (ticket.method, ticket.stage) == ("PUT", "post-drain")


@pytest.mark.parametrize(
    ("env", "setting", "reason"),
    [
        ({"KUBESPOT_HTTP_CALL_X_URL": "api.test/x"}, "http_calls.x.url", "http:// or https://"),
        ({"KUBESPOT_HTTP_CALL_X_URL": "https://{{ .Host }}/x"}, "http_calls.x.url", "host"),
        # Issue 10: nothing templated may reach the authority (host, port, userinfo).
        ({"KUBESPOT_HTTP_CALL_X_URL": "https://api.test{{ .X }}/x"}, "http_calls.x.url", "must be literal"),
        ({"KUBESPOT_HTTP_CALL_X_URL": "https://api.test{{ .X }}"}, "http_calls.x.url", "must be literal"),
        ({"KUBESPOT_HTTP_CALL_X_URL": "https://api.test:{{ .P }}/x"}, "http_calls.x.url", "must be literal"),
        ({"KUBESPOT_HTTP_CALL_X_URL": "https://u:{{ .P }}@api.test/"}, "http_calls.x.url", "must be literal"),
        ({"KUBESPOT_HTTP_CALL_X_URL": "https://{{ .U }}@api.test/"}, "http_calls.x.url", "host"),
        (
            {"KUBESPOT_HTTP_CALL_X_URL": "https://api{% if 1 %}.evil{% endif %}.test/"},
            "http_calls.x.url",
            "must be literal",
        ),
        ({"KUBESPOT_HTTP_CALL_X_URL": "{{ .Url }}"}, "http_calls.x.url", "http:// or https://"),
        (
            {"KUBESPOT_HTTP_CALL_X_URL": "https://a.test", "KUBESPOT_HTTP_CALL_X_METHOD": "FETCH"},
            "http_calls.x.method",
            "expected one of",
        ),
        (
            {"KUBESPOT_HTTP_CALL_X_URL": "https://a.test", "KUBESPOT_HTTP_CALL_X_STAGE": "during"},
            "http_calls.x.stage",
            "expected one of",
        ),
        (
            {"KUBESPOT_HTTP_CALL_X_URL": "https://a.test", "KUBESPOT_HTTP_CALL_X_ATTEMPTS": "0"},
            "http_calls.x.attempts",
            "at least 1",
        ),
        ({"KUBESPOT_HTTP_CALL_X_BODY": "{}"}, "http_calls.x.url", "set url or url_file"),
    ],
)
def test_bad_http_calls_name_the_setting(env: dict[str, str], setting: str, reason: str) -> None:
    with pytest.raises(SettingsError) as err:
        http_calls(HttpCallSettings(), env=env)
    assert reason in problems(err)[setting]


def test_http_call_templates_are_checked_at_start_up(tmp_path: Path) -> None:
    calls = [
        HttpCall(name="a", url="https://a.test/{{ if .X }}"),
        HttpCall(name="b", url="https://b.test", headers=(("X-Host", "{{ .A | nosuchfilter }}"),)),
        HttpCall(name="c", url="https://c.test", body_file=str(tmp_path / "missing")),
        HttpCall(name="d", url="https://d.test", body='{"h": "{{ .InstanceID }}"}'),
    ]
    with pytest.raises(SettingsError) as err:
        check_calls(calls)
    assert list(problems(err)) == [
        "http_calls.a.url",
        "http_calls.b.headers[X-Host]",
        "http_calls.c.body_file",
    ]


def test_templates_after_the_host_are_accepted_and_a_url_file_is_checked_when_read(tmp_path: Path) -> None:
    for url in (
        "https://api.test/{{ .X }}",
        "https://api.test?{{ .X }}",
        "https://api.test#{{ .X }}",
        "https://u:p@api.test:8443/h/{{ .X }}?k={{ .Y }}",
    ):
        assert HttpCall(name="ok", url=url).url == url
    url_file = tmp_path / "url"
    url_file.write_text("https://api.test{{ .NodeName }}/mute\n")
    with pytest.raises(SettingsError) as err:
        HttpCall(name="f", url_file=str(url_file)).read_url()
    assert "must be literal" in problems(err)["http_calls.f.url_file"]


def test_every_field_of_targets_and_calls_is_documented() -> None:
    from kubespot.config.loader import specs

    doc = (Path(__file__).resolve().parents[3] / "docs" / "notifications.md").read_text()
    missing = [
        f"{cls.__name__}.{s.path}"
        for cls in (NotifyTarget, HttpCall)
        for s in specs(cls)
        if s.path != "name" and f"`{s.path}`" not in doc
    ]
    assert not missing, missing
    for setting in ("notify.targets_file", "notify.queue_size", "http_calls.file", "webhook.format"):
        assert f"`{setting}`" in doc, setting
