"""An async client for the EC2 instance metadata service (IMDS).

IMDSv2 first: a session token is fetched with ``PUT /latest/api/token``, cached, and replaced a
margin before it expires; a 401 drops it and the read is tried once more with a fresh one. When no
token can be had (404/403/5xx/timeout on the token endpoint) reads fall back to IMDSv1 unless
``require_v2``; the token endpoint is tried again now and then, and at once if a v1 read gets 401.

Each read has a whole-request timeout and up to ``tries`` attempts with exponential backoff and full
jitter (random source and sleep injected). A 404 is "absent" and comes back as ``None``; everything
else that goes wrong comes out as an ``ImdsError`` subclass, never as an httpx exception.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any

import httpx2

from kubespot.config.imds import ImdsSettings
from kubespot.model import Clock
from kubespot.model.backoff import full_jitter
from kubespot.sources.imds import paths
from kubespot.sources.imds.errors import (
    ImdsError,
    ImdsHttpError,
    ImdsParseError,
    ImdsTokenError,
    ImdsUnavailable,
)
from kubespot.sources.imds.parsers import parse_identity_document

_log = logging.getLogger(__name__)

#: While falling back to IMDSv1, how often the token endpoint is tried again. Not a setting: v1
#: reads work meanwhile, and a v1 read refused with 401 retries the token endpoint at once.
V1_RECHECK_SECONDS = 300.0


@dataclass(frozen=True)
class InstanceIdentity:
    """Who this instance is, read once at start-up."""

    instance_id: str
    instance_type: str = ""
    availability_zone: str = ""
    region: str = ""
    account_id: str = ""
    private_ip: str = ""
    local_hostname: str = ""
    life_cycle: str = ""
    """``spot``, ``on-demand`` or ``scheduled``."""
    public_ip: str = ""
    """"" when the instance has no public IPv4 address (IMDS answers 404)."""
    public_hostname: str = ""
    document: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


class _Retriable(Exception):
    """Wraps an ``ImdsError`` worth another attempt (timeouts, 5xx, 429, token trouble)."""

    def __init__(self, error: ImdsError) -> None:
        super().__init__(str(error))
        self.error = error


class ImdsClient:
    """Reads IMDS paths. One instance per process; safe for concurrent reads from one event loop."""

    def __init__(
        self,
        settings: ImdsSettings,
        *,
        clock: Clock,
        transport: httpx2.AsyncBaseTransport | None = None,
        rng: Callable[[], float] | None = None,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._rng = rng or random.random
        self._base = settings.url.rstrip("/")
        self._http = httpx2.AsyncClient(
            transport=transport,
            timeout=httpx2.Timeout(settings.request_timeout),
            # IMDS is link-local: an HTTP(S)_PROXY from the environment must never see these calls.
            trust_env=False,
            follow_redirects=False,
            # IMDS is plain HTTP: a TLS context with no trust roots saves loading the system CA store
            # into every agent (~1.5 MiB); an https:// URL (a proxy in front of a test IMDS) gets the
            # default verification.
            verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT) if self._base.startswith("http://") else True,
        )
        self._token: str | None = None
        self._token_expires = 0.0  # clock.monotonic() seconds
        self._v1_until: float | None = None  # monotonic deadline of the current v1 fallback
        self._token_lock = asyncio.Lock()
        self._last_contact: datetime | None = None

    # --- lifecycle ---------------------------------------------------------------------------------

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ImdsClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # --- state -------------------------------------------------------------------------------------

    @property
    def last_contact(self) -> datetime | None:
        """When IMDS last answered anything at all (a 404 counts: the service is there)."""
        return self._last_contact

    @property
    def using_v1(self) -> bool:
        """True while reads go without a token because none could be had."""
        return self._token is None and self._v1_until is not None

    # --- reads -------------------------------------------------------------------------------------

    async def get(self, path: str) -> str | None:
        """The body at ``path`` (e.g. ``/latest/meta-data/instance-id``), or None if absent (404)."""
        tries = self._settings.tries
        for attempt in range(tries):
            if attempt:
                await self._clock.sleep(self._backoff(attempt))
            try:
                return await self._get_once(path)
            except _Retriable as retry:
                if attempt + 1 == tries:
                    raise retry.error from None
                _log.debug(
                    "IMDS read failed, retrying: %s",
                    retry.error,
                    extra={"imds_path": path, "attempt": attempt + 1},
                )
        raise AssertionError("unreachable: tries >= 1")  # pragma: no cover

    async def identity(self) -> InstanceIdentity:
        """The identity document plus the few metadata items it lacks."""
        doc_body = await self._require(paths.IDENTITY_DOCUMENT)
        doc = parse_identity_document(doc_body)
        hostname, life_cycle, local_ip, public_ip, public_hostname = await asyncio.gather(
            self.get(paths.LOCAL_HOSTNAME),
            self.get(paths.LIFE_CYCLE),
            self.get(paths.LOCAL_IPV4),
            # For webhook templates (NTH's PublicIP and PublicHostname); absent on private instances.
            self.get(paths.PUBLIC_IPV4),
            self.get(paths.PUBLIC_HOSTNAME),
        )

        def text(key: str) -> str:
            value = doc.get(key)
            return value if isinstance(value, str) else ""

        return InstanceIdentity(
            instance_id=text("instanceId"),
            instance_type=text("instanceType"),
            availability_zone=text("availabilityZone"),
            region=text("region"),
            account_id=text("accountId"),
            private_ip=text("privateIp") or (local_ip or "").strip(),
            local_hostname=(hostname or "").strip(),
            life_cycle=(life_cycle or "").strip(),
            public_ip=(public_ip or "").strip(),
            public_hostname=(public_hostname or "").strip(),
            document=doc,
        )

    async def _require(self, path: str) -> str:
        body = await self.get(path)
        if body is None:
            raise ImdsHttpError(path, 404)
        return body

    def _backoff(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2^(attempt-1))]."""
        s = self._settings
        return full_jitter(attempt - 1, base=s.retry_backoff_base, cap=s.retry_backoff_cap, rng=self._rng)

    async def _get_once(self, path: str) -> str | None:
        token = await self._session_token(path)
        resp = await self._send("GET", path, self._auth_headers(token))
        if resp.status_code == 401:
            # A token gone stale on the server, or a v1 read on an instance now requiring v2: one
            # fresh token, one more go.
            self._forget_token(v1_refused=token is None)
            token = await self._session_token(path, v1_refused=token is None)
            resp = await self._send("GET", path, self._auth_headers(token))
        status = resp.status_code
        if status == 200:
            try:
                return resp.content.decode("utf-8")
            except UnicodeDecodeError:
                raise ImdsParseError(path, "body is not UTF-8", resp.content) from None
        if status == 404:
            return None
        if status in (401, 429) or status >= 500:
            raise _Retriable(ImdsHttpError(path, status))
        raise ImdsHttpError(path, status)

    @staticmethod
    def _auth_headers(token: str | None) -> dict[str, str]:
        return {paths.TOKEN_HEADER: token} if token else {}

    # --- tokens ------------------------------------------------------------------------------------

    async def _session_token(self, path: str, *, v1_refused: bool = False) -> str | None:
        """A valid token, or None to read with IMDSv1."""
        s = self._settings
        async with self._token_lock:
            now = self._clock.monotonic()
            if self._token is not None and now < self._token_expires - s.token_refresh_margin:
                return self._token
            v1_allowed = not s.require_v2 and not v1_refused
            if v1_allowed and self._v1_until is not None and now < self._v1_until:
                return None
            try:
                token, ttl = await self._fetch_token()
            except (ImdsError, _Retriable) as caught:
                exc = caught.error if isinstance(caught, _Retriable) else caught
                self._token = None
                if not v1_allowed:
                    why = "IMDSv2 is required" if s.require_v2 else "IMDS refused an IMDSv1 read"
                    raise _Retriable(ImdsTokenError(path, f"no session token ({exc}); {why}")) from None
                if self._v1_until is None:
                    _log.warning(
                        "IMDSv2 token unavailable (%s); reading with IMDSv1", exc, extra={"imds_path": path}
                    )
                self._v1_until = now + V1_RECHECK_SECONDS
                return None
            if self._v1_until is not None:
                _log.info("IMDSv2 token obtained; leaving IMDSv1 fallback", extra={"imds_path": path})
            self._token, self._token_expires, self._v1_until = token, now + ttl, None
            return token

    def _forget_token(self, *, v1_refused: bool) -> None:
        self._token = None
        if v1_refused:
            self._v1_until = None

    async def _fetch_token(self) -> tuple[str, float]:
        requested = self._settings.token_ttl
        resp = await self._send("PUT", paths.TOKEN, {paths.TOKEN_TTL_HEADER: str(requested)})
        if resp.status_code != 200:
            raise ImdsHttpError(paths.TOKEN, resp.status_code)
        token = resp.content.decode("utf-8", "replace").strip()
        if not token or not token.isprintable():
            raise ImdsParseError(paths.TOKEN, "empty or unprintable token", resp.content)
        # Trust a shorter TTL if the service grants one; never a longer one than asked for.
        granted = resp.headers.get(paths.TOKEN_TTL_HEADER, "")
        ttl = int(granted) if granted.isdigit() and 0 < int(granted) <= requested else requested
        return token, float(ttl)

    # --- wire --------------------------------------------------------------------------------------

    async def _send(self, method: str, path: str, headers: dict[str, str]) -> httpx2.Response:
        try:
            # httpx timeouts are per phase; this bounds the whole exchange.
            async with asyncio.timeout(self._settings.request_timeout):
                resp = await self._http.request(method, self._base + path, headers=headers)
        except (TimeoutError, httpx2.TimeoutException):
            raise _Retriable(
                ImdsUnavailable(path, f"no answer within {self._settings.request_timeout:g} s")
            ) from None
        except httpx2.HTTPError as exc:
            raise _Retriable(ImdsUnavailable(path, f"{type(exc).__name__}: {exc}")) from None
        self._last_contact = self._clock.now()
        return resp
