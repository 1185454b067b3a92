"""Fault injection for kubesim: errors, latency, dropped or silent watches and an API QPS limit.

Rules match on verb, resource (``pods``, ``pods/eviction``, ``nodes``…), a path regex and a regex
on the decoded query string (``spec.nodeName=node-a`` picks one node's list); each matching request
may be delayed, failed with a status code, or (for watches) cut or silenced after a time.

A silenced watch is what a half-open connection looks like to a client: the watch was answered
(200 and its headers) and may have carried events, then no byte comes and the connection is never
closed (no FIN, no RST), whatever ``timeoutSeconds`` asked for, as after a control-plane upgrade or
a NAT entry reset (client-go#374, kubernetes#65012). Only the client's own idle bound ends it.
Rules are set from the CLI (``--fault``), from tests (``sim.faults.add(...)``) and at runtime over
HTTP (``/kubesim/v1/faults``).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import ApiError, throttled

VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"})

_MESSAGES = {
    500: "Internal error occurred: kubesim injected fault",
    503: "The server is currently unable to handle the request",
    409: "Operation cannot be fulfilled: kubesim injected conflict",
    504: (
        "The server was unable to return a response in the time allotted, but may still be processing the "
        "request"
    ),
}


@dataclass
class FaultRule:
    """One rule; empty match fields match everything."""

    verb: str | None = None
    resource: str | None = None
    path: str | None = None
    #: Regex searched in the decoded query string (e.g. ``spec.nodeName=node-a``).
    query: str | None = None
    #: Fraction of matching requests that fail, 0..1.
    error_rate: float = 0.0
    #: HTTP status of injected failures (429, 500, 503, 409, 504…).
    error_code: int = 500
    #: Added latency before the request is served, milliseconds.
    latency_ms: float = 0.0
    #: Watches matching this rule are cut after this many seconds.
    drop_watch_after_s: float | None = None
    #: Watches matching this rule go silent after this many seconds (0: at once, after the headers):
    #: their events are swallowed and the connection is held open until the client closes it.
    stall_watch_after_s: float | None = None
    #: The rule expires after this many matches (None: never).
    remaining: int | None = None
    id: int = 0
    _path_re: re.Pattern[str] | None = field(default=None, repr=False, compare=False)
    _query_re: re.Pattern[str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.verb is not None and self.verb not in VERBS:
            raise ValueError(f"unknown verb {self.verb!r}; expected one of {sorted(VERBS)}")
        if not 0.0 <= self.error_rate <= 1.0:
            raise ValueError("error_rate must be between 0 and 1")
        if not 100 <= int(self.error_code) <= 599:
            raise ValueError("error_code must be an HTTP status code")
        try:
            self._path_re = re.compile(self.path) if self.path else None
        except re.error as exc:
            raise ValueError(f"bad path regex {self.path!r}: {exc}") from None
        try:
            self._query_re = re.compile(self.query) if self.query else None
        except re.error as exc:
            raise ValueError(f"bad query regex {self.query!r}: {exc}") from None

    def matches(self, verb: str, resource: str, path: str, query: str = "") -> bool:
        if self.verb is not None and self.verb != verb:
            return False
        if (
            self.resource is not None
            and self.resource != resource
            and self.resource != resource.split("/")[0]
        ):
            return False
        if self._query_re is not None and self._query_re.search(query) is None:
            return False
        return self._path_re is None or self._path_re.search(path) is not None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("_path_re", None)
        d.pop("_query_re", None)
        return d


_KEYS = {
    "verb": ("verb", str),
    "resource": ("resource", str),
    "path": ("path", str),
    "query": ("query", str),
    "rate": ("error_rate", float),
    "error_rate": ("error_rate", float),
    "code": ("error_code", int),
    "error_code": ("error_code", int),
    "latency": ("latency_ms", float),
    "latency_ms": ("latency_ms", float),
    "drop_watch_after": ("drop_watch_after_s", float),
    "drop_watch_after_s": ("drop_watch_after_s", float),
    "stall_watch_after": ("stall_watch_after_s", float),
    "stall_watch_after_s": ("stall_watch_after_s", float),
    "count": ("remaining", int),
    "remaining": ("remaining", int),
}


def parse_rule(text: str) -> FaultRule:
    """Parse ``verb=patch,resource=nodes,rate=0.2,code=409,latency=50`` (the CLI form)."""
    kwargs: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in _KEYS:
            raise ValueError(f"bad fault term {part!r}; known keys: {', '.join(sorted(_KEYS))}")
        name, conv = _KEYS[key.strip()]
        value = value.strip().removesuffix("ms").removesuffix("s") if conv is float else value.strip()
        try:
            kwargs[name] = conv(value)
        except ValueError:
            raise ValueError(f"bad value for {key!r}: {value!r}") from None
    return FaultRule(**kwargs)


def rule_from_dict(data: Any) -> FaultRule:
    if not isinstance(data, dict):
        raise ValueError("a fault rule must be a JSON object")
    allowed = {f for f in FaultRule.__dataclass_fields__ if not f.startswith("_") and f != "id"}
    unknown = set(data) - allowed - {"id"}
    if unknown:
        raise ValueError(f"unknown fault rule fields: {sorted(unknown)}")
    return FaultRule(**{k: v for k, v in data.items() if k in allowed})


class TokenBucket:
    """Client-visible API rate limit, like API Priority and Fairness rejecting with 429 (``throttled``)."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._clock = clock
        self._last = clock()

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class Faults:
    """The active fault rules and the QPS limit."""

    def __init__(self, *, seed: int | None = None) -> None:
        self.rules: list[FaultRule] = []
        self.limit: TokenBucket | None = None
        self.injected = 0
        self._rng = random.Random(seed)
        self._ids = itertools.count(1)

    def add(self, rule: FaultRule | str | None = None, **kwargs: Any) -> FaultRule:
        if isinstance(rule, str):
            rule = parse_rule(rule)
        rule = rule or FaultRule(**kwargs)
        rule.id = next(self._ids)
        self.rules.append(rule)
        return rule

    def remove(self, rule_id: int) -> bool:
        before = len(self.rules)
        self.rules = [r for r in self.rules if r.id != rule_id]
        return len(self.rules) != before

    def clear(self) -> None:
        self.rules.clear()
        self.limit = None

    def set_qps(self, qps: float | None, burst: int | None = None) -> None:
        self.limit = None if not qps else TokenBucket(qps, burst or int(qps * 2))

    def to_dict(self) -> dict[str, Any]:
        return {
            "rules": [r.to_dict() for r in self.rules],
            "qps": self.limit.qps if self.limit else None,
            "burst": self.limit.burst if self.limit else None,
            "injected": self.injected,
        }

    async def before(self, verb: str, resource: str, path: str, query: str = "") -> ApiError | None:
        """Apply latency; return the error to answer with, if any. ``resource`` may be empty;
        ``query``: the decoded query string."""
        if self.limit is not None and not self.limit.take():
            self.injected += 1
            return throttled(retry_after=1)
        if not self.rules:
            return None
        delay = 0.0
        failure: ApiError | None = None
        for rule in list(self.rules):
            if not rule.matches(verb, resource, path, query):
                continue
            if rule.remaining is not None:
                rule.remaining -= 1
                if rule.remaining <= 0:
                    self.remove(rule.id)
            delay = max(delay, rule.latency_ms / 1000.0)
            if failure is None and rule.error_rate > 0 and self._rng.random() < rule.error_rate:
                code = int(rule.error_code)
                # An injected 429 is the API server's throttling (a budget's refusal is the
                # eviction's own answer, from a PodDisruptionBudget: see ``eviction``).
                failure = (
                    throttled(retry_after=1)
                    if code == 429
                    else ApiError(
                        code,
                        _MESSAGES.get(code, f"kubesim injected fault {code}"),
                        retry_after=1 if code == 503 else None,
                    )
                )
        if delay:
            await asyncio.sleep(delay)
        if failure is not None:
            self.injected += 1
        return failure

    def watch_cut_after(self, resource: str, path: str, query: str = "") -> float | None:
        cut = [
            r.drop_watch_after_s
            for r in self.rules
            if r.drop_watch_after_s is not None and r.matches("watch", resource, path, query)
        ]
        return min(cut) if cut else None

    def watch_stall_after(self, resource: str, path: str, query: str = "") -> float | None:
        """Seconds after which a watch goes silent but stays open (a half-open connection)."""
        stall = [
            r.stall_watch_after_s
            for r in self.rules
            if r.stall_watch_after_s is not None and r.matches("watch", resource, path, query)
        ]
        return min(stall) if stall else None
