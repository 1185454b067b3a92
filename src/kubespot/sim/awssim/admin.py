"""JSON admin routes served next to moto, for processes that only reach the server over HTTP.

The sandbox drives moto from another process than the one that runs it, so the Python accessors
of ``MotoServer`` are out of its reach. These routes expose the same operations:

``GET /_kubespot/health``
    ``{"ok": true, "extensions": [...]}``.
``GET /_kubespot/autoscaling/lifecycle-actions[?region=r]``
    every lifecycle action with its result, completion and heartbeats (``LifecycleAction.to_dict``).
``POST /_kubespot/autoscaling/lifecycle-actions``
    body ``{"AutoScalingGroupName", "InstanceId", "LifecycleHookName"?, "LifecycleTransition"?,
    "Emit"? (default true), "DecrementDesiredCapacity"?, "Region"?}``; starts a lifecycle action
    (see ``extensions.lifecycle.start_action``) and answers it, token included. 400 when the group,
    instance or hook is unknown.
``POST /_kubespot/autoscaling/lifecycle-faults``
    body ``{"Operation", "Code", "Times"? (default 1), "Region"?}``: the next calls of that lifecycle
    operation fail with that AWS error (see ``extensions.lifecycle.inject_fault``).

The spot market (``extensions.market``, ``.fleet``, ``.reclaims``; ``Region`` / ``?region=`` optional):

``GET /_kubespot/ec2/pools``
    ``{"Pools": [{CapacityType, InstanceType, AvailabilityZone, Capacity, Used, Free, Launches,
    Errors, Reclaimed, InterruptionBand?}], "FleetCalls", "TimeScale"}`` (``Capacity``/``Free``
    null: unlimited).
``GET /_kubespot/ec2/fleet-calls``
    ``{"FleetCalls": [{"Start", "End", "Request", "Launched", "Errors"}]}``: every CreateFleet
    ``instant`` call with its times (epoch seconds), see ``extensions.market.fleet_call_log``.
``POST /_kubespot/ec2/fleet-faults``
    body ``{"HoldSeconds": float, "Times"? (default 1; 0 drops the holds not used yet)}``: the next
    CreateFleet ``instant`` calls launch at once and answer ``HoldSeconds`` later
    (``extensions.market.hold_answers``).
``POST /_kubespot/ec2/pool-capacity``
    body ``{"Capacity": int|null, "CapacityType"?, "InstanceType"?, "AvailabilityZone"?}`` (fnmatch
    patterns, default ``*``): the matching pools, now and later, hold that many instances.
``POST /_kubespot/ec2/reclaims`` / ``GET /_kubespot/ec2/reclaims``
    body ``{"AvailabilityZone", "InstanceType"? (absent: every spot pool of the zone),
    "Rebalance"?: false, "RebalanceLeadSeconds"?: 0, "DelaySeconds"? (default 120 x time scale),
    "CapacityAfter"?: 0}``: reclaim (see ``extensions.reclaims.reclaim``); GET lists the reclaims.
``GET /_kubespot/ec2/interruption-rates[?instance_type=t&zone=z]`` / ``POST`` the same path
    the Spot-Advisor band of spot pools; POST body ``{"Band": "<5%"|…|0-4, "InstanceType"?,
    "AvailabilityZone"?}`` sets it for the matching pools.
``POST /_kubespot/ec2/market-settings``
    body ``{"TimeScale": float}``: multiplies the market's default delays (1 = AWS's).

Everything else goes to moto unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from moto.core.models import DEFAULT_ACCOUNT_ID

from kubespot.sim.awssim import extensions
from kubespot.sim.awssim.extensions import lifecycle, market, reclaims

__all__ = ["PREFIX", "AdminMiddleware"]

PREFIX = "/_kubespot/"

_StartResponse = Callable[..., Any]
_WSGIApp = Callable[[dict[str, Any], _StartResponse], Iterable[bytes]]


class AdminMiddleware:
    """WSGI middleware answering ``/_kubespot/...`` and passing the rest to moto."""

    def __init__(self, app: _WSGIApp, *, default_region: str) -> None:
        self._app = app
        self._region = default_region

    def __call__(self, environ: dict[str, Any], start_response: _StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        if not path.startswith(PREFIX):
            return self._app(environ, start_response)
        try:
            status, body = self._route(environ, path[len(PREFIX) :].rstrip("/"))
        except lifecycle.LifecycleActionError as exc:
            status, body = 400, {"error": str(exc)}
        except (ValueError, KeyError) as exc:
            status, body = 400, {"error": f"bad request: {exc}"}
        payload = json.dumps(body).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}[status]
        start_response(
            f"{status} {reason}",
            [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))],
        )
        return [payload]

    def _route(self, environ: dict[str, Any], route: str) -> tuple[int, Any]:
        method = str(environ.get("REQUEST_METHOD", "GET"))
        if route == "health":
            return 200, {"ok": True, "extensions": extensions.installed()}
        if route == "autoscaling/lifecycle-actions":
            if method == "GET":
                query = parse_qs(str(environ.get("QUERY_STRING", "")))
                region = query.get("region", [self._region])[0]
                actions = lifecycle.list_actions(DEFAULT_ACCOUNT_ID, region)
                return 200, {"LifecycleActions": [a.to_dict() for a in actions]}
            if method == "POST":
                request = _read_json(environ)
                action = lifecycle.start_action(
                    DEFAULT_ACCOUNT_ID,
                    str(request.get("Region", self._region)),
                    str(request["AutoScalingGroupName"]),
                    str(request["InstanceId"]),
                    lifecycle_hook_name=request.get("LifecycleHookName"),
                    transition=str(request.get("LifecycleTransition", lifecycle.TERMINATING)),
                    emit=bool(request.get("Emit", True)),
                    decrement_desired_capacity=bool(request.get("DecrementDesiredCapacity", False)),
                )
                return 200, action.to_dict()
            return 405, {"error": f"{method} not allowed"}
        if route == "autoscaling/lifecycle-faults":
            if method != "POST":
                return 405, {"error": f"{method} not allowed"}
            request = _read_json(environ)
            lifecycle.inject_fault(
                DEFAULT_ACCOUNT_ID,
                str(request.get("Region", self._region)),
                str(request["Operation"]),
                str(request["Code"]),
                times=int(request.get("Times", 1)),
            )
            return 200, {"ok": True}
        if route.startswith("ec2/"):
            return _market_route(environ, method, route[len("ec2/") :], self._region)
        return 404, {"error": f"no route {route!r}"}


def _market_route(environ: dict[str, Any], method: str, route: str, default_region: str) -> tuple[int, Any]:
    """The spot market's routes (``ec2/...``)."""
    from moto.ec2.models import ec2_backends

    query = parse_qs(str(environ.get("QUERY_STRING", "")))
    request = _read_json(environ) if method == "POST" else {}
    region = str(request.get("Region") or query.get("region", [default_region])[0])
    account = DEFAULT_ACCOUNT_ID
    if route == "pools" and method == "GET":
        reclaims.run_due(ec2_backends[account][region])
        return 200, market.pools(account, region)
    if route == "fleet-calls" and method == "GET":
        return 200, {"FleetCalls": market.fleet_call_log(account, region)}
    if route == "pool-capacity" and method == "POST":
        capacity = request["Capacity"]
        changed = market.set_capacity(
            account,
            region,
            None if capacity is None else int(capacity),
            capacity_type=str(request.get("CapacityType", "*")),
            instance_type=str(request.get("InstanceType", "*")),
            zone=str(request.get("AvailabilityZone", "*")),
        )
        return 200, {"Pools": changed}
    if route == "fleet-faults" and method == "POST":
        market.hold_answers(
            account, region, float(request["HoldSeconds"]), times=int(request.get("Times", 1))
        )
        return 200, {"ok": True}
    if route == "reclaims" and method == "POST":
        delay = request.get("DelaySeconds")
        record = reclaims.reclaim(
            account,
            region,
            zone=str(request["AvailabilityZone"]),
            instance_type=request.get("InstanceType"),
            rebalance=bool(request.get("Rebalance", False)),
            rebalance_lead_s=float(request.get("RebalanceLeadSeconds", 0.0)),
            delay_s=None if delay is None else float(delay),
            capacity_after=int(request.get("CapacityAfter", 0)),
        )
        return 200, record.to_dict()
    if route == "reclaims" and method == "GET":
        return 200, {"Reclaims": reclaims.list_reclaims(account, region)}
    if route == "interruption-rates" and method == "GET":
        rates = market.interruption_rates(
            account, region, instance_types=query.get("instance_type"), zones=query.get("zone")
        )
        return 200, {"InterruptionRates": rates, "Bands": list(market.BANDS)}
    if route == "interruption-rates" and method == "POST":
        band = request["Band"]
        market.set_interruption_band(
            account,
            region,
            band if isinstance(band, int) else str(band),
            instance_type=str(request.get("InstanceType", "*")),
            zone=str(request.get("AvailabilityZone", "*")),
        )
        return 200, {"ok": True}
    if route == "market-settings" and method == "POST":
        market.set_time_scale(account, region, float(request["TimeScale"]))
        return 200, {"ok": True}
    if route in (
        "pools",
        "fleet-calls",
        "fleet-faults",
        "pool-capacity",
        "reclaims",
        "interruption-rates",
        "market-settings",
    ):
        return 405, {"error": f"{method} not allowed"}
    return 404, {"error": f"no route 'ec2/{route}'"}


def _read_json(environ: dict[str, Any]) -> dict[str, Any]:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    raw = environ["wsgi.input"].read(length) if length else b"{}"
    data = json.loads(raw or b"{}")
    if not isinstance(data, dict):
        raise ValueError("body must be a JSON object")
    return data
