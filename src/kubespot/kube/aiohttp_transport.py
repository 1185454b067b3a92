"""``RawHttp`` over aiohttp, for the controller (see ``transport`` for why).

Only the controller imports this module (it needs ``kubespot[controller]``); the per-node agent keeps
lightkube's httpx client and never loads aiohttp.

Credentials come from lightkube's configuration, whatever their kind: the TLS context (cluster CA,
client certificate) is the one lightkube builds, and the ``Authorization`` header is taken from
lightkube's httpx auth (static token, service-account token file, exec plugin, basic auth) by running
its auth flow once and again after a 401, as lightkube itself does: a rotated service-account token
is re-read from its file when the API server first refuses the old one.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import aiohttp
import httpx2

from .transport import ApiStatus, LinkError, api_status, body_headers, watch_lines

#: What aiohttp raises when no answer came (besides asyncio.TimeoutError).
_LINK_ERRORS = (aiohttp.ClientError, OSError, asyncio.TimeoutError)
_NO_AUTH = "-"


class AiohttpRaw:
    """Raw-JSON requests through one aiohttp session (created on first use, in the running loop)."""

    def __init__(
        self,
        base_url: str,
        *,
        tls: ssl.SSLContext | None,
        auth: httpx2.Auth | None,
        timeout: float,
    ) -> None:
        self._base = base_url.rstrip("/") + "/"
        self._tls = tls if base_url.startswith("https:") else None
        self._auth = auth
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._connect_timeout = timeout
        self._proxy = _env_proxy(base_url)
        self._session: aiohttp.ClientSession | None = None
        self._authorization: str | None = None
        self._auth_lock = asyncio.Lock()

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            # No cap on connections: KubeClient caps the calls in flight, and every call needs one.
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ssl=self._tls or False)
            self._session = aiohttp.ClientSession(
                connector=connector,
                # The proxy is resolved once (_env_proxy): aiohttp's trust_env reads the environment
                # and ~/.netrc on every request, a tenth of the cost of a call.
                trust_env=False,
                skip_auto_headers=("User-Agent",),
                headers={"User-Agent": "kubespot", "Accept": "application/json"},
            )
        return self._session

    async def _header(self, *, refused: tuple[str, bytes] | None = None) -> str:
        """The Authorization header ("-" for none). ``refused``: a header the server answered 401 to,
        and that answer's body; unless another call has already replaced that header, the
        credentials are read afresh (a token file re-read, an exec plugin run again) once."""
        if self._auth is None:
            return _NO_AUTH
        if refused is None and self._authorization is not None:
            return self._authorization  # every call but the first: no lock on the hot path
        async with self._auth_lock:
            if self._authorization is not None and (refused is None or refused[0] != self._authorization):
                return self._authorization  # fresh already (calls refused together refresh once)
            request = httpx2.Request("GET", self._base)
            flow = self._auth.async_auth_flow(request)
            try:
                request = await flow.__anext__()
                if refused is not None:
                    request = await flow.asend(httpx2.Response(401, content=refused[1], request=request))
            except StopAsyncIteration:
                pass
            finally:
                await flow.aclose()
            self._authorization = request.headers.get("Authorization", _NO_AUTH)
            return self._authorization

    def _headers(self, authorization: str, body: bytes | None, content_type: str | None) -> dict[str, str]:
        headers = body_headers(body, content_type) or {}
        if authorization != _NO_AUTH:
            headers["Authorization"] = authorization
        return headers

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> bytes:
        session = self._open()
        authorization = await self._header()
        for attempt in (1, 2):
            try:
                async with session.request(
                    method,
                    self._base + path,
                    params=params or None,
                    data=body,
                    headers=self._headers(authorization, body, content_type),
                    timeout=self._timeout,
                    proxy=self._proxy,
                ) as response:
                    content = await response.read()
            except _LINK_ERRORS as err:
                raise LinkError(f"{type(err).__name__}: {err}") from err
            if response.status == 401 and attempt == 1 and self._auth is not None:
                fresh = await self._header(refused=(authorization, content))
                if fresh != authorization:
                    authorization = fresh
                    continue
            if response.status >= 400:
                raise _status_of(response, content)
            return content
        raise AssertionError("unreachable")  # pragma: no cover

    @asynccontextmanager
    async def stream(
        self, path: str, params: Mapping[str, str], *, idle_timeout: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        session = self._open()
        authorization = await self._header()
        # No bound on the whole watch (the server ends it); aiohttp's sock_read bounds each wait for
        # data on the socket, headers included: the idle bound of the watch.
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._connect_timeout, sock_read=idle_timeout
        )
        try:
            response = await session.get(
                self._base + path,
                params=params,
                headers=self._headers(authorization, None, None),
                timeout=timeout,
                proxy=self._proxy,
            )
        except _LINK_ERRORS as err:
            raise LinkError(f"{type(err).__name__}: {err}") from err
        try:
            if response.status >= 400:
                content = await response.read()
                if response.status == 401:
                    # The next attempt (a re-list) uses the new one.
                    await self._header(refused=(authorization, content))
                raise _status_of(response, content)
            yield watch_lines(
                response.content.iter_any(),
                idle_timeout=idle_timeout,
                timeouts=(asyncio.TimeoutError,),
                failures=_LINK_ERRORS,
            )
        except BaseException:
            # A broken, silent or abandoned watch: its connection is never handed back to the pool.
            response.close()
            raise
        else:
            response.release()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _status_of(response: aiohttp.ClientResponse, content: bytes) -> ApiStatus:
    return api_status(
        response.status,
        content,
        content_type=response.headers.get("Content-Type", ""),
        retry_after=response.headers.get("Retry-After"),
    )


def _env_proxy(base_url: str) -> str | None:
    """The proxy for the API server from HTTP(S)_PROXY / NO_PROXY, as lightkube's httpx client
    honours them (None: connect directly)."""
    host = urllib.parse.urlsplit(base_url).hostname or ""
    if urllib.request.proxy_bypass(host):
        return None
    scheme = "https" if base_url.startswith("https:") else "http"
    return urllib.request.getproxies().get(scheme)
