"""One raw HTTP call to a kubesim, status and decoded body back, for the API-server tests that
check status codes and bodies as upstream sends them."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson


async def call(
    http: aiohttp.ClientSession,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    **params: str,
) -> tuple[int, Any]:
    """``body``: an object sent as JSON, or bytes sent as they are; the answer as JSON, or text when
    it is not JSON."""
    data = orjson.dumps(body) if body is not None and not isinstance(body, bytes) else body
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    async with http.request(method, path, data=data, headers=hdrs, params=params) as resp:
        raw = await resp.read()
        try:
            return resp.status, orjson.loads(raw)
        except orjson.JSONDecodeError:
            return resp.status, raw.decode()
