"""The Go text/template engine against Go's documented semantics.

Expected outputs come from Go's and sprig's documentation and sources, cited per case:
- text/template package doc (pkg.go.dev/text/template): actions, trim markers ("{{- 3 }}" trims the
  space before it), comments, pipelines (the previous command's result is the last argument), range
  over maps in sorted key order, variables, and/or/not/eq/ne/lt/index/len/printf/print/html/js;
- text/template/exec.go: evalField (a struct's missing field is an error; a map's missing key is
  the invalid value, printed "<no value>", and a field of it is too), isTrue;
- fmt: %v of maps "map[k:v]" with sorted keys, of slices "[a b]", of float64 via strconv 'g'
  shortest ("1e+06"); Sprint adds spaces between operands when neither is a string;
- time/format.go: layouts by the reference time "Mon Jan 2 15:04:05 MST 2006";
- sprig v3 (masterminds.github.io/sprig): upper/lower/trim/default/quote/toJson/join/replace/
  contains/hasPrefix/date/...; argument order with the subject last.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubespot.actions.gotemplate import Struct, TemplateError, Unsupported, parse

T = datetime(2026, 11, 20, 17, 4, 13, 250_000, tzinfo=UTC)

DATA = Struct(
    EventID="spot-itn-1",
    Kind="SPOT_ITN",
    NodeName="ip-10-0-1-2.ec2.internal",
    NodeLabels={"stage": "prod", "foo": "bar", "kubernetes.io/os": "linux"},
    Pods=["web-0", "web-1"],
    Count=3,
    Ratio=1.5,
    Empty="",
    StartTime=T,
    EndTime=None,
    Raw={"State": "active", "Nested": {"A": 1}, "Null": None},
)


def render(template: str, data: Any = DATA, **kw: Any) -> str:
    return parse(template).execute(data, now=T, **kw)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        # Fields, dot, variables ($ is the data).
        ("{{ .EventID }}", "spot-itn-1"),
        ("{{.EventID}}", "spot-itn-1"),
        ("{{ $.NodeName }}", "ip-10-0-1-2.ec2.internal"),
        ("{{ .Raw.Nested.A }}", "1"),
        # NTH's PR #382 examples: labels printed raw (fmt: sorted keys) and ranged over with $k, $v.
        ("{{ .NodeLabels }}", "map[foo:bar kubernetes.io/os:linux stage:prod]"),
        (
            "{{ range $key, $value := .NodeLabels }}{{ $key }}:{{ $value }} {{ end }}",
            "foo:bar kubernetes.io/os:linux stage:prod ",
        ),
        ("{{ range .Pods }}[{{ . }}]{{ end }}", "[web-0][web-1]"),
        ("{{ range $i, $p := .Pods }}{{ $i }}={{ $p }} {{ end }}", "0=web-0 1=web-1 "),
        ("{{ range $p := .Pods }}{{ $p }},{{ end }}", "web-0,web-1,"),
        ("{{ range .Raw.Nothing }}x{{ else }}none{{ end }}", "none"),
        ("{{ range 3 }}{{ . }}{{ end }}", "012"),  # Go 1.22: range over an int
        ('{{ range .Pods }}{{ if eq . "web-0" }}{{ continue }}{{ end }}{{ . }}{{ end }}', "web-1"),
        ("{{ range .Pods }}{{ . }}{{ break }}{{ end }}", "web-0"),
        # Printing: fmt's %v.
        ("{{ .Pods }}", "[web-0 web-1]"),
        ("{{ .StartTime }}", "2026-11-20 17:04:13.25 +0000 UTC"),
        ("{{ .Count }} {{ .Ratio }} {{ 1e6 }} {{ 0x10 }} {{ 'a' }} {{ true }}", "3 1.5 1e+06 16 97 true"),
        ("{{ .Raw.Missing }}", "<no value>"),
        ("{{ .Raw.Missing.Deeper }}", "<no value>"),
        ("{{ .EndTime }}", ""),  # kubespot: no deadline prints empty
        # Conditionals and comparisons.
        ('{{ if eq .Kind "SPOT_ITN" }}spot{{ else if eq .Kind "X" }}x{{ else }}other{{ end }}', "spot"),
        ('{{ if eq .Kind "A" "B" "SPOT_ITN" }}any{{ end }}', "any"),
        ('{{ if ne .Kind "SPOT_ITN" }}no{{ else }}yes{{ end }}', "yes"),
        ("{{ if lt .Count 5 }}small{{ end }}{{ if ge .Count 3 }}+{{ end }}", "small+"),
        ("{{ if and .Pods .Count }}both{{ end }}", "both"),
        ('{{ and 1 0 "x" }}|{{ or 0 "" "x" }}|{{ or 0 "" }}|{{ not .Pods }}', "0|x||false"),
        ("{{ if .Empty }}set{{ else }}empty{{ end }}", "empty"),
        ("{{ if .Raw.Missing }}set{{ else }}unset{{ end }}", "unset"),
        # with: dot is the value.
        ("{{ with .NodeLabels }}{{ .stage }}{{ end }}", "prod"),
        ("{{ with .Empty }}x{{ else }}empty{{ end }}", "empty"),
        ("{{ with $s := .NodeLabels.stage }}{{ $s }}/{{ . }}{{ end }}", "prod/prod"),
        # index, len, slice.
        ('{{ index .NodeLabels "stage" }}', "prod"),
        ('{{ index .NodeLabels "nope" }}', ""),  # index gives the zero value: "" for map[string]string
        ("{{ index .Pods 1 }}", "web-1"),
        ('{{ index .Raw.Nested "A" }}', "1"),
        ("{{ len .Pods }} {{ len .NodeLabels }} {{ len .EventID }}", "2 3 10"),
        ("{{ slice .Pods 1 }}", "[web-1]"),
        # printf, print, println.
        ('{{ printf "%s on %s (%d)" .Kind .NodeName .Count }}', "SPOT_ITN on ip-10-0-1-2.ec2.internal (3)"),
        (
            '{{ printf "%q %v %5.2f|%-4d|%03d %x %t %%" .Kind .Pods .Ratio 7 5 255 true }}',
            '"SPOT_ITN" [web-0 web-1]  1.50|7   |005 ff true %',
        ),
        ('{{ printf "%d" .Kind }}', "%!d(string=SPOT_ITN)"),
        ('{{ print "a" "b" 1 2 "c" }}', "ab1 2c"),
        ('{{ println "a" 1 }}', "a 1\n"),
        # Pipelines: the result is the last argument of the next command.
        ('{{ .Kind | printf "<%s>" }}', "<SPOT_ITN>"),
        ('{{ .Kind | lower | printf "%s!" }}', "spot_itn!"),
        ('{{ "a" | printf "%s-%s" "b" }}', "b-a"),
        ("{{ (index .Pods 0) | upper }}", "WEB-0"),
        ("{{ (.NodeLabels).stage }}", "prod"),
        # Variables: declaration, assignment (Go 1.11), scope ends at {{ end }}.
        ("{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}", "2"),
        (
            "{{ $n := .NodeName }}{{ range .Pods }}{{ $n }} {{ end }}",
            "ip-10-0-1-2.ec2.internal ip-10-0-1-2.ec2.internal ",
        ),
        # Trim markers and comments.
        ("a  {{- .Count -}}  b", "a3b"),
        ("{{ 23 -}} < {{- 45 }}", "23<45"),
        ("x {{- /* a comment */ -}} y", "xy"),
        ("{{/* comment */}}ok", "ok"),
        ("line\n  {{- range .Pods }}\n  - {{ . }}\n  {{- end }}\n", "line\n  - web-0\n  - web-1\n"),
        # Raw strings and escapes.
        ("{{ `raw \\n` }}", "raw \\n"),
        ('{{ "tab\\there" }}', "tab\there"),
        # html, js, urlquery.
        ('{{ html "<a href=\\"x\\">&</a>" }}', "&lt;a href=&#34;x&#34;&gt;&amp;&lt;/a&gt;"),
        ('{{ js "it\'s <b>" }}', "it\\'s \\u003Cb\\u003E"),
        ('{{ urlquery "a b&c" }}', "a+b%26c"),
    ],
)
def test_go_semantics(template: str, expected: str) -> None:
    assert render(template) == expected


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        # time/format.go: every element of the reference time.
        ("2006-01-02T15:04:05Z07:00", "2026-11-20T17:04:13Z"),
        ("2006-01-02 15:04:05.000 MST", "2026-11-20 17:04:13.250 UTC"),
        ("2006-01-02T15:04:05.999999999Z07:00", "2026-11-20T17:04:13.25Z"),
        ("Mon Jan _2 15:04:05 2006", "Fri Nov 20 17:04:13 2026"),
        ("Monday, January 2, 2006 3:04PM", "Friday, November 20, 2026 5:04PM"),
        ("02/01/06 03:04:05 pm -0700", "20/11/26 05:04:13 pm +0000"),
        ("2006-002 __2 1/2", "2026-324 324 11/20"),
        ("15h04 -07:00 -07", "17h04 +00:00 +00"),
        ("_2006", "_2026"),  # "_2006" is "_" and the year, not a padded day
        ("literal text: 2006", "literal text: 2026"),
    ],
)
def test_time_format_layouts(layout: str, expected: str) -> None:
    assert render(f'{{{{ .StartTime.Format "{layout}" }}}}') == expected


def test_time_methods() -> None:
    assert render("{{ .StartTime.Unix }}") == "1795194253"
    assert render("{{ .StartTime.Year }}-{{ .StartTime.Month }}-{{ .StartTime.Day }}") == "2026-November-20"
    assert render('{{ printf "%02d" .StartTime.Month }}') == "11"
    assert render("{{ .StartTime.Weekday }}") == "Friday"
    assert render('{{ (.StartTime.Add 60000000000).Format "15:04" }}') == "17:05"
    assert render('{{ (.StartTime.AddDate 0 0 1).Format "2006-01-02" }}') == "2026-11-21"


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        # sprig: strings (subject last, so it pipes).
        ('{{ upper "a" }}{{ lower "B" }}{{ trim "  c  " }}{{ title "hello world" }}', "AbcHello World"),
        ('{{ .NodeName | replace "." "-" }}', "ip-10-0-1-2-ec2-internal"),
        ('{{ if contains "ec2" .NodeName }}yes{{ end }}', "yes"),
        (
            '{{ if hasPrefix "ip-" .NodeName }}yes{{ end }}'
            '{{ if hasSuffix ".internal" .NodeName }}!{{ end }}',
            "yes!",
        ),
        ('{{ trimPrefix "ip-" .NodeName | trimSuffix ".ec2.internal" }}', "10-0-1-2"),
        ('{{ quote .Kind "x\\"y" }}', '"SPOT_ITN" "x\\"y"'),
        ("{{ squote .Kind }}", "'SPOT_ITN'"),
        ('{{ join ", " .Pods }}', "web-0, web-1"),
        ('{{ splitList "." .NodeName | first }}', "ip-10-0-1-2"),
        ("{{ trunc 5 .NodeName }} {{ trunc -8 .NodeName }}", "ip-10 internal"),
        ('{{ repeat 3 "ab" }} {{ substr 0 2 "hello" }} {{ nospace "a b c" }}', "ababab he abc"),
        ('{{ cat "a" 1 .Empty "b" }}', "a 1  b"),
        ('{{ indent 2 "a\\nb" }}', "  a\n  b"),
        # sprig: defaults.
        (
            '{{ default "none" .Empty }}|{{ default "none" .Kind }}|{{ .Raw.Missing | default "dflt" }}',
            "none|SPOT_ITN|dflt",
        ),
        ('{{ default "no deadline" .EndTime }}', "no deadline"),
        ('{{ coalesce .Empty "" "third" }}', "third"),
        ('{{ ternary "y" "n" true }}{{ empty .Empty }}', "ytrue"),
        # sprig: JSON (encoding/json: sorted map keys, <>& escaped by toJson, times as RFC 3339).
        ("{{ toJson .NodeLabels }}", '{"foo":"bar","kubernetes.io/os":"linux","stage":"prod"}'),
        ("{{ toJson .Pods }}", '["web-0","web-1"]'),
        ('{{ toJson "<b>&" }}|{{ toRawJson "<b>&" }}', '"\\u003cb\\u003e\\u0026"|"<b>&"'),
        ("{{ toJson .StartTime }}", '"2026-11-20T17:04:13.25Z"'),
        ('{{ toPrettyJson (dict "a" 1) }}', '{\n  "a": 1\n}'),
        # sprig: dates ("date" formats in the agent's zone, UTC).
        ('{{ date "2006-01-02 15:04" .StartTime }}', "2026-11-20 17:04"),
        ('{{ .StartTime | date "Jan 2" }}', "Nov 20"),
        ('{{ now | date "2006" }}', "2026"),
        ('{{ dateInZone "15:04 MST" .StartTime "UTC" }}', "17:04 UTC"),
        ("{{ unixEpoch .StartTime }} {{ htmlDate .StartTime }}", "1795194253 2026-11-20"),
        # sprig: numbers, lists, dicts, encodings.
        (
            "{{ add 1 2 3 }} {{ sub 5 2 }} {{ mul 2 3 }} {{ div 7 2 }} {{ mod 7 2 }} {{ add1 .Count }}",
            "6 3 6 3 1 4",
        ),
        ('{{ max 1 5 3 }} {{ min 4 2 }} {{ int "42" }} {{ atoi "7" }}', "5 2 42 7"),
        ('{{ list 1 "a" | last }} {{ has "web-1" .Pods }} {{ .Pods | reverse }}', "a true [web-1 web-0]"),
        (
            '{{ get (dict "k" "v") "k" }} {{ hasKey .NodeLabels "stage" }} '
            "{{ keys .NodeLabels | sortAlpha }}",
            "v true [foo kubernetes.io/os stage]",
        ),
        ('{{ b64enc "hi" }} {{ b64dec "aGk=" }} {{ sha256sum "" | trunc 8 }}', "aGk= hi e3b0c442"),
        ('{{ regexMatch "^ip-" .NodeName }}', "true"),
        # kubespot's own: RFC 3339 and epoch seconds.
        (
            "{{ .StartTime | rfc3339 }} {{ .StartTime | unix }} {{ add (.StartTime | unix) 900 | rfc3339 }}",
            "2026-11-20T17:04:13Z 1795194253 2026-11-20T17:19:13Z",
        ),
    ],
)
def test_sprig_functions(template: str, expected: str) -> None:
    assert render(template) == expected


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ .Nope }}", "can't evaluate field Nope in type struct"),
        ("{{ .Raw.Null.X }}", "nil pointer evaluating interface {}.X"),
        ("{{ .Kind.Length }}", "can't evaluate field Length in type string"),
        ('{{ eq .Count "3" }}', "incompatible types for comparison"),
        ("{{ index .Pods 5 }}", "index out of range: 5"),
        ('{{ .Kind "x" }}', "Kind is not a method but has arguments"),
        ('{{ "x" "y" }}', "can't give argument to non-function"),
        ("{{ .StartTime.Nope }}", "can't evaluate field Nope in type time.Time"),
        ('{{ fail "stop" }}', "stop"),
    ],
)
def test_execution_errors_as_go_reports_them(template: str, message: str) -> None:
    with pytest.raises(TemplateError) as err:
        render(template)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ .EventID ", "unclosed action"),
        ("{{ if .Pods }}x", "unexpected EOF"),
        ("{{ end }}", "unexpected {{end}}"),
        ("{{ $undefined }}", "undefined variable"),
        ("{{ nosuch .X }}", 'function "nosuch" not defined'),
        ("{{ break }}", "{{break}} outside {{range}}"),
        ('{{ "unterminated }}', "unterminated quoted string"),
        ("{{ /* spaced */ }}", "unexpected"),  # a comment must follow the delimiter directly
    ],
)
def test_parse_errors_as_go_reports_them(template: str, message: str) -> None:
    with pytest.raises(TemplateError) as err:
        parse(template)
    assert message in str(err.value)
    assert not isinstance(err.value, Unsupported)


@pytest.mark.parametrize(
    ("template", "construct"),
    [
        ('{{ define "x" }}a{{ end }}', "{{define}}"),
        ('{{ template "x" . }}', "{{template}}"),
        ('{{ block "x" . }}a{{ end }}', "{{block}}"),
        ('{{ env "WEBHOOK_URL" }}', "function 'env'"),
        ('{{ expandenv "$HOME" }}', "function 'expandenv'"),
        ('{{ getHostByName "example.com" }}', "function 'getHostByName'"),
        ("{{ genCA }}", "function 'genCA'"),
        ("{{ snakecase .Kind }}", "function 'snakecase'"),
    ],
)
def test_valid_go_this_engine_lacks_is_named(template: str, construct: str) -> None:
    with pytest.raises(Unsupported) as err:
        parse(template)
    assert err.value.construct == construct


def test_no_python_attribute_is_reachable() -> None:
    """Fields are mapping keys only: dunder names are just absent keys or errors, never attributes."""
    assert render("{{ .Raw.__class__ }}") == "<no value>"
    for template in (
        "{{ .__class__ }}",
        "{{ .Kind.__class__ }}",
        "{{ .StartTime.__class__ }}",
        "{{ .Pods.__len__ }}",
    ):
        with pytest.raises(TemplateError):
            render(template)


def test_json_strings_escape_only_inside_json_strings() -> None:
    data = Struct(D='say "hi"\n', L={"a": "<x>"})
    body = render(
        '{"text": "{{ .D }}", "labels": {{ toJson .L }}, "n": "{{ range $k, $v := .L }}{{ $v }}{{ end }}"}',
        data,
        json_strings=True,
    )
    assert body == '{"text": "say \\"hi\\"\\n", "labels": {"a":"\\u003cx\\u003e"}, "n": "<x>"}'


def test_runaway_templates_are_bounded() -> None:
    with pytest.raises(TemplateError):
        render("{{ range 100000000 }}x{{ end }}")
    with pytest.raises(TemplateError):
        render('{{ range 150000 }}{{ repeat 100 "x" }}{{ end }}')
    # Values that never reach the output are bounded too: doubling a string in a variable, or one
    # huge repeat, must fail fast instead of taking the agent's memory (review of issue 10).
    with pytest.raises(TemplateError, match="longer than"):
        render('{{ $s := "xxxxxxxxxxxxxxxx" }}{{ range 40 }}{{ $s = cat $s $s }}{{ end }}{{ len $s }}')
    with pytest.raises(TemplateError, match="longer than"):
        render('{{ len (repeat 300000000 "ab") }}')
