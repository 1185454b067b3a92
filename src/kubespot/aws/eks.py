"""The cluster's own facts from EKS (``DescribeCluster``): its API endpoint, certificate authority and
service CIDR, which nodes need in their bootstrap configuration.

Karpenter reads the same call when ``CLUSTER_ENDPOINT`` is not set and for the cluster CIDR
(aws/karpenter-provider-aws ``pkg/operator/operator.go`` ``ResolveClusterEndpoint``,
``ResolveClusterCIDR``), so the launch settings may leave them empty on EKS.
"""

from __future__ import annotations

from dataclasses import dataclass

from .session import AwsClients

__all__ = ["ClusterFacts", "describe_cluster"]


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    endpoint: str
    #: base64 PEM, as EKS returns it.
    ca_bundle: str
    #: The service CIDR (IPv4, else IPv6); "" when EKS does not say.
    cidr: str


async def describe_cluster(clients: AwsClients, name: str) -> ClusterFacts:
    """``DescribeCluster`` of ``name``; ``AwsError`` when it fails (not found, denied)."""
    answer = await clients.call("eks", "DescribeCluster", name=name)
    cluster = answer.get("cluster") or {}
    network = cluster.get("kubernetesNetworkConfig") or {}
    return ClusterFacts(
        endpoint=str(cluster.get("endpoint") or ""),
        ca_bundle=str((cluster.get("certificateAuthority") or {}).get("data") or ""),
        cidr=str(network.get("serviceIpv4Cidr") or network.get("serviceIpv6Cidr") or ""),
    )
