"""Webhook templates: Go or jinja, the variables (NTH's fields), Go-style printing, JSON escaping,
sandbox, and the start-up check. The Go engine itself: test_gotemplate.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from jinja2.exceptions import SecurityError

from kubespot.actions.templates import (
    check_template,
    go_time,
    render_template,
    template_problem,
    template_variables,
)
from kubespot.config.loader import InvalidSetting
from kubespot.config.webhook import DEFAULT_TEMPLATE
from kubespot.model import InterruptionEvent, Kind, Source
from support.imports import loaded_by

NOTICE = datetime(2026, 11, 20, 17, 2, 13, tzinfo=UTC)
DEADLINE = datetime(2026, 11, 20, 17, 4, 13, tzinfo=UTC)


def spot(description: str = "Spot ITN received", **kw: object) -> InterruptionEvent:
    fields: dict[str, object] = {
        "id": "spot-itn-abc",
        "kind": Kind.SPOT_INTERRUPTION,
        "instance_id": "i-0123",
        "source": Source.IMDS,
        "notice_time": NOTICE,
        "act_at": NOTICE,
        "deadline": DEADLINE,
        "description": description,
    }
    fields.update(kw)
    return InterruptionEvent(**fields)  # type: ignore[arg-type]


# --- Go and jinja ------------------------------------------------------------------------------------


def test_go_and_native_forms_render_the_same() -> None:
    variables = template_variables(spot(), node_name="node-1")
    go = render_template("{{ .EventID }}/{{.NodeName}}/{{ .InstanceID }}", variables)
    native = render_template("{{ EventID }}/{{ NodeName }}/{{ InstanceID }}", variables)
    assert go == native == "spot-itn-abc/node-1/i-0123"


def test_range_over_extra_list_and_dot_inside_it() -> None:
    variables = template_variables(spot(), node_name="n", extra={"Pods": ["a", "b"]})
    assert render_template("{{ range .Pods }}<{{ . }}>{{ end }}", variables) == "<a><b>"


# --- variables ----------------------------------------------------------------------------------------


def test_variables_use_the_reference_handler_names_and_kinds() -> None:
    v = template_variables(spot(), node_name="node-1", extra={"InstanceType": "m5.large"})
    assert v["EventID"] == "spot-itn-abc"
    assert v["Kind"] == "SPOT_ITN"
    assert v["KubespotKind"] == "spot-itn"
    assert v["NodeName"] == "node-1"
    assert v["InstanceID"] == "i-0123"
    assert v["Description"] == "Spot ITN received"
    assert v["StartTime"] == DEADLINE  # the interruption time, as the reference handler sets it
    # NTH sets EndTime only for scheduled events (pkg/monitor/types.go): Go's zero time elsewhere.
    assert v["EndTime"] == datetime(1, 1, 1, tzinfo=UTC)
    assert v["NoticeTime"] == NOTICE
    assert v["InstanceType"] == "m5.large"


@pytest.mark.parametrize(
    ("kind", "nth"),
    [
        (Kind.SPOT_INTERRUPTION, "SPOT_ITN"),
        (Kind.SCHEDULED_MAINTENANCE, "SCHEDULED_EVENT"),
        (Kind.REBALANCE_RECOMMENDATION, "REBALANCE_RECOMMENDATION"),
        (Kind.ASG_LIFECYCLE, "ASG_LIFECYCLE"),
        (Kind.STATE_CHANGE, "STATE_CHANGE"),
    ],
)
def test_every_kind_maps_to_the_reference_string(kind: Kind, nth: str) -> None:
    assert template_variables(spot(kind=kind), node_name="n")["Kind"] == nth


def test_extra_cannot_override_event_fields() -> None:
    v = template_variables(spot(), node_name="n", extra={"EventID": "forged", "AvailabilityZone": "az1"})
    assert v["EventID"] == "spot-itn-abc"
    assert v["AvailabilityZone"] == "az1"


def test_without_deadline_start_is_notice_and_end_is_gos_zero_time() -> None:
    # NTH's EndTime is a time.Time, zero unless a scheduled event set it: it prints Go's zero time,
    # .IsZero is true, and .EndTime.Format works instead of failing on nil (issue 10 review).
    v = template_variables(spot(kind=Kind.REBALANCE_RECOMMENDATION, deadline=None), node_name="n")
    assert v["StartTime"] == NOTICE
    assert render_template("[{{ .EndTime }}]", v) == "[0001-01-01 00:00:00 +0000 UTC]"
    assert render_template("{{ if .EndTime.IsZero }}none{{ end }}", v) == "none"
    assert render_template('{{ .EndTime.Format "2006-01-02" }}', v) == "0001-01-01"
    scheduled = template_variables(spot(kind=Kind.SCHEDULED_MAINTENANCE), node_name="n")
    assert scheduled["EndTime"] == DEADLINE


def test_index_of_an_absent_label_is_the_empty_string() -> None:
    # Go's index on map[string]string returns the zero value "" for an absent key (text/template
    # funcs.go: indexArg / reflect.Zero), so `eq (index .NodeLabels "team") ""` is true.
    v = template_variables(spot(), node_name="n", extra={"NodeLabels": {"stage": "prod"}})
    template = '{{ if eq (index .NodeLabels "team") "" }}no-team{{ else }}team{{ end }}'
    assert render_template(template, v) == "no-team"
    assert render_template('{{ printf "%q" (index .NodeLabels "team") }}', v) == '""'


def test_state_comes_from_the_payload_or_cancellation() -> None:
    scheduled = spot(kind=Kind.SCHEDULED_MAINTENANCE, raw={"State": "active"})
    assert template_variables(scheduled, node_name="n")["State"] == "active"
    assert template_variables(spot(cancelled=True), node_name="n")["State"] == "canceled"
    assert template_variables(spot(), node_name="n")["State"] == ""


def test_times_print_as_go_prints_them() -> None:
    assert go_time(DEADLINE) == "2026-11-20 17:04:13 +0000 UTC"
    assert go_time(DEADLINE.replace(microsecond=250000)) == "2026-11-20 17:04:13.25 +0000 UTC"
    v = template_variables(spot(), node_name="n")
    assert render_template("{{ .StartTime }}", v) == "2026-11-20 17:04:13 +0000 UTC"
    # Native templates can still format the datetime themselves.
    assert render_template("{{ StartTime.isoformat() }}", v) == "2026-11-20T17:04:13+00:00"


def test_lists_and_booleans_print_as_go_prints_them() -> None:
    v = template_variables(spot(), node_name="n", extra={"Pods": ["a", "b"]})
    assert render_template("{{ .Pods }} {{ .Cancelled }}", v) == "[a b] false"


def test_unknown_names_follow_each_language() -> None:
    """Go: a map's absent key prints ``<no value>`` (and so does a field of it), a field the data does
    not have is an error, as on NTH's struct (text/template exec.go evalField). jinja: empty."""
    v = template_variables(spot(), node_name="n")
    assert render_template("<{{ .Raw.Missing }}|{{ .Raw.Missing.Deeper }}>", v) == "<<no value>|<no value>>"
    assert render_template("<{{ nope }}|{{ Raw.Missing.Deeper }}>", v) == "<|>"
    problem = template_problem("{{ .NoSuchThing }}")
    assert problem is not None and "can't evaluate field NoSuchThing" in problem


# --- JSON escaping ------------------------------------------------------------------------------------


def test_default_template_stays_valid_json_with_hostile_description() -> None:
    nasty = 'He said "stop"\nthen \\ left\t\x01'
    v = template_variables(spot(description=nasty), node_name="node-1")
    body = render_template(DEFAULT_TEMPLATE, v, json_escape=True)
    text = json.loads(body)["text"]
    assert f"Description: {nasty} - " in text
    assert "EventID: spot-itn-abc - Kind: SPOT_ITN - Instance: i-0123 - Node: node-1" in text
    assert text.endswith("Start Time: 2026-11-20 17:04:13 +0000 UTC")


def test_without_json_escape_values_are_inserted_verbatim() -> None:
    v = template_variables(spot(description='a "b"\n'), node_name="n")
    assert render_template("{{ .Description }}", v) == 'a "b"\n'
    # Go: escaped inside a JSON string of the body, printed as is outside one (a toJson value).
    assert render_template('"{{ .Description }}"', v, json_escape=True) == '"a \\"b\\"\\n"'
    assert render_template("{{ toJson .Description }}", v, json_escape=True) == '"a \\"b\\"\\n"'
    # jinja: every printed value, as before.
    assert render_template("{{ Description }}", v, json_escape=True) == 'a \\"b\\"\\n'


def test_json_escape_applies_inside_loops_and_to_filtered_values() -> None:
    v = template_variables(spot(), node_name="n", extra={"Pods": ['x"1', "y\n2"]})
    body = render_template('{"pods":[{{ range .Pods }}"{{ . }}",{{ end }}"end"]}', v, json_escape=True)
    assert json.loads(body)["pods"] == ['x"1', "y\n2", "end"]
    body = render_template('{"p":"{{ Pods | join(", ") }}"}', v, json_escape=True)
    assert json.loads(body)["p"] == 'x"1, y\n2'


# --- sandbox ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "escape",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ Description.__class__ }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ StartTime.__reduce_ex__(2) }}",
    ],
)
def test_sandbox_refuses_python_internals(escape: str) -> None:
    v = template_variables(spot(), node_name="n")
    with pytest.raises(SecurityError):
        render_template(escape, v)
    with pytest.raises(InvalidSetting) as err:
        check_template(escape)
    assert err.value.field == "template"
    assert "unsafe" in err.value.reason


# --- check_template -----------------------------------------------------------------------------------


def test_check_template_accepts_default_and_native() -> None:
    check_template(DEFAULT_TEMPLATE)
    check_template('{"text": "{{ EventID }} {% for p in Pods %}{{ p }}{% endfor %}"}')


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("{{ .EventID ", "invalid template (line 1): unclosed action"),
        ("{{ if .Pods }}never closed", "invalid template (line 1): unexpected EOF"),
        ("{{ .EventID | nosuchfunc }}", 'invalid template (line 1): function "nosuchfunc" not defined'),
        ('{{ template "x" . }}', "unsupported construct (line 1): {{template}}"),
        ('{{ env "WEBHOOK_URL" }}', "unsupported construct (line 1): function 'env'"),
        ("{% for %}", "invalid template (line 1): Expected an expression"),
        ("{{ .A }}{% if X %}{% endif %}", "invalid template (line 1): unexpected"),
    ],
)
def test_check_template_names_the_setting_and_the_construct(bad: str, reason: str) -> None:
    with pytest.raises(InvalidSetting) as err:
        check_template(bad)
    assert err.value.field == "template"
    assert err.value.reason.startswith(reason), err.value.reason
    with pytest.raises(InvalidSetting) as from_file:
        check_template(bad, field="template_file")
    assert from_file.value.field == "template_file"


def test_go_templates_reach_no_python_attribute() -> None:
    """Fields are mapping keys only, methods only time.Time's listed ones."""
    v = template_variables(spot(), node_name="n")
    for escape in ("{{ .Description.__class__ }}", "{{ .StartTime.__reduce_ex__ }}", "{{ .Raw.__class__ }}"):
        problem = template_problem(escape)
        assert problem is not None or render_template(escape, v) == "<no value>", escape
    assert render_template("{{ .Raw.__class__ }}", v) == "<no value>"


def test_importing_the_notifier_and_rendering_go_does_not_load_jinja2() -> None:
    code = (
        "import kubespot.actions.notify as n, kubespot.actions.templates as t;"
        "from kubespot.config.webhook import DEFAULT_TEMPLATE as d;"
        "assert t.template_problem(d) is None"
    )
    assert loaded_by(code, {"jinja2"}) == []


# --- NTH's fields ------------------------------------------------------------------------------------


def test_every_field_nth_passes_exists_even_without_the_node_facts() -> None:
    """NTH's template data is ``monitor.InterruptionEvent`` + ``ec2metadata.NodeMetadata``
    (pkg/webhook/webhook.go combinedDrainData): a template naming any of their fields must render,
    not fail on "can't evaluate field", when the agent could not read the node."""
    nth_fields = [
        "EventID",
        "Kind",
        "Monitor",
        "Description",
        "State",
        "AutoScalingGroupName",
        "NodeName",
        "NodeLabels",
        "Pods",
        "InstanceID",
        "ProviderID",
        "InstanceType",
        "IsManaged",
        "StartTime",
        "EndTime",
        "NodeProcessed",
        "InProgress",
        "AccountId",
        "InstanceLifeCycle",
        "PublicHostname",
        "PublicIP",
        "LocalHostname",
        "LocalIP",
        "AvailabilityZone",
        "Region",
    ]
    v = template_variables(spot(), node_name="n")
    assert set(nth_fields) <= set(v)
    rendered = render_template(" ".join(f"{{{{ .{f} }}}}" for f in nth_fields), v)
    assert rendered.startswith("spot-itn-abc SPOT_ITN SPOT_ITN_MONITOR Spot ITN received")
    assert "map[] []" in rendered  # empty labels and pods, as Go prints them


@pytest.mark.parametrize(
    ("kind", "source", "monitor"),
    [
        (Kind.SPOT_INTERRUPTION, Source.IMDS, "SPOT_ITN_MONITOR"),
        (Kind.SCHEDULED_MAINTENANCE, Source.IMDS, "SCHEDULED_EVENT_MONITOR"),
        (Kind.REBALANCE_RECOMMENDATION, Source.IMDS, "REBALANCE_RECOMMENDATION_MONITOR"),
        (Kind.ASG_LIFECYCLE, Source.IMDS, "ASG_LIFECYCLE_MONITOR"),
        (Kind.SPOT_INTERRUPTION, Source.SQS, "SQS_MONITOR"),
        (Kind.STATE_CHANGE, Source.SQS, "SQS_MONITOR"),
    ],
)
def test_monitor_is_nths_monitor_name(kind: Kind, source: Source, monitor: str) -> None:
    """NTH's monitor packages' ``...MonitorKind`` constants (pkg/monitor/*/...-monitor.go)."""
    assert template_variables(spot(kind=kind, source=source), node_name="n")["Monitor"] == monitor


def test_asg_name_comes_from_the_message_and_node_facts_fill_in() -> None:
    from kubespot.actions.templates import with_context

    plain = spot(kind=Kind.ASG_LIFECYCLE, source=Source.SQS, raw={"AutoScalingGroupName": "workers"})
    wrapped = spot(kind=Kind.ASG_LIFECYCLE, source=Source.SQS, raw={"detail": {"AutoScalingGroupName": "w2"}})
    assert template_variables(plain, node_name="n")["AutoScalingGroupName"] == "workers"
    assert template_variables(wrapped, node_name="n")["AutoScalingGroupName"] == "w2"
    v = with_context(
        template_variables(plain, node_name="n"),
        {
            "NodeLabels": {"a": "b"},
            "Pods": ["p"],
            "InstanceType": "m5.large",
            "EventID": "forged",
            "AutoScalingGroupName": "other",
        },
    )
    assert (v["NodeLabels"], v["Pods"], v["InstanceType"]) == ({"a": "b"}, ["p"], "m5.large")
    assert v["EventID"] == "spot-itn-abc"  # the event's own fields are never replaced
    assert v["AutoScalingGroupName"] == "workers"  # nor the group the message named


def test_node_facts_are_read_only_for_templates_that_use_them() -> None:
    """NTH's default message names none of them: it costs the agent no API call per event."""
    from kubespot.actions.templates import uses_context

    assert not uses_context(DEFAULT_TEMPLATE)
    assert not uses_context('{"id": "{{ .EventID }}", "n": {{ 1.5 }}, "x": "{{ $.NodeName }}"}')
    for template in ("{{ .NodeLabels }}", "{{ range .Pods }}{{ end }}", "{{ toJson . }}", "{{ .Region }}"):
        assert uses_context(template), template
