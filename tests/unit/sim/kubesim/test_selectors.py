"""Label and field selector behaviour, checked against upstream apimachinery.

References:
* ``k8s.io/apimachinery/pkg/labels/selector.go`` (``Parse``, ``NewRequirement``, lexer/parser errors).
* ``k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go`` ``LabelSelectorAsSelector`` (nil -> Nothing,
  empty -> Everything).
* ``k8s.io/apimachinery/pkg/fields/selector.go`` (``ParseSelector``, escaping) and
  ``kubernetes/pkg/apis/core/v1/conversion.go`` (per-kind field labels and their error messages).
* https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/
"""

from __future__ import annotations

from typing import Any

import pytest

from kubespot.sim.kubesim.selectors import (
    EVERYTHING,
    NOTHING,
    SelectorError,
    label_selector_from_dict,
    parse_field_selector,
    parse_label_selector,
    supported_fields,
)

LABELS = {"app": "web", "tier": "front", "env": "prod", "n": "5"}


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("", LABELS, True),
        ("app=web", LABELS, True),
        ("app==web", LABELS, True),
        ("app=db", LABELS, False),
        ("app!=db", LABELS, True),
        ("app!=web", LABELS, False),
        ("missing!=x", LABELS, True),  # NotEquals matches when the key is absent
        ("app in (web,db)", LABELS, True),
        ("app in (db)", LABELS, False),
        ("missing in (x)", LABELS, False),
        ("app notin (db)", LABELS, True),
        ("app notin (web)", LABELS, False),
        ("missing notin (x)", LABELS, True),  # NotIn matches when the key is absent
        ("app", LABELS, True),
        ("missing", LABELS, False),
        ("!missing", LABELS, True),
        ("!app", LABELS, False),
        ("app=web,tier=front", LABELS, True),
        ("app=web,tier=back", LABELS, False),
        ("  app =  web ,  tier in ( front , back )  ", LABELS, True),
        ("\tapp\n=\tweb", LABELS, True),
        ("x in (in)", {"x": "in"}, True),  # keywords are identifiers in value position
        ("app=", {"app": ""}, True),  # empty value
        ("app=", LABELS, False),
        ("app in ()", {"app": ""}, True),  # "()" is the empty value
        ("n>3", LABELS, True),
        ("n<3", LABELS, False),
        ("app>3", LABELS, False),  # non-integer label never matches Gt/Lt
        ("example.com/role=x", {"example.com/role": "x"}, True),
        ("app=web", None, False),
        ("!app", None, True),
    ],
)
def test_label_selector_matching(text: str, labels: dict[str, str] | None, expected: bool) -> None:
    """Requirement.Matches semantics for every operator of the query-string grammar (labels.Parse)."""
    assert parse_label_selector(text).matches(labels) is expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("==", "found '==', expected: !, identifier, or 'end of string'"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
    ],
)
def test_label_selector_syntax_errors(text: str, message: str) -> None:
    """Parser error texts are upstream's (Parser.parse / parseRequirement / parseValues)."""
    with pytest.raises(SelectorError) as exc:
        parse_label_selector(text)
    assert str(exc.value) == message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a@=b", '<nil>: Invalid value: "a@": name part must consist of alphanumeric characters'),
        ("-a=b", 'Invalid value: "-a": name part must consist'),
        ("/a=b", "prefix part must be non-empty"),
        ("Example.com/a=b", "prefix part a lowercase RFC 1123 subdomain must consist"),
        ("a/b/c=d", "a qualified name must consist of alphanumeric characters"),
        ("a=@", 'values[0][a]: Invalid value: "@": a valid label must be an empty string'),
        ("a=" + "v" * 64, "must be no more than 63 characters"),
        ("k" * 64 + "=v", "name part must be no more than 63 characters"),
        ("a in (ok,zz@)", 'values[1][a]: Invalid value: "zz@"'),  # indexes follow the sorted set
        ("a in (ok,b@d)", 'values[0][a]: Invalid value: "b@d"'),
        ("n>x", "for 'Gt', 'Lt' operators, the value must be an integer"),
    ],
)
def test_label_selector_validation(text: str, fragment: str) -> None:
    """Keys are qualified names and values label values (validation.IsQualifiedName/IsValidLabelValue),
    reported through field.Invalid with upstream's paths: a nil path for keys, values[i][key] for values."""
    with pytest.raises(SelectorError) as exc:
        parse_label_selector(text)
    assert fragment in str(exc.value)
    assert str(exc.value).startswith("unable to parse requirement: ")


def test_label_selector_error_quotes_examples_like_upstream() -> None:
    """validation.RegexError joins examples as "'MyName',  or 'my.name'" (two spaces) -- kubectl shows it."""
    with pytest.raises(SelectorError) as exc:
        parse_label_selector("a=@")
    assert "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is" in str(exc.value)


def test_label_selector_is_value_error() -> None:
    """SelectorError is a ValueError so callers can map it to 400 generically."""
    assert issubclass(SelectorError, ValueError)


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("app=web", "app", "web"),
        ("app==web", "app", "web"),
        ("app in (web)", "app", "web"),
        ("app in (web,db)", "app", None),
        ("app!=web", "app", None),
        ("app", "app", None),
        ("tier=x,app=web", "app", "web"),
        ("tier=x", "app", None),
    ],
)
def test_label_selector_exact(text: str, key: str, value: str | None) -> None:
    """RequiresExactMatch: =, == and single-valued in pin the key (used for store indexes)."""
    assert parse_label_selector(text).exact(key) == value


def test_label_selector_string_is_sorted_like_upstream() -> None:
    """internalSelector.String(): requirements sorted by key, set values sorted."""
    assert str(parse_label_selector("z notin (b,a), a in (y,x), !m, k")) == "a in (x,y),k,!m,z notin (a,b)"


def test_empty_and_nothing() -> None:
    """Everything() is Empty(); Nothing() matches nothing and is not Empty()."""
    assert parse_label_selector("").is_empty()
    assert parse_label_selector("   ").is_empty()
    assert not parse_label_selector("a").is_empty()
    assert EVERYTHING.matches({}) and EVERYTHING.matches(None)
    assert not NOTHING.matches({}) and not NOTHING.is_empty() and NOTHING.matches_nothing()


def test_label_selector_is_immutable_and_hashable() -> None:
    sel = parse_label_selector("a=b")
    with pytest.raises(AttributeError):
        sel.requirements = ()
    assert sel == parse_label_selector("a = b")
    assert len({sel, parse_label_selector("a=b")}) == 1


@pytest.mark.parametrize(
    ("sel", "labels", "expected"),
    [
        (None, {"a": "b"}, False),  # nil selector: Nothing()
        (None, {}, False),
        ({}, {"a": "b"}, True),  # empty selector: Everything()
        ({"matchLabels": {}, "matchExpressions": []}, {}, True),
        ({"matchLabels": {"a": "b"}}, {"a": "b", "c": "d"}, True),
        ({"matchLabels": {"a": "b"}}, {"a": "c"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c"]}]}, {"a": "c"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
        (
            {"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "c", "operator": "Exists"}]},
            {"a": "b"},
            False,
        ),
    ],
)
def test_label_selector_from_dict(sel: dict[str, Any] | None, labels: dict[str, str], expected: bool) -> None:
    """metav1.LabelSelectorAsSelector: nil -> labels.Nothing(), {} -> labels.Everything(), else AND."""
    assert label_selector_from_dict(sel).matches(labels) is expected


def test_label_selector_from_dict_nil_can_mean_everything() -> None:
    """Contexts where an absent selector means "all" opt in explicitly."""
    assert label_selector_from_dict(None, nil_matches_everything=True).matches({"x": "y"})
    assert label_selector_from_dict(None).matches_nothing()


@pytest.mark.parametrize(
    ("sel", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Bogus"}]},
            '"Bogus" is not a valid label selector operator',
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
            "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            'values: Invalid value: []string{"x"}: values set must be empty for exists and does not exist',
        ),
        ({"matchLabels": {"a@": "b"}}, 'key: Invalid value: "a@": name part must consist'),
    ],
)
def test_label_selector_from_dict_errors(sel: dict[str, Any], message: str) -> None:
    """NewRequirement validation messages (field paths "key"/"values" without a parent path)."""
    with pytest.raises(SelectorError) as exc:
        label_selector_from_dict(sel)
    assert str(exc.value).startswith(message)


def test_label_selector_from_dict_exact() -> None:
    assert label_selector_from_dict({"matchLabels": {"app": "web"}}).exact("app") == "web"


# ---------------------------------------------------------------------------------------------- fields

POD: dict[str, Any] = {
    "metadata": {"name": "p1", "namespace": "ns"},
    "spec": {"nodeName": "n1", "restartPolicy": "Always", "hostNetwork": True, "serviceAccountName": "sa"},
    "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}]},
}
UNSCHEDULED: dict[str, Any] = {
    "metadata": {"name": "p2", "namespace": "ns"},
    "spec": {},
    "status": {"phase": "Pending"},
}


@pytest.mark.parametrize(
    ("text", "obj", "expected"),
    [
        ("", POD, True),
        ("spec.nodeName=n1", POD, True),
        ("spec.nodeName==n1", POD, True),
        ("spec.nodeName=n2", POD, False),
        ("spec.nodeName!=n2", POD, True),
        ("spec.nodeName=", UNSCHEDULED, True),  # missing compares as ""
        ("spec.nodeName!=", UNSCHEDULED, False),
        ("spec.nodeName!=", POD, True),
        ("spec.hostNetwork=true", POD, True),
        ("spec.hostNetwork=false", UNSCHEDULED, True),  # unset bool is "false"
        ("status.phase=Running,metadata.namespace=ns", POD, True),
        ("status.phase=Running,metadata.namespace=other", POD, False),
        ("status.podIP=10.0.0.1", POD, True),
        ("status.nominatedNodeName=", POD, True),
        ("metadata.name=p1", POD, True),
        ("spec.host=n1", POD, True),  # legacy alias for spec.nodeName
    ],
)
def test_pod_field_selector(text: str, obj: dict[str, Any], expected: bool) -> None:
    """Pod selectable fields (pod registry ToSelectableFields; FormatBool for hostNetwork)."""
    assert parse_field_selector(text, kind="Pod").matches(obj) is expected


def test_field_selector_exact_for_index() -> None:
    """RequiresExactMatch for the store's pods-by-node index; != does not pin a value."""
    assert (
        parse_field_selector("spec.nodeName=n1,status.phase!=Failed", kind="Pod").exact("spec.nodeName")
        == "n1"
    )
    assert parse_field_selector("spec.nodeName!=n1", kind="Pod").exact("spec.nodeName") is None
    assert parse_field_selector("spec.host=n1", kind="Pod").exact("spec.nodeName") == "n1"


@pytest.mark.parametrize(
    ("kind", "text", "obj", "expected"),
    [
        ("Node", "spec.unschedulable=true", {"spec": {"unschedulable": True}}, True),
        ("Node", "spec.unschedulable=false", {"spec": {}}, True),
        ("Node", "metadata.name=n1", {"metadata": {"name": "n1"}}, True),
        ("Namespace", "status.phase=Terminating", {"status": {"phase": "Terminating"}}, True),
        ("Secret", "type=kubernetes.io/tls", {"type": "kubernetes.io/tls"}, True),
        ("ReplicaSet", "status.replicas=0", {"status": {}}, True),
        ("ReplicaSet", "status.replicas=3", {"status": {"replicas": 3}}, True),
        ("Service", "spec.type=ClusterIP", {"spec": {"type": "ClusterIP"}}, True),
        (
            "Event",
            "involvedObject.kind=Pod,involvedObject.name=p",
            {"involvedObject": {"kind": "Pod", "name": "p"}},
            True,
        ),
        ("Event", "reason=Evicted", {"reason": "Killing"}, False),
        ("Event", "source=kubelet", {"source": {"component": "kubelet"}}, True),
        ("Event", "source=ctrl", {"source": {}, "reportingComponent": "ctrl"}, True),
        ("Event", "type=Warning", {"type": "Warning"}, True),
        ("ConfigMap", "metadata.name=c", {"metadata": {"name": "c"}}, True),
        ("Widget", "metadata.namespace=ns", {"metadata": {"namespace": "ns"}}, True),
    ],
)
def test_field_selector_other_kinds(kind: str, text: str, obj: dict[str, Any], expected: bool) -> None:
    """Per-kind fields from the conversion functions in pkg/apis/core/v1/conversion.go."""
    assert parse_field_selector(text, kind=kind).matches(obj) is expected


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("Pod", "status.hostIP=1.2.3.4", "field label not supported: status.hostIP"),
        ("Node", "metadata.namespace=x", "field label not supported: metadata.namespace"),
        ("Namespace", "metadata.namespace=x", "field label not supported: metadata.namespace"),
        ("Event", "message=x", "field label not supported: message"),
        ("Widget", "spec.foo=x", "field label not supported: spec.foo"),
        (
            "ConfigMap",
            "data.x=y",
            '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
        (
            "Deployment",
            "spec.replicas=1",
            '"spec.replicas" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
        ("Pod", "spec.nodeName", "invalid selector: 'spec.nodeName'; can't understand 'spec.nodeName'"),
        ("Pod", "spec.nodeName = n1", "field label not supported: spec.nodeName "),  # no trimming upstream
        ("Pod", "metadata.name==a=b", "invalid field selector: unescaped character in value: 61"),
        ("Pod", "metadata.name=a\\x", "invalid field selector: invalid escape sequence: \\x"),
        ("Pod", "metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"),
    ],
)
def test_field_selector_errors(kind: str, text: str, message: str) -> None:
    """Unsupported labels: "field label not supported: X" for kinds with a conversion function (and
    custom resources), runtime.DefaultMetaV1FieldSelectorConversion's message for the others; the
    docs page shows the latter for ingresses."""
    with pytest.raises(SelectorError) as exc:
        parse_field_selector(text, kind=kind)
    assert str(exc.value) == message


def test_field_selector_escapes() -> None:
    """fields.EscapeValue: \\, \\= \\\\ in values; commas split terms only when unescaped."""
    sel = parse_field_selector("metadata.name=a\\,b\\=c\\\\d", kind="Pod")
    assert sel.matches({"metadata": {"name": "a,b=c\\d"}})
    assert sel.exact("metadata.name") == "a,b=c\\d"


def test_supported_fields() -> None:
    assert "spec.nodeName" in supported_fields("Pod")
    assert "status.nominatedNodeName" in supported_fields("Pod")
    assert supported_fields("Node") == frozenset({"metadata.name", "spec.unschedulable"})
    assert supported_fields("ConfigMap") == frozenset({"metadata.name", "metadata.namespace"})
    assert supported_fields("SomeCustomKind") == frozenset({"metadata.name", "metadata.namespace"})
    assert {"involvedObject.uid", "reportingComponent", "source", "type"} <= supported_fields("Event")
