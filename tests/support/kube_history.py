"""What happened in a kubesim cluster, in the API server's order: watches from a resourceVersion
recorded as (resourceVersion, type, object) so a test can say which of two writes to different
resources came first (kubesim's resourceVersions are one counter, as etcd's revision is)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp

Obj = dict[str, Any]


@dataclass
class History:
    """Every event of the watched paths since the recorder started, oldest first per path."""

    events: dict[str, list[tuple[int, str, Obj]]] = field(default_factory=dict)

    def of(self, path: str) -> list[tuple[int, str, Obj]]:
        return list(self.events.get(path, ()))

    def first(self, path: str, match: Any) -> tuple[int, str, Obj] | None:
        """The first event of ``path`` whose object ``match(obj, type)`` accepts."""
        return next((e for e in self.events.get(path, ()) if match(e[2], e[1])), None)


async def _watch(
    http: aiohttp.ClientSession, path: str, since: str, into: list[tuple[int, str, Obj]]
) -> None:
    params = {"watch": "1", "resourceVersion": since, "allowWatchBookmarks": "false"}
    async with http.get(path, params=params, timeout=aiohttp.ClientTimeout(total=None)) as r:
        r.raise_for_status()
        async for line in r.content:
            if not line.strip():
                continue
            event = json.loads(line)
            obj = event.get("object") or {}
            rv = int((obj.get("metadata") or {}).get("resourceVersion") or 0)
            into.append((rv, str(event.get("type")), obj))


@contextlib.asynccontextmanager
async def recording(api_url: str, *paths: str) -> AsyncIterator[History]:
    """Watch ``paths`` (collection URLs) from the cluster's current resourceVersion until exit."""
    history = History()
    async with aiohttp.ClientSession(base_url=api_url) as http:
        async with http.get("/api/v1/namespaces", params={"limit": "1"}) as r:
            since = str((await r.json())["metadata"]["resourceVersion"])
        tasks = []
        for path in paths:
            history.events[path] = []
            tasks.append(asyncio.ensure_future(_watch(http, path, since, history.events[path])))
        try:
            yield history
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
