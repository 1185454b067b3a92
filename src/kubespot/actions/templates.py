"""Webhook message templates: the variables an interruption offers, and rendering them safely.

This module owns everything between an ``InterruptionEvent`` and the text of a webhook body:

* ``template_variables`` builds the variables under the reference handler's names (``EventID``,
  ``Kind``, ``StartTime``, ``NodeLabels``, ``Pods``, ``InstanceType``...: every field NTH gives its
  template), so a template written for aws-node-termination-handler fills in the same way;
* templates are Go ``text/template`` with sprig's functions, as NTH renders them, run by kubespot's
  own engine (``kubespot.actions.gotemplate``: no attribute of a Python object is reachable). A
  template that is not Go but jinja (``{{ EventID }}``, ``{% for %}``) still renders in jinja's
  sandbox, as before;
* every value a template prints is formatted as Go prints it, and with ``json_escape`` a value
  printed inside a JSON string is escaped as JSON string content, so a quote or newline in a
  description cannot break a JSON body;
* ``template_problem`` says, once at start-up, why a template cannot be used (naming the construct),
  so the caller can fall back to the default message instead of stopping;
* ``message_variables`` adds the stage, the outcome and the summary of what was done, and
  ``render_builtin`` writes the built-in messages (Slack Block Kit, a Microsoft Teams Adaptive Card,
  Amazon Chime, a structured JSON object) from an ``InterruptionSummary``.

jinja2 is imported only for a template that is not Go: the per-node agent never loads it otherwise.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from kubespot.config.loader import InvalidSetting
from kubespot.model import InterruptionEvent, Kind, Source
from kubespot.model.summary import (
    SCHEMA_VERSION,
    ActionResult,
    ActionSummary,
    InterruptionSummary,
    Outcome,
    PodCounts,
    Stage,
    rfc3339,
)

if TYPE_CHECKING:
    from jinja2 import Template
    from jinja2.sandbox import SandboxedEnvironment

    from . import gotemplate

#: The reference handler's kind strings (its monitor package constants), so templates and receivers
#: that switch on ``Kind`` keep working. kubespot's own value is offered as ``KubespotKind``.
NTH_KINDS: Mapping[Kind, str] = {
    Kind.SPOT_INTERRUPTION: "SPOT_ITN",
    Kind.SCHEDULED_MAINTENANCE: "SCHEDULED_EVENT",
    Kind.REBALANCE_RECOMMENDATION: "REBALANCE_RECOMMENDATION",
    Kind.ASG_LIFECYCLE: "ASG_LIFECYCLE",
    Kind.STATE_CHANGE: "STATE_CHANGE",
}

# --- variables ----------------------------------------------------------------------------------------


#: NTH's monitor names (its monitor packages' ``...MonitorKind`` constants), by source and kind.
NTH_MONITORS: Mapping[Kind, str] = {
    Kind.SPOT_INTERRUPTION: "SPOT_ITN_MONITOR",
    Kind.SCHEDULED_MAINTENANCE: "SCHEDULED_EVENT_MONITOR",
    Kind.REBALANCE_RECOMMENDATION: "REBALANCE_RECOMMENDATION_MONITOR",
    Kind.ASG_LIFECYCLE: "ASG_LIFECYCLE_MONITOR",
}

#: The node and instance facts NTH gives its template (``monitor.InterruptionEvent`` and
#: ``ec2metadata.NodeMetadata``) that the event itself does not carry: filled from ``extra`` (the
#: agent reads them from the Node, its pods and IMDS), else empty, as NTH leaves what it cannot read.
NTH_CONTEXT_DEFAULTS: Mapping[str, Any] = {
    "NodeLabels": {},
    "Pods": [],
    "ProviderID": "",
    "InstanceType": "",
    "AccountId": "",
    "InstanceLifeCycle": "",
    "PublicHostname": "",
    "PublicIP": "",
    "LocalHostname": "",
    "LocalIP": "",
    "AvailabilityZone": "",
    "Region": "",
}


def _asg_name(raw: Mapping[str, Any]) -> str:
    """The Auto Scaling group named by the message (a lifecycle notice, plain or in an EventBridge
    envelope), as NTH fills ``AutoScalingGroupName``; "" when none."""
    detail = raw.get("detail")
    for where in (raw, detail if isinstance(detail, Mapping) else {}):
        name = where.get("AutoScalingGroupName")
        if isinstance(name, str):
            return name
    return ""


def template_variables(
    event: InterruptionEvent, *, node_name: str, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The variables a template sees for ``event`` on ``node_name``.

    Every field NTH's template gets: ``EventID``, ``Kind`` (its kind strings), ``Monitor`` (its
    monitor names), ``Description``, ``State``, ``AutoScalingGroupName``, ``NodeName``,
    ``NodeLabels``, ``Pods``, ``InstanceID``, ``ProviderID``, ``InstanceType``, ``IsManaged``,
    ``StartTime`` (when the interruption takes effect: the deadline when one is known, as NTH uses the
    spot interruption time, else the notice time), ``EndTime`` (the deadline; empty without one),
    ``NodeProcessed``, ``InProgress``, and the instance's ``AccountId``, ``InstanceLifeCycle``,
    ``PublicHostname``, ``PublicIP``, ``LocalHostname``, ``LocalIP``, ``AvailabilityZone``,
    ``Region``. The node and instance facts come from ``extra`` (empty when not given); ``extra``
    cannot replace the event's own fields. kubespot adds ``KubespotKind``, ``Source``,
    ``NoticeTime``, ``ActAt``, ``Cancelled`` and ``Raw`` (the payload as received). Times stay
    ``datetime`` objects; printed bare they come out as Go's ``time.Time`` does
    (``2026-11-20 17:04:13 +0000 UTC``).
    """
    raw_state = event.raw.get("State")
    state = raw_state if isinstance(raw_state, str) else ("canceled" if event.cancelled else "")
    monitor = "SQS_MONITOR" if event.source is Source.SQS else NTH_MONITORS.get(event.kind, "")
    own: dict[str, Any] = {
        "EventID": event.id,
        "Kind": NTH_KINDS.get(event.kind, event.kind.name),
        "Monitor": monitor,
        "KubespotKind": event.kind.value,
        "Description": event.description,
        "State": state,
        "NodeName": node_name,
        "InstanceID": event.instance_id,
        "IsManaged": True,
        "StartTime": event.deadline or event.notice_time,
        # NTH sets EndTime only for scheduled events; elsewhere it is Go's zero time (prints
        # 0001-01-01 00:00:00 +0000 UTC, .IsZero is true), never nil: .EndTime.Format must work.
        "EndTime": (event.deadline if event.kind is Kind.SCHEDULED_MAINTENANCE else None) or GO_ZERO_TIME,
        "NodeProcessed": False,
        "InProgress": not event.cancelled,
        "NoticeTime": event.notice_time,
        "ActAt": event.act_at,
        "Source": event.source.value,
        "Cancelled": event.cancelled,
        # A snapshot: the queued message must not change if the caller's mapping does.
        "Raw": dict(event.raw),
    }
    context = {**NTH_CONTEXT_DEFAULTS, "AutoScalingGroupName": _asg_name(event.raw), **dict(extra or {})}
    return {**context, **own}


def uses_context(template: str) -> bool:
    """Whether ``template`` may use the node and instance facts (it names one, or prints dot whole)."""
    names = (*NTH_CONTEXT_DEFAULTS, "AutoScalingGroupName")
    return any(name in template for name in names) or bool(_WHOLE_DOT.search(template))


#: An action that prints or passes dot or ``$`` itself (``{{ . }}``, ``{{ toJson $ }}``).
_WHOLE_DOT = re.compile(r"\{\{[^}]*?(?<![\w)\]])(?:\.|\$)(?![\w.$])")


def with_context(variables: Mapping[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
    """``variables`` with the node and instance facts of ``context`` filled in (only those names:
    ``NTH_CONTEXT_DEFAULTS`` and ``AutoScalingGroupName`` when the event named none)."""
    out = dict(variables)
    for name, value in context.items():
        if name in NTH_CONTEXT_DEFAULTS or (name == "AutoScalingGroupName" and not out.get(name)):
            out[name] = value
    return out


def message_variables(
    event: InterruptionEvent,
    *,
    node_name: str,
    summary: InterruptionSummary,
    now: datetime,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``template_variables`` plus what kubespot knows at the message's stage.

    Added: ``Stage`` (started/finished/failed), ``Outcome`` (in_progress, done, withdrawn, superseded,
    ignored, failed), ``Error``, ``DryRun``, ``Duration`` (seconds of handling, once finished),
    ``PodsEvicted``, ``PodsDeleted``, ``PodsDeletedAtDeadline``, ``PodsSkipped``, ``PodsMoved``
    (empty before a drain), ``Actions`` (a list of {name, result, started, duration, detail,
    status}), ``Failures``, ``Summary`` (the whole ``InterruptionSummary.to_dict()``), ``Deadline``
    and ``DeadlineUnix`` (empty without one), ``Now`` and ``NowUnix`` (when the message was made).
    ``extra`` cannot replace them either; none of them replaces a reference-handler name (``Pods``
    stays the caller's list of pod names).
    """
    variables = template_variables(event, node_name=node_name, extra=extra)
    pods = summary.pods
    added: dict[str, Any] = {
        "Stage": summary.stage.value,
        "Outcome": summary.outcome.value,
        "Error": summary.error or "",
        "DryRun": summary.dry_run,
        "Duration": None if summary.duration is None else round(summary.duration, 3),
        "PodsEvicted": None if pods is None else pods.evicted,
        "PodsDeleted": None if pods is None else pods.deleted,
        "PodsDeletedAtDeadline": None if pods is None else pods.deleted_at_deadline,
        "PodsSkipped": None if pods is None else pods.skipped,
        "PodsMoved": None if pods is None else pods.moved,
        "Actions": [a.to_dict() for a in summary.actions],
        "Failures": list(summary.failures),
        "Summary": summary.to_dict(),
        "Deadline": event.deadline,
        "DeadlineUnix": None if event.deadline is None else int(event.deadline.timestamp()),
        "Now": now,
        "NowUnix": int(now.timestamp()),
    }
    # kubespot's own names win over ``extra``, as the reference handler's do.
    return {**variables, **added}


# --- built-in messages --------------------------------------------------------------------------------

KIND_TITLES: Mapping[Kind, str] = {
    Kind.SPOT_INTERRUPTION: "Spot interruption",
    Kind.REBALANCE_RECOMMENDATION: "Rebalance recommendation",
    Kind.SCHEDULED_MAINTENANCE: "Scheduled maintenance",
    Kind.ASG_LIFECYCLE: "Auto Scaling termination",
    Kind.STATE_CHANGE: "Instance state change",
}
_OUTCOME_TITLES: Mapping[Outcome, str] = {
    Outcome.IN_PROGRESS: "handling started",
    Outcome.DONE: "handled",
    Outcome.WITHDRAWN: "withdrawn",
    Outcome.SUPERSEDED: "superseded by a stronger event",
    Outcome.IGNORED: "ignored",
    Outcome.FAILED: "handling failed",
}
#: Chat services cap message sizes (Slack: 2 000 characters per field, 150 per header; Chime: 4 096
#: per message); longer text is cut rather than have the whole message refused.
_FIELD_MAX = 1_900
_CHIME_MAX = 4_000


def message_title(summary: InterruptionSummary) -> str:
    """``Spot interruption on ip-10-0-1-2: handled`` (the failed stage always says it failed)."""
    outcome = Outcome.FAILED if summary.stage is Stage.FAILED else summary.outcome
    if summary.stage is Stage.STARTED:
        outcome = Outcome.IN_PROGRESS
    kind = KIND_TITLES.get(summary.kind, summary.kind.value)
    dry = " (dry run)" if summary.dry_run else ""
    return f"{kind} on {summary.node}: {_OUTCOME_TITLES[outcome]}{dry}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _utc(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _timings(summary: InterruptionSummary) -> str:
    parts: list[str] = []
    if summary.notice_time is not None and summary.started is not None:
        parts.append(
            f"fenced {(summary.started - summary.notice_time).total_seconds():.1f} s after the notice"
        )
    if summary.duration is not None:
        took = "gave up after" if summary.stage is Stage.FAILED else "done in"
        parts.append(f"{took} {summary.duration:.1f} s")
    margin = summary.margin
    if margin is not None:
        parts.append(
            f"{margin:.0f} s before the deadline" if margin >= 0 else f"{-margin:.0f} s past the deadline"
        )
    elif summary.deadline is not None and summary.started is not None:
        parts.append(f"{(summary.deadline - summary.started).total_seconds():.0f} s left before the deadline")
    return ", ".join(parts)


def _pods(pods: PodCounts) -> str:
    parts = [
        f"{n} {label}"
        for n, label in (
            (pods.evicted, "evicted"),
            (pods.deleted, "deleted (no controller)"),
            (pods.deleted_at_deadline, "deleted at the deadline"),
            (pods.gone, "gone by themselves"),
            (pods.skipped, "skipped"),
            (pods.still_running, "still running"),
        )
        if n
    ]
    return ", ".join(parts) or "none to move"


def _action(action: ActionSummary) -> str:
    details = [f"{action.duration:.1f} s"] if action.duration is not None else []
    if action.detail:
        details.append(action.detail)
    suffix = f" ({'; '.join(details)})" if details else ""
    return f"{action.name}: {action.result.value}{suffix}"


def message_facts(summary: InterruptionSummary) -> list[tuple[str, str]]:
    """The (label, value) lines every built-in chat message shows, in order; empty ones left out."""
    facts = [
        ("Kind", f"{KIND_TITLES.get(summary.kind, summary.kind.value)} ({summary.kind.value})"),
        ("Node", summary.node),
        ("Instance", summary.instance_id),
        ("Deadline", _utc(summary.deadline) if summary.deadline is not None else "none announced"),
        ("Outcome", summary.outcome.value + (" (dry run)" if summary.dry_run else "")),
        ("Timings", _timings(summary)),
    ]
    if summary.pods is not None:
        facts.append(("Pods", _pods(summary.pods)))
    if summary.actions:
        facts.append(("Actions", "; ".join(_action(a) for a in summary.actions)))
    if summary.failures:
        facts.append(("Failures", "; ".join(summary.failures)))
    if summary.error:
        facts.append(("Error", summary.error))
    if summary.description:
        facts.append(("Description", summary.description))
    return [(label, _clip(value, _FIELD_MAX)) for label, value in facts if value]


def _slack_escape(text: str) -> str:
    # Slack's mrkdwn reserves these three; everything else prints as written.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_SHORT_FACTS = frozenset(("Kind", "Node", "Instance", "Deadline", "Outcome", "Timings", "Pods"))


def slack_message(summary: InterruptionSummary) -> dict[str, Any]:
    """Block Kit: a header, the short facts as section fields, the long ones as a section, a context.

    ``text`` is the fallback Slack shows in notifications and where blocks cannot be displayed.
    """
    title = message_title(summary)
    facts = message_facts(summary)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(title, 150), "emoji": True}},
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": f"*{label}*\n{_slack_escape(value)}"}
                for label, value in facts
                if label in _SHORT_FACTS
            ][:10],
        },
    ]
    for label, value in facts:
        if label not in _SHORT_FACTS:
            blocks.append(
                {"type": "section", "text": {"type": "mrkdwn", "text": f"*{label}*\n{_slack_escape(value)}"}}
            )
    blocks.append(
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"kubespot · event `{_slack_escape(summary.event_id)}`"}],
        }
    )
    return {"text": f"{title} (instance {summary.instance_id}, event {summary.event_id})", "blocks": blocks}


def teams_message(summary: InterruptionSummary) -> dict[str, Any]:
    """A ``message`` with one Adaptive Card attachment: what Teams Workflows webhooks accept.

    (The retired Office 365 connector format, MessageCard, is not sent: Workflows refuse it.) Card
    version 1.4 renders in every current Teams client.
    """
    color = {Stage.STARTED: "Warning", Stage.FAILED: "Attention"}.get(summary.stage, "Good")
    if summary.stage is Stage.FINISHED and summary.outcome is not Outcome.DONE:
        color = "Default"
    card = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "msteams": {"width": "Full"},
        "body": [
            {
                "type": "TextBlock",
                "text": message_title(summary),
                "weight": "Bolder",
                "size": "Medium",
                "color": color,
                "wrap": True,
            },
            {"type": "FactSet", "facts": [{"title": k, "value": v} for k, v in message_facts(summary)]},
            {
                "type": "TextBlock",
                "text": f"kubespot · event {summary.event_id}",
                "isSubtle": True,
                "size": "Small",
                "wrap": True,
            },
        ],
    }
    return {
        "type": "message",
        "attachments": [
            {"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None, "content": card}
        ],
    }


def chime_message(summary: InterruptionSummary) -> dict[str, Any]:
    """Amazon Chime's incoming-webhook body: ``{"Content": text}``, plain text, one fact per line."""
    lines = [
        message_title(summary),
        *(f"{k}: {v}" for k, v in message_facts(summary)),
        f"Event: {summary.event_id}",
    ]
    return {"Content": _clip("\n".join(lines), _CHIME_MAX)}


def json_message(summary: InterruptionSummary) -> dict[str, Any]:
    """A structured object for automation: the event, where, the stage and outcome, the summary."""
    return {
        "source": "kubespot",
        "schema_version": SCHEMA_VERSION,
        "stage": summary.stage.value,
        "outcome": summary.outcome.value,
        "text": message_title(summary),
        "event": {
            "id": summary.event_id,
            "kind": summary.kind.value,
            "nth_kind": NTH_KINDS.get(summary.kind, summary.kind.name),
            "source": summary.source.value,
            "description": summary.description,
            "notice_time": rfc3339(summary.notice_time),
            "deadline": rfc3339(summary.deadline),
        },
        "node": summary.node,
        "instance": summary.instance_id,
        "summary": summary.to_dict(),
    }


BUILTIN_FORMATS = {
    "slack": slack_message,
    "teams": teams_message,
    "chime": chime_message,
    "json": json_message,
}


def render_builtin(fmt: str, summary: InterruptionSummary) -> str:
    """The built-in message of ``fmt`` (slack, teams, chime, json) as a JSON text; KeyError if none."""
    return orjson.dumps(BUILTIN_FORMATS[fmt](summary)).decode()


# --- printing values ----------------------------------------------------------------------------------

#: Go's zero ``time.Time``: NTH's ``EndTime`` of an event without one (``gotemplate.GO_ZERO_TIME``).
GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)


def _engine() -> Any:
    """The Go-template engine, imported on first use: an agent without templates or notification
    targets never loads it (its memory is paid on every node)."""
    from . import gotemplate

    return gotemplate


def go_time(value: datetime) -> str:
    """``time.Time.String()`` as Go prints it; shared with the Go-template engine."""
    result: str = _engine().go_time(value)
    return result


def format_value(value: Any) -> str:
    """How a value prints in a message: as the reference handler (Go's ``%v``) would print it."""
    result: str = _engine().go_value(value)
    return result


def json_string_content(text: str) -> str:
    """``text`` escaped to sit between the quotes of a JSON string (quotes, backslashes, controls)."""
    return orjson.dumps(text).decode()[1:-1]


def _finalize_plain(value: Any) -> str:
    return format_value(value)


def _finalize_json(value: Any) -> str:
    return json_string_content(format_value(value))


# --- jinja (templates that are not Go) ------------------------------------------------------------------


@functools.cache
def _environment(json_escape: bool) -> SandboxedEnvironment:
    from jinja2 import ChainableUndefined
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import SandboxedEnvironment

    class _Sandbox(SandboxedEnvironment):
        # The stock sandbox turns an unsafe attribute into an undefined value that prints as "" and
        # only raises when called; refusing at once makes an escape attempt visible in the logs.
        def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
            raise SecurityError(f"access to attribute {attribute!r} of {type(obj).__name__!r} is unsafe")

    env = _Sandbox(
        # Unknown variables print as "", and chains through them (`Raw.Missing.Deeper`) too, so one
        # missing field never loses the message.
        undefined=ChainableUndefined,
        finalize=_finalize_json if json_escape else _finalize_plain,
        autoescape=False,
        keep_trailing_newline=True,
        cache_size=0,
    )
    # APIs want times as RFC 3339 or epoch seconds (a monitoring downtime's end, say), and a
    # Go-style time string is neither.
    env.filters["rfc3339"] = _filter_rfc3339
    env.filters["unix"] = _filter_unix
    return env


def _as_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, tz=UTC)
    return None


def _filter_rfc3339(value: Any) -> str:
    """``{{ Deadline | rfc3339 }}``: a time or epoch seconds as ``2026-11-20T17:04:13Z``; else ""."""
    when = _as_datetime(value)
    return rfc3339(when.replace(microsecond=0)) or "" if when is not None else ""


def _filter_unix(value: Any) -> int | str:
    """``{{ Deadline | unix }}``: a time as epoch seconds; else ""."""
    when = _as_datetime(value)
    return int(when.timestamp()) if when is not None else ""


# --- compiling and rendering --------------------------------------------------------------------------


class TemplateProblem(Exception):
    """A template that cannot be used: ``reason`` names the construct (and the line) at fault."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Compiled:
    """A template ready to render: Go (``go``) or, for a template that is not Go, jinja."""

    go: gotemplate.Template | None = None
    jinja: str | None = None

    def render(self, variables: Mapping[str, Any], *, json_escape: bool) -> str:
        from . import gotemplate  # on first use (see _engine)

        if self.go is not None:
            now = variables.get("Now")
            return self.go.execute(
                gotemplate.Struct(variables),
                now=now if isinstance(now, datetime) else None,
                json_strings=json_escape,
            )
        assert self.jinja is not None
        return _jinja(self.jinja, json_escape).render(dict(variables))


@functools.lru_cache(maxsize=8)
def _jinja(template: str, json_escape: bool) -> Template:
    return _environment(json_escape).from_string(template)


#: A Go field or variable reference inside an action (``.Name``, ``$x``), which jinja never has (its
#: attributes follow a name: ``foo.bar``).
_GO_REFERENCE = re.compile(r"\{\{[^}]*?(?:(?<![\w)\]'\"`])\.[A-Za-z_]|\$)")


@functools.lru_cache(maxsize=16)
def compile_template(template: str) -> Compiled:
    """``template`` compiled: as Go ``text/template`` (NTH's language), or as jinja when it is
    jinja: it has jinja blocks (``{% ... %}``) or no Go reference (``{{ EventID }}``), and compiles
    as jinja. ``TemplateProblem`` otherwise, with the Go engine's reason (naming the construct)."""
    from . import gotemplate  # on first use (see _engine)

    jinja_blocks = "{%" in template or "{#" in template
    go_error: gotemplate.TemplateError | None = None
    if not jinja_blocks:
        try:
            return Compiled(go=gotemplate.parse(template))
        except gotemplate.Unsupported as exc:
            # Valid Go that this engine does not offer: never second-guessed as jinja.
            raise TemplateProblem(_reason(exc)) from None
        except gotemplate.TemplateError as exc:
            go_error = exc
        if _GO_REFERENCE.search(template):
            raise TemplateProblem(_reason(go_error)) from None
    from jinja2 import TemplateError

    try:
        _jinja(template, False)
    except TemplateError as exc:
        if go_error is not None:
            raise TemplateProblem(_reason(go_error)) from None
        lineno = getattr(exc, "lineno", None)
        line = f" (line {lineno})" if lineno else ""
        raise TemplateProblem(f"invalid template{line}: {exc.message or type(exc).__name__}") from None
    return Compiled(jinja=template)


def _reason(exc: gotemplate.TemplateError) -> str:
    from . import gotemplate  # on first use (see _engine)

    where = f" (line {exc.line})" if exc.line else ""
    kind = "unsupported construct" if isinstance(exc, gotemplate.Unsupported) else "invalid template"
    return f"{kind}{where}: {exc.reason}"


def render_template(template: str, variables: Mapping[str, Any], *, json_escape: bool = False) -> str:
    """``template`` (Go, or jinja) filled in with ``variables``.

    With ``json_escape`` every value printed inside a JSON string is escaped as JSON string content.
    Raises ``TemplateProblem`` for a template that does not compile, and the engines' errors
    (``gotemplate.TemplateError``, jinja's ``SecurityError``...) for one that fails to render.
    """

    return compile_template(template).render(variables, json_escape=json_escape)


def render_values_with(template: str, variables: Mapping[str, Any], show: Callable[[str], str]) -> str:
    """``template`` filled in with ``variables``, each printed value (as the engine prints it) passed
    through ``show``; the template's own text is left as written (``kubespot.actions.url`` encodes the
    values of a URL by where they land)."""
    from . import gotemplate  # on first use (see _engine)

    compiled = compile_template(template)
    if compiled.go is not None:
        now = variables.get("Now")
        return compiled.go.execute(
            gotemplate.Struct(variables), now=now if isinstance(now, datetime) else None, show=show
        )
    env = _environment(False).overlay(finalize=lambda value: show(format_value(value)))
    return env.from_string(template).render(dict(variables))


def sample_variables() -> dict[str, Any]:
    """The variables of a made-up spot interruption, every field filled: what a check renders with."""
    sample = InterruptionEvent(
        id="spot-itn-0000",
        kind=Kind.SPOT_INTERRUPTION,
        instance_id="i-0123456789abcdef0",
        source=Source.IMDS,
        notice_time=datetime(2026, 1, 1, tzinfo=UTC),
        act_at=datetime(2026, 1, 1, tzinfo=UTC),
        deadline=datetime(2026, 1, 1, 0, 2, tzinfo=UTC),
        description="sample",
    )
    summary = InterruptionSummary.for_event(
        sample,
        node="node",
        stage=Stage.FINISHED,
        started=sample.notice_time,
        finished=sample.notice_time,
        actions=(
            ActionSummary(
                name="drain", result=ActionResult.SUCCESS, started=sample.notice_time, duration=1.0
            ),
        ),
        pods=PodCounts(evicted=1),
    )
    extra = {
        "NodeLabels": {"kubernetes.io/hostname": "node", "node.kubernetes.io/instance-type": "m5.large"},
        # No pods, as NTH validates its template with empty data: `index .Pods 0` fails there too.
        "Pods": [],
        "InstanceType": "m5.large",
        "AvailabilityZone": "us-east-1a",
        "Region": "us-east-1",
        "AccountId": "123456789012",
        "LocalIP": "10.0.0.1",
        "LocalHostname": "ip-10-0-0-1.ec2.internal",
        "InstanceLifeCycle": "spot",
        "ProviderID": "aws:///us-east-1a/i-0123456789abcdef0",
    }
    return message_variables(sample, node_name="node", summary=summary, now=sample.notice_time, extra=extra)


def template_problem(template: str) -> str | None:
    """Why ``template`` cannot be used (None when it can): compiled and rendered once with a sample
    event, as the reference handler validates its template at start-up, so syntax errors,
    unsupported constructs and sandbox violations are all found before the first interruption."""
    from . import gotemplate  # on first use (see _engine)

    try:
        compiled = compile_template(template)
    except TemplateProblem as exc:
        return exc.reason
    try:
        compiled.render(sample_variables(), json_escape=True)
    except gotemplate.TemplateError as exc:
        return "template fails to render: " + _reason(exc).removeprefix("invalid template")
    except Exception as exc:  # jinja's errors, e.g. a SecurityError; the reason is all we need
        message = getattr(exc, "message", None) or str(exc)
        line = getattr(exc, "lineno", None)
        where = f" (line {line})" if line else ""
        return f"template fails to render{where}: {type(exc).__name__}: {message}"
    return None


def check_template(template: str, *, field: str = "template") -> None:
    """Refuse a template that cannot work: ``InvalidSetting(field, reason)`` (for templates with no
    default to fall back to, such as an outgoing call's URL)."""
    problem = template_problem(template)
    if problem is not None:
        raise InvalidSetting(field, problem)
