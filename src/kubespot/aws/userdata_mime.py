"""MIME multipart user data: reading a user's archive into parts, writing Karpenter's (pure).

What cloud-init and nodeadm read. Follows aws/karpenter-provider-aws
``pkg/providers/amifamily/bootstrap/mime/mime.go`` (``NewArchive``, ``Archive.Serialize``) and
``eksbootstrap.go`` (``mimeify``, ``copyCustomUserDataParts``), which lean on Go's
``mime/multipart``: the archive Karpenter writes has the boundary ``//``, a ``MIME-Version: 1.0``
header, each part's headers sorted by canonical name, and every carriage return removed. A part's
body is the text between its header block and the line break before the next delimiter, as Go's
reader returns it; a ``quoted-printable`` part is decoded and loses that header, as there.

Deliberately stricter than Go's reader: an archive with no delimiter at all is an error here, where
Go's reader yields no parts and the user's user data would silently vanish.
"""

from __future__ import annotations

import quopri
import re
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import Message
from email.parser import HeaderParser

from .userdata_options import UserDataError

__all__ = [
    "BOUNDARY",
    "NODE_CONFIG",
    "SHELL_SCRIPT",
    "Part",
    "is_mime",
    "parse_archive",
    "serialize",
]

BOUNDARY = "//"
SHELL_SCRIPT = 'text/x-shellscript; charset="us-ascii"'
#: nodeadm's content type (``application/`` + the ``node.eks.aws`` API group).
NODE_CONFIG = "application/node.eks.aws"


@dataclass(frozen=True, slots=True)
class Part:
    """One part: its headers in order (name, value) and its body."""

    headers: tuple[tuple[str, str], ...]
    body: str

    @classmethod
    def of(cls, content_type: str, body: str) -> Part:
        return cls((("Content-Type", content_type),), body)

    @property
    def content_type(self) -> str:
        return next((v for k, v in self.headers if k.lower() == "content-type"), "")


def is_mime(text: str) -> bool:
    """Whether user data claims to be MIME (Karpenter's test: it starts with one of these headers)."""
    head = text.strip()
    return head.startswith("MIME-Version:") or head.startswith("Content-Type:")


def _canonical(name: str) -> str:
    # textproto.CanonicalMIMEHeaderKey: each dash-separated word capitalised.
    return "-".join(w[:1].upper() + w[1:].lower() for w in name.split("-"))


def _headers(msg: Message) -> tuple[tuple[str, str], ...]:
    return tuple((_canonical(k), str(v)) for k, v in msg.items())


def _split_headers(text: str, what: str) -> Message:
    msg = HeaderParser().parsestr(text)
    if msg.defects:
        raise UserDataError(f"malformed MIME {what}: {', '.join(type(d).__name__ for d in msg.defects)}")
    return msg


def parse_archive(text: str) -> list[Part]:
    """The parts of a multipart MIME archive, in order; ``UserDataError`` when it is not one."""
    top = _split_headers(text.lstrip(), "user data headers")
    if top.get("Content-Type") is None:
        raise UserDataError("MIME user data has no Content-Type header")
    if top.get_content_maintype() != "multipart":
        raise UserDataError(f"MIME user data is not multipart ({top.get_content_type()})")
    boundary = top.get_param("boundary")
    if not isinstance(boundary, str) or not boundary:
        raise UserDataError("MIME user data has no boundary parameter")
    body = top.get_payload()
    assert isinstance(body, str)  # headers-only parsing leaves the body as text
    delimiter = re.compile(r"--" + re.escape(boundary) + r"(--)?[ \t]*\r?\n?")
    parts: list[Part] = []
    current: list[str] | None = None
    closed = False
    # Lines end at LF only (str.splitlines would also split at form feeds and the like).
    for line in re.findall(r"[^\n]*\n|[^\n]+\Z", body):
        m = delimiter.fullmatch(line)
        if m is None:
            if current is not None:
                current.append(line)
            continue  # the preamble before the first delimiter is ignored
        if current is not None:
            parts.append(_part("".join(current)))
        if m.group(1):
            closed = True
            break
        current = []
    if current is None:
        raise UserDataError(f"MIME user data has no part delimited by --{boundary}")
    # A delimiter with nothing after it ends the archive as well as a closing one (Go's reader
    # finds no part headers there: io.EOF); a part body running into the end is truncated.
    if not closed and "".join(current).strip():
        raise UserDataError(f"MIME user data is truncated: no closing --{boundary}--")
    return parts


def _part(raw: str) -> Part:
    # The line break before a delimiter belongs to the delimiter.
    raw = raw.removesuffix("\n").removesuffix("\r")
    if raw.startswith(("\n", "\r\n")):  # a part without headers
        return Part((), raw.split("\n", 1)[1])
    msg = _split_headers(raw, "part")
    body = msg.get_payload()
    assert isinstance(body, str)
    headers = _headers(msg)
    cte = msg.get("Content-Transfer-Encoding", "")
    if str(cte).strip().lower() == "quoted-printable":
        body = quopri.decodestring(body.encode()).decode("utf-8", "replace")
        headers = tuple((k, v) for k, v in headers if k != "Content-Transfer-Encoding")
    return Part(headers, body)


def serialize(parts: Sequence[Part]) -> str:
    """The archive Karpenter writes: boundary ``//``, LF line ends only."""
    out = ["MIME-Version: 1.0\n", f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"\n\n']
    for i, part in enumerate(parts):
        out.append(f"--{BOUNDARY}\n" if i == 0 else f"\n--{BOUNDARY}\n")
        for name, value in sorted(part.headers, key=lambda h: h[0]):
            out.append(f"{name}: {value}\n")
        out.append("\n")
        out.append(part.body)
    out.append(f"\n--{BOUNDARY}--\n")
    return "".join(out).replace("\r", "")
