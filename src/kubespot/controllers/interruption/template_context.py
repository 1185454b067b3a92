"""The facts a webhook template gets in queue mode: the Node's labels, providerID and pod names
(``actions.node_facts``, as the agent reads them) and what EC2 says of the interrupted instance
(its zone, life cycle, private host name, from the cached DescribeInstances the queue already
makes). NTH in queue mode fills its instance fields from the IMDS of the host it runs on, which
describes the wrong machine; kubespot leaves out what it does not know instead.
"""

from __future__ import annotations

import logging
from typing import Any

from kubespot.actions.node_facts import node_facts
from kubespot.aws import InstanceDirectory
from kubespot.kube import KubeClient
from kubespot.model import InterruptionEvent

log = logging.getLogger("kubespot.controller")


class QueueTemplateContext:
    """``await context(event, node_name)``: the facts for the notifier's templates."""

    def __init__(self, kube: KubeClient, instances: InstanceDirectory, region: str) -> None:
        self._kube = kube
        self._instances = instances
        self._region = region

    async def __call__(self, event: InterruptionEvent, node_name: str) -> dict[str, Any]:
        facts: dict[str, Any] = {"Region": self._region} if self._region else {}
        if event.instance_id:
            try:
                info = (await self._instances.lookup([event.instance_id])).get(event.instance_id)
            except Exception as exc:  # the message goes out without the instance's facts
                log.warning("webhook template: instance %s not described: %s", event.instance_id, exc)
                info = None
            if info is not None:
                facts["AvailabilityZone"] = info.availability_zone
                facts["LocalHostname"] = info.private_dns_name
                facts["InstanceLifeCycle"] = info.lifecycle or "on-demand"
        return {**facts, **await node_facts(self._kube, event, node_name)}
