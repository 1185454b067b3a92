"""The capacity catalog: EC2 instance types, their zones and prices, as the scheduling core's InstanceTypes.

Read from the EC2 API as Karpenter's AWS provider reads it (``pkg/providers/instancetype/
instancetype.go``, ``types.go``): ``DescribeInstanceTypes`` (hardware-virtualised x86_64 and arm64
types, paged) → ``model.capacity.InstanceTypeInfo``; ``DescribeInstanceTypeOfferings`` with
``LocationType=availability-zone`` → the zones each type is sold in; prices from
``kubespot.aws.pricing.Prices``. ``Catalog.instance_types(zones, ...)`` builds
``scheduling.instance_types.InstanceType`` with ``scheduling.allocatable.node_resources`` and an
offering per zone and capacity type: on-demand priced at this account's discounted price, spot at
the latest spot price; an offering without a known price is unavailable (Karpenter's rule), and so
is a spot offering of a type that does not support spot.

Accelerators become extended resources as Karpenter counts them: ``nvidia.com/gpu``,
``amd.com/gpu`` and ``habana.ai/gaudi`` from the GPUs by manufacturer, ``aws.amazon.com/neuron``
(devices) and ``aws.amazon.com/neuroncore`` (devices times cores per device) from the Neuron info, and
``vpc.amazonaws.com/efa`` from the EFA interfaces.

Refreshes: ``refresh()`` on demand (one at a time; concurrent callers share it), ``refresh_if_due()``
after ``PricingSettings.refresh_interval`` (12 h, as Karpenter). A failed read keeps what was known
and says so in ``errors``; the provisioning controller's ``CatalogRefresh`` keeps the catalog fresh
and retries failures with backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any, Final

from kubespot.config.pricing import PricingSettings
from kubespot.model import Clock, SystemClock
from kubespot.model.capacity import AMIFamily, InstanceTypeInfo, KubeletConfig
from kubespot.scheduling.allocatable import node_resources
from kubespot.scheduling.instance_types import InstanceType, Offering, instance_type

from .pricing import Prices
from .session import AwsClients, AwsError

__all__ = ["CAPACITY_TYPES", "Catalog", "extended_resources", "instance_type_info"]

CAPACITY_TYPES: Final = ("spot", "on-demand")
_TYPES_PAGE: Final = 100  # DescribeInstanceTypes' maximum
_OFFERINGS_PAGE: Final = 1000  # DescribeInstanceTypeOfferings' maximum
_TYPE_FILTERS: Final = [
    {"Name": "supported-virtualization-type", "Values": ["hvm"]},
    {"Name": "processor-info.supported-architecture", "Values": ["x86_64", "arm64"]},
]
_GPU_RESOURCES: Final = {"NVIDIA": "nvidia.com/gpu", "AMD": "amd.com/gpu", "Habana": "habana.ai/gaudi"}


def extended_resources(raw: Mapping[str, Any]) -> dict[str, int]:
    """Accelerators and EFA interfaces of a DescribeInstanceTypes entry as node resources (non-zero)."""
    out: dict[str, int] = {}
    for gpu in (raw.get("GpuInfo") or {}).get("Gpus") or []:
        resource = _GPU_RESOURCES.get(str(gpu.get("Manufacturer")))
        if resource:
            out[resource] = out.get(resource, 0) + int(gpu.get("Count") or 0)
    devices = (raw.get("NeuronInfo") or {}).get("NeuronDevices") or []
    if devices:
        out["aws.amazon.com/neuron"] = sum(int(d.get("Count") or 0) for d in devices)
        first = devices[0]
        out["aws.amazon.com/neuroncore"] = int(first.get("Count") or 0) * int(
            (first.get("CoreInfo") or {}).get("Count") or 0
        )
    efa = ((raw.get("NetworkInfo") or {}).get("EfaInfo") or {}).get("MaximumEfaInterfaces")
    if efa:
        out["vpc.amazonaws.com/efa"] = int(efa)
    return {name: count for name, count in out.items() if count > 0}


def instance_type_info(raw: Mapping[str, Any]) -> InstanceTypeInfo:
    """One DescribeInstanceTypes entry as the capacity model's facts."""
    network = raw.get("NetworkInfo") or {}
    cards = network.get("NetworkCards") or []
    default_card = int(network.get("DefaultNetworkCardIndex") or 0)
    # The VPC CNI uses only the default network card's interfaces (Karpenter's ENILimitedPods).
    enis = next(
        (int(c["MaximumNetworkInterfaces"]) for c in cards if c.get("NetworkCardIndex") == default_card),
        int(network.get("MaximumNetworkInterfaces") or 0),
    )
    arches = (raw.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []
    return InstanceTypeInfo(
        name=str(raw["InstanceType"]),
        vcpus=int(raw["VCpuInfo"]["DefaultVCpus"]),
        memory_mib=int(raw["MemoryInfo"]["SizeInMiB"]),
        architecture="arm64" if "arm64" in arches else "x86_64",
        max_enis=enis,
        ipv4_per_eni=int(network.get("Ipv4AddressesPerInterface") or 0),
        local_storage_gb=int((raw.get("InstanceStorageInfo") or {}).get("TotalSizeInGB") or 0),
        extended=extended_resources(raw),
    )


async def describe_types(clients: AwsClients, names: Iterable[str]) -> dict[str, InstanceTypeInfo]:
    """The named instance types as EC2 describes them (``kubespot convert --instance-sizes``). A filter,
    not ``InstanceTypes``: a name EC2 does not know is left out instead of failing the call."""
    wanted = sorted(set(names))
    out: dict[str, InstanceTypeInfo] = {}
    for start in range(0, len(wanted), _TYPES_PAGE):
        chunk = wanted[start : start + _TYPES_PAGE]
        request: dict[str, Any] = {"Filters": [{"Name": "instance-type", "Values": chunk}]}
        while True:
            page = await clients.call("ec2", "DescribeInstanceTypes", **request)
            for raw in page.get("InstanceTypes") or []:
                info = instance_type_info(raw)
                out[info.name] = info
            token = page.get("NextToken")
            if not token:
                break
            request["NextToken"] = token
    return out


class Catalog:
    """Instance types, zonal offerings and prices of one region, kept in memory and refreshed."""

    def __init__(
        self,
        clients: AwsClients,
        region: str,
        settings: PricingSettings | None = None,
        *,
        prices: Prices | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings or PricingSettings()
        self._clients = clients
        self._clock = clock or SystemClock()
        self.prices = prices or Prices(clients, region, self.settings, clock=self._clock)
        self.region = region
        self._types: dict[str, InstanceTypeInfo] = {}
        #: ``instance_types`` answers by their arguments, until the next refresh: building every
        #: type (over a thousand) costs a provisioning pass 0.2-0.8 s each time, and nothing they
        #: are built from changes between refreshes (Karpenter's instance type provider caches
        #: them too, keyed by the class and its caches' versions).
        self._built: dict[tuple[object, ...], tuple[InstanceType, ...]] = {}
        self._spot_capable: set[str] = set()
        self._zones: dict[str, set[str]] = {}
        self._refreshed_at: float | None = None
        self._inflight: asyncio.Task[None] | None = None
        self.errors: dict[str, AwsError] = {}

    # -- reads ------------------------------------------------------------------------------------

    @property
    def refreshed_at(self) -> float | None:
        """When the last refresh finished (the clock's monotonic seconds), None before the first."""
        return self._refreshed_at

    def infos(self) -> dict[str, InstanceTypeInfo]:
        return dict(self._types)

    def zones(self) -> set[str]:
        """Every zone some type is offered in."""
        return set().union(*self._zones.values()) if self._zones else set()

    def instance_types(
        self,
        zones: Iterable[str] | None = None,
        *,
        family: AMIFamily = AMIFamily.AL2023,
        kubelet: KubeletConfig | None = None,
        capacity_types: Iterable[str] = CAPACITY_TYPES,
    ) -> list[InstanceType]:
        """The types offered in any of ``zones`` (all zones when None), with their offerings there."""
        wanted = set(zones) if zones is not None else None
        kinds = tuple(capacity_types)
        zones_key = frozenset(wanted) if wanted is not None else None
        # The prices (and their settings' discounts) as they are now: swapping them, or a price
        # refresh outside the catalog's own (``Prices.generation``), rebuilds.
        key = (
            zones_key,
            family,
            repr(kubelet),
            kinds,
            id(self.prices),
            self.prices.generation,
            id(self.prices.settings),
        )
        built = self._built.get(key)
        if built is not None:
            return list(built)
        out = []
        for name in sorted(self._types):
            info = self._types[name]
            offered = self._zones.get(name, set())
            where = sorted(offered & wanted if wanted is not None else offered)
            if not where:
                continue
            offerings = [self._offering(name, zone, kind) for zone in where for kind in kinds]
            out.append(instance_type(info, node_resources(info, family, kubelet), offerings))
        self._built[key] = tuple(out)
        return out

    def _offering(self, name: str, zone: str, capacity_type: str) -> Offering:
        if capacity_type == "spot":
            price = self.prices.spot_price(name, zone) if name in self._spot_capable else None
        else:
            price = self.prices.ondemand_price(name)
        return Offering(zone, capacity_type, price if price is not None else 0.0, price is not None)

    # -- refreshes --------------------------------------------------------------------------------

    def due(self) -> bool:
        """True before the first refresh and once ``refresh_interval`` has passed since the last."""
        if self._refreshed_at is None:
            return True
        return self._clock.monotonic() - self._refreshed_at >= self.settings.refresh_interval

    async def refresh_if_due(self) -> bool:
        if not self.due():
            return False
        await self.refresh()
        return True

    async def refresh(self) -> None:
        """Read types, offerings and prices again; concurrent callers share one refresh."""
        if self._inflight is None or self._inflight.done():
            self._inflight = asyncio.create_task(self._refresh(), name="kubespot-catalog-refresh")
        await asyncio.shield(self._inflight)

    async def _refresh(self) -> None:
        self._built.clear()
        try:
            types = await self._describe_types()
        except AwsError as exc:
            self.errors["instance-types"] = exc
        else:
            self._types = {info.name: info for info, _ in types}
            self._spot_capable = {info.name for info, spot in types if spot}
            self.errors.pop("instance-types", None)
        try:
            self._zones = await self._describe_offerings()
        except AwsError as exc:
            self.errors["offerings"] = exc
        else:
            self.errors.pop("offerings", None)
        await self.prices.refresh()
        # Built from what the refresh changed (and perhaps half-way through it): build again.
        self._built.clear()
        self._refreshed_at = self._clock.monotonic()

    async def _describe_types(self) -> list[tuple[InstanceTypeInfo, bool]]:
        out = []
        request: dict[str, Any] = {"Filters": _TYPE_FILTERS, "MaxResults": _TYPES_PAGE}
        while True:
            page = await self._clients.call("ec2", "DescribeInstanceTypes", **request)
            for raw in page.get("InstanceTypes") or []:
                spot = "spot" in (raw.get("SupportedUsageClasses") or ["spot"])
                out.append((instance_type_info(raw), spot))
            token = page.get("NextToken")
            if not token:
                return out
            request["NextToken"] = token

    async def _describe_offerings(self) -> dict[str, set[str]]:
        zones: dict[str, set[str]] = {}
        request: dict[str, Any] = {"LocationType": "availability-zone", "MaxResults": _OFFERINGS_PAGE}
        while True:
            page = await self._clients.call("ec2", "DescribeInstanceTypeOfferings", **request)
            for offering in page.get("InstanceTypeOfferings") or []:
                zones.setdefault(str(offering["InstanceType"]), set()).add(str(offering["Location"]))
            token = page.get("NextToken")
            if not token:
                return zones
            request["NextToken"] = token
