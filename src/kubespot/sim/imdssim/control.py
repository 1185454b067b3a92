"""The control endpoint: JSON over HTTP under ``/_imdssim`` to inspect the fleet and make things happen.

The prefix starts with an underscore, which no IMDS version or instance id does, so it cannot clash
with metadata paths. Every failure is a JSON ``{"error": ...}`` with a 4xx status, never a crash.
Routes (relative to ``/_imdssim``):

- ``GET /health``; ``GET|POST /settings`` (``{"require_v2": bool}``)
- ``GET /instances``; ``POST /instances`` (an instance as in a scenario); ``GET|DELETE /instances/{id}``
- ``POST /instances/{id}/events`` (an event as in a scenario; times count from now);
  ``DELETE /instances/{id}/events[?kind=spot-itn|rebalance|scheduled|asg]``
- ``POST /instances/{id}/scheduled/{event_id}/state`` (``{"state": "canceled", "after_seconds": 0}``)
- ``POST /events`` (an event plus optional ``"instance_ids"``; default every instance)
- ``GET|POST|DELETE /faults``; ``DELETE /faults/{fault_id}``
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from aiohttp import web

from kubespot.sim.imdssim.events import SCHEDULED_STATES, ScheduledState
from kubespot.sim.imdssim.faults import FaultError, fault_from_mapping
from kubespot.sim.imdssim.fleet import EVENT_KINDS, EventKind, Fleet, UnknownInstance
from kubespot.sim.imdssim.instance import SimInstance
from kubespot.sim.imdssim.scenario import EventSpec, InstanceSpec, ScenarioError, When

CONTROL_PREFIX = "/_imdssim"
_log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ControlTarget(Protocol):
    """What the control endpoint needs from the server."""

    @property
    def fleet(self) -> Fleet: ...

    async def add_instance(self, instance: SimInstance) -> SimInstance: ...

    async def remove_instance(self, instance_id: str) -> None: ...

    def urls_for(self, instance_id: str) -> dict[str, str]: ...


class BadRequest(Exception):
    """A control request that cannot be honoured; ``status`` is the HTTP code to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status)


def _error(message: str, status: int) -> web.Response:
    return _json({"error": message, "status": status}, status)


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    return data


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except BadRequest as exc:
        return _error(str(exc), exc.status)
    except (ScenarioError, FaultError) as exc:
        return _error(str(exc), 400)
    except UnknownInstance as exc:
        return _error(f"no instance {exc.args[0]}", 404)
    except web.HTTPException as exc:
        return _error(exc.reason, exc.status)
    except Exception:
        _log.exception("control request %s %s failed", request.method, request.path)
        return _error("internal error in imdssim (see its log)", 500)


class Control:
    """Handlers bound to one server."""

    def __init__(self, target: ControlTarget) -> None:
        self._target = target

    @property
    def _fleet(self) -> Fleet:
        return self._target.fleet

    def _describe(self, instance: SimInstance) -> dict[str, Any]:
        fleet = self._fleet
        summary = instance.summary(fleet.clock(), require_v2_default=fleet.require_v2)
        return {**summary, "urls": self._target.urls_for(instance.instance_id)}

    async def health(self, request: web.Request) -> web.Response:
        return _json({"ok": True, "instances": len(self._fleet)})

    async def get_settings(self, request: web.Request) -> web.Response:
        return _json({"require_v2": self._fleet.require_v2})

    async def set_settings(self, request: web.Request) -> web.Response:
        body = await _body(request)
        unknown = set(body) - {"require_v2"}
        if unknown:
            raise BadRequest(f"unknown settings: {', '.join(sorted(unknown))}")
        if "require_v2" in body:
            if not isinstance(body["require_v2"], bool):
                raise BadRequest("require_v2 must be true or false")
            self._fleet.require_v2 = body["require_v2"]
        return await self.get_settings(request)

    async def list_instances(self, request: web.Request) -> web.Response:
        return _json({"instances": [self._describe(i) for i in self._fleet.instances()]})

    async def add_instance(self, request: web.Request) -> web.Response:
        spec = InstanceSpec.read(await _body(request))
        fleet = self._fleet
        instance = spec.build(index=len(fleet), origin=fleet.clock())
        if instance.instance_id in fleet:
            raise BadRequest(f"instance {instance.instance_id} already exists", 409)
        await self._target.add_instance(instance)
        for event in spec.events:
            self._apply(event, instance.instance_id)
        return _json(self._describe(instance), 201)

    async def get_instance(self, request: web.Request) -> web.Response:
        return _json(self._describe(self._fleet.get(request.match_info["iid"])))

    async def delete_instance(self, request: web.Request) -> web.Response:
        iid = request.match_info["iid"]
        self._fleet.get(iid)
        await self._target.remove_instance(iid)
        return _json({"deleted": iid})

    async def add_event(self, request: web.Request) -> web.Response:
        iid = request.match_info["iid"]
        self._fleet.get(iid)
        spec = EventSpec.read(await _body(request))
        return _json({"instance_id": iid, "added": self._apply(spec, iid)}, 201)

    async def add_fleet_event(self, request: web.Request) -> web.Response:
        body = await _body(request)
        ids = body.pop("instance_ids", None)
        if ids is None:
            ids = [i.instance_id for i in self._fleet.instances()]
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise BadRequest("instance_ids must be a list of instance ids")
        for iid in ids:
            self._fleet.get(iid)
        spec = EventSpec.read(body)
        return _json({"added": [{"instance_id": iid, **self._apply(spec, iid)} for iid in ids]}, 201)

    def _apply(self, spec: EventSpec, instance_id: str) -> dict[str, Any]:
        try:
            return spec.apply(self._fleet, instance_id, self._fleet.clock())
        except KeyError as exc:
            raise BadRequest(str(exc.args[0]), 404) from None
        except ValueError as exc:
            raise BadRequest(str(exc)) from None

    async def clear_events(self, request: web.Request) -> web.Response:
        iid = request.match_info["iid"]
        kind = request.query.get("kind")
        if kind is not None and kind not in EVENT_KINDS:
            raise BadRequest(f"kind must be one of {', '.join(EVENT_KINDS)}")
        self._fleet.clear_events(iid, cast(EventKind | None, kind))
        return _json({"instance_id": iid, "cleared": kind or "all"})

    async def set_scheduled_state(self, request: web.Request) -> web.Response:
        iid, eid = request.match_info["iid"], request.match_info["eid"]
        body = await _body(request)
        unknown = set(body) - {"state", "after_seconds", "at"}
        if unknown:
            raise BadRequest(f"unknown keys: {', '.join(sorted(unknown))}")
        state = body.get("state")
        if state not in SCHEDULED_STATES:
            raise BadRequest(f"state must be one of {', '.join(SCHEDULED_STATES)}")
        fleet = self._fleet
        at = When.read(body, "state").resolve(fleet.clock())
        try:
            event = fleet.set_scheduled_state(iid, eid, cast(ScheduledState, state), at=at)
        except UnknownInstance:
            raise
        except KeyError as exc:
            raise BadRequest(str(exc.args[0]), 404) from None
        return _json(event.summary(fleet.clock()))

    async def list_faults(self, request: web.Request) -> web.Response:
        return _json({"faults": [f.to_json() for f in self._fleet.faults.all()]})

    async def add_fault(self, request: web.Request) -> web.Response:
        fault = fault_from_mapping(await _body(request))
        if fault.instance_id is not None:
            self._fleet.get(fault.instance_id)
        self._fleet.faults.add(fault)
        return _json(fault.to_json(), 201)

    async def clear_faults(self, request: web.Request) -> web.Response:
        self._fleet.faults.clear()
        return _json({"cleared": "all"})

    async def delete_fault(self, request: web.Request) -> web.Response:
        fid = request.match_info["fid"]
        if not self._fleet.faults.remove(fid):
            raise BadRequest(f"no fault {fid}", 404)
        return _json({"deleted": fid})


def make_control_app(target: ControlTarget) -> web.Application:
    """The sub-application mounted at ``CONTROL_PREFIX``."""
    c = Control(target)
    app = web.Application(middlewares=[_json_errors])
    r = app.router
    r.add_get("/health", c.health)
    r.add_get("/settings", c.get_settings)
    r.add_post("/settings", c.set_settings)
    r.add_get("/instances", c.list_instances)
    r.add_post("/instances", c.add_instance)
    r.add_get("/instances/{iid}", c.get_instance)
    r.add_delete("/instances/{iid}", c.delete_instance)
    r.add_post("/instances/{iid}/events", c.add_event)
    r.add_delete("/instances/{iid}/events", c.clear_events)
    r.add_post("/instances/{iid}/scheduled/{eid}/state", c.set_scheduled_state)
    r.add_post("/events", c.add_fleet_event)
    r.add_get("/faults", c.list_faults)
    r.add_post("/faults", c.add_fault)
    r.add_delete("/faults", c.clear_faults)
    r.add_delete("/faults/{fid}", c.delete_fault)
    return app
