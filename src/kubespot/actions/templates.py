"""Webhook message templates: the variables an interruption offers, and rendering them safely.

This module owns everything between an ``InterruptionEvent`` and the text of a webhook body:

* ``template_variables`` builds the variables under the reference handler's names (``EventID``,
  ``Kind``, ``StartTime``...), so a template written for aws-node-termination-handler fills in the
  same way;
* Go-template references (``{{ .EventID }}``, ``{{ if .X }}...{{ end }}``, ``{{ range .Pods }}``) are
  translated to jinja before compiling, and native jinja works as well;
* templates run in jinja's ``SandboxedEnvironment``, with unsafe attribute access raising at once, so a
  user template cannot reach Python internals;
* every value a template prints passes through one formatter: times and lists print as Go prints them
  (what the reference handler's users see), and with ``json_escape`` the text is escaped as the
  inside of a JSON string, so a quote or newline in a description cannot break a JSON body;
* ``message_variables`` adds the stage, the outcome and the summary of what was done, and
  ``render_builtin`` writes the built-in messages (Slack Block Kit, a Microsoft Teams Adaptive Card,
  Amazon Chime, a structured JSON object) from an ``InterruptionSummary``, without jinja.

jinja2 is imported on first use, not at import time: the per-node agent loads it only when a
webhook is configured.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Set
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


def template_variables(
    event: InterruptionEvent, *, node_name: str, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The variables a template sees for ``event`` on ``node_name``.

    Reference-handler names: ``EventID``, ``Kind`` (its kind strings), ``Description``, ``State``,
    ``NodeName``, ``InstanceID``, ``StartTime`` (when the interruption takes effect: the deadline when
    one is known, as the reference handler uses the spot interruption time, else the notice time) and
    ``EndTime`` (the deadline; empty without one). kubespot adds ``KubespotKind``, ``Source``,
    ``NoticeTime``, ``ActAt``, ``Cancelled`` and ``Raw`` (the payload as received). ``extra`` (e.g.
    ``InstanceType``, ``AvailabilityZone``, ``Pods``) adds more; it cannot replace the event's own.
    Times stay ``datetime`` objects so native templates can format them; printed bare they come out
    as the reference handler's Go ``time.Time`` does (``2026-11-20 17:04:13 +0000 UTC``).
    """
    raw_state = event.raw.get("State")
    state = raw_state if isinstance(raw_state, str) else ("canceled" if event.cancelled else "")
    own: dict[str, Any] = {
        "EventID": event.id,
        "Kind": NTH_KINDS.get(event.kind, event.kind.name),
        "KubespotKind": event.kind.value,
        "Description": event.description,
        "State": state,
        "NodeName": node_name,
        "InstanceID": event.instance_id,
        "StartTime": event.deadline or event.notice_time,
        "EndTime": event.deadline,
        "NoticeTime": event.notice_time,
        "ActAt": event.act_at,
        "Source": event.source.value,
        "Cancelled": event.cancelled,
        # A snapshot: the queued message must not change if the caller's mapping does.
        "Raw": dict(event.raw),
    }
    return {**dict(extra or {}), **own}


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


def go_time(value: datetime) -> str:
    """``value`` as Go's ``time.Time.String()`` prints a UTC time: ``2006-01-02 15:04:05.5 +0000 UTC``.

    Naive times are taken as UTC (every time kubespot handles comes from AWS in UTC).
    """
    utc = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    text = utc.strftime("%Y-%m-%d %H:%M:%S")
    if utc.microsecond:
        # Go prints the fraction with trailing zeros trimmed (".999999999" layout).
        text += f".{utc.microsecond:06d}".rstrip("0")
    return text + " +0000 UTC"


def format_value(value: Any) -> str:
    """How a value prints in a message: as the reference handler (Go's ``%v``) would print it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return go_time(value)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        items = " ".join(f"{format_value(k)}:{format_value(v)}" for k, v in sorted(value.items(), key=str))
        return f"map[{items}]"
    if isinstance(value, list | tuple | Set):
        return "[" + " ".join(format_value(v) for v in value) + "]"
    return str(value)


def json_string_content(text: str) -> str:
    """``text`` escaped to sit between the quotes of a JSON string (quotes, backslashes, controls)."""
    return orjson.dumps(text).decode()[1:-1]


def _finalize_plain(value: Any) -> str:
    return format_value(value)


def _finalize_json(value: Any) -> str:
    return json_string_content(format_value(value))


# --- Go template syntax -------------------------------------------------------------------------------

_TAG = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
# String literals are matched first and kept as they are: a dot inside "a .B" is text, not a reference.
# A dot right after something it could be an attribute of (`foo.bar`, `x().y`, `''.x`, `1.5`) is not
# a Go reference either, so the look-behind lists what may precede one.
_STRING = r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`'
_NOT_AFTER = r"(?<![\w)\]\.$'\"`])"
_PATH = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_TOKENS = re.compile(
    rf"(?P<string>{_STRING})|\$\.(?P<root>{_PATH})|{_NOT_AFTER}\.(?P<field>{_PATH})|{_NOT_AFTER}\.(?![\w.])",
    re.DOTALL,
)
_RANGE = re.compile(r"range\s+(.+)", re.DOTALL)
_IF = re.compile(r"(else\s+)?if\s+(.+)", re.DOTALL)


def translate_go_template(template: str) -> str:
    """Rewrite the Go-template forms the reference handler's users write into jinja.

    Handled: field references (``.EventID``, ``$.NodeName``), ``{{ . }}`` inside ``range``,
    ``if``/``else if``/``else``/``end`` and ``range .List``, with ``{{-``/``-}}`` trim markers (the
    same in both languages). Native jinja passes through unchanged: a tag is only rewritten when it
    holds a Go reference or closes a block this function opened. Go functions and pipelines
    (``{{ .X | printf "%s" }}``) are not translated and fail ``check_template`` with jinja's message.
    """
    blocks: list[str] = []  # "if", or the loop variable of a range; innermost last

    def expression(text: str) -> str:
        loop = next((b for b in reversed(blocks) if b != "if"), None)
        return _TOKENS.sub(lambda m: _rewrite(m, loop), text)

    def tag(match: re.Match[str]) -> str:
        inner = match.group(1)
        # Go's trim markers need a space after/before the dash; jinja accepts the same spelling.
        left = "-" if re.match(r"-\s", inner) else ""
        right = "-" if re.search(r"\s-$", inner) else ""
        body = inner[len(left) : len(inner) - len(right)].strip()
        if body == "end" and blocks:
            kind = blocks.pop()
            return f"{{%{left} {'endif' if kind == 'if' else 'endfor'} {right}%}}"
        if body == "else" and blocks:
            return f"{{%{left} else {right}%}}"
        if not _is_go(body, in_range=any(b != "if" for b in blocks)):
            return match.group(0)
        if m := _IF.fullmatch(body):
            condition = expression(m.group(2))
            if m.group(1):
                return f"{{%{left} elif {condition} {right}%}}"
            blocks.append("if")
            return f"{{%{left} if {condition} {right}%}}"
        if m := _RANGE.fullmatch(body):
            iterable = expression(m.group(1))
            var = f"go_item{len(blocks) + 1}"
            blocks.append(var)
            return f"{{%{left} for {var} in {iterable} {right}%}}"
        return f"{{{{{left} {expression(body)} {right}}}}}"

    return _TAG.sub(tag, template)


def _is_go(body: str, *, in_range: bool) -> bool:
    """Whether a tag's body holds a Go reference (a bare ``.`` counts only inside a range)."""
    for m in _TOKENS.finditer(body):
        if m.group("root") or m.group("field") or (in_range and not m.group("string")):
            return True
    return False


def _rewrite(m: re.Match[str], loop: str | None) -> str:
    """One token of a Go expression in jinja form."""
    if m.group("string") is not None:
        lit = m.group("string")
        # Go's raw strings have no jinja spelling: a JSON string literal reads the same in jinja.
        return orjson.dumps(lit[1:-1]).decode() if lit.startswith("`") else lit
    if m.group("root"):
        return m.group("root")
    # Inside `range`, Go's dot is the current element: `.` is the item, `.Name` a field of it.
    if m.group("field"):
        return m.group("field") if loop is None else f"{loop}.{m.group('field')}"
    return loop if loop is not None else m.group(0)


# --- compiling and rendering --------------------------------------------------------------------------


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
        # Unknown variables print as "" (the reference handler prints "<no value>"), and chains
        # through them (`Raw.Missing.Deeper`) too, so one missing field never loses the message.
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


@functools.lru_cache(maxsize=8)
def _compile(template: str, json_escape: bool) -> Template:
    return _environment(json_escape).from_string(translate_go_template(template))


def render_template(template: str, variables: Mapping[str, Any], *, json_escape: bool = False) -> str:
    """``template`` (Go-style or jinja) filled in with ``variables``.

    With ``json_escape`` every printed value is escaped as JSON string content. Raises jinja's errors
    (``TemplateSyntaxError``, ``SecurityError``...) for the caller to report.
    """
    return _compile(template, json_escape).render(dict(variables))


def render_values_with(template: str, variables: Mapping[str, Any], show: Callable[[str], str]) -> str:
    """``template`` filled in with ``variables``, each printed value (as ``format_value`` prints it)
    passed through ``show``; the template's own text is left as written (``kubespot.actions.url``
    encodes the values of a URL by where they land)."""
    env = _environment(False).overlay(finalize=lambda value: show(format_value(value)))
    return env.from_string(translate_go_template(template)).render(dict(variables))


def check_template(template: str, *, field: str = "template") -> None:
    """Refuse a template that cannot work, so the agent stops at start-up with a clear message.

    The template is compiled and rendered once with a sample event, as the reference handler does,
    so syntax errors and sandbox violations are both caught. Raises ``InvalidSetting(field, reason)``.
    """
    from jinja2 import TemplateError

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
    variables = message_variables(sample, node_name="node", summary=summary, now=sample.notice_time)
    try:
        render_template(template, variables, json_escape=True)
    except TemplateError as exc:
        line = getattr(exc, "lineno", None)
        where = f" (line {line})" if line else ""
        raise InvalidSetting(field, f"invalid template{where}: {exc.message or type(exc).__name__}") from None
    except Exception as exc:  # e.g. a TypeError from `{{ .Kind + 1 }}`; the reason is all we need
        raise InvalidSetting(field, f"template fails to render: {type(exc).__name__}: {exc}") from None
