"""Field errors as upstream reports them (k8s.io/apimachinery pkg/util/validation/field/errors.go).

One ``FieldError`` is a field path, an error type, the bad value and a detail; ``invalid_status``
folds a list of them into the 422 ``Status`` that ``errors.NewInvalid`` builds: the message
``<Kind>[.<group>] "<name>" is invalid: <field>: <body>`` (several errors bracketed and joined by
", ", duplicates dropped, as ``ToAggregate`` does) and one ``details.causes`` entry per error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from .errors import ApiError

#: error type -> (what ErrorBody prints, the cause's reason)
_TYPES = {
    "required": ("Required value", "FieldValueRequired"),
    "invalid": ("Invalid value", "FieldValueInvalid"),
    "not_supported": ("Unsupported value", "FieldValueNotSupported"),
    "duplicate": ("Duplicate value", "FieldValueDuplicate"),
    "forbidden": ("Forbidden", "FieldValueForbidden"),
    "too_long": ("Too long", "FieldValueTooLong"),
}
#: Types whose body never shows the value (ErrorBody's first cases).
_NO_VALUE = frozenset({"required", "forbidden", "too_long"})


class GoValue(str):
    """A value already rendered the way Go's ``%#v`` or a ``Stringer`` would print it (unquoted)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class FieldError:
    """One validation failure at ``field`` (``spec.taints[0].effect``)."""

    type: str
    field: str
    value: Any = None
    detail: str = ""

    def body(self) -> str:
        text = _TYPES[self.type][0]
        if self.type not in _NO_VALUE:
            text = f"{text}: {_render(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def _render(value: Any) -> str:
    if isinstance(value, GoValue):
        return str(value)
    if isinstance(value, str):
        return orjson.dumps(value).decode()  # Go's %q, for the printable text kubesim meets
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    return orjson.dumps(value).decode()


def required(field: str, detail: str = "") -> FieldError:
    return FieldError("required", field, "", detail)


def invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError("invalid", field, value, detail)


def not_supported(field: str, value: Any, supported: tuple[str, ...]) -> FieldError:
    return FieldError(
        "not_supported", field, value, "supported values: " + ", ".join(f'"{v}"' for v in supported)
    )


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError("forbidden", field, "", detail)


def aggregate(errs: list[FieldError]) -> str:
    """``field.ErrorList.ToAggregate().Error()``: one message, or several bracketed, deduplicated."""
    seen: list[str] = []
    for e in errs:
        text = str(e)
        if text not in seen:
            seen.append(text)
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


def invalid_status(kind: str, group: str, name: str, errs: list[FieldError]) -> ApiError:
    """``errors.NewInvalid(GroupKind{group, kind}, name, errs)``: 422 with one cause per error."""
    qualified = f"{kind}.{group}" if group else kind
    # StatusDetails' fields are omitempty: a patch's decoding error has neither kind nor name.
    details: dict[str, Any] = {k: v for k, v in (("name", name), ("group", group), ("kind", kind)) if v}
    details["causes"] = [{"reason": _TYPES[e.type][1], "message": e.body(), "field": e.field} for e in errs]
    message = f"{qualified} {orjson.dumps(name).decode()} is invalid: {aggregate(errs)}"
    return ApiError(422, message, reason="Invalid", details=details)
