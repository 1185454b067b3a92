"""A small table of common EC2 instance types for kubesim's cluster generator.

Only the figures a simulated EKS node needs: vCPUs, memory, architecture, the default EKS max-pods
value (ENI limit formula, what the EKS AMI bootstrap uses without prefix delegation) and the
us-east-1 on-demand price (from ``shared/data/aws-ondemand-prices.json``), so that generated
clusters look like real ones. Not a catalogue: the provisioner has its own source of instance data.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class InstanceType:
    name: str
    vcpu: int
    memory_mib: int
    arch: str  # Kubernetes spelling: amd64 | arm64
    max_pods: int
    price: float  # us-east-1 on-demand, USD per hour

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def size(self) -> str:
        return self.name.split(".", 1)[1]


# size -> (vCPUs, ENI-derived max pods); identical across the Nitro families listed below.
_SIZES: dict[str, tuple[int, int]] = {
    "large": (2, 29),
    "xlarge": (4, 58),
    "2xlarge": (8, 58),
    "4xlarge": (16, 234),
    "8xlarge": (32, 234),
    "9xlarge": (36, 234),
    "12xlarge": (48, 234),
    "16xlarge": (64, 737),
}

# family -> (GiB per vCPU, arch, {size: price}). Prices copied from the shared price file.
_FAMILIES: dict[str, tuple[int, str, dict[str, float]]] = {
    "m5": (4, "amd64", {"large": 0.096, "xlarge": 0.192, "2xlarge": 0.384, "4xlarge": 0.768,
                        "8xlarge": 1.536, "12xlarge": 2.304, "16xlarge": 3.072}),
    "m6i": (4, "amd64", {"large": 0.096, "xlarge": 0.192, "2xlarge": 0.384, "4xlarge": 0.768,
                         "8xlarge": 1.536, "12xlarge": 2.304, "16xlarge": 3.072}),
    "m7i": (4, "amd64", {"large": 0.1008, "xlarge": 0.2016, "2xlarge": 0.4032, "4xlarge": 0.8064,
                         "8xlarge": 1.6128, "12xlarge": 2.4192, "16xlarge": 3.2256}),
    "c5": (2, "amd64", {"large": 0.085, "xlarge": 0.17, "2xlarge": 0.34, "4xlarge": 0.68,
                        "9xlarge": 1.53, "12xlarge": 2.04}),
    "c6i": (2, "amd64", {"large": 0.085, "xlarge": 0.17, "2xlarge": 0.34, "4xlarge": 0.68,
                         "8xlarge": 1.36, "12xlarge": 2.04, "16xlarge": 2.72}),
    "c7i": (2, "amd64", {"large": 0.08925, "xlarge": 0.1785, "2xlarge": 0.357, "4xlarge": 0.714,
                         "8xlarge": 1.428, "12xlarge": 2.142, "16xlarge": 2.856}),
    "r5": (8, "amd64", {"large": 0.126, "xlarge": 0.252, "2xlarge": 0.504, "4xlarge": 1.008,
                        "8xlarge": 2.016, "12xlarge": 3.024, "16xlarge": 4.032}),
    "r6i": (8, "amd64", {"large": 0.126, "xlarge": 0.252, "2xlarge": 0.504, "4xlarge": 1.008,
                         "8xlarge": 2.016, "12xlarge": 3.024, "16xlarge": 4.032}),
    "m6g": (4, "arm64", {"large": 0.077, "xlarge": 0.154, "2xlarge": 0.308, "4xlarge": 0.616,
                         "8xlarge": 1.232, "12xlarge": 1.848, "16xlarge": 2.464}),
    "m7g": (4, "arm64", {"large": 0.0816, "xlarge": 0.1632, "2xlarge": 0.3264, "4xlarge": 0.6528,
                         "8xlarge": 1.3056, "12xlarge": 1.9584, "16xlarge": 2.6112}),
    "c6g": (2, "arm64", {"large": 0.068, "xlarge": 0.136, "2xlarge": 0.272, "4xlarge": 0.544,
                         "8xlarge": 1.088, "12xlarge": 1.632, "16xlarge": 2.176}),
    "c7g": (2, "arm64", {"large": 0.0725, "xlarge": 0.145, "2xlarge": 0.29, "4xlarge": 0.58,
                         "8xlarge": 1.16, "12xlarge": 1.74, "16xlarge": 2.32}),
}  # fmt: skip


def _build() -> dict[str, InstanceType]:
    table: dict[str, InstanceType] = {}
    for family, (gib_per_vcpu, arch, prices) in _FAMILIES.items():
        for size, price in prices.items():
            vcpu, max_pods = _SIZES[size]
            name = f"{family}.{size}"
            table[name] = InstanceType(name, vcpu, vcpu * gib_per_vcpu * 1024, arch, max_pods, price)
    return table


#: All known types by name, in a stable order (families as listed, sizes ascending).
INSTANCE_TYPES: dict[str, InstanceType] = _build()

#: Families Karpenter-style spot node pools typically diversify over.
SPOT_FAMILIES: tuple[str, ...] = tuple(_FAMILIES)

#: Families typical of on-demand managed node groups (general purpose, x86).
ON_DEMAND_FAMILIES: tuple[str, ...] = ("m5", "m6i", "m7i")
