"""Where interruption notifications go: any number of named targets, plus the NTH-style webhook.

A target is an HTTP endpoint with a message format (Slack, Microsoft Teams, Amazon Chime, a
structured JSON object, or the user's own template), the stages it hears about (started, finished,
failed) and the event kinds it cares about. Targets are named, and declared in the environment
(``KUBESPOT_NOTIFY_<NAME>_<FIELD>``) or in the file ``notify.targets_file`` names (see
``kubespot.config.named``); the ``WEBHOOK_*`` settings (``webhook`` group) stay what they are and
become one more target, ``webhook``, so an NTH env block keeps working unchanged.

URLs, header values and proxy URLs are secrets: never printed or logged. A URL or header value can
be read from a file (a mounted Secret), re-read at each send so a rotated Secret applies at once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import MISSING, dataclass
from typing import Literal

from kubespot.model import Kind
from kubespot.model.summary import Stage

from .base import setting
from .loader import InvalidSetting, Problem, SettingsError, redacted, specs
from .named import NAME, check_proxy, check_url, load_named, read_setting_file
from .webhook import DEFAULT_TEMPLATE, FORMATS, Format, WebhookSettings

__all__ = ["FORMATS", "Format", "NotifySettings", "NotifyTarget", "notify_targets", "webhook_target"]
#: The target the ``webhook`` group becomes; no named target may take its name.
WEBHOOK_TARGET = "webhook"
ENV_PREFIX = "KUBESPOT_NOTIFY_"

TemplateKey = tuple[Kind | None, Stage | None]


def parse_template_key(key: str) -> TemplateKey:
    """``"finished"``, ``"spot-itn"`` or ``"spot-itn/finished"`` as (kind, stage); ValueError if neither.

    Kinds are kubespot's values (``spot-itn``, ``rebalance-recommendation``...) or enum names
    (``SPOT_INTERRUPTION``), in any case.
    """
    kind: Kind | None = None
    stage: Stage | None = None
    parts = [p.strip().lower() for p in key.split("/")]
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise ValueError(f"template key {key!r}: expected <stage>, <kind> or <kind>/<stage>")
    for part in parts:
        if part in {s.value for s in Stage} and stage is None:
            stage = Stage(part)
            continue
        found = next((k for k in Kind if part in (k.value, k.name.lower())), None)
        if found is None or kind is not None:
            stages = ", ".join(s.value for s in Stage)
            kinds = ", ".join(k.value for k in Kind)
            raise ValueError(f"template key {key!r}: {part!r} is no stage ({stages}) or kind ({kinds})")
        kind = found
    if len(parts) == 2 and (kind is None or stage is None):
        raise ValueError(f"template key {key!r}: a two-part key is <kind>/<stage>")
    return kind, stage


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class NotifyTarget:
    """One notification endpoint: where, in which format, for which stages and kinds."""

    name: str = setting(MISSING, doc="The target's name: the <NAME> of its variables, its key in the file.")
    format: Literal["template", "slack", "teams", "chime", "json"] = setting(
        "json",
        doc=(
            "Message format: slack (Block Kit), teams (an Adaptive Card, as Teams Workflows webhooks "
            'take), chime ({"Content": ...}), json (a structured object for automation) or template '
            "(the body is template/template_file, required then). A template given with another "
            "format replaces the built-in message."
        ),
        env="KUBESPOT_NOTIFY_<NAME>_FORMAT",
    )
    url: str | None = setting(
        None,
        doc=(
            "HTTP(S) endpoint that receives one POST per message. Secret (a Slack or Teams webhook URL "
            "is the credential): prefer url_file, or an env var from a Secret. Set url or url_file."
        ),
        env="KUBESPOT_NOTIFY_<NAME>_URL",
        secret=True,
    )
    url_file: str | None = setting(
        None,
        doc="File holding the URL (a mounted Secret); re-read at each send, so rotation needs no restart.",
        env="KUBESPOT_NOTIFY_<NAME>_URL_FILE",
        unit="path",
    )
    headers: tuple[tuple[str, str], ...] = setting(
        (),
        doc=(
            "HTTP headers sent with each POST, as a JSON object. Secret (it may carry an Authorization "
            "header). Without a Content-Type, application/json is sent."
        ),
        env="KUBESPOT_NOTIFY_<NAME>_HEADERS",
        secret=True,
    )
    header_files: tuple[tuple[str, str], ...] = setting(
        (),
        doc=(
            "Headers whose value is read from a file at each send (header name -> path of a mounted "
            "Secret key), so a token appears in no pod spec or environment."
        ),
        env="KUBESPOT_NOTIFY_<NAME>_HEADER_FILES",
    )
    stages: frozenset[Stage] = setting(
        frozenset(Stage),
        doc=(
            "Stages that send a message: started (the node is fenced, the drain begins), finished "
            "(handled, with a summary of the drain and the actions), failed (with the error)."
        ),
        env="KUBESPOT_NOTIFY_<NAME>_STAGES",
    )
    kinds: frozenset[Kind] = setting(
        frozenset(),
        doc="Event kinds that send a message (spot-itn, rebalance-recommendation...). Empty: all kinds.",
        env="KUBESPOT_NOTIFY_<NAME>_KINDS",
    )
    template: str | None = setting(
        None,
        doc=(
            "Body template (NTH's {{ .EventID }} variables or jinja, in a sandbox), for every stage and "
            "kind that templates does not cover. Replaces the built-in message of format."
        ),
        env="KUBESPOT_NOTIFY_<NAME>_TEMPLATE",
    )
    template_file: str | None = setting(
        None,
        doc="File holding template (a mounted ConfigMap); exclusive with template.",
        env="KUBESPOT_NOTIFY_<NAME>_TEMPLATE_FILE",
        unit="path",
    )
    templates: tuple[tuple[str, str], ...] = setting(
        (),
        doc=(
            "Templates per stage and/or kind, as a JSON object keyed by <stage>, <kind> or "
            "<kind>/<stage> (e.g. finished, spot-itn/failed). The most specific key wins: "
            "<kind>/<stage>, then <stage>, then <kind>, then template, then the built-in message."
        ),
        env="KUBESPOT_NOTIFY_<NAME>_TEMPLATES",
    )
    template_files: tuple[tuple[str, str], ...] = setting(
        (),
        doc="As templates, each value being the path of a file holding the template.",
        env="KUBESPOT_NOTIFY_<NAME>_TEMPLATE_FILES",
    )
    proxy: str | None = setting(
        None,
        doc=(
            "Proxy for this target only: http://, https://, socks5:// or socks5h://; tcp:// (NTH's "
            "example) is an HTTP proxy. Secret (it may carry credentials). Unset: direct."
        ),
        env="KUBESPOT_NOTIFY_<NAME>_PROXY",
        secret=True,
    )
    timeout: float = setting(
        5.0,
        doc=(
            "Time allowed for one POST. Messages are sent in the background, so a slow endpoint costs "
            "this per attempt to its own queue, never to the drain or to another target."
        ),
        env="KUBESPOT_NOTIFY_<NAME>_TIMEOUT",
        unit="seconds",
    )
    attempts: int = setting(
        3,
        doc="POSTs tried per message (first included) on a 5xx, 429 or transport error, with backoff.",
        env="KUBESPOT_NOTIFY_<NAME>_ATTEMPTS",
        unit="attempts",
    )

    def __post_init__(self) -> None:
        if not NAME.fullmatch(self.name):
            raise InvalidSetting("name", "names are letters, digits and _, starting with a letter")
        if self.format not in FORMATS:
            raise InvalidSetting("format", "expected one of " + ", ".join(FORMATS))
        if self.url is None and self.url_file is None:
            raise InvalidSetting("url", "set url or url_file")
        if self.url is not None and self.url_file is not None:
            raise InvalidSetting("url_file", "set either url or url_file, not both")
        if self.url is not None and (why := check_url(self.url)):
            raise InvalidSetting("url", why)
        if self.proxy is not None and (why := check_proxy(self.proxy)):
            raise InvalidSetting("proxy", why)
        check_headers(self.headers, self.header_files)
        if self.timeout <= 0:
            raise InvalidSetting("timeout", "must be positive")
        if self.attempts < 1:
            raise InvalidSetting("attempts", "must be at least 1")
        if not self.stages:
            raise InvalidSetting("stages", "name at least one stage: " + ", ".join(s.value for s in Stage))
        if self.template is not None and self.template_file is not None:
            raise InvalidSetting("template_file", "set either template or template_file, not both")
        if self.format == "template" and self.template is None and self.template_file is None:
            raise InvalidSetting("template", "format template needs template or template_file")
        keys: dict[TemplateKey, str] = {}
        for field, pairs in (("templates", self.templates), ("template_files", self.template_files)):
            for key, _ in pairs:
                try:
                    parsed = parse_template_key(key)
                except ValueError as exc:
                    raise InvalidSetting(field, str(exc)) from None
                if parsed in keys:
                    raise InvalidSetting(field, f"template key {key!r} is also given as {keys[parsed]!r}")
                keys[parsed] = key

    def __repr__(self) -> str:
        # Targets end up in logs and tracebacks; their secrets must not.
        body = ", ".join(f"{k}={v!r}" for k, v in redacted(self).items())
        return f"NotifyTarget({body})"

    @property
    def path(self) -> str:
        """The settings path problems are reported under (``webhook`` or ``notify.<name>``)."""
        return WEBHOOK_TARGET if self.name == WEBHOOK_TARGET else f"notify.{self.name}"

    def wants(self, kind: Kind, stage: Stage) -> bool:
        """Whether a message about an event of ``kind`` at ``stage`` goes to this target."""
        return stage in self.stages and (not self.kinds or kind in self.kinds)

    def read_url(self) -> str:
        """The URL, from ``url`` or (read now, so rotation applies) ``url_file``; ``SettingsError``."""
        if self.url is not None:
            return self.url
        assert self.url_file is not None  # __post_init__: one of the two
        url = read_setting_file(f"{self.path}.url_file", self.url_file).strip()
        if check_url(url):
            # The content is a secret: say what is wrong, not what it is.
            raise SettingsError(
                [
                    Problem(
                        f"{self.path}.url_file", f"file {self.url_file}", None, "does not hold an http(s) URL"
                    )
                ]
            )
        return url

    def read_headers(self) -> list[tuple[str, str]]:
        """``headers`` plus ``header_files`` (read now), with a JSON Content-Type when none is set.

        The webhook with its template is the exception: it sends exactly the headers configured, as
        the reference handler does (and without a JSON Content-Type its values are not JSON-escaped).
        """
        nth_style = self.name == WEBHOOK_TARGET and self.format == "template"
        return read_headers(self.path, self.headers, self.header_files, default_json=not nth_style)

    def read_templates(self) -> dict[TemplateKey, tuple[str, str]]:
        """Every template (files read now), keyed by (kind, stage), ``(None, None)`` for the default.

        Values are ``(text, field)``, the field being where it came from within the target
        (``template``, ``template_file``, ``templates[finished]``...). Raises ``SettingsError`` for a
        file that cannot be read.
        """
        out: dict[TemplateKey, tuple[str, str]] = {}
        if self.template is not None:
            out[(None, None)] = (self.template, "template")
        if self.template_file is not None:
            text = read_setting_file(f"{self.path}.template_file", self.template_file)
            out[(None, None)] = (text, "template_file")
        for key, text in self.templates:
            out[parse_template_key(key)] = (text, f"templates[{key}]")
        for key, file in self.template_files:
            text = read_setting_file(f"{self.path}.template_files[{key}]", file)
            out[parse_template_key(key)] = (text, f"template_files[{key}]")
        return out


def check_headers(headers: tuple[tuple[str, str], ...], header_files: tuple[tuple[str, str], ...]) -> None:
    """Refuse empty header names or paths, and a header set both inline and from a file."""
    if any(not name.strip() for name, _ in headers):
        raise InvalidSetting("headers", "header names must not be empty")
    if any(not name.strip() or not path.strip() for name, path in header_files):
        raise InvalidSetting("header_files", "header names and paths must not be empty")
    both = {n.lower() for n, _ in headers} & {n.lower() for n, _ in header_files}
    if both:
        raise InvalidSetting("header_files", f"header {sorted(both)[0]!r} is also set in headers")


def read_headers(
    path: str,
    headers: tuple[tuple[str, str], ...],
    header_files: tuple[tuple[str, str], ...],
    *,
    default_json: bool = True,
) -> list[tuple[str, str]]:
    """Static headers plus file-backed ones (read now), with a JSON Content-Type when none is set.

    Raises ``SettingsError`` naming ``<path>.header_files`` and the file, never the content.
    """
    out = list(headers)
    for name, file in header_files:
        # A Secret's key usually ends with a newline; a header value may not.
        out.append((name, read_setting_file(f"{path}.header_files", file).strip()))
    if default_json and not any(name.strip().lower() == "content-type" for name, _ in out):
        out.append(("Content-Type", "application/json"))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifySettings:
    """Notification targets beyond the webhook: where they are declared, how much each may queue."""

    targets_file: str | None = setting(
        None,
        doc=(
            "YAML or JSON file mapping target names to their fields (format, url_file, stages...), "
            "typically a mounted ConfigMap; KUBESPOT_NOTIFY_<NAME>_<FIELD> variables override it field "
            "by field. Unset: targets come from the environment only."
        ),
        env="KUBESPOT_NOTIFY_TARGETS_FILE",
        unit="path",
    )
    queue_size: int = setting(
        256,
        doc=(
            "Messages each target may hold waiting to be sent. When full the oldest is dropped (and "
            "counted): the newest notice matters most, and memory stays bounded whatever an endpoint "
            "does."
        ),
        env="KUBESPOT_NOTIFY_QUEUE_SIZE",
        unit="messages",
    )

    def __post_init__(self) -> None:
        if self.queue_size < 1:
            raise InvalidSetting("queue_size", "must be at least 1")


def webhook_target(webhook: WebhookSettings) -> NotifyTarget:
    """The ``webhook`` group as a target (requires ``webhook.enabled``).

    With format ``template`` (the default) the body is the webhook template, NTH's message unless
    changed. With another format the built-in message is sent, unless the template was changed from
    NTH's default or a template file is given: then it replaces the built-in one.
    """
    custom = webhook.template_file is not None or webhook.template != DEFAULT_TEMPLATE
    use_template = webhook.format == "template" or custom
    return NotifyTarget(
        name=WEBHOOK_TARGET,
        format=webhook.format,
        url=webhook.url,
        url_file=webhook.url_file,
        headers=webhook.headers,
        template=webhook.template if use_template and webhook.template_file is None else None,
        template_file=webhook.template_file,
        proxy=webhook.proxy,
        timeout=webhook.timeout,
        attempts=webhook.attempts,
        stages=webhook.stages,
        kinds=webhook.kinds,
    )


def notify_targets(
    settings: NotifySettings, webhook: WebhookSettings, *, env: Mapping[str, str] | None = None
) -> tuple[NotifyTarget, ...]:
    """Every notification target: the webhook's (when set), then the named ones by name.

    Reads ``KUBESPOT_NOTIFY_<NAME>_<FIELD>`` from ``env`` (default: the process environment) and
    ``settings.targets_file``. Raises ``SettingsError`` naming each bad setting. Templates are checked
    by ``kubespot.actions.notify.check_targets`` (compiling them needs the template engine).
    """
    legacy = (webhook_target(webhook),) if webhook.enabled else ()
    named = load_named(
        NotifyTarget,
        group="notify",
        env_prefix=ENV_PREFIX,
        env=os.environ if env is None else env,
        file=settings.targets_file,
        reserved_env={s.env for s in specs(NotifySettings)},
        reserved_names={WEBHOOK_TARGET: "the name webhook belongs to the WEBHOOK_* settings; pick another"},
    )
    return (*legacy, *named)
