"""Outgoing HTTP calls made as part of handling an interruption (mute a host in monitoring, ...).

Each call is named and declared in the environment (``KUBESPOT_HTTP_CALL_<NAME>_<FIELD>``) or in the
file ``http_calls.file`` names (see ``kubespot.config.named``). Unlike notifications, a call is a
step of the timeline: it runs before the drain (``pre-drain``) or after it (``post-drain``), awaited
within its own timeout and the time left before the deadline, and its outcome is part of the summary.

The URL, header values and proxy may carry credentials (an API key in a header or a query string):
they are secrets, never printed or logged, and each can come from a file (a mounted Secret) read at
each call.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass
from typing import Literal

from kubespot.model import Kind

from .base import setting
from .loader import InvalidSetting, Problem, SettingsError, redacted, specs
from .named import NAME, check_proxy, check_url, load_named, read_setting_file
from .notify import check_headers, read_headers

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
CallStage = Literal["pre-drain", "post-drain"]
ENV_PREFIX = "KUBESPOT_HTTP_CALL_"


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class HttpCall:
    """One outgoing call: request (method, URL, headers, body templates), when, and its bounds."""

    name: str = setting(MISSING, doc="The call's name: the <NAME> of its variables, its key in the file.")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = setting(
        "POST", doc="HTTP method of the call.", env="KUBESPOT_HTTP_CALL_<NAME>_METHOD"
    )
    url: str | None = setting(
        None,
        doc=(
            "URL, a template (e.g. https://api.example.com/hosts/{{ .InstanceID }}/mute); scheme, "
            "host and port must be literal (a tag only after the first /, ? or # following the host), "
            "and the values are percent-encoded for the path or the query. Secret (a query string may "
            "carry a key). Set url or url_file."
        ),
        env="KUBESPOT_HTTP_CALL_<NAME>_URL",
        secret=True,
    )
    url_file: str | None = setting(
        None,
        doc="File holding the URL template (a mounted Secret), re-read at each call.",
        env="KUBESPOT_HTTP_CALL_<NAME>_URL_FILE",
        unit="path",
    )
    headers: tuple[tuple[str, str], ...] = setting(
        (),
        doc=(
            "Headers as a JSON object; values are templates. Secret. Without a Content-Type, "
            "application/json is sent (and printed values are JSON-escaped in the body)."
        ),
        env="KUBESPOT_HTTP_CALL_<NAME>_HEADERS",
        secret=True,
    )
    header_files: tuple[tuple[str, str], ...] = setting(
        (),
        doc=(
            "Headers whose value is read from a file at each call (header name -> path of a mounted "
            "Secret key), e.g. an API key; used as read, not as a template."
        ),
        env="KUBESPOT_HTTP_CALL_<NAME>_HEADER_FILES",
    )
    body: str | None = setting(
        None,
        doc="Body template (NTH's {{ .EventID }} variables or jinja, sandboxed). Unset: no body.",
        env="KUBESPOT_HTTP_CALL_<NAME>_BODY",
    )
    body_file: str | None = setting(
        None,
        doc="File holding the body template (a mounted ConfigMap); exclusive with body.",
        env="KUBESPOT_HTTP_CALL_<NAME>_BODY_FILE",
        unit="path",
    )
    stage: Literal["pre-drain", "post-drain"] = setting(
        "pre-drain",
        doc=(
            "When the call is made: pre-drain (after the fence, before pods are evicted, e.g. to mute "
            "the host in monitoring) or post-drain (after the drain, before the finished message)."
        ),
        env="KUBESPOT_HTTP_CALL_<NAME>_STAGE",
    )
    kinds: frozenset[Kind] = setting(
        frozenset(),
        doc="Event kinds the call is made for (spot-itn, scheduled-maintenance...). Empty: all kinds.",
        env="KUBESPOT_HTTP_CALL_<NAME>_KINDS",
    )
    timeout: float = setting(
        5.0,
        doc=(
            "Time allowed for one attempt. The call is awaited by the timeline, so this (times "
            "attempts) is what a hung endpoint can cost it, and never more than the time left before "
            "the deadline."
        ),
        env="KUBESPOT_HTTP_CALL_<NAME>_TIMEOUT",
        unit="seconds",
    )
    attempts: int = setting(
        2,
        doc=(
            "Attempts (first included) on a 5xx, 429 or transport error, with a short backoff. Two: "
            "one retry rides out a blip without holding the drain for long."
        ),
        env="KUBESPOT_HTTP_CALL_<NAME>_ATTEMPTS",
        unit="attempts",
    )
    proxy: str | None = setting(
        None,
        doc=(
            "Proxy for this call only: http://, https://, socks5:// or socks5h://; tcp:// is an HTTP "
            "proxy. Secret (it may carry credentials). Unset: direct."
        ),
        env="KUBESPOT_HTTP_CALL_<NAME>_PROXY",
        secret=True,
    )

    def __post_init__(self) -> None:
        if not NAME.fullmatch(self.name):
            raise InvalidSetting("name", "names are letters, digits and _, starting with a letter")
        if self.url is None and self.url_file is None:
            raise InvalidSetting("url", "set url or url_file")
        if self.url is not None and self.url_file is not None:
            raise InvalidSetting("url_file", "set either url or url_file, not both")
        if self.url is not None and (why := authority_problem(self.url)):
            raise InvalidSetting("url", why)
        if self.proxy is not None and (why := check_proxy(self.proxy)):
            raise InvalidSetting("proxy", why)
        check_headers(self.headers, self.header_files)
        if self.body is not None and self.body_file is not None:
            raise InvalidSetting("body_file", "set either body or body_file, not both")
        if self.timeout <= 0:
            raise InvalidSetting("timeout", "must be positive")
        if self.attempts < 1:
            raise InvalidSetting("attempts", "must be at least 1")

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in redacted(self).items())
        return f"HttpCall({body})"

    @property
    def path(self) -> str:
        """The settings path problems are reported under."""
        return f"http_calls.{self.name}"

    @property
    def action(self) -> str:
        """The name of the action in metrics, logs and summaries."""
        return f"http:{self.name}"

    def wants(self, kind: Kind, stage: CallStage) -> bool:
        """Whether the call is made for an event of ``kind`` at ``stage``."""
        return stage == self.stage and (not self.kinds or kind in self.kinds)

    def read_url(self) -> str:
        """The URL template, from ``url`` or (read now) ``url_file``; ``SettingsError`` if unusable."""
        if self.url is not None:
            return self.url
        assert self.url_file is not None  # __post_init__: one of the two
        url = read_setting_file(f"{self.path}.url_file", self.url_file).strip()
        if why := authority_problem(url):
            raise SettingsError([Problem(f"{self.path}.url_file", f"file {self.url_file}", None, why)])
        return url

    def read_headers(self) -> list[tuple[str, str]]:
        """``headers`` (templates) plus ``header_files`` (read now), Content-Type JSON unless set."""
        return read_headers(self.path, self.headers, self.header_files)

    def read_body(self) -> tuple[str, str] | None:
        """The body template and the field it came from (``body``/``body_file``), or None."""
        if self.body_file is not None:
            return read_setting_file(f"{self.path}.body_file", self.body_file), "body_file"
        return None if self.body is None else (self.body, "body")


#: Where a template tag (Go or jinja: value, block or comment) starts.
_TAG_START = re.compile(r"\{[{%#]")


def authority_problem(url: str) -> str | None:
    """Why the URL template ``url`` could send the call to another server than it names, or None.

    Scheme, userinfo, host and port must be literal: every template tag must come after the end of
    the authority, the first ``/``, ``?`` or ``#`` after ``://``. A value in ``https://api.test{{ x }}``
    (``.evil.test``), ``https://api.test:{{ x }}`` or ``https://{{ x }}@api.test`` could redirect the
    call, its headers and their credentials to a host of the sender's choosing.
    """
    tag = _TAG_START.search(url)
    if tag is None:
        return check_url(url)
    literal = url[: tag.start()]
    if why := check_url(literal if literal.endswith("/") else literal + "/"):
        return why + " (scheme and host literal, not templated)"
    authority_end = re.search(r"[/?#]", literal.split("://", 1)[1])
    if authority_end is None:
        return (
            "scheme, host and port must be literal: a template may only follow the first '/', '?' "
            "or '#' after the host"
        )
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpCallSettings:
    """Outgoing HTTP calls made while handling an interruption: where they are declared."""

    file: str | None = setting(
        None,
        doc=(
            "YAML or JSON file mapping call names to their fields (method, url, header_files, body, "
            "stage...), typically a mounted ConfigMap; KUBESPOT_HTTP_CALL_<NAME>_<FIELD> variables "
            "override it field by field. Unset: calls come from the environment only."
        ),
        env="KUBESPOT_HTTP_CALLS_FILE",
        unit="path",
    )


def http_calls(settings: HttpCallSettings, *, env: Mapping[str, str] | None = None) -> tuple[HttpCall, ...]:
    """Every configured call, by name, from ``KUBESPOT_HTTP_CALL_<NAME>_<FIELD>`` and ``settings.file``.

    Raises ``SettingsError`` naming each bad setting. Templates are checked by
    ``kubespot.actions.http_call.check_calls``.
    """
    return load_named(
        HttpCall,
        group="http_calls",
        env_prefix=ENV_PREFIX,
        env=os.environ if env is None else env,
        file=settings.file,
        reserved_env={s.env for s in specs(HttpCallSettings)},
    )
