"""Built-in message formats (their JSON shapes), template overrides per kind and stage, variables."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
import pytest

from kubespot.actions.notify import Notifier, WebhookNotifier, check_targets
from kubespot.actions.templates import (
    message_title,
    message_variables,
    render_builtin,
    render_template,
)
from kubespot.config.loader import SettingsError
from kubespot.config.notify import NotifyTarget
from kubespot.config.webhook import WebhookSettings
from kubespot.model import InterruptionEvent, Kind, SystemClock
from kubespot.model.summary import (
    ActionResult,
    ActionSummary,
    InterruptionSummary,
    Outcome,
    PodCounts,
    Stage,
)
from support.events import imds_event
from support.imports import loaded_by

NOTICE = datetime(2026, 11, 20, 17, 2, 13, tzinfo=UTC)


def event(kind: Kind = Kind.SPOT_INTERRUPTION, description: str = "Spot ITN received") -> InterruptionEvent:
    return imds_event(
        kind, "spot-itn-1", NOTICE, deadline_in=120, description=description, instance_id="i-0123"
    )


def summary(stage: Stage = Stage.FINISHED, **kw: Any) -> InterruptionSummary:
    fields: dict[str, Any] = {"started": NOTICE + timedelta(seconds=1)}
    if stage is not Stage.STARTED:
        fields.update(
            finished=NOTICE + timedelta(seconds=75),
            actions=(
                ActionSummary(name="drain", result=ActionResult.SUCCESS, duration=72.0),
                ActionSummary(name="http:mute", result=ActionResult.FAILURE, detail="HTTP 500", status=500),
            ),
            pods=PodCounts(evicted=12, deleted_at_deadline=1, skipped=3),
        )
    fields.update(kw)
    return InterruptionSummary.for_event(event(), node="node-a", stage=stage, **fields)


def builtin(fmt: str, s: InterruptionSummary) -> Any:
    return json.loads(render_builtin(fmt, s))


# --- formats ------------------------------------------------------------------------------------------


def test_slack_is_block_kit_with_a_text_fallback() -> None:
    msg = builtin("slack", summary())
    assert msg["text"] == "Spot interruption on node-a: handled (instance i-0123, event spot-itn-1)"
    header, fields, *rest, context = msg["blocks"]
    assert header == {
        "type": "header",
        "text": {"type": "plain_text", "text": "Spot interruption on node-a: handled", "emoji": True},
    }
    assert fields["type"] == "section"
    labels = [f["text"].split("\n")[0] for f in fields["fields"]]
    assert labels == ["*Kind*", "*Node*", "*Instance*", "*Deadline*", "*Outcome*", "*Timings*", "*Pods*"]
    assert all(f["type"] == "mrkdwn" for f in fields["fields"])
    texts = {f["text"].split("\n")[0]: f["text"].split("\n", 1)[1] for f in fields["fields"]}
    assert texts["*Deadline*"] == "2026-11-20 17:04:13 UTC"
    assert texts["*Pods*"] == "12 evicted, 1 deleted at the deadline, 3 skipped"
    assert "done in 74.0 s" in texts["*Timings*"] and "45 s before the deadline" in texts["*Timings*"]
    long = {b["text"]["text"].split("\n")[0]: b["text"]["text"] for b in rest}
    assert "http:mute: failure (HTTP 500)" in long["*Actions*"]
    assert context["type"] == "context"


def test_slack_escapes_its_control_characters() -> None:
    msg = builtin("slack", summary(description="<!channel> & <http://x|y>"))
    desc = next(b for b in msg["blocks"] if b.get("text", {}).get("text", "").startswith("*Description*"))
    assert desc["text"]["text"] == "*Description*\n&lt;!channel&gt; &amp; &lt;http://x|y&gt;"


def test_slack_limits_are_respected() -> None:
    msg = builtin("slack", summary(description="x" * 5000, error="e" * 5000))
    assert len(msg["blocks"][0]["text"]["text"]) <= 150
    assert len(msg["blocks"][1]["fields"]) <= 10
    assert all(len(b["text"]["text"]) <= 3000 for b in msg["blocks"][2:-1])


def test_teams_is_an_adaptive_card_in_a_message_attachment() -> None:
    msg = builtin("teams", summary(Stage.FAILED, error="deadline passed"))
    assert msg["type"] == "message"
    (attachment,) = msg["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert attachment["contentUrl"] is None
    card = attachment["content"]
    assert (card["type"], card["version"]) == ("AdaptiveCard", "1.4")
    assert card["$schema"] == "http://adaptivecards.io/schemas/adaptive-card.json"
    title, facts, footer = card["body"]
    assert title["type"] == "TextBlock" and title["color"] == "Attention"
    assert title["text"] == "Spot interruption on node-a: handling failed"
    assert facts["type"] == "FactSet"
    by_title = {f["title"]: f["value"] for f in facts["facts"]}
    assert by_title["Error"] == "deadline passed"
    assert by_title["Instance"] == "i-0123"
    assert "spot-itn-1" in footer["text"]


def test_chime_is_one_content_string() -> None:
    msg = builtin("chime", summary(Stage.STARTED))
    assert set(msg) == {"Content"}
    lines = msg["Content"].split("\n")
    assert lines[0] == "Spot interruption on node-a: handling started"
    assert "Node: node-a" in lines and "Instance: i-0123" in lines
    assert "Timings: fenced 1.0 s after the notice, 119 s left before the deadline" in lines
    assert len(builtin("chime", summary(description="x" * 9000))["Content"]) <= 4096


def test_json_is_a_structured_object_with_the_summary() -> None:
    s = summary()
    msg = builtin("json", s)
    assert set(msg) == {
        "source",
        "schema_version",
        "stage",
        "outcome",
        "text",
        "event",
        "node",
        "instance",
        "summary",
    }
    assert (msg["stage"], msg["outcome"], msg["node"], msg["instance"]) == (
        "finished",
        "done",
        "node-a",
        "i-0123",
    )
    assert msg["event"] == {
        "id": "spot-itn-1",
        "kind": "spot-itn",
        "nth_kind": "SPOT_ITN",
        "source": "imds",
        "description": "Spot ITN received",
        "notice_time": "2026-11-20T17:02:13Z",
        "deadline": "2026-11-20T17:04:13Z",
    }
    assert msg["summary"] == s.to_dict()


@pytest.mark.parametrize(
    ("stage", "outcome", "title"),
    [
        (Stage.STARTED, Outcome.IN_PROGRESS, "handling started"),
        (Stage.FINISHED, Outcome.DONE, "handled"),
        (Stage.FINISHED, Outcome.WITHDRAWN, "withdrawn"),
        (Stage.FINISHED, Outcome.SUPERSEDED, "superseded by a stronger event"),
        (Stage.FAILED, Outcome.FAILED, "handling failed"),
    ],
)
def test_titles_follow_stage_and_outcome(stage: Stage, outcome: Outcome, title: str) -> None:
    assert message_title(summary(stage, outcome=outcome)) == f"Spot interruption on node-a: {title}"
    assert message_title(summary(stage, outcome=outcome, dry_run=True)).endswith("(dry run)")


# --- variables ----------------------------------------------------------------------------------------


def test_new_variables_and_filters() -> None:
    variables = message_variables(
        event(), node_name="node-a", summary=summary(), now=NOTICE, extra={"Pods": ["a"]}
    )
    text = render_template(
        '{"s": "{{ .Stage }}/{{ .Outcome }}", "p": {{ .PodsEvicted }}, "a": "{{ range .Actions }}{{ .name }} '
        '{{ end }}", "end": {{ add .DeadlineUnix 600 }}, "iso": "{{ .Deadline | rfc3339 }}", '
        '"later": "{{ add .DeadlineUnix 900 | rfc3339 }}", "pods": "{{ .Pods }}", "d": {{ .Duration }}}',
        variables,
        json_escape=True,
    )
    assert json.loads(text) == {
        "s": "finished/done",
        "p": 12,
        "a": "drain http:mute ",
        "end": int((NOTICE + timedelta(seconds=720)).timestamp()),
        "iso": "2026-11-20T17:04:13Z",
        "later": "2026-11-20T17:19:13Z",
        "pods": "[a]",  # the caller's Pods (NTH's variable) are never replaced
        "d": 74.0,
    }


def test_extra_cannot_replace_kubespot_variables() -> None:
    variables = message_variables(event(), node_name="n", summary=summary(), now=NOTICE, extra={"Stage": "x"})
    assert variables["Stage"] == "finished"


# --- template overrides, through a notifier -----------------------------------------------------------


class Sink:
    """A mock transport that records each request's path and body."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str], bytes]] = []
        self.transport = httpx2.MockTransport(self.handle)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.append((request.url.path, dict(request.headers), request.content))
        return httpx2.Response(200)

    def bodies(self, path: str) -> list[str]:
        return [body.decode() for p, _, body in self.seen if p == path]


async def send(notifier: Notifier, *messages: tuple[InterruptionEvent, Stage]) -> None:
    for ev, stage in messages:
        notifier.notify(ev, node_name="node-a", stage=stage, summary=None)
    await notifier.aclose(timeout=5.0)


def target(name: str, **kw: Any) -> NotifyTarget:
    return NotifyTarget(name=name, url=f"http://receiver.test/{name}", **kw)


async def test_the_most_specific_template_wins() -> None:
    sink = Sink()
    t = target(
        "ops",
        format="slack",
        template='{"who": "default {{ .Stage }}"}',
        templates=(
            ("finished", '{"who": "finished"}'),
            ("rebalance-recommendation", '{"who": "rebalance"}'),
            ("SPOT_INTERRUPTION/failed", '{"who": "spot failed"}'),
        ),
    )
    notifier = Notifier([t], clock=SystemClock(), transport=sink.transport)
    spot, rebalance = event(), event(Kind.REBALANCE_RECOMMENDATION)
    await send(
        notifier,
        (spot, Stage.STARTED),
        (spot, Stage.FINISHED),
        (spot, Stage.FAILED),
        (rebalance, Stage.STARTED),
        (rebalance, Stage.FINISHED),
        (rebalance, Stage.FAILED),
    )
    who = [json.loads(b)["who"] for b in sink.bodies("/ops")]
    assert who == ["default started", "finished", "spot failed", "rebalance", "finished", "rebalance"]


async def test_without_a_template_the_format_decides(tmp_path: Any) -> None:
    sink = Sink()
    file = tmp_path / "finished.j2"
    file.write_text('{"from": "file", "evicted": "{{ .PodsEvicted }}"}')
    targets = [
        target("slack", format="slack"),
        target("teams", format="teams", template_files=(("finished", str(file)),)),
    ]
    notifier = Notifier(targets, clock=SystemClock(), transport=sink.transport)
    await send(notifier, (event(), Stage.STARTED), (event(), Stage.FINISHED))
    slack = [json.loads(b) for b in sink.bodies("/slack")]
    assert [m["blocks"][0]["type"] for m in slack] == ["header", "header"]
    teams = [json.loads(b) for b in sink.bodies("/teams")]
    assert teams[0]["type"] == "message"
    assert teams[1] == {"from": "file", "evicted": ""}  # no drain in a summary made from the event alone
    content_types = {h["content-type"] for _, h, _ in sink.seen}
    assert content_types == {"application/json"}


async def test_stages_and_kinds_select_what_a_target_hears() -> None:
    sink = Sink()
    targets = [
        target("humans", format="chime", stages=frozenset({Stage.FAILED})),
        target("spot_only", kinds=frozenset({Kind.SPOT_INTERRUPTION})),
    ]
    deliveries: list[tuple[str, str, str]] = []
    notifier = Notifier(
        targets,
        clock=SystemClock(),
        transport=sink.transport,
        on_delivery=lambda *a: deliveries.append(a),
    )
    rebalance = event(Kind.REBALANCE_RECOMMENDATION)
    await send(notifier, (event(), Stage.STARTED), (rebalance, Stage.STARTED), (rebalance, Stage.FAILED))
    assert sorted(deliveries) == [
        ("humans", "failed", "success"),
        ("spot_only", "started", "success"),
    ]


async def test_the_stage_comes_from_the_summary_when_not_given() -> None:
    sink = Sink()
    only_finished = target("done", stages=frozenset({Stage.FINISHED}))
    notifier = Notifier([only_finished], clock=SystemClock(), transport=sink.transport)
    notifier.notify(event(), node_name="node-a", summary=summary(Stage.FINISHED))
    notifier.notify(event(), node_name="node-a")  # started: not for this target
    await notifier.aclose(timeout=5.0)
    (body,) = sink.bodies("/done")
    assert json.loads(body)["summary"]["pods"]["evicted"] == 12


async def test_the_webhook_keeps_nths_message_and_content_type() -> None:
    sink = Sink()
    settings = WebhookSettings(url="http://receiver.test/hook", headers=(("X-Token", "t"),))
    notifier = WebhookNotifier(settings, clock=SystemClock(), transport=sink.transport)
    await send(notifier, (event(description='say "hi"'), Stage.STARTED), (event(), Stage.FINISHED))
    (body,) = sink.bodies("/hook")  # started only, as the reference handler sends
    assert body.startswith('{"text":"[NTH][Instance Interruption] EventID: spot-itn-1 - Kind: SPOT_ITN')
    assert 'say "hi"' in body  # no JSON content type configured: inserted verbatim, as before
    assert "content-type" not in sink.seen[0][1]


async def test_the_webhook_with_a_builtin_format() -> None:
    sink = Sink()
    settings = WebhookSettings(
        url="http://receiver.test/hook", format="json", stages=frozenset({Stage.STARTED, Stage.FINISHED})
    )
    notifier = WebhookNotifier(settings, clock=SystemClock(), transport=sink.transport)
    await send(notifier, (event(), Stage.STARTED), (event(), Stage.FINISHED))
    assert [json.loads(b)["stage"] for b in sink.bodies("/hook")] == ["started", "finished"]


def test_unreadable_template_files_are_refused_unusable_templates_logged(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A missing file stops start-up (naming it); a template that cannot be used does not: it is
    logged, naming the setting and the construct, and the default message replaces it."""
    bad = target("ops", templates=(("failed", "{{ if .X }}"),))
    with pytest.raises(SettingsError) as err:
        check_targets([bad, target("ok", template_files=(("finished", str(tmp_path / "missing")),))])
    assert [p.setting for p in err.value.problems] == ["notify.ok.template_files[finished]"]
    check_targets([bad])
    with caplog.at_level("ERROR", logger="kubespot.actions.notify"):
        Notifier([bad], clock=SystemClock())
    (line,) = [r.getMessage() for r in caplog.records if "not usable" in r.getMessage()]
    assert "notify.ops.templates[failed]: invalid template (line 1): unexpected EOF" in line


def test_importing_the_notifier_and_rendering_builtins_does_not_load_jinja2() -> None:
    code = (
        "from datetime import datetime, UTC;"
        "from kubespot.actions import notify, http_call, templates;"
        "from kubespot.model import InterruptionEvent, Kind, Source;"
        "from kubespot.model.summary import InterruptionSummary;"
        "t = datetime(2026, 1, 1, tzinfo=UTC);"
        "e = InterruptionEvent(id='x', kind=Kind.SPOT_INTERRUPTION, instance_id='i', source=Source.IMDS,"
        " notice_time=t, act_at=t);"
        "[templates.render_builtin(f, InterruptionSummary.for_event(e, node='n')) for f in"
        " ('slack', 'teams', 'chime', 'json')]"
    )
    assert loaded_by(code, {"jinja2"}) == []
