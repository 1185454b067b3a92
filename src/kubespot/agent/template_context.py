"""The node and instance facts a webhook template can use, read when an event's first message is
queued: what aws-node-termination-handler gives its template besides the event.

NTH's drain handler reads the Node's labels and the names of the pods on it before it drains
(``draincordon/handler.go``: ``GetNodeLabels``, ``FetchPodNameList``), and passes the instance's
metadata (``ec2metadata.NodeMetadata``: account, type, zone, region, IPs, host names, life cycle).
The agent does the same: the Node and its pods from the API server, the instance from the identity
the IMDS monitor read at start-up. A part that cannot be read is left out (empty in the message),
as NTH falls back to what it had.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubespot.actions.node_facts import node_facts
from kubespot.kube import KubeClient
from kubespot.model import InterruptionEvent
from kubespot.sources.imds.client import InstanceIdentity


class TemplateContext:
    """``await context(event, node_name)``: the facts for the notifier's templates."""

    def __init__(self, kube: KubeClient, identity: Callable[[], InstanceIdentity | None]) -> None:
        self._kube = kube
        self._identity = identity

    async def __call__(self, event: InterruptionEvent, node_name: str) -> dict[str, Any]:
        return {**instance_facts(self._identity()), **await node_facts(self._kube, event, node_name)}


def instance_facts(identity: InstanceIdentity | None) -> dict[str, Any]:
    """NTH's ``NodeMetadata`` names for what IMDS says about this instance (nothing if unknown yet)."""
    if identity is None:
        return {}
    facts = {
        "AccountId": identity.account_id,
        "InstanceType": identity.instance_type,
        "InstanceLifeCycle": identity.life_cycle,
        "AvailabilityZone": identity.availability_zone,
        "Region": identity.region,
        "LocalIP": identity.private_ip,
        "LocalHostname": identity.local_hostname,
        "PublicIP": identity.public_ip,
        "PublicHostname": identity.public_hostname,
    }
    return {name: value for name, value in facts.items() if value}
