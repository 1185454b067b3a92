"""Go ``text/template`` lexing: a template's text split into text runs and action tokens.

Follows Go's ``text/template/parse/lex.go``: actions sit between ``{{`` and ``}}``; ``{{- `` and
`` -}}`` (the dash followed or preceded by a space, tab or newline) trim the whitespace of the
neighbouring text; ``{{/* ... */}}`` is a comment. Inside an action: fields (``.Name``), variables
(``$x``), identifiers (functions and keywords), strings (``"..."`` with Go escapes, raw
```...```), characters (``'a'``), numbers, ``|``, ``(``, ``)``, ``:=``, ``=``, ``,``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import TemplateError

#: Whitespace Go's trim markers remove (``isSpace`` in lex.go).
SPACE = " \t\r\n"

KEYWORDS = frozenset(
    ("if", "else", "end", "range", "with", "define", "template", "block", "break", "continue", "nil")
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # text, open, close, field, var, ident, keyword, string, char, number, bool, pipe, ...
    value: str
    line: int


_NUMBER = re.compile(
    r"[+-]?(0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|(\d[\d_]*)?\.?\d[\d_]*([eE][+-]?\d+)?)"
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_RAW = re.compile(r"`[^`]*`")
_CHAR = re.compile(r"'(?:[^'\\\n]|\\.[^']*)'")


def lex(text: str) -> list[Token]:
    """Every token of ``text``; ``TemplateError`` on an unterminated action, string or comment."""
    out: list[Token] = []
    pos = 0
    line = 1
    trim_next = False
    while pos < len(text):
        start = text.find("{{", pos)
        chunk = text[pos:] if start < 0 else text[pos:start]
        if start >= 0:
            # A left trim marker: "{{-" followed by whitespace.
            left_trim = text.startswith("{{-", start) and start + 3 < len(text) and text[start + 3] in SPACE
        else:
            left_trim = False
        if trim_next:
            chunk = chunk.lstrip(SPACE)
        if left_trim:
            chunk = chunk.rstrip(SPACE)
        if chunk:
            out.append(Token("text", chunk, line))
        if start < 0:
            break
        line += text.count("\n", pos, start)
        pos = start + (4 if left_trim else 2)
        pos, line, trim_next = _action(text, pos, line, out)
    return out


def _close_at(text: str, pos: int) -> tuple[int, bool] | None:
    """If an action closes at ``pos`` (after optional space): (position after it, right trim)."""
    if text.startswith("}}", pos):
        return pos + 2, False
    if text[pos : pos + 1] in SPACE and pos < len(text):
        j = pos
        while j < len(text) and text[j] in SPACE:
            j += 1
        if text.startswith("-}}", j):
            return j + 3, True
    return None


def _action(text: str, pos: int, line: int, out: list[Token]) -> tuple[int, int, bool]:
    """Lex one action starting after its ``{{``; returns (position after ``}}``, line, trim right)."""
    first = line
    # A comment must start right after the delimiter (and its trim marker), as in lex.go.
    if text.startswith("/*", pos):
        end = text.find("*/", pos + 2)
        if end < 0:
            raise TemplateError("unclosed comment", line)
        line += text.count("\n", pos, end)
        closed = _close_at(text, end + 2)
        if closed is None:
            raise TemplateError("comment ends before closing delimiter", line)
        return closed[0], line, closed[1]
    out.append(Token("open", "{{", first))
    depth = 0
    while True:
        if pos >= len(text):
            raise TemplateError("unclosed action", first)
        closed = _close_at(text, pos)
        if closed is not None:
            if depth:
                raise TemplateError("unclosed left paren", line)
            out.append(Token("close", "}}", line))
            return closed[0], line, closed[1]
        c = text[pos]
        if c in SPACE:
            if c == "\n":
                line += 1
            if not out or out[-1].kind != "space":
                out.append(Token("space", " ", line))
            pos += 1
            continue
        if c == "|":
            out.append(Token("pipe", c, line))
            pos += 1
        elif c == "(":
            depth += 1
            out.append(Token("lparen", c, line))
            pos += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                raise TemplateError("unexpected right paren", line)
            out.append(Token("rparen", c, line))
            pos += 1
        elif c == ",":
            out.append(Token("comma", c, line))
            pos += 1
        elif text.startswith(":=", pos):
            out.append(Token("declare", ":=", line))
            pos += 2
        elif c == "=":
            out.append(Token("assign", "=", line))
            pos += 1
        elif c == '"':
            m = _STRING.match(text, pos)
            if m is None:
                raise TemplateError("unterminated quoted string", line)
            out.append(Token("string", m.group(0), line))
            pos = m.end()
        elif c == "`":
            m = _RAW.match(text, pos)
            if m is None:
                raise TemplateError("unterminated raw quoted string", line)
            out.append(Token("rawstring", m.group(0), line))
            line += m.group(0).count("\n")
            pos = m.end()
        elif c == "'":
            m = _CHAR.match(text, pos)
            if m is None:
                raise TemplateError("unterminated character constant", line)
            out.append(Token("char", m.group(0), line))
            pos = m.end()
        elif c == "$":
            m = _IDENT.match(text, pos + 1)
            name = "$" + (m.group(0) if m else "")
            out.append(Token("var", name, line))
            pos += len(name)
        elif c == ".":
            m = _IDENT.match(text, pos + 1)
            if m is not None:
                out.append(Token("field", m.group(0), line))
                pos = m.end()
            elif text[pos + 1 : pos + 2].isdigit():
                pos = _number(text, pos, line, out)
            else:
                out.append(Token("dot", ".", line))
                pos += 1
        elif c.isdigit() or (c in "+-" and text[pos + 1 : pos + 2].isdigit()):
            pos = _number(text, pos, line, out)
        elif m := _IDENT.match(text, pos):
            word = m.group(0)
            if word in ("true", "false"):
                out.append(Token("bool", word, line))
            else:
                out.append(Token("keyword" if word in KEYWORDS else "ident", word, line))
            pos = m.end()
        else:
            raise TemplateError(f"unexpected {c!r} in command", line)


def _number(text: str, pos: int, line: int, out: list[Token]) -> int:
    m = _NUMBER.match(text, pos)
    if m is None or not m.group(0).strip("+-"):
        raise TemplateError(f"bad number syntax: {text[pos : pos + 10]!r}", line)
    end = m.end()
    if end < len(text) and (text[end].isalnum() or text[end] == "_"):
        raise TemplateError(f"bad number syntax: {text[pos : end + 1]!r}", line)
    out.append(Token("number", m.group(0), line))
    return end
