"""RunInstances draws from the spot market's pools, answering EC2's capacity and price errors.

Stock moto 5.2.5 launches whatever RunInstances asks, never running out. Here the instances come
from the same finite pools as CreateFleet's (``market.py``; one pool per capacity type, instance
type and zone), so a caller that launches one instance at a time meets the same shortage:

- the pool is (``spot`` when ``InstanceMarketOptions.MarketType`` is ``spot``, else
  ``on-demand``; ``InstanceType``, else the launch template's, else moto's ``m1.small``; the zone
  moto places the instance in: the subnet's (``SubnetId``, else the first network interface's),
  else ``Placement.AvailabilityZone``, else the region's ``a`` zone);
- a spot request whose ``SpotOptions.MaxPrice`` is below the pool's current spot price
  (``spot_prices.price_for``) is refused with ``SpotMaxPriceTooLow`` "Your Spot request price of
  <max> is lower than the minimum required Spot request fulfillment price of <price>.";
- when the pool has room for fewer than the instances moto would launch (it launches ``MinCount``;
  EC2 launches up to ``MaxCount``, at least ``MinCount``), nothing launches and the answer is
  ``InsufficientInstanceCapacity``: for on-demand "We currently do not have sufficient <type>
  capacity in the Availability Zone you requested (<zone>)…" (the zones with room suggested, as
  CreateFleet's), for spot "There is no Spot capacity available that matches your request."
  (EC2 API reference, "Error codes for the Amazon EC2 API": both codes; the wording as EC2 and
  the CreateFleet extension give it);
- the instances launched hold their slots until they terminate (``market.release``) and count as
  the pool's launches; a refusal counts as one error of the pool.

Pools default to unlimited (``market.py``): a caller that never configures the market sees stock
moto. Only the RunInstances action is covered: CreateFleet, spot requests and Auto Scaling groups
reach moto's backend directly and are not counted twice.
"""

from __future__ import annotations

from typing import Any

from moto.ec2.exceptions import EC2ClientError
from moto.ec2.responses.instances import InstanceResponse

from kubespot.sim.awssim.extensions import fleet, market, reclaims, spot_prices

__all__ = ["install"]

_MARK = "_kubespot_run_instances"
_DEFAULT_TYPE = "m1.small"  # what moto launches when neither the call nor a template names a type


def _instance_type(self: Any) -> str:
    named = self._get_param("InstanceType")
    if named:
        return str(named)
    template = self._get_param("LaunchTemplate", {})
    if template:
        data = self.ec2_backend._get_template_from_args(template).data
        if data.get("InstanceType"):
            return str(data["InstanceType"])
    return _DEFAULT_TYPE


def _zone(self: Any) -> str:
    backend = self.ec2_backend
    subnet_id = self._get_param("SubnetId") or next(
        (n["SubnetId"] for n in self._get_param("NetworkInterfaces", []) or [] if n.get("SubnetId")), None
    )
    if subnet_id:
        return str(backend.get_subnet(subnet_id).availability_zone)
    placed = self._get_param("Placement.AvailabilityZone")
    return str(placed) if placed else f"{backend.region_name}a"


def _refuse_price(instance_type: str, zone: str, max_price: Any) -> None:
    if max_price in (None, ""):
        return
    price = spot_prices.price_for(instance_type, zone)
    if price is not None and float(max_price) < price:
        raise EC2ClientError(
            "SpotMaxPriceTooLow",
            f"Your Spot request price of {max_price} is lower than the minimum required Spot request "
            f"fulfillment price of {price:.6f}.",
        )


def _make_run_instances(original: Any) -> Any:
    def run_instances(self: Any) -> Any:
        backend = self.ec2_backend
        spot = self._get_param("InstanceMarketOptions.MarketType") == "spot"
        capacity_type = market.SPOT if spot else market.ON_DEMAND
        instance_type, zone = _instance_type(self), _zone(self)
        count = int(self._get_param("MinCount", if_none="1"))
        key = (capacity_type, instance_type, zone)
        if spot:
            _refuse_price(instance_type, zone, self._get_param("InstanceMarketOptions.SpotOptions.MaxPrice"))
        reclaims.run_due(backend)
        with market.lock:
            state = market.state(backend.account_id, backend.region_name)
            held = market.pool(state, *key)
            if held.free < count:
                held.errors += 1
                if spot:
                    message = fleet.SPOT_NO_CAPACITY
                else:
                    others = fleet.other_zones_with_room(backend, state, key)
                    message = fleet.ice_message(instance_type, zone, others)
                raise EC2ClientError("InsufficientInstanceCapacity", message)
            # Under the lock: two calls on two server threads must not book one slot twice.
            result = original(self)
            # moto answers the new Reservation (``ActionResult(new_reservation)``).
            launched = [i.id for i in getattr(result.result, "instances", [])]
            for instance_id in launched:
                state.instances[instance_id] = key
            held.used += len(launched)
            held.launches += len(launched)
        return result

    return run_instances


def install() -> None:
    """Patch moto's RunInstances action (once)."""
    cls: Any = InstanceResponse  # a mixin of EC2Response: patching it reaches the served class
    if getattr(cls, _MARK, False):
        return
    cls.run_instances = _make_run_instances(cls.run_instances)
    setattr(cls, _MARK, True)
