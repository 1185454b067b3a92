"""Answering one IMDS request for one instance: faults first, then the token and metadata rules.

Status codes follow EC2: PUT /latest/api/token without a valid TTL header → 400, with
``X-Forwarded-For`` → 403; other methods on the token path → 405; a metadata read with a bad or
expired token → 401 (also when IMDSv1 is allowed), with no token on an IMDSv2-only instance → 401;
an absent item → 404; methods other than GET/HEAD on metadata → 405.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web

from kubespot.sim.imdssim.faults import TOKEN_PATH
from kubespot.sim.imdssim.fleet import Fleet
from kubespot.sim.imdssim.instance import SimInstance
from kubespot.sim.imdssim.metadata import lookup
from kubespot.sim.imdssim.responses import imds_error, imds_text
from kubespot.sim.imdssim.tokens import TOKEN_HEADER, TTL_HEADER, Access, authorize_get, parse_ttl

FORWARDED_HEADER = "X-Forwarded-For"


class ImdsResponder:
    """Turns (request, instance, instance-relative path) into the response EC2 would give."""

    def __init__(self, fleet: Fleet, closing: asyncio.Event) -> None:
        self._fleet = fleet
        self._closing = closing
        """Set when the server stops, so hung "timeout" requests end at once instead of pinning it."""

    async def respond(self, request: web.Request, instance: SimInstance, path: str) -> web.StreamResponse:
        is_token_path = path in (TOKEN_PATH, TOKEN_PATH + "/")
        injected = await self._apply_faults(
            instance, path, token_request=is_token_path and request.method == "PUT"
        )
        if injected is not None:
            return injected
        if is_token_path:
            return self._token(request, instance)
        return self._metadata(request, instance, path)

    async def _apply_faults(
        self, instance: SimInstance, path: str, *, token_request: bool
    ) -> web.StreamResponse | None:
        fired = self._fleet.faults.trigger(instance.instance_id, path, token_request=token_request)
        delay = sum(f.seconds for f in fired if f.kind == "latency")
        hang = max((f.seconds for f in fired if f.kind == "timeout"), default=0.0)
        if delay or hang:
            # Real time on purpose: latency is what a client's own timer sees, not simulated time.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), timeout=delay + hang)
            if self._closing.is_set():
                return imds_error(503)
        for fault in fired:
            if fault.kind in ("error", "token"):
                return imds_error(fault.status)
        return None

    def _token(self, request: web.Request, instance: SimInstance) -> web.StreamResponse:
        if request.method != "PUT":
            return imds_error(405, headers={"Allow": "OPTIONS, PUT"})
        if FORWARDED_HEADER in request.headers:
            return imds_error(403)
        ttl = parse_ttl(request.headers.get(TTL_HEADER))
        if ttl is None:
            return imds_error(400)
        token = self._fleet.tokens(instance.instance_id).issue(ttl)
        return imds_text(token, headers={TTL_HEADER: str(ttl)})

    def _metadata(self, request: web.Request, instance: SimInstance, path: str) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            return imds_error(405, headers={"Allow": "GET, HEAD"})
        decision = authorize_get(
            self._fleet.tokens(instance.instance_id),
            token=request.headers.get(TOKEN_HEADER),
            require_v2=self._fleet.requires_v2(instance),
            forwarded=FORWARDED_HEADER in request.headers,
        )
        if decision.access is not Access.ALLOWED:
            return imds_error(decision.access.value)
        body = lookup(instance, self._fleet.clock(), path)
        if body is None:
            return imds_error(404)
        headers = {} if decision.ttl_remaining is None else {TTL_HEADER: str(decision.ttl_remaining)}
        return imds_text(body, headers=headers)
