"""Go ``text/template`` parsing: tokens into a tree of text, actions and control structures.

Follows Go's ``text/template/parse/parse.go``: ``if``/``else if``/``else``, ``range`` (with
``$i, $e :=``, ``else``, ``break``, ``continue``), ``with``/``else with``/``else``, variable
declarations (``$x :=``) and assignments (``$x =``), pipelines (``a | b``), parenthesised pipelines,
field chains on any operand (``(.X).Y``, ``$x.Y``). Functions must exist when the template is parsed,
as in Go (``function "x" not defined``). ``define``/``template``/``block`` (named templates) are
refused as ``Unsupported``: a webhook body is one template.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Container
from dataclasses import dataclass, field

from .errors import TemplateError, Unsupported
from .lexer import Token, lex

# --- the tree ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Field:
    """``.A.B``: fields of dot."""

    names: tuple[str, ...]
    line: int


@dataclass(frozen=True, slots=True)
class Variable:
    """``$x.A.B``: a variable and fields of it (``$`` alone is the data given to execute)."""

    name: str
    names: tuple[str, ...]
    line: int


@dataclass(frozen=True, slots=True)
class Chain:
    """``(pipeline).A.B``: fields of any other operand."""

    node: Node
    names: tuple[str, ...]
    line: int


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    line: int


@dataclass(frozen=True, slots=True)
class Literal:
    """A string, number, character, bool or nil constant, already as its value."""

    value: object
    line: int


@dataclass(frozen=True, slots=True)
class Dot:
    line: int


@dataclass(frozen=True, slots=True)
class Command:
    args: tuple[Node, ...]
    line: int


@dataclass(frozen=True, slots=True)
class Pipeline:
    decl: tuple[str, ...]
    assign: bool  # "$x = ..." rather than "$x := ..."
    commands: tuple[Command, ...]
    line: int


@dataclass(frozen=True, slots=True)
class Action:
    """``{{ pipeline }}``: printed unless it declares or assigns a variable."""

    pipe: Pipeline


@dataclass(slots=True)
class Branch:
    """``if``, ``range`` or ``with``: the pipeline, the body and the ``else`` part."""

    kind: str
    pipe: Pipeline
    body: list[Node] = field(default_factory=list)
    otherwise: list[Node] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Loop:
    """``break`` or ``continue`` inside a range."""

    kind: str
    line: int


Node = (
    Text | Field | Variable | Chain | Function | Literal | Dot | Command | Pipeline | Action | Branch | Loop
)


# --- the parser ----------------------------------------------------------------------------------------

#: Named-template constructs: valid Go, not offered here.
_NAMED = frozenset(("define", "template", "block"))


def parse(text: str, functions: Container[str], unsupported: Callable[[str], str | None]) -> list[Node]:
    """The tree of ``text``. ``functions``: names that may be called; ``unsupported(name)``: why a
    function Go's sprig offers is not offered here (None when it is not a sprig name either)."""
    return _Parser(lex(text), functions, unsupported).template()


class _Parser:
    def __init__(
        self, tokens: list[Token], functions: Container[str], unsupported: Callable[[str], str | None]
    ) -> None:
        self.tokens = tokens
        self.pos = 0
        self.functions = functions
        self.unsupported = unsupported
        self.scopes: list[set[str]] = [{"$"}]
        self.range_depth = 0

    # --- token helpers ---------------------------------------------------------------------------------

    def peek(self, skip_space: bool = True) -> Token:
        i = self.pos
        while skip_space and i < len(self.tokens) and self.tokens[i].kind == "space":
            i += 1
        if i >= len(self.tokens):
            return Token("eof", "", self.tokens[-1].line if self.tokens else 1)
        return self.tokens[i]

    def next(self, skip_space: bool = True) -> Token:
        while skip_space and self.pos < len(self.tokens) and self.tokens[self.pos].kind == "space":
            self.pos += 1
        tok = self.peek(skip_space=False)
        self.pos += 1
        return tok

    def expect(self, kind: str, context: str) -> Token:
        tok = self.next()
        if tok.kind != kind:
            raise TemplateError(f"unexpected {_shown(tok)} in {context}", tok.line)
        return tok

    # --- structure -------------------------------------------------------------------------------------

    def template(self) -> list[Node]:
        nodes, stop = self.items()
        if stop is not None:
            raise TemplateError(f"unexpected {{{{{stop.value}}}}}", stop.line)
        return nodes

    def items(self) -> tuple[list[Node], Token | None]:
        """Nodes up to the end of input (None) or an ``end``/``else`` keyword (returned, consumed)."""
        nodes: list[Node] = []
        while True:
            tok = self.next(skip_space=False)
            if tok.kind == "eof":
                return nodes, None
            if tok.kind == "text":
                nodes.append(Text(tok.value))
                continue
            # tok is "open"
            word = self.peek()
            if word.kind == "keyword":
                if word.value in ("end", "else"):
                    self.next()
                    return nodes, word
                nodes.append(self.control(self.next()))
            else:
                pipe = self.pipeline("command", decl_ok=True)
                self.expect("close", "command")
                nodes.append(Action(pipe))

    def control(self, word: Token) -> Node:
        if word.value in _NAMED:
            raise Unsupported(f"{{{{{word.value}}}}}", word.line, "named templates are not supported")
        if word.value in ("break", "continue"):
            if not self.range_depth:
                raise TemplateError(f"{{{{{word.value}}}}} outside {{{{range}}}}", word.line)
            self.expect("close", word.value)
            return Loop(word.value, word.line)
        if word.value == "nil":
            raise TemplateError("nil is not a command", word.line)
        return self.branch(word.value, word.line)

    def branch(self, kind: str, line: int) -> Branch:
        self.scopes.append(set())
        try:
            pipe = self.pipeline(kind, decl_ok=True, range_decl=kind == "range")
            self.expect("close", kind)
            node = Branch(kind, pipe)
            if kind == "range":
                self.range_depth += 1
            try:
                node.body, stop = self.items()
            finally:
                if kind == "range":
                    self.range_depth -= 1
            if stop is None:
                raise TemplateError(f"unexpected EOF: {{{{{kind}}}}} has no {{{{end}}}}", line)
            if stop.value == "else":
                after = self.peek()
                # "else if" / "else with": one more branch nested in the else part, sharing the end.
                if kind in ("if", "with") and after.kind == "keyword" and after.value == kind:
                    self.next()
                    node.otherwise = [self.branch(kind, after.line)]
                    return node
                self.expect("close", "else")
                node.otherwise, stop = self.items()
                if stop is None or stop.value != "end":
                    raise TemplateError(f"expected {{{{end}}}} after {{{{else}}}} of {{{{{kind}}}}}", line)
            self.expect("close", "end")
            return node
        finally:
            self.scopes.pop()

    # --- pipelines -------------------------------------------------------------------------------------

    def pipeline(self, context: str, *, decl_ok: bool = False, range_decl: bool = False) -> Pipeline:
        line = self.peek().line
        decl: list[str] = []
        assign = False
        if decl_ok and self.peek().kind == "var":
            save = self.pos
            names = [self.next().value]
            if range_decl and self.peek().kind == "comma":
                self.next()
                second = self.next()
                if second.kind != "var":
                    raise TemplateError(f"range can only initialize variables, got {_shown(second)}", line)
                names.append(second.value)
            op = self.peek()
            if op.kind in ("declare", "assign") and (len(names) == 1 or op.kind == "declare"):
                self.next()
                decl = names
                assign = op.kind == "assign"
                for name in decl:
                    if assign:
                        self.lookup(name, line)
                    else:
                        self.scopes[-1].add(name)
            else:
                if len(names) > 1:
                    raise TemplateError("too many declarations", line)
                self.pos = save
        commands: list[Command] = []
        while True:
            commands.append(self.command(context))
            if self.peek().kind != "pipe":
                break
            self.next()
        if not commands or not commands[0].args:
            raise TemplateError(f"missing value for {context}", line)
        return Pipeline(tuple(decl), assign, tuple(commands), line)

    def command(self, context: str) -> Command:
        args: list[Node] = []
        line = self.peek().line
        while True:
            tok = self.peek()
            if tok.kind in ("close", "rparen", "pipe", "eof"):
                break
            args.append(self.operand())
            after = self.peek(skip_space=False)
            if after.kind not in ("space", "close", "rparen", "pipe"):
                raise TemplateError(f"unexpected {_shown(after)} in operand", after.line)
        if not args:
            raise TemplateError(f"missing value for {context}", line)
        return Command(tuple(args), line)

    def operand(self) -> Node:
        term = self.term()
        names: list[str] = []
        while self.peek(skip_space=False).kind == "field":
            names.append(self.next(skip_space=False).value)
        if not names:
            return term
        if isinstance(term, Field):
            return Field(term.names + tuple(names), term.line)
        if isinstance(term, Variable):
            return Variable(term.name, term.names + tuple(names), term.line)
        if isinstance(term, Literal | Function):
            raise TemplateError("unexpected . after term", term.line)
        return Chain(term, tuple(names), getattr(term, "line", 0))

    def term(self) -> Node:
        tok = self.next()
        kind, value, line = tok.kind, tok.value, tok.line
        if kind == "field":
            names = [value]
            while self.peek(skip_space=False).kind == "field":
                names.append(self.next(skip_space=False).value)
            return Field(tuple(names), line)
        if kind == "dot":
            return Dot(line)
        if kind == "var":
            self.lookup(value, line)
            return Variable(value, (), line)
        if kind == "ident":
            if value not in self.functions:
                why = self.unsupported(value)
                if why is not None:
                    raise Unsupported(f"function {value!r}", line, why)
                raise TemplateError(f'function "{value}" not defined', line)
            return Function(value, line)
        if kind == "keyword" and value == "nil":
            return Literal(None, line)
        if kind == "bool":
            return Literal(value == "true", line)
        if kind == "string":
            return Literal(_go_string(value, line), line)
        if kind == "rawstring":
            return Literal(value[1:-1].replace("\r", ""), line)
        if kind == "char":
            text = _go_string('"' + value[1:-1].replace('"', '\\"') + '"', line)
            if len(text) != 1:
                raise TemplateError(f"malformed character constant: {value}", line)
            return Literal(ord(text), line)
        if kind == "number":
            return Literal(_go_number(value, line), line)
        if kind == "lparen":
            pipe = self.pipeline("parenthesized pipeline")
            self.expect("rparen", "parenthesized pipeline")
            return pipe
        raise TemplateError(f"unexpected {_shown(tok)} in operand", line)

    def lookup(self, name: str, line: int) -> None:
        if not any(name in scope for scope in self.scopes):
            raise TemplateError(f"undefined variable {name!r}", line)


def _shown(tok: Token) -> str:
    return {"close": '"}}"', "eof": "EOF", "space": "space"}.get(tok.kind, f"{tok.value!r}")


def _go_string(quoted: str, line: int) -> str:
    """A Go interpreted string literal's value (Go's escapes are a subset of Python's, plus \\a...)."""
    body = quoted[1:-1]
    if "\\" not in body:
        return body
    try:
        value = ast.literal_eval(quoted)
    except (SyntaxError, ValueError):
        raise TemplateError(f"invalid syntax in string {quoted}", line) from None
    if not isinstance(value, str):
        raise TemplateError(f"invalid syntax in string {quoted}", line)
    return value


def _go_number(text: str, line: int) -> int | float:
    clean = text.replace("_", "")
    try:
        if any(c in clean.lower() for c in ".e") and not clean.lower().lstrip("+-").startswith("0x"):
            return float(clean)
        return int(clean, 0) if not _octal(clean) else int(clean, 8)
    except ValueError:
        raise TemplateError(f"bad number syntax: {text!r}", line) from None


def _octal(text: str) -> bool:
    """Go reads a leading 0 as octal (``017``); Python's int(x, 0) refuses it."""
    digits = text.lstrip("+-")
    return len(digits) > 1 and digits[0] == "0" and digits[1].isdigit()
