"""The liveness verdict: named checks, their combination, and its JSON body for the probe.

Pure data and arithmetic; the caller decides what to check (typically the freshness of the last
successful IMDS and Kubernetes API answers, see ``ObservabilitySettings.probes_stale_after``) and
passes ``now``, so the verdict is testable without a clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import orjson

__all__ = ["Check", "HealthReport", "freshness", "report", "silence"]


@dataclass(frozen=True, slots=True)
class Check:
    """One named condition and whether it holds."""

    name: str
    ok: bool
    detail: str
    last_success: datetime | None

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "ok": self.ok,
            "detail": self.detail,
            "last_success": None if self.last_success is None else _utc(self.last_success).isoformat(),
        }


@dataclass(frozen=True, slots=True)
class HealthReport:
    """The checks, and ``ok`` when every one of them holds."""

    ok: bool
    checks: tuple[Check, ...]

    def to_json(self) -> bytes:
        """``{"ok": bool, "checks": [{"name", "ok", "detail", "last_success"}, ...]}``."""
        return orjson.dumps(
            {"ok": self.ok, "checks": [check.to_dict() for check in self.checks]},
            default=str,
        )


def _utc(when: datetime) -> datetime:
    # Naive datetimes are taken as UTC (what the rest of the agent uses), so mixing the two in
    # a subtraction cannot raise inside a probe.
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def freshness(
    name: str,
    last_success: datetime | None,
    *,
    now: datetime,
    max_age: timedelta,
    detail: str = "",
) -> Check:
    """ok iff ``last_success`` is at most ``max_age`` before ``now`` (a timestamp ahead of ``now``,
    from a clock step, counts as fresh). ``detail`` defaults to a description of the age."""
    if last_success is None:
        return Check(name, False, detail or "no success yet", None)
    age = (_utc(now) - _utc(last_success)).total_seconds()
    ok = age <= max_age.total_seconds()
    if not detail:
        limit = max_age.total_seconds()
        detail = f"last success {age:.1f}s ago" + ("" if ok else f", more than {limit:g}s")
    return Check(name, ok, detail, last_success)


def silence(name: str, silences: Iterable[tuple[str, float]], *, now: datetime, limit: float) -> Check:
    """ok iff none of the ``(what, seconds silent)`` streams (e.g. watches) has been silent for more
    than ``limit`` seconds; the detail names those that have. ok with no streams at all."""
    quiet = sorted(silences, key=lambda item: -item[1])
    if not quiet:
        return Check(name, True, "none running", _utc(now))
    stuck = [f"{what} silent for {age:.1f}s" for what, age in quiet if age > limit]
    last = _utc(now) - timedelta(seconds=quiet[0][1])
    if stuck:
        return Check(name, False, f"{', '.join(stuck)} (more than {limit:g}s)", last)
    return Check(name, True, f"{len(quiet)} running, the quietest silent for {quiet[0][1]:.1f}s", last)


def report(*checks: Check) -> HealthReport:
    """Combine ``checks``: ok iff all are ok (and so ok with no checks at all)."""
    return HealthReport(all(check.ok for check in checks), tuple(checks))
