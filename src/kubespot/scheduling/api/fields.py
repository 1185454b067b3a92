"""Reading a JSON-shaped object field by field without ever raising.

An object from the API server or a user's file may hold anything: a field of the wrong type is
recorded as a ``Problem`` naming its path (``spec.template.spec.taints[1].effect``) and read as if it
were absent, so a malformed NodePool ends as a False condition with a reason, never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .conditions import Problem

Obj = Mapping[str, Any]
T = TypeVar("T")


class Fields:
    """Typed reads of ``parent[key]`` that record what is wrong instead of raising."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.problems: list[Problem] = []

    def problem(self, message: str, reason: str | None = None) -> None:
        self.problems.append(Problem(reason or self.reason, message))

    def _wrong(self, path: str, expected: str, value: Any) -> None:
        self.problem(f"{path}: expected {expected}, got {type(value).__name__} {value!r}"[:300])

    def obj(self, parent: Obj, key: str, path: str) -> Obj:
        value = parent.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self._wrong(path, "an object", value)
            return {}
        return value

    def objs(self, parent: Obj, key: str, path: str) -> list[tuple[str, Obj]]:
        """The list's object items with their paths; items that are not objects are problems."""
        value = parent.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self._wrong(path, "a list", value)
            return []
        out: list[tuple[str, Obj]] = []
        for i, item in enumerate(value):
            if isinstance(item, Mapping):
                out.append((f"{path}[{i}]", item))
            else:
                self._wrong(f"{path}[{i}]", "an object", item)
        return out

    def has(self, parent: Obj, key: str) -> bool:
        return parent.get(key) is not None

    def text(self, parent: Obj, key: str, path: str) -> str | None:
        value = parent.get(key)
        if value is None or isinstance(value, str):
            return value
        self._wrong(path, "a string", value)
        return None

    def integer(self, parent: Obj, key: str, path: str) -> int | None:
        value = parent.get(key)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        self._wrong(path, "an integer", value)
        return None

    def flag(self, parent: Obj, key: str, path: str) -> bool | None:
        value = parent.get(key)
        if value is None or isinstance(value, bool):
            return value
        self._wrong(path, "a boolean", value)
        return None

    def texts(self, parent: Obj, key: str, path: str) -> tuple[str, ...] | None:
        """A list of strings (None when absent)."""
        value = parent.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self._wrong(path, "a list of strings", value)
            return None
        return tuple(value)

    def str_map(self, parent: Obj, key: str, path: str) -> dict[str, str]:
        """A map of strings (labels, annotations, tags)."""
        value = self.obj(parent, key, path)
        out: dict[str, str] = {}
        for k, v in value.items():
            if isinstance(v, str):
                out[str(k)] = v
            else:  # the API server refuses a number here too: label values are strings
                self._wrong(f"{path}.{k}", "a string", v)
        return out

    def quantities(self, parent: Obj, key: str, path: str) -> dict[str, str]:
        """A resource list: quantities as strings (a JSON number is a quantity too)."""
        value = self.obj(parent, key, path)
        out: dict[str, str] = {}
        for k, v in value.items():
            if isinstance(v, str):
                out[str(k)] = v
            elif isinstance(v, int | float) and not isinstance(v, bool):
                out[str(k)] = str(v)
            else:
                self._wrong(f"{path}.{k}", "a quantity", v)
        return out


@dataclass(frozen=True, slots=True)
class Parsed(Generic[T]):
    """A parsed spec and the shape problems met on the way (fields of the wrong type, read as unset)."""

    spec: T
    problems: tuple[Problem, ...] = ()
