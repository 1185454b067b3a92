"""CreateFleet over the market's finite pools, with EC2's errors and idempotence.

Stock moto 5.2.5 launches every instance from the first override whatever the strategy, never
runs out of capacity, never answers ``Errors``, ignores ``ClientToken``, leaves
``SpotInstanceRequestId`` off spot instances and answers 500 to the ``instance-lifecycle`` filter
(docs/designs/launching-research.md §2.1). This module replaces ``Fleets.create_fleet``:

- the target is split as EC2 does: ``SpotTargetCapacity`` + ``OnDemandTargetCapacity``, the rest of
  ``TotalTargetCapacity`` of ``DefaultTargetCapacityType`` (on-demand when absent, as moto);
- each override (launch template data overlaid by ``InstanceType``, ``SubnetId``,
  ``AvailabilityZone``, ``ImageId``, ``Priority``) maps to the pool (capacity type, type, zone) of
  ``market.py``; the zone is the subnet's, else the override's (launched into that zone's default
  subnet); prices are ``spot_prices.price_for(type, zone)`` for spot and the on-demand table
  (``spot_prices.ondemand_price``, what the Pricing extension answers) for on-demand;
- ``allocation.allocate`` spreads the instances over the pools by the strategy (spot default
  ``lowest-price``, on-demand default ``lowest-price``, as the API reference gives them), splitting
  over pools when one runs out; moto then launches them from the chosen overrides (tags, user data,
  ids as before);
- the answer is HTTP 200 with ``Instances`` (one entry per override used, several ids each) and
  ``Errors``: one per override whose pool was empty and that the strategy tried: for the
  capacity-aware strategies (``price-capacity-optimized``, ``capacity-optimized[-prioritized]``,
  ``diversified``, which weigh every pool's capacity) every empty pool, for the ordered ones
  (``lowest-price``, ``prioritized``) the empty pools ranked before the last pool used; and every
  override left without room when the request was not met (research §1.2: errors also come
  alongside a success). AWS does not document which pools an instant fleet reports; this rule is
  ours. Codes and wording as EC2's:
  ``InsufficientInstanceCapacity`` ("We currently do not have sufficient <type> capacity in the
  Availability Zone you requested (<zone>)…" on-demand, "There is no Spot capacity available that
  matches your request." spot) and, when no spot pool had room at all, ``UnfulfillableCapacity``
  ("Unable to fulfill capacity due to your request configuration. Please adjust your request and
  try again."). Each error echoes ``Lifecycle`` and ``LaunchTemplateAndOverrides`` with the
  override's ``AvailabilityZone`` (filled in when the caller gave only a subnet): Karpenter keys its
  unavailable-offerings cache on it;
- spot instances carry ``SpotInstanceRequestId`` (the ``spot_request_ids`` extension);
- ``ClientToken``: the same token answers the first call's fleet, instances and errors without
  launching; with other parameters, ``IdempotentParameterMismatch`` "Arguments on this idempotent
  request are inconsistent with arguments used in previous request(s)." (EC2 developer guide,
  "Ensuring idempotency in Amazon EC2 API requests"; the wording as runs-on issue #251 logs it);
- ``Type=request`` and ``Type=maintain`` (moto's default, as EC2's) draw from the same pools by
  the same placement, and answer only ``FleetId``: the API reference gives ``Instances`` and
  ``Errors`` for ``instant`` fleets only (a ``request`` fleet's shortfall is seen in
  DescribeFleets' fulfilled capacity). EC2 keeps trying to fill a ``request`` fleet's one-time
  asynchronous request and replenishes a ``maintain`` fleet later; here both are placed once, at
  creation (a known gap: nothing is launched when a pool frees up). They are not counted in
  ``FleetCalls`` nor in the call log, which time the launch path (``instant``);
- ``DescribeInstances`` learns the ``instance-lifecycle`` filter (``spot``; on-demand instances have
  no value, as on EC2), and a terminated instance gives its slot back to its pool;
- a held answer (``market.hold_answers``, a test's fault): the call launches and is logged as usual,
  then its answer waits that many seconds. ``instant`` is synchronous ("EC2 Fleet instant": the
  instances are launched when the answer comes), so a client that dies or times out meanwhile
  leaves instances it never heard of, tagged from ``TagSpecifications``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Hashable
from typing import Any

from moto.core.responses import ActionResult
from moto.ec2 import utils as ec2_utils
from moto.ec2.exceptions import EC2ClientError, InvalidParameterValueError
from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS
from moto.ec2.models.instances import Instance
from moto.ec2.responses import fleets

from kubespot.sim.awssim.extensions import allocation, market, reclaims, spot_prices

__all__ = ["install"]

_MARK = "_kubespot_fleet"
_INF = float("inf")
SPOT_NO_CAPACITY = "There is no Spot capacity available that matches your request."
UNFULFILLABLE = (
    "Unable to fulfill capacity due to your request configuration. Please adjust your request and try again."
)


def ice_message(instance_type: str, zone: str, other_zones: list[str]) -> str:
    text = (
        f"We currently do not have sufficient {instance_type} capacity in the Availability Zone you "
        f"requested ({zone}). Our system will be working on provisioning additional capacity."
    )
    if other_zones:
        text += (
            f" You can currently get {instance_type} capacity by not specifying an Availability Zone in "
            f"your request or choosing {', '.join(other_zones)}."
        )
    return text


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return _INF


def _fingerprint(querystring: dict[str, Any]) -> str:
    fields = {k: v for k, v in querystring.items() if k not in ("ClientToken", "Action", "Version")}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


def _zone_of(backend: Any, spec: Any) -> str:
    """The zone an override launches into; an AZ without a subnet picks that zone's default subnet."""
    if spec.subnet_id:
        return str(backend.get_subnet(spec.subnet_id).availability_zone)
    zone = (spec.overrides or {}).get("AvailabilityZone")
    if zone:
        default = backend.get_default_subnets().get(zone)
        if default is not None:
            spec.subnet_id = default.id
        return str(zone)
    return f"{backend.region_name}a"  # where moto puts an instance without subnet or placement


def _echo(spec: Any, zone: str) -> dict[str, Any]:
    overrides = dict(spec.overrides or {})
    overrides.setdefault("InstanceType", spec.instance_type)
    overrides.setdefault("AvailabilityZone", zone)
    return {"LaunchTemplateSpecification": spec.launch_template_spec, "Overrides": overrides}


@functools.cache
def _offered_zones(region: str) -> dict[str, frozenset[str]]:
    """Instance type -> the zones moto's offerings list it in (static data, read once per region)."""
    zones: dict[str, set[str]] = {}
    for offering in INSTANCE_TYPE_OFFERINGS.get("availability-zone", {}).get(region, []):
        zones.setdefault(offering["InstanceType"], set()).add(offering["Location"])
    return {t: frozenset(z) for t, z in zones.items()}


def other_zones_with_room(backend: Any, state: market.MarketState, key: market.PoolKey) -> list[str]:
    """The zones EC2's message suggests: those offering the type (all when moto does not know it)
    whose pool of the same capacity type has room."""
    capacity_type, instance_type, zone = key
    zones = {z.name for z in backend.describe_availability_zones()}
    offered = _offered_zones(backend.region_name).get(instance_type)
    if offered:
        zones &= offered
    return [
        z
        for z in sorted(zones)
        if z != zone and market.free_of(state, (capacity_type, instance_type, z)) >= 1
    ]


def _launch(fleet: Any, spec: Any, capacity_type: str, count: int) -> list[Any]:
    """Launch ``count`` instances from one override through moto's own fleet code."""
    fleet.get_launch_spec_counts = lambda weight: ({spec: count}, float(count))
    if capacity_type == market.SPOT:
        before = len(fleet.spot_requests)
        fleet.create_spot_requests(count)
        # Each instance knows its request id (the ``spot_request_ids`` extension).
        return [request.instance for request in fleet.spot_requests[before:]]
    before = len(fleet.on_demand_instances)
    fleet.create_on_demand_requests(count)
    return [item["instance"] for item in fleet.on_demand_instances[before:]]


def _fill(
    backend: Any,
    state: market.MarketState,
    fleet: Any,
    specs: list[tuple[Any, str]],
    capacity_type: str,
    count: int,
    strategy: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Launch ``count`` instances of one capacity type; answer (Instances, Errors) entries."""
    candidates = []
    for index, (spec, zone) in enumerate(specs):
        price = (
            spot_prices.price_for(spec.instance_type, zone)
            if capacity_type == market.SPOT
            else spot_prices.ondemand_price(spec.instance_type)
        )
        key = (capacity_type, spec.instance_type, zone)
        priority = _float((spec.overrides or {}).get("Priority"))
        candidates.append(allocation.Candidate(index, key, _INF if price is None else price, priority))
    start: dict[Hashable, float] = {c.pool: market.pool(state, *c.pool).free for c in candidates}  # type: ignore[misc]
    free = dict(start)
    placements = allocation.allocate(candidates, free, count, strategy)

    launched_entries = []
    for placement in placements:
        spec, zone = specs[placement.index]
        key = (capacity_type, spec.instance_type, zone)
        held = market.pool(state, *key)
        instances = _launch(fleet, spec, capacity_type, placement.count)
        for instance in instances:
            state.instances[instance.id] = key
        held.used += len(instances)
        held.launches += len(instances)
        launched_entries.append(
            {
                "Lifecycle": capacity_type,
                "InstanceIds": [i.id for i in instances],
                "InstanceType": spec.instance_type,
                "LaunchTemplateAndOverrides": _echo(spec, zone),
            }
        )

    fulfilled = sum(p.count for p in placements)
    used = {p.index for p in placements}
    position = {c.index: n for n, c in enumerate(allocation.rank(candidates, strategy))}
    last_used = max((position[i] for i in used), default=-1)
    weighs_all = strategy in allocation.CAPACITY_AWARE
    errors = []
    for candidate in candidates:
        if fulfilled < count:
            failed = free[candidate.pool] < 1
        else:
            # A capacity-aware strategy looked at every pool's capacity; an ordered one stopped at
            # the pool it launched into.
            failed = (
                candidate.index not in used
                and start[candidate.pool] < 1
                and (weighs_all or position[candidate.index] < last_used)
            )
        if not failed:
            continue
        spec, zone = specs[candidate.index]
        key = (capacity_type, spec.instance_type, zone)
        if capacity_type == market.SPOT:
            code, message = (
                ("UnfulfillableCapacity", UNFULFILLABLE)
                if fulfilled == 0
                else ("InsufficientInstanceCapacity", SPOT_NO_CAPACITY)
            )
        else:
            code = "InsufficientInstanceCapacity"
            message = ice_message(spec.instance_type, zone, other_zones_with_room(backend, state, key))
        market.pool(state, *key).errors += 1
        errors.append(
            {
                "LaunchTemplateAndOverrides": _echo(spec, zone),
                "Lifecycle": capacity_type,
                "ErrorCode": code,
                "ErrorMessage": message,
            }
        )
    return launched_entries, errors


def _strategy(options: dict[str, Any], allowed: tuple[str, ...]) -> str:
    strategy = str(options.get("AllocationStrategy") or "lowest-price")
    if strategy not in allowed:
        raise InvalidParameterValueError(strategy)
    return strategy


def _placed_fleet(self: Any, fleet_type: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Place what the request asks for; answer (EC2's answer, what the call log adds to the
    request's facts: the target per capacity type and each override's pool and ``Priority``)."""
    backend = self.ec2_backend
    spot_options = self._get_param("SpotOptions", {}) or {}
    on_demand_options = self._get_param("OnDemandOptions", {}) or {}
    target = dict(self._get_param("TargetCapacitySpecification", {}) or {})
    spot_strategy = _strategy(spot_options, allocation.SPOT_STRATEGIES)
    on_demand_strategy = _strategy(on_demand_options, allocation.ON_DEMAND_STRATEGIES)
    total = int(target.get("TotalTargetCapacity") or 0)
    if total < 1:
        raise InvalidParameterValueError(str(total))
    counts = {
        market.SPOT: int(target.get("SpotTargetCapacity") or 0),
        market.ON_DEMAND: int(target.get("OnDemandTargetCapacity") or 0),
    }
    default = str(target.get("DefaultTargetCapacityType") or market.ON_DEMAND)
    if default not in counts:
        raise InvalidParameterValueError(default)
    counts[default] += max(0, total - sum(counts.values()))

    # moto builds the fleet (launch templates resolved, tags, one launch spec per override) but
    # launches nothing: the market decides what to launch below.
    zero = dict(target, TotalTargetCapacity=0, SpotTargetCapacity=0, OnDemandTargetCapacity=0)
    fleet = backend.create_fleet(
        on_demand_options=on_demand_options,
        spot_options=spot_options,
        target_capacity_specification=zero,
        launch_template_configs=self._get_param("LaunchTemplateConfigs", []),
        excess_capacity_termination_policy=self._get_param("ExcessCapacityTerminationPolicy"),
        replace_unhealthy_instances=self._get_param("ReplaceUnhealthyInstances"),
        terminate_instances_with_expiration=self._get_param("TerminateInstancesWithExpiration", if_none=True),
        fleet_type=fleet_type,
        valid_from=self._get_param("ValidFrom"),
        valid_until=self._get_param("ValidUntil"),
        tag_specifications=self._get_param("TagSpecifications", []),
    )
    fleet.target_capacity_specification = target
    fleet.target_capacity = total
    state = market.state(backend.account_id, backend.region_name)
    specs = [(spec, _zone_of(backend, spec)) for spec in fleet.launch_specs]
    instances: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for capacity_type, strategy in ((market.ON_DEMAND, on_demand_strategy), (market.SPOT, spot_strategy)):
        if counts[capacity_type] > 0:
            launched, failed = _fill(
                backend, state, fleet, specs, capacity_type, counts[capacity_type], strategy
            )
            instances += launched
            errors += failed
    # Drop the instance attribute ``_launch`` may have set: moto's own method again.
    fleet.__dict__.pop("get_launch_spec_counts", None)
    requested = [
        {"InstanceType": spec.instance_type, "AvailabilityZone": zone, "Priority": _priority(spec)}
        for spec, zone in specs
    ]
    target = {market.SPOT: counts[market.SPOT], market.ON_DEMAND: counts[market.ON_DEMAND]}
    pools = {"Target": target, "Pools": requested}
    if fleet_type != "instant":
        return {"FleetId": fleet.id}, pools
    return {"FleetId": fleet.id, "Instances": instances, "Errors": errors}, pools


def _priority(spec: Any) -> float | None:
    value = _float((spec.overrides or {}).get("Priority"))
    return None if value == _INF else value


def _make_create_fleet(original: Any) -> Any:
    def create_fleet(self: Any) -> ActionResult:
        fleet_type = str(self._get_param("Type") or "maintain")
        if fleet_type not in ("instant", "request", "maintain"):
            raise InvalidParameterValueError(fleet_type)
        self.error_on_dryrun()
        backend = self.ec2_backend
        token = self._get_param("ClientToken")
        fingerprint = _fingerprint(self.querystring)
        reclaims.run_due(backend)
        with market.lock:
            state = market.state(backend.account_id, backend.region_name)
            if token and token in state.tokens:
                first, answer = state.tokens[token]
                if first != fingerprint:
                    raise EC2ClientError(
                        "IdempotentParameterMismatch",
                        "Arguments on this idempotent request are inconsistent with arguments used in "
                        "previous request(s).",
                    )
                return ActionResult(json.loads(json.dumps(answer)))
            started = time.time()
            answer, pools = _placed_fleet(self, fleet_type)
            if fleet_type == "instant":
                state.fleet_calls += 1
                request = {**_request_facts(self), **pools}
                state.call_log.append(_call_record(started, time.time(), request, answer))
            if token:
                state.tokens[token] = (fingerprint, json.loads(json.dumps(answer, default=str)))
            held = fleet_type == "instant" and bool(state.answer_holds)
            hold = state.answer_holds.pop(0) if held else 0.0
        if hold > 0:
            # The instances exist (DescribeInstances lists them, tagged) but the caller waits for
            # its answer: what a client sees when it dies or times out mid-call (``hold_answers``).
            time.sleep(hold)
        return ActionResult(answer)

    return create_fleet


def _request_facts(self: Any) -> dict[str, Any]:
    """What the caller asked for, as far as a call-log reader checks it: the fleet type, the target's
    default capacity type and total, each side's allocation strategy (None when not given) and the
    overrides summed over every launch template config."""
    target = self._get_param("TargetCapacitySpecification", {}) or {}
    spot = self._get_param("SpotOptions", {}) or {}
    on_demand = self._get_param("OnDemandOptions", {}) or {}
    configs = self._get_param("LaunchTemplateConfigs", []) or []
    return {
        "Type": self._get_param("Type") or "maintain",
        "DefaultTargetCapacityType": target.get("DefaultTargetCapacityType"),
        "TotalTargetCapacity": int(target.get("TotalTargetCapacity") or 0),
        "SpotAllocationStrategy": spot.get("AllocationStrategy"),
        "OnDemandAllocationStrategy": on_demand.get("AllocationStrategy"),
        "Overrides": sum(len(c.get("Overrides") or []) for c in configs),
    }


def _call_record(start: float, end: float, request: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """The call log's entry for one answered call (``market.fleet_call_log``): its times, the
    request's facts (``_request_facts``), what launched and the errors."""

    def where(entry: dict[str, Any]) -> dict[str, Any]:
        overrides = (entry.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
        return {
            "CapacityType": entry.get("Lifecycle"),
            "InstanceType": overrides.get("InstanceType") or entry.get("InstanceType"),
            "AvailabilityZone": overrides.get("AvailabilityZone"),
        }

    return {
        "Start": start,
        "End": end,
        "Request": request,
        "Launched": [{**where(i), "Count": len(i["InstanceIds"])} for i in answer["Instances"]],
        "Errors": [{**where(e), "ErrorCode": e["ErrorCode"]} for e in answer["Errors"]],
    }


def _make_terminate(original: Any) -> Any:
    def terminate(self: Any) -> Any:
        was = self._state.name
        previous = original(self)
        if was != "terminated":
            market.release(self.ec2_backend, self.id)
        return previous

    return terminate


def install() -> None:
    """Patch moto's CreateFleet, instance termination and instance filters (once)."""
    cls: Any = fleets.Fleets  # a mixin of EC2Response: patching it reaches the served class
    if getattr(cls, _MARK, False):
        return
    cls.create_fleet = _make_create_fleet(cls.create_fleet)
    instance_cls: Any = Instance
    instance_cls.terminate = _make_terminate(instance_cls.terminate)
    # EC2's filter; moto's Instance keeps "spot" (or None) in ``lifecycle``.
    ec2_utils.filter_dict_attribute_mapping["instance-lifecycle"] = "lifecycle"
    setattr(cls, _MARK, True)
