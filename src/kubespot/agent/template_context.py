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

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kubespot.kube import KubeClient, KubeError
from kubespot.model import InterruptionEvent
from kubespot.sources.imds.client import InstanceIdentity

log = logging.getLogger("kubespot.agent")


class TemplateContext:
    """``await context(event, node_name)``: the facts for the notifier's templates."""

    def __init__(self, kube: KubeClient, identity: Callable[[], InstanceIdentity | None]) -> None:
        self._kube = kube
        self._identity = identity

    async def __call__(self, event: InterruptionEvent, node_name: str) -> dict[str, Any]:
        facts = instance_facts(self._identity())
        node, pods = await asyncio.gather(
            self._kube.get_node(node_name), self._kube.list_pods_on_node(node_name), return_exceptions=True
        )
        if isinstance(node, BaseException):
            _unread("node labels", node, event)
        elif node is not None:
            facts["NodeLabels"] = dict(node.labels)
            facts["ProviderID"] = node.provider_id
        if isinstance(pods, BaseException):
            _unread("pod names", pods, event)
        else:
            # Names only, in the API server's order, as NTH's FetchPodNameList returns them.
            facts["Pods"] = [pod.name for pod in pods.pods]
        return facts


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


def _unread(what: str, exc: BaseException, event: InterruptionEvent) -> None:
    if not isinstance(exc, KubeError | OSError | TimeoutError):
        raise exc
    log.warning(
        "webhook template: %s not read for event %s: %s", what, event.id, exc, extra={"event_id": event.id}
    )
