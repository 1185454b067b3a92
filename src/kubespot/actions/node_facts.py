"""The Node facts a webhook template can use besides the event: its labels, providerID and the names
of the pods on it, read as aws-node-termination-handler's drain handler reads them before it drains
(``draincordon/handler.go``: ``GetNodeLabels``, ``FetchPodNameList``). Agent and controller share
this; each adds what it knows of the instance (the agent from IMDS, the controller from EC2).
A part that cannot be read is left out (empty in the message), as NTH falls back to what it had.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubespot.kube import KubeClient, KubeError
from kubespot.model import InterruptionEvent

log = logging.getLogger("kubespot.actions.notify")


async def node_facts(kube: KubeClient, event: InterruptionEvent, node_name: str) -> dict[str, Any]:
    """``NodeLabels``, ``ProviderID`` and ``Pods`` of ``node_name``, those that could be read."""
    facts: dict[str, Any] = {}
    node, pods = await asyncio.gather(
        kube.get_node(node_name), kube.list_pods_on_node(node_name), return_exceptions=True
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


def _unread(what: str, exc: BaseException, event: InterruptionEvent) -> None:
    if not isinstance(exc, KubeError | OSError | TimeoutError):
        raise exc
    log.warning(
        "webhook template: %s not read for event %s: %s", what, event.id, exc, extra={"event_id": event.id}
    )
