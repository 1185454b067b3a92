"""Label and field selectors with the parsing, validation and matching rules of the Kubernetes API server.

Label selectors follow ``k8s.io/apimachinery/pkg/labels`` (the query-string grammar of ``labels.Parse``
and ``metav1.LabelSelectorAsSelector`` for ``matchLabels``/``matchExpressions``); field selectors follow
``k8s.io/apimachinery/pkg/fields`` plus the per-kind field label conversion functions of the API server
(``pkg/apis/core/v1/conversion.go``). Error messages are kept close to upstream because kubectl prints
them verbatim in its ``Error from server (BadRequest)`` line.

Everything here is pure: no I/O, immutable results, safe to share between requests and threads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from .names import label_value_errors as _label_value_errors
from .names import qualified_name_errors as _qualified_name_errors

__all__ = [
    "EVERYTHING",
    "NOTHING",
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "label_selector_from_dict",
    "parse_field_selector",
    "parse_label_selector",
    "supported_fields",
]


class SelectorError(ValueError):
    """A selector the API server would reject; ``str(err)`` is the message of the 400 BadRequest Status."""


# --------------------------------------------------------------------------------------------------
# Validation (k8s.io/apimachinery/pkg/util/validation): see ``names``.


def _go_quote(s: str) -> str:
    """Approximates Go's ``%q`` (JSON escaping is identical for the printable ASCII that matters)."""
    return json.dumps(s, ensure_ascii=False)


def _go_string_slice(values: tuple[str, ...] | list[str]) -> str:
    """Go's ``%#v`` of a ``[]string``, as field.Invalid prints it."""
    return "[]string{" + ", ".join(_go_quote(v) for v in values) + "}"


def _invalid(path: str, bad: str, detail: str) -> str:
    """``field.Invalid(path, value, detail).Error()``."""
    return f"{path}: Invalid value: {bad}: {detail}"


def _aggregate(errs: list[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: one message bare, several de-duplicated in brackets."""
    seen: list[str] = []
    for e in errs:
        if e not in seen:
            seen.append(e)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"


# --------------------------------------------------------------------------------------------------
# Label selectors

_EQUALS: Final = "="
_DOUBLE_EQUALS: Final = "=="
_NOT_EQUALS: Final = "!="
_IN: Final = "in"
_NOT_IN: Final = "notin"
_EXISTS: Final = "exists"
_DOES_NOT_EXIST: Final = "!"
_GT: Final = "gt"
_LT: Final = "lt"
_BINARY_OPERATORS_TEXT: Final = "in, notin, =, ==, !=, gt, lt"


class Requirement:
    """One ``key <op> values`` term of a label selector (``labels.Requirement``)."""

    __slots__ = ("_set", "key", "operator", "values")

    key: str
    operator: str
    values: tuple[str, ...]
    _set: frozenset[str]

    def __init__(self, key: str, operator: str, values: tuple[str, ...]) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "operator", operator)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "_set", frozenset(values))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Requirement is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Requirement):
            return NotImplemented
        return (self.key, self.operator, self.values) == (other.key, other.operator, other.values)

    def __hash__(self) -> int:
        return hash((self.key, self.operator, self.values))

    def __repr__(self) -> str:
        return f"Requirement({self.key!r}, {self.operator!r}, {self.values!r})"

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (_EQUALS, _DOUBLE_EQUALS, _IN):
            value = labels.get(self.key)
            return value is not None and value in self._set
        if op in (_NOT_EQUALS, _NOT_IN):
            value = labels.get(self.key)
            return value is None or value not in self._set
        if op == _EXISTS:
            return self.key in labels
        if op == _DOES_NOT_EXIST:
            return self.key not in labels
        # Gt/Lt: both sides must parse as integers, otherwise the requirement does not match.
        value = labels.get(self.key)
        if value is None:
            return False
        try:
            have, want = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > want if op == _GT else have < want

    def __str__(self) -> str:
        op = self.operator
        if op == _EXISTS:
            return self.key
        if op == _DOES_NOT_EXIST:
            return "!" + self.key
        vals = ",".join(sorted(self.values)) if len(self.values) > 1 else self.values[0]
        if op in (_IN, _NOT_IN):
            return f"{self.key} {op} ({vals})"
        symbol = {_GT: ">", _LT: "<"}.get(op, op)
        return f"{self.key}{symbol}{vals}"


def _new_requirement(key: str, op: str, values: list[str], path: str | None) -> Requirement:
    """``labels.NewRequirement`` with its validation; ``path`` None means the query-string parser."""
    errs: list[str] = []
    key_path = "key" if path is None else f"{path}.key"
    values_path = "values" if path is None else f"{path}.values"
    key_errs = _qualified_name_errors(key)
    if key_errs:
        errs.append(_invalid(key_path, _go_quote(key), "; ".join(key_errs)))
    if op in (_IN, _NOT_IN):
        if not values:
            errs.append(
                _invalid(
                    values_path,
                    _go_string_slice(values),
                    "for 'in', 'notin' operators, values set can't be empty",
                )
            )
    elif op in (_EQUALS, _DOUBLE_EQUALS, _NOT_EQUALS):
        if len(values) != 1:
            errs.append(
                _invalid(
                    values_path,
                    _go_string_slice(values),
                    "exact-match compatibility requires one single value",
                )
            )
    elif op in (_EXISTS, _DOES_NOT_EXIST):
        if values:
            errs.append(
                _invalid(
                    values_path,
                    _go_string_slice(values),
                    "values set must be empty for exists and does not exist",
                )
            )
    elif op in (_GT, _LT):
        if len(values) != 1:
            errs.append(
                _invalid(
                    values_path,
                    _go_string_slice(values),
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                )
            )
        for i, v in enumerate(values):
            try:
                int(v)
            except ValueError:
                errs.append(
                    _invalid(
                        f"{values_path}[{i}]",
                        _go_quote(v),
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    )
                )
    for i, v in enumerate(values):
        value_errs = _label_value_errors(v)
        if value_errs:
            errs.append(_invalid(f"{values_path}[{i}][{key}]", _go_quote(v), "; ".join(value_errs)))
    if errs:
        raise SelectorError(_aggregate(errs))
    return Requirement(key, op, tuple(values))


class LabelSelector:
    """An immutable AND of requirements; or the special selector that matches nothing.

    ``is_empty()`` is true only for the match-everything selector (``labels.Everything()``); the
    match-nothing selector (``labels.Nothing()``) is not empty, as upstream.
    """

    __slots__ = ("_exact", "_nothing", "requirements")

    requirements: tuple[Requirement, ...]
    _nothing: bool
    _exact: dict[str, str]

    def __init__(self, requirements: tuple[Requirement, ...] = (), *, match_nothing: bool = False) -> None:
        reqs = tuple(sorted(requirements, key=lambda r: r.key))  # stable: deterministic String()
        exact: dict[str, str] = {}
        seen: set[str] = set()
        for r in reqs:
            # RequiresExactMatch looks at the first requirement for the key only.
            if r.key in seen:
                continue
            seen.add(r.key)
            if r.operator in (_EQUALS, _DOUBLE_EQUALS, _IN) and len(r.values) == 1:
                exact[r.key] = r.values[0]
        object.__setattr__(self, "requirements", reqs)
        object.__setattr__(self, "_nothing", match_nothing)
        object.__setattr__(self, "_exact", exact)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("LabelSelector is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return (self.requirements, self._nothing) == (other.requirements, other._nothing)

    def __hash__(self) -> int:
        return hash((self.requirements, self._nothing))

    def __repr__(self) -> str:
        return "LabelSelector(<nothing>)" if self._nothing else f"LabelSelector({str(self)!r})"

    def __str__(self) -> str:
        """Upstream ``Selector.String()``: requirements sorted by key, comma-joined ("" for both specials)."""
        return ",".join(str(r) for r in self.requirements)

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self._nothing:
            return False
        if not self.requirements:
            return True
        ls: Mapping[str, str] = labels if labels is not None else {}
        return all(r.matches(ls) for r in self.requirements)

    def is_empty(self) -> bool:
        return not self._nothing and not self.requirements

    def matches_nothing(self) -> bool:
        return self._nothing

    def exact(self, key: str) -> str | None:
        """The value ``key`` must have (``key=v``, ``key==v`` or ``key in (v)``), for index lookups."""
        return self._exact.get(key)


#: ``labels.Everything()``: matches every object, including ones without labels.
EVERYTHING: Final = LabelSelector()
#: ``labels.Nothing()``: matches no object.
NOTHING: Final = LabelSelector(match_nothing=True)


# Lexer/parser for the query-string grammar, mirroring labels.Parse token by token so that the error
# messages point at the same token upstream would.
(
    _T_ERROR,
    _T_EOS,
    _T_CLOSE,
    _T_COMMA,
    _T_NOT,
    _T_DEQ,
    _T_EQ,
    _T_GT,
    _T_ID,
    _T_IN,
    _T_LT,
    _T_NEQ,
    _T_NOTIN,
    _T_OPEN,
) = range(14)
_STRING_TO_TOKEN: Final = {
    ")": _T_CLOSE,
    ",": _T_COMMA,
    "!": _T_NOT,
    "==": _T_DEQ,
    "=": _T_EQ,
    ">": _T_GT,
    "in": _T_IN,
    "<": _T_LT,
    "!=": _T_NEQ,
    "notin": _T_NOTIN,
    "(": _T_OPEN,
}
_SPECIAL: Final = frozenset("=!(),><")
_WHITESPACE: Final = frozenset(" \t\r\n")


def _lex(s: str) -> list[tuple[int, str]]:
    items: list[tuple[int, str]] = []
    pos, n = 0, len(s)
    while True:
        while pos < n and s[pos] in _WHITESPACE:
            pos += 1
        if pos >= n:
            items.append((_T_EOS, ""))
            return items
        if s[pos] in _SPECIAL:
            # Longest special-symbol run that is a token, as scanSpecialSymbol does.
            buf = ""
            last: tuple[int, str] | None = None
            while pos < n and s[pos] in _SPECIAL:
                buf += s[pos]
                tok = _STRING_TO_TOKEN.get(buf)
                if tok is not None:
                    last = (tok, buf)
                    pos += 1
                elif last is not None:
                    break
                else:
                    pos += 1
            if last is None:
                items.append((_T_ERROR, f"error expected: keyword found '{buf}'"))
            else:
                items.append(last)
            continue
        start = pos
        while pos < n and s[pos] not in _SPECIAL and s[pos] not in _WHITESPACE:
            pos += 1
        word = s[start:pos]
        items.append((_STRING_TO_TOKEN.get(word, _T_ID), word))


class _Parser:
    __slots__ = ("items", "pos")

    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def _values_ctx(self, tok: int) -> int:
        # In value position "in"/"notin" are plain identifiers ("x in (in)").
        return _T_ID if tok in (_T_IN, _T_NOTIN) else tok

    def lookahead(self, values: bool = True) -> tuple[int, str]:
        tok, lit = self.items[self.pos]
        return (self._values_ctx(tok) if values else tok), lit

    def consume(self, values: bool = True) -> tuple[int, str]:
        tok, lit = self.items[self.pos]
        self.pos += 1
        return (self._values_ctx(tok) if values else tok), lit

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self.lookahead()
            if tok in (_T_ID, _T_NOT):
                try:
                    reqs.append(self.parse_requirement())
                except SelectorError as e:
                    raise SelectorError(f"unable to parse requirement: {e}") from None
                t, lit2 = self.consume()
                if t == _T_EOS:
                    return reqs
                if t == _T_COMMA:
                    t2, l2 = self.lookahead()
                    if t2 not in (_T_ID, _T_NOT):
                        raise SelectorError(f"found '{l2}', expected: identifier after ','")
                else:
                    raise SelectorError(f"found '{lit2}', expected: ',' or 'end of string'")
            elif tok == _T_EOS:
                return reqs
            else:
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def parse_requirement(self) -> Requirement:
        operator = ""
        tok, lit = self.consume()
        if tok == _T_NOT:
            operator = _DOES_NOT_EXIST
            tok, lit = self.consume()
        if tok != _T_ID:
            raise SelectorError(f"found '{lit}', expected: identifier")
        key_errs = _qualified_name_errors(lit)
        if key_errs:
            # labels.Parse validates the key with a nil field path, which prints as "<nil>".
            raise SelectorError(_invalid("<nil>", _go_quote(lit), "; ".join(key_errs)))
        t, _ = self.lookahead()
        if t in (_T_EOS, _T_COMMA):
            if operator != _DOES_NOT_EXIST:
                operator = _EXISTS
            return _new_requirement(lit, operator, [], None)
        if operator == _DOES_NOT_EXIST:
            return _new_requirement(lit, operator, [], None)
        op_tok, op_lit = self.consume(values=False)
        op = {
            _T_IN: _IN,
            _T_EQ: _EQUALS,
            _T_DEQ: _DOUBLE_EQUALS,
            _T_GT: _GT,
            _T_LT: _LT,
            _T_NOTIN: _NOT_IN,
            _T_NEQ: _NOT_EQUALS,
        }.get(op_tok)
        if op is None:
            raise SelectorError(f"found '{op_lit}', expected: {_BINARY_OPERATORS_TEXT}")
        values = self.parse_values() if op in (_IN, _NOT_IN) else self.parse_exact_value()
        return _new_requirement(lit, op, sorted(values), None)

    def parse_values(self) -> set[str]:
        tok, lit = self.consume()
        if tok != _T_OPEN:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok in (_T_ID, _T_COMMA):
            values = self.parse_identifiers_list()
            tok, _ = self.consume()
            if tok != _T_CLOSE:
                raise SelectorError(f"found '{lit}', expected: ')'")
            return values
        if tok == _T_CLOSE:
            self.consume()
            return {""}
        raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")

    def parse_identifiers_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.consume()
            if tok == _T_ID:
                values.add(lit)
                tok2, lit2 = self.lookahead()
                if tok2 == _T_COMMA:
                    continue
                if tok2 == _T_CLOSE:
                    return values
                raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            if tok == _T_COMMA:
                # Empty members ("(,a)", "(a,,b)", "(a,)") stand for the empty value.
                if not values:
                    values.add("")
                tok2, _ = self.lookahead()
                if tok2 == _T_CLOSE:
                    values.add("")
                    return values
                if tok2 == _T_COMMA:
                    self.consume()
                    values.add("")
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def parse_exact_value(self) -> set[str]:
        tok, _ = self.lookahead()
        if tok in (_T_EOS, _T_COMMA):
            return {""}
        tok, lit = self.consume()
        if tok == _T_ID:
            return {lit}
        raise SelectorError(f"found '{lit}', expected: identifier")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the ``labelSelector`` query parameter (``labels.Parse``); "" selects everything.

    Supports ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a)``, ``k``, ``!k`` and upstream's
    ``k>1``/``k<1``; commas AND the terms; whitespace between tokens is ignored.
    """
    if not text or text.isspace():
        return EVERYTHING
    reqs = _Parser(text).parse()
    return LabelSelector(tuple(reqs)) if reqs else EVERYTHING


_EXPRESSION_OPERATORS: Final = {
    "In": _IN,
    "NotIn": _NOT_IN,
    "Exists": _EXISTS,
    "DoesNotExist": _DOES_NOT_EXIST,
}


def label_selector_from_dict(
    sel: Mapping[str, Any] | None, *, nil_matches_everything: bool = False
) -> LabelSelector:
    """Convert a ``metav1.LabelSelector`` (``matchLabels`` + ``matchExpressions``) to a selector.

    Upstream ``LabelSelectorAsSelector`` maps a *nil* selector to ``Nothing()`` and an *empty* one
    (``{}``) to ``Everything()``: a PodDisruptionBudget or ReplicaSet without ``spec.selector`` selects
    no pods, one with ``selector: {}`` selects all pods of its namespace. That is the default here.
    Contexts where an absent selector means "no restriction" pass ``nil_matches_everything=True``.
    """
    if sel is None:
        return EVERYTHING if nil_matches_everything else NOTHING
    match_labels = sel.get("matchLabels") or {}
    match_expressions = sel.get("matchExpressions") or []
    if not match_labels and not match_expressions:
        return EVERYTHING
    reqs: list[Requirement] = []
    for k, v in match_labels.items():
        reqs.append(_new_requirement(str(k), _EQUALS, [str(v)], None))
    for expr in match_expressions:
        operator = expr.get("operator", "")
        op = _EXPRESSION_OPERATORS.get(operator)
        if op is None:
            raise SelectorError(f"{_go_quote(str(operator))} is not a valid label selector operator")
        values = [str(v) for v in (expr.get("values") or [])]
        reqs.append(_new_requirement(str(expr.get("key", "")), op, values, None))
    return LabelSelector(tuple(reqs))


# --------------------------------------------------------------------------------------------------
# Field selectors

_FieldGetter = Callable[[Mapping[str, Any]], str]


def _dig(obj: Mapping[str, Any], *path: str) -> Any:
    cur: Any = obj
    for p in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(p)
    return cur


def _as_field_string(value: Any) -> str:
    # Selectable fields are Go strings: unset is "", bools are FormatBool, ints are Itoa.
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def _getter(*path: str) -> _FieldGetter:
    return lambda obj: _as_field_string(_dig(obj, *path))


def _bool_getter(*path: str) -> _FieldGetter:
    return lambda obj: "true" if _dig(obj, *path) is True else "false"


def _int_getter(*path: str) -> _FieldGetter:
    def get(obj: Mapping[str, Any]) -> str:
        v = _dig(obj, *path)
        return str(int(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else "0"

    return get


def _pod_ip(obj: Mapping[str, Any]) -> str:
    # The pod registry selects on status.podIPs[0].ip when set, falling back to status.podIP.
    ips = _dig(obj, "status", "podIPs")
    if isinstance(ips, list) and ips and isinstance(ips[0], Mapping):
        return _as_field_string(ips[0].get("ip"))
    return _as_field_string(_dig(obj, "status", "podIP"))


def _event_source(obj: Mapping[str, Any]) -> str:
    source = _as_field_string(_dig(obj, "source", "component"))
    return source or _as_field_string(obj.get("reportingComponent"))


_NAME: Final = _getter("metadata", "name")
_NAMESPACE: Final = _getter("metadata", "namespace")
_META_FIELDS: Final[dict[str, _FieldGetter]] = {"metadata.name": _NAME, "metadata.namespace": _NAMESPACE}

#: Per kind: selectable fields and how to read them. Kinds with an upstream conversion function answer
#: "field label not supported: X"; the others use the scheme default message (see _unsupported).
_KIND_FIELDS: Final[dict[str, dict[str, _FieldGetter]]] = {
    "Pod": {
        **_META_FIELDS,
        "spec.nodeName": _getter("spec", "nodeName"),
        "spec.restartPolicy": _getter("spec", "restartPolicy"),
        "spec.schedulerName": _getter("spec", "schedulerName"),
        "spec.serviceAccountName": _getter("spec", "serviceAccountName"),
        "spec.hostNetwork": _bool_getter("spec", "hostNetwork"),
        "status.phase": _getter("status", "phase"),
        "status.podIP": _pod_ip,
        "status.nominatedNodeName": _getter("status", "nominatedNodeName"),
    },
    # Cluster-scoped kinds whose conversion functions do not accept metadata.namespace.
    "Node": {"metadata.name": _NAME, "spec.unschedulable": _bool_getter("spec", "unschedulable")},
    "Namespace": {"metadata.name": _NAME, "status.phase": _getter("status", "phase")},
    "Event": {
        **_META_FIELDS,
        "involvedObject.kind": _getter("involvedObject", "kind"),
        "involvedObject.namespace": _getter("involvedObject", "namespace"),
        "involvedObject.name": _getter("involvedObject", "name"),
        "involvedObject.uid": _getter("involvedObject", "uid"),
        "involvedObject.apiVersion": _getter("involvedObject", "apiVersion"),
        "involvedObject.resourceVersion": _getter("involvedObject", "resourceVersion"),
        "involvedObject.fieldPath": _getter("involvedObject", "fieldPath"),
        "reason": _getter("reason"),
        "reportingComponent": _getter("reportingComponent"),
        "source": _event_source,
        "type": _getter("type"),
    },
    "Secret": {**_META_FIELDS, "type": _getter("type")},
    "Service": {
        **_META_FIELDS,
        "spec.clusterIP": _getter("spec", "clusterIP"),
        "spec.type": _getter("spec", "type"),
    },
    "ReplicaSet": {**_META_FIELDS, "status.replicas": _int_getter("status", "replicas")},
}

#: Built-in kinds without a conversion function: the scheme's DefaultMetaV1FieldSelectorConversion.
_DEFAULT_CONVERSION_KINDS: Final = frozenset(
    {
        "ConfigMap",
        "ServiceAccount",
        "Endpoints",
        "PersistentVolumeClaim",
        "ResourceQuota",
        "Deployment",
        "DaemonSet",
        "StatefulSet",
        "PodDisruptionBudget",
        "Lease",
        "CustomResourceDefinition",
        "ControllerRevision",
    }
)

#: Old v1 clients send spec.host; the Pod conversion function renames it.
_ALIASES: Final[dict[str, dict[str, str]]] = {"Pod": {"spec.host": "spec.nodeName"}}


def _fields_for(kind: str) -> dict[str, _FieldGetter]:
    return _KIND_FIELDS.get(kind, _META_FIELDS)


def supported_fields(kind: str) -> frozenset[str]:
    """Field labels the API server accepts in ``fieldSelector`` for ``kind``."""
    return frozenset(_fields_for(kind))


def _unsupported(kind: str, label: str) -> SelectorError:
    if kind in _DEFAULT_CONVERSION_KINDS:
        return SelectorError(
            f'{_go_quote(label)} is not a known field selector: only "metadata.name", "metadata.namespace"'
        )
    # Kinds with their own conversion function, and custom resources (apiextensions crConverter).
    return SelectorError(f"field label not supported: {label}")


class FieldSelector:
    """An immutable AND of ``field=value`` / ``field!=value`` terms bound to one kind."""

    __slots__ = ("_exact", "kind", "terms")

    kind: str
    terms: tuple[tuple[str, bool, str, _FieldGetter], ...]  # (field, equal?, value, getter)
    _exact: dict[str, str]

    def __init__(self, kind: str, terms: tuple[tuple[str, bool, str, _FieldGetter], ...]) -> None:
        exact: dict[str, str] = {}
        for fld, equal, value, _ in terms:
            if equal and fld not in exact:
                exact[fld] = value
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "terms", terms)
        object.__setattr__(self, "_exact", exact)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("FieldSelector is immutable")

    def __repr__(self) -> str:
        return f"FieldSelector({self.kind!r}, {str(self)!r})"

    def __str__(self) -> str:
        return ",".join(f"{f}{'=' if eq else '!='}{v}" for f, eq, v, _ in self.terms)

    def is_empty(self) -> bool:
        return not self.terms

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((get(obj) == value) is equal for _, equal, value, get in self.terms)

    def exact(self, field: str) -> str | None:
        """The value ``field`` must equal, e.g. ``exact("spec.nodeName")`` for a pods-by-node index."""
        return self._exact.get(field)


def _split_terms(text: str) -> list[str]:
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, c in enumerate(text):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def _unescape(value: str) -> str:
    if "\\" not in value and "," not in value and "=" not in value:
        return value
    out: list[str] = []
    in_slash = False
    for c in value:
        if in_slash:
            if c not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c in ",=":
            # Upstream formats the rune with %v, i.e. as its code point.
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(text: str, *, kind: str) -> FieldSelector:
    """Parse the ``fieldSelector`` query parameter for ``kind`` (``fields.ParseSelector`` + conversion).

    Operators ``=``, ``==``, ``!=``; commas AND the terms; ``\\,``, ``\\=`` and ``\\\\`` escape values.
    Like upstream, whitespace is *not* trimmed (``a = b`` names the field ``"a "``).
    """
    fields = _fields_for(kind)
    aliases = _ALIASES.get(kind, {})
    parsed: list[tuple[str, bool, str, _FieldGetter]] = []
    for part in sorted(_split_terms(text)) if text else ():
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        lhs, op, rhs = split
        value = _unescape(rhs)
        label = aliases.get(lhs, lhs)
        getter = fields.get(label)
        if getter is None:
            raise _unsupported(kind, lhs)
        parsed.append((label, op != "!=", value, getter))
    return FieldSelector(kind, tuple(parsed))
