"""Response shapes IMDS puts on the wire: text bodies, and its small XHTML error pages.

Real IMDS answers errors with an XHTML page titled like ``404 - Not Found`` and identifies itself
as ``Server: EC2ws``; clients that log the body or check the server header see the same here.
"""

from __future__ import annotations

from http import HTTPStatus

from aiohttp import web

SERVER_HEADER = "EC2ws"

_ERROR_PAGE = """<?xml version="1.0" encoding="iso-8859-1"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"
\t"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">
 <head>
  <title>{title}</title>
 </head>
 <body>
  <h1>{title}</h1>
 </body>
</html>
"""


def error_title(status: int) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    return f"{status} - {phrase}"


def error_body(status: int) -> str:
    return _ERROR_PAGE.format(title=error_title(status))


def imds_error(status: int, *, headers: dict[str, str] | None = None) -> web.Response:
    out = {"Server": SERVER_HEADER, **(headers or {})}
    return web.Response(status=status, text=error_body(status), content_type="text/html", headers=out)


def imds_text(body: str, *, headers: dict[str, str] | None = None) -> web.Response:
    out = {"Server": SERVER_HEADER, **(headers or {})}
    return web.Response(status=200, text=body, content_type="text/plain", headers=out)
