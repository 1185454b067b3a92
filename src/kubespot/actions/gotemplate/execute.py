"""Go ``text/template`` execution: a parsed tree and data into text.

Follows Go's ``text/template/exec.go``: dot and variables, field chains (a field of a struct that
does not exist is an error; a key a map lacks is ``<no value>``), the final value of a pipeline
passed as the last argument of the next command, ``if``/``with``/``range`` truth, ``range`` over
slices, maps (in sorted key order) and integers, ``break``/``continue``, lazy ``and``/``or``.

Sandboxed by construction: a field is only ever a key of a mapping, and the only methods are those of
Go's ``time.Time`` listed in ``TIME_METHODS``; no Python attribute is ever read. Output and steps
are bounded, so a template cannot hold the sender for long.

With ``json_strings`` set, a value printed where the output so far is inside a JSON string literal
is escaped as JSON string content, so a quote or newline in a description cannot break the body;
outside a string (``{{ toJson .NodeLabels }}``) it is printed as is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from .errors import TemplateError
from .funcs import FUNCS, truth
from .gofmt import MISSING, Month, Weekday, go_time, go_value
from .gotime import go_format
from .parser import (
    Action,
    Branch,
    Chain,
    Command,
    Dot,
    Field,
    Function,
    Literal,
    Loop,
    Node,
    Pipeline,
    Text,
    Variable,
)

MAX_OUTPUT = 1 << 20
MAX_STEPS = 200_000


class Struct(dict[str, Any]):
    """Data whose fields are fixed, like a Go struct: naming a field it lacks is an error."""


def _t(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _go_duration(value: Any) -> timedelta:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TemplateError("wrong type for value; expected time.Duration")
    return timedelta(microseconds=value / 1000)


#: Go's zero ``time.Time`` (January 1, year 1, UTC): what NTH's ``EndTime`` is for an event without one.
GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)

#: The methods of Go's ``time.Time`` a template may call (``.StartTime.Format "2006-01-02"``).
TIME_METHODS: dict[str, Callable[..., Any]] = {
    "Format": lambda t, layout: go_format(_t(t), layout if isinstance(layout, str) else go_value(layout)),
    "String": lambda t: go_time(t),
    "Unix": lambda t: int(_t(t).timestamp()),
    "UnixMilli": lambda t: int(_t(t).timestamp() * 1000),
    "UnixNano": lambda t: int(_t(t).timestamp()) * 1_000_000_000 + _t(t).microsecond * 1000,
    "UTC": lambda t: _t(t).astimezone(UTC),
    "Local": lambda t: _t(t).astimezone(UTC),
    "Year": lambda t: t.year,
    "Month": lambda t: Month(t.month),
    "Day": lambda t: t.day,
    "Hour": lambda t: t.hour,
    "Minute": lambda t: t.minute,
    "Second": lambda t: t.second,
    "Nanosecond": lambda t: t.microsecond * 1000,
    "YearDay": lambda t: t.timetuple().tm_yday,
    "Weekday": lambda t: Weekday((t.weekday() + 1) % 7),
    "IsZero": lambda t: _t(t) == GO_ZERO_TIME,
    "Add": lambda t, d: _t(t) + _go_duration(d),
    "AddDate": lambda t, y, m, d: _add_date(_t(t), y, m, d),
    "Before": lambda t, u: _t(t) < _t(u),
    "After": lambda t, u: _t(t) > _t(u),
    "Equal": lambda t, u: _t(t) == _t(u),
    "Sub": lambda t, u: int((_t(t) - _t(u)).total_seconds() * 1_000_000_000),
}


def _add_date(t: datetime, years: Any, months: Any, days: Any) -> datetime:
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (years, months, days)):
        raise TemplateError("wrong type for value; expected int")
    month0 = t.month - 1 + months
    year = t.year + years + month0 // 12
    # Go normalises an overflowing day (Oct 31 + 1 month = Dec 1): go through the first of the month.
    base = t.replace(year=year, month=month0 % 12 + 1, day=1)
    return base + timedelta(days=t.day - 1 + days)


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


_NO_FINAL = object()
_NODE_TYPES = (Text, Field, Variable, Chain, Function, Literal, Dot, Command, Pipeline)


class Executor:
    """One execution of a template; not reused."""

    def __init__(
        self, data: Any, *, now: datetime, json_strings: bool, show: Callable[[str], str] | None = None
    ) -> None:
        self.root = data
        self.show = show
        self.now = now
        self.json_strings = json_strings
        self.vars: list[tuple[str, Any]] = [("$", data)]
        self.out: list[str] = []
        self.size = 0
        self.steps = 0
        # JSON lexing state of what was written so far (only with json_strings).
        self.in_string = False
        self.escaped = False

    # --- output ----------------------------------------------------------------------------------------

    def write(self, text: str, *, value: bool) -> None:
        if value and self.show is not None:
            text = self.show(text)
        if value and self.json_strings and self.in_string:
            text = orjson.dumps(text).decode()[1:-1]
        elif self.json_strings:
            self._track(text)
        self.size += len(text)
        if self.size > MAX_OUTPUT:
            raise TemplateError(f"output longer than {MAX_OUTPUT} characters")
        self.out.append(text)

    def _track(self, text: str) -> None:
        for ch in text:
            if self.escaped:
                self.escaped = False
            elif ch == "\\" and self.in_string:
                self.escaped = True
            elif ch == '"':
                self.in_string = not self.in_string

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise TemplateError(f"more than {MAX_STEPS} steps")

    # --- nodes -----------------------------------------------------------------------------------------

    def run(self, nodes: list[Node]) -> str:
        self.walk(nodes, self.root)
        return "".join(self.out)

    def walk(self, nodes: list[Node], dot: Any) -> None:
        for node in nodes:
            self.step()
            if isinstance(node, Text):
                self.write(node.text, value=False)
            elif isinstance(node, Action):
                value = self.pipeline(node.pipe, dot)
                if not node.pipe.decl:
                    self.write(go_value(value), value=True)
            elif isinstance(node, Branch):
                self.branch(node, dot)
            elif isinstance(node, Loop):
                raise _Break() if node.kind == "break" else _Continue()
            else:  # pragma: no cover - the parser makes no other top-level node
                raise TemplateError(f"unexpected node {type(node).__name__}")

    def branch(self, node: Branch, dot: Any) -> None:
        mark = len(self.vars)
        try:
            if node.kind == "range":
                self.range(node, dot)
                return
            value = self.pipeline(node.pipe, dot)
            if truth(value):
                self.walk(node.body, value if node.kind == "with" else dot)
            else:
                self.walk(node.otherwise, dot)
        finally:
            del self.vars[mark:]

    def range(self, node: Branch, dot: Any) -> None:
        pipe = node.pipe
        value = self.pipeline(Pipeline((), False, pipe.commands, pipe.line), dot)
        items: list[tuple[Any, Any]]
        if isinstance(value, list | tuple):
            items = list(enumerate(value))
        elif isinstance(value, Mapping):
            items = sorted(value.items(), key=lambda kv: (not isinstance(kv[0], int | float), kv[0]))
        elif isinstance(value, int) and not isinstance(value, bool):
            if value > MAX_STEPS:
                raise TemplateError(f"range over {value}: more than {MAX_STEPS} steps")
            items = [(i, i) for i in range(value)]
        elif value is None or value is MISSING:
            items = []
        else:
            raise TemplateError(f"range can't iterate over {go_value(value)}", pipe.line)
        if not items:
            self.walk(node.otherwise, dot)
            return
        mark = len(self.vars)
        for key, elem in items:
            del self.vars[mark:]
            if len(pipe.decl) == 1:
                self.vars.append((pipe.decl[0], elem))
            elif len(pipe.decl) == 2:
                self.vars.append((pipe.decl[0], key))
                self.vars.append((pipe.decl[1], elem))
            try:
                self.walk(node.body, elem)
            except _Break:
                break
            except _Continue:
                continue

    # --- pipelines ---------------------------------------------------------------------------------------

    def pipeline(self, pipe: Pipeline, dot: Any) -> Any:
        value: Any = _NO_FINAL
        for command in pipe.commands:
            value = self.command(command, dot, value)
        for name in pipe.decl:
            if pipe.assign:
                self.set_var(name, value, pipe.line)
            else:
                self.vars.append((name, value))
        return value

    def command(self, cmd: Command, dot: Any, final: Any) -> Any:
        self.step()
        first, args = cmd.args[0], cmd.args[1:]
        if isinstance(first, Field):
            return self.chain(dot, first.names, args, final, dot, first.line)
        if isinstance(first, Variable):
            value = self.var(first.name, first.line)
            if first.names:
                return self.chain(value, first.names, args, final, dot, first.line)
            self.no_args(args, final, first.name, first.line)
            return value
        if isinstance(first, Chain):
            receiver = self.arg(first.node, dot)
            return self.chain(receiver, first.names, args, final, dot, first.line)
        if isinstance(first, Function):
            return self.call(first, args, final, dot)
        if isinstance(first, Pipeline):
            self.no_args(args, final, "parenthesized pipeline", first.line)
            return self.pipeline(first, dot)
        if isinstance(first, Literal) and first.value is None:
            raise TemplateError("nil is not a command", first.line)
        line = getattr(first, "line", None)
        self.no_args(args, final, go_value(self.arg(first, dot)), line)
        return self.arg(first, dot)

    def no_args(self, args: tuple[Node, ...], final: Any, what: str, line: int | None) -> None:
        if args or final is not _NO_FINAL:
            raise TemplateError(f"can't give argument to non-function {what}", line)

    def arg(self, node: Node, dot: Any) -> Any:
        if isinstance(node, Dot):
            return dot
        if isinstance(node, Literal):
            return node.value
        if isinstance(node, Field):
            return self.chain(dot, node.names, (), _NO_FINAL, dot, node.line)
        if isinstance(node, Variable):
            value = self.var(node.name, node.line)
            return self.chain(value, node.names, (), _NO_FINAL, dot, node.line) if node.names else value
        if isinstance(node, Chain):
            return self.chain(self.arg(node.node, dot), node.names, (), _NO_FINAL, dot, node.line)
        if isinstance(node, Function):
            return self.call(node, (), _NO_FINAL, dot)
        if isinstance(node, Pipeline):
            mark = len(self.vars)
            try:
                return self.pipeline(node, dot)
            finally:
                del self.vars[mark:]
        raise TemplateError(f"can't handle {type(node).__name__} as an argument")

    def chain(
        self, receiver: Any, names: tuple[str, ...], args: tuple[Node, ...], final: Any, dot: Any, line: int
    ) -> Any:
        for i, name in enumerate(names):
            last = i == len(names) - 1
            receiver = self.field(
                receiver, name, args if last else (), final if last else _NO_FINAL, dot, line
            )
        return receiver

    def field(self, receiver: Any, name: str, args: tuple[Node, ...], final: Any, dot: Any, line: int) -> Any:
        if isinstance(receiver, datetime):
            method = TIME_METHODS.get(name)
            if method is None:
                raise TemplateError(f"can't evaluate field {name} in type time.Time", line)
            values = [self.arg(a, dot) for a in args]
            if final is not _NO_FINAL:
                values.append(final)
            try:
                return method(receiver, *values)
            except TypeError:
                raise TemplateError(f"wrong number of args for {name}: got {len(values)}", line) from None
        if receiver is MISSING:
            # A field of an absent map key is absent too (exec.go evalField: invalid receiver).
            return MISSING
        if receiver is None:
            raise TemplateError(f"nil pointer evaluating interface {{}}.{name}", line)
        has_args = bool(args) or final is not _NO_FINAL
        if isinstance(receiver, Struct):
            if name not in receiver:
                raise TemplateError(f"can't evaluate field {name} in type struct", line)
            if has_args:
                raise TemplateError(f"{name} is not a method but has arguments", line)
            return receiver[name]
        if isinstance(receiver, Mapping):
            if has_args:
                raise TemplateError(f"{name} is not a method but has arguments", line)
            return receiver.get(name, MISSING)
        kind = {str: "string", int: "int", float: "float64", bool: "bool"}.get(type(receiver), "slice")
        raise TemplateError(f"can't evaluate field {name} in type {kind}", line)

    def call(self, fn: Function, args: tuple[Node, ...], final: Any, dot: Any) -> Any:
        name = fn.name
        extra = [] if final is _NO_FINAL else [final]
        if name in ("and", "or"):
            if not args and not extra:
                raise TemplateError(f"wrong number of args for {name}: want at least 1 got 0", fn.line)
            value: Any = None
            # and: the first empty argument, or the last; or: the first non-empty, or the last.
            # Arguments after the deciding one are never evaluated (Go 1.18).
            for arg in (*args, *extra):
                value = self.arg(arg, dot) if isinstance(arg, _NODE_TYPES) else arg
                if truth(value) != (name == "and"):
                    return value
            return value
            return value
        values = [self.arg(a, dot) for a in args] + extra
        if name == "not":
            if len(values) != 1:
                raise TemplateError(f"wrong number of args for not: want 1 got {len(values)}", fn.line)
            return not truth(values[0])
        if name == "now":
            if values:
                raise TemplateError(f"wrong number of args for now: want 0 got {len(values)}", fn.line)
            return self.now
        try:
            result = FUNCS[name](*values)
        except TemplateError as exc:
            raise TemplateError(f"error calling {name}: {exc.reason}", exc.line or fn.line) from None
        except TypeError:
            raise TemplateError(f"wrong number of args for {name}: got {len(values)}", fn.line) from None
        except (ValueError, OverflowError, ArithmeticError) as exc:
            raise TemplateError(f"error calling {name}: {exc}", fn.line) from None
        # Bounded like the output: doubling a string in a loop must not take the agent's memory.
        if isinstance(result, str | bytes | list | tuple | dict) and len(result) > MAX_OUTPUT:
            raise TemplateError(f"error calling {name}: result longer than {MAX_OUTPUT}", fn.line)
        return result

    # --- variables ---------------------------------------------------------------------------------------

    def var(self, name: str, line: int) -> Any:
        for var_name, value in reversed(self.vars):
            if var_name == name:
                return value
        raise TemplateError(f"undefined variable: {name}", line)

    def set_var(self, name: str, value: Any, line: int) -> None:
        for i in range(len(self.vars) - 1, -1, -1):
            if self.vars[i][0] == name:
                self.vars[i] = (name, value)
                return
        raise TemplateError(f"undefined variable: {name}", line)
