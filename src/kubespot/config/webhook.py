"""Where the agent posts a message for each interruption (Slack, Teams, any HTTP endpoint).

Read by ``kubespot.actions.notify`` (as the notification target ``webhook``, next to any named
targets of ``kubespot.config.notify``); the loader composes this group with the others. Names and
defaults follow aws-node-termination-handler, whose names are accepted as aliases: with only
``WEBHOOK_URL`` set, one message per interruption, NTH's, when the node is fenced. The URL usually
carries a token (a Slack webhook URL *is* the credential), so it is a secret: never printed, logged or
taken from a flag, and it can be read from a file mounted from a Kubernetes Secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kubespot.model import Kind
from kubespot.model.summary import Stage

from .base import setting
from .loader import InvalidSetting, Problem, SettingsError, redacted
from .named import check_proxy

#: Message formats: the user's template, or a built-in message (kubespot.actions.templates).
Format = Literal["template", "slack", "teams", "chime", "json"]
FORMATS: tuple[Format, ...] = ("template", "slack", "teams", "chime", "json")

#: The reference handler's default message, so existing Slack channels see the same text.
DEFAULT_TEMPLATE = (
    '{"text":"[NTH][Instance Interruption] EventID: {{ .EventID }} - Kind: {{ .Kind }} - '
    "Instance: {{ .InstanceID }} - Node: {{ .NodeName }} - Description: {{ .Description }} - "
    'Start Time: {{ .StartTime }}"}'
)


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class WebhookSettings:
    """The notification webhook: endpoint, headers, message template, proxy."""

    url: str | None = setting(
        None,
        doc=(
            "HTTP(S) endpoint that receives one POST per interruption. Secret: never printed or "
            "logged, and no flag (a command line is readable by every process on the node); prefer "
            "url_file or an env var from a Secret. Unset: no webhook."
        ),
        env="KUBESPOT_WEBHOOK_URL",
        nth="WEBHOOK_URL",
        secret=True,
    )
    url_file: str | None = setting(
        None,
        doc=(
            "File holding the webhook URL (surrounding whitespace ignored), typically a Secret "
            "mounted as a volume, so the URL appears in no pod spec or environment. Read at each "
            "send, so a rotated Secret takes effect without a restart. Exclusive with url."
        ),
        env="KUBESPOT_WEBHOOK_URL_FILE",
        unit="path",
    )
    headers: tuple[tuple[str, str], ...] = setting(
        (("Content-type", "application/json"),),
        doc=(
            'HTTP headers sent with each POST, as a JSON object. Default {"Content-type": '
            '"application/json"}, as in the reference handler. Secret, since it may carry an '
            "Authorization header: printed with its values redacted."
        ),
        env="KUBESPOT_WEBHOOK_HEADERS",
        nth="WEBHOOK_HEADERS",
        secret=True,
    )
    template: str = setting(
        DEFAULT_TEMPLATE,
        doc=(
            "Body of the POST, with the reference handler's variables ({{ .EventID }}, {{ .Kind }}, "
            "{{ .InstanceID }}, {{ .NodeName }}, {{ .Description }}, {{ .StartTime }}) filled in. "
            "The default is the reference handler's Slack-style message."
        ),
        env="KUBESPOT_WEBHOOK_TEMPLATE",
        nth="WEBHOOK_TEMPLATE",
    )
    template_file: str | None = setting(
        None,
        doc="File holding the template (e.g. a mounted ConfigMap); when set it replaces template.",
        env="KUBESPOT_WEBHOOK_TEMPLATE_FILE",
        nth="WEBHOOK_TEMPLATE_FILE",
        unit="path",
    )
    proxy: str | None = setting(
        None,
        doc=(
            "Proxy for webhook requests only (e.g. http://proxy.internal:3128): http://, https://, "
            "socks5:// or socks5h://; tcp://host:port (NTH's own example) is an HTTP proxy, as Go's "
            "HTTP client treats it. Secret, since a proxy URL may carry credentials "
            "(http://user:password@host). Unset: direct."
        ),
        env="KUBESPOT_WEBHOOK_PROXY",
        nth="WEBHOOK_PROXY",
        secret=True,
    )
    timeout: float = setting(
        5.0,
        doc=(
            "Time allowed for one POST. Webhooks are sent in the background and never delay the "
            "drain; 5 s is generous for a chat service and keeps a dead endpoint from piling up "
            "retries."
        ),
        env="KUBESPOT_WEBHOOK_TIMEOUT",
        unit="seconds",
    )
    attempts: int = setting(
        3,
        doc="POSTs tried per message (first included) on a 5xx, 429 or transport error, with backoff.",
        env="KUBESPOT_WEBHOOK_ATTEMPTS",
        unit="attempts",
    )

    format: Literal["template", "slack", "teams", "chime", "json"] = setting(
        "template",
        doc=(
            "Message format: template (the body is template/template_file, NTH's message by default), "
            "or a built-in message: slack (Block Kit), teams (Adaptive Card, for Teams Workflows "
            "webhooks), chime, json (a structured object). With a built-in format a template changed "
            "from NTH's default (or a template_file) still replaces the built-in message."
        ),
        env="KUBESPOT_WEBHOOK_FORMAT",
    )
    stages: frozenset[Stage] = setting(
        frozenset({Stage.STARTED}),
        doc=(
            "Stages that send a message: started (node fenced, drain beginning), finished (handled, "
            "with a summary), failed (with the error). Default started only: one message per "
            "interruption, as the reference handler sends."
        ),
        env="KUBESPOT_WEBHOOK_STAGES",
    )
    kinds: frozenset[Kind] = setting(
        frozenset(),
        doc="Event kinds that send a message (spot-itn, rebalance-recommendation...). Empty: all kinds.",
        env="KUBESPOT_WEBHOOK_KINDS",
    )

    def __post_init__(self) -> None:
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise InvalidSetting("url", "must be an http:// or https:// URL")
        if self.url is not None and self.url_file is not None:
            raise InvalidSetting("url_file", "set either webhook.url or webhook.url_file, not both")
        if self.proxy is not None and (why := check_proxy(self.proxy)):
            raise InvalidSetting("proxy", why)
        if any(not name.strip() for name, _ in self.headers):
            raise InvalidSetting("headers", "header names must not be empty")
        if self.timeout <= 0:
            raise InvalidSetting("timeout", "must be positive")
        if self.attempts < 1:
            raise InvalidSetting("attempts", "must be at least 1")
        if self.format not in FORMATS:
            raise InvalidSetting("format", "expected one of " + ", ".join(FORMATS))
        if not self.stages:
            raise InvalidSetting("stages", "name at least one stage: " + ", ".join(s.value for s in Stage))

    def __repr__(self) -> str:
        # A settings object ends up in logs and tracebacks; its secrets must not.
        body = ", ".join(f"{k}={v!r}" for k, v in redacted(self).items())
        return f"WebhookSettings({body})"

    @property
    def enabled(self) -> bool:
        """Whether a webhook is configured at all."""
        return self.url is not None or self.url_file is not None

    def read_url(self) -> str | None:
        """The URL, from ``url`` or (read now, so rotation applies) ``url_file``; None when unset."""
        if self.url_file is None:
            return self.url
        url = _read("url_file", self.url_file).strip()
        if not url.startswith(("http://", "https://")):
            # The content is a secret: say what is wrong, not what it is.
            raise SettingsError(
                [Problem("webhook.url_file", f"file {self.url_file}", None, "does not hold an http(s) URL")]
            )
        return url

    def read_template(self) -> str:
        """The template, from ``template_file`` when set, else ``template``."""
        return self.template if self.template_file is None else _read("template_file", self.template_file)


def _read(field: str, path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        reason = f"cannot read: {exc.strerror or exc}"
        raise SettingsError([Problem(f"webhook.{field}", f"file {path}", None, reason)]) from None
