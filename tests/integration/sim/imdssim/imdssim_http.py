"""Reading imdssim over HTTP as IMDSv1 clients do (the tests of its paths, fleet and control API)."""

from __future__ import annotations

import aiohttp

#: The instance most tests simulate.
IID = "i-0123456789abcdef0"


async def get_text(http: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    """(status, body) of a GET."""
    async with http.get(url) as resp:
        return resp.status, await resp.text()
