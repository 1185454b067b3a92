"""An outgoing call's URL template, rendered with every value percent-encoded for where it lands.

The template's own text is the URL as written; each value a tag prints is data, so it is encoded:
in the path as one segment (``/``, ``?``, ``#`` and ``%`` encoded; a value that would make a whole
segment ``.`` or ``..`` is refused: RFC 3986 section 6.2.2.2 lets a server or proxy decode ``%2E``
before it removes dot segments, so encoding alone cannot stop it climbing the path), in the query
and the fragment as one component (``&``, ``=``, ``+``, ``#``, spaces and ``%`` encoded; ``/``,
``?``, ``:`` and ``@`` may stay, RFC 3986 section 3.4).
Where a value lands is where its tag sits in the rendered text: after the first ``?`` or ``#`` of the
template's own text, it is in the query (or fragment).

Scheme, userinfo, host and port are literal (``kubespot.config.http_calls.authority_problem``,
checked at start-up), so no value can move the call to another server; the rendered URL's authority
is compared with the template's once more before sending.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote, urlsplit

from . import templates

# Private-use characters (never in a URL) around each printed value while rendering.
_OPEN: Final = "\ue000"
_CLOSE: Final = "\ue001"
#: Left as they are in a query or fragment value: they delimit nothing there (RFC 3986 section 3.4).
_QUERY_SAFE: Final = "/?:@"


class ServerChanged(ValueError):
    """The rendered URL names another scheme or authority than its template's literal start, or
    a value made a dot segment of its path (``/../``) that would climb it."""


def encode_path_segment(value: str) -> str:
    """``value`` inside a path segment: every reserved character encoded."""
    return quote(value, safe="")


def encode_query_value(value: str) -> str:
    """``value`` inside a query (or fragment): it cannot end its parameter or start another."""
    return quote(value, safe=_QUERY_SAFE)


def _mark(value: str) -> str:
    return _OPEN + value.replace(_OPEN, "").replace(_CLOSE, "") + _CLOSE


def render_url(template: str, variables: Mapping[str, Any]) -> str:
    """The URL ``template`` filled in with ``variables``, values encoded by where they land.

    Raises ``ServerChanged`` if the result names another scheme or authority than the template's
    literal start (not possible for a template that passed the start-up check).
    """
    marked = templates.render_values_with(template, variables, _mark).strip()
    out: list[str] = []
    in_query = False
    i = 0
    while i < len(marked):
        start = marked.find(_OPEN, i)
        literal = marked[i:] if start < 0 else marked[i:start]
        out.append(literal)
        in_query = in_query or "?" in literal or "#" in literal
        if start < 0:
            break
        end = marked.find(_CLOSE, start)
        value = marked[start + 1 : end]
        out.append(encode_query_value(value) if in_query else encode_path_segment(value))
        i = end + 1
    url = "".join(out)
    expected = urlsplit(template.split("{", 1)[0])
    got = urlsplit(url)
    if (got.scheme, got.netloc) != (expected.scheme, expected.netloc):
        raise ServerChanged("the rendered URL names another server than its template")
    literal_dots = {seg for seg in urlsplit(template).path.split("/") if seg in (".", "..")}
    if any(seg in (".", "..") and seg not in literal_dots for seg in got.path.split("/")):
        raise ServerChanged("a value made a '.' or '..' segment of the URL's path")
    return url
