"""Start-up of the outgoing HTTP: every notification target and HTTP call, read and checked at once.

Both commands call ``load_outgoing`` before anything runs, so a bad target, call or template stops
the process with exit code 2 and one message naming every setting at fault.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubespot.config.http_calls import HttpCall, HttpCallSettings, http_calls
from kubespot.config.loader import Problem, SettingsError
from kubespot.config.notify import NotifySettings, NotifyTarget, notify_targets
from kubespot.config.webhook import WebhookSettings

from .notify import check_targets


def load_outgoing(
    notify: NotifySettings, webhook: WebhookSettings, calls: HttpCallSettings
) -> tuple[tuple[NotifyTarget, ...], tuple[HttpCall, ...]]:
    """The notification targets (the webhook's first) and the HTTP calls, with their templates
    compiled; ``SettingsError`` listing every problem of both."""
    problems: list[Problem] = []
    targets: tuple[NotifyTarget, ...] = ()
    found: tuple[HttpCall, ...] = ()
    try:
        targets = notify_targets(notify, webhook)
        check_targets(targets)
    except SettingsError as exc:
        problems += exc.problems
    try:
        found = http_calls(calls)
        if found:
            # Only then: the agent runs on every node, and most have no calls to make.
            from .http_call import check_calls

            check_calls(found)
    except SettingsError as exc:
        problems += exc.problems
    if problems:
        raise SettingsError(problems)
    return targets, found


def given_or_configured(
    targets: Sequence[NotifyTarget] | None,
    calls: Sequence[HttpCall] | None,
    *,
    notify: NotifySettings,
    webhook: WebhookSettings,
    http: HttpCallSettings,
) -> tuple[tuple[NotifyTarget, ...], tuple[HttpCall, ...]]:
    """The targets and calls the command read and checked at start-up, or (None: a process built
    directly, e.g. by a test or the sandbox) those of the settings and the environment now."""
    return (
        tuple(targets) if targets is not None else notify_targets(notify, webhook),
        tuple(calls) if calls is not None else http_calls(http),
    )


def describe_outgoing(targets: tuple[NotifyTarget, ...], calls: tuple[HttpCall, ...]) -> str:
    """One log-safe line: targets and calls by name, stage and format (never a URL or header)."""
    parts = [f"notify {t.name} ({t.format}: {','.join(sorted(s.value for s in t.stages))})" for t in targets]
    parts += [f"http call {c.name} ({c.method}, {c.stage})" for c in calls]
    return "; ".join(parts) or "none"
