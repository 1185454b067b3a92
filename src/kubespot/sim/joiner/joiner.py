"""The joiner's loop: every poll, the cluster's instances from EC2, and for each the kubelet's part.

Per instance (``_Boot``):

- **running**, no Node yet, ``boot_delay`` (plus a seeded per-instance jitter) after its EC2
  ``LaunchTime``: read its user data, check its kubelet flags, create its Node (``node.registration``:
  Ready False); ``ready_delay`` later, post Ready True. A kubelet that would refuse to start
  (``kubelet_flags``, a malformed flag) never registers; user data of no known family registers
  without extra labels. A Node of that name already there (a restarted joiner) is left alone.
- **shutting-down**, **terminated** or gone, with a Node: at once, stop kubesim's simulated kubelet
  of it and write Ready Unknown (what the node lifecycle controller writes once heartbeats stop);
  once the instance is terminated or gone, delete the Node (again each poll while finalizers
  hold it; once it is gone kubesim forgets the stopped kubelet, so a later instance given the
  same private DNS name boots a live one), as the cloud node lifecycle
  controller does for a not-Ready node whose instance no longer exists
  (staging/src/k8s.io/cloud-provider/controllers/nodelifecycle ``MonitorNodes``; the AWS provider's
  ``InstanceExistsByProviderID`` is false only for terminated instances).

Any EC2 or Kubernetes failure (5xx, timeouts, refused connections) is logged and the step tried
again next poll; the loop itself never ends on an error.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError

from . import kubelet_flags
from .ec2 import Ec2Reader, Instance
from .kube import KubeError, KubeWriter
from .node import gone_patch, node_name, ready_patch, registration
from .userdata import BootConfig, parse

log = logging.getLogger("kubespot.sim.joiner")

#: What the joiner expects to go wrong in one step: retried next poll.
_RETRIED = (KubeError, BotoCoreError, ClientError, LookupError, OSError)


@dataclass(frozen=True, slots=True)
class JoinerConfig:
    cluster: str
    boot_delay: float = 5.0  # LaunchTime -> the kubelet registers its Node
    ready_delay: float = 2.0  # registration -> Ready True (the CNI comes up)
    jitter: float = 0.0  # up to this much more boot time per instance, seeded by (seed, instance id)
    seed: int = 0
    poll_interval: float = 1.0
    concurrency: int = 16  # steps in flight at once


@dataclass
class _Boot:
    """One instance's boot as the joiner follows it."""

    instance: Instance
    due: float  # wall time the kubelet registers
    boot: BootConfig | None = None
    refused: str = ""
    registered_at: float | None = None
    ready: bool = False
    going: bool = False  # kubelet stopped and Ready Unknown written


class Joiner:
    """See the module docstring. ``run()`` until cancelled, or ``tick()`` once."""

    def __init__(
        self,
        ec2: Ec2Reader,
        kube: KubeWriter,
        config: JoinerConfig,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ec2 = ec2
        self.kube = kube
        self.config = config
        self.clock = clock
        self._boots: dict[str, _Boot] = {}
        self._limit = asyncio.Semaphore(config.concurrency)

    # -- what tests and the sandbox read ----------------------------------------------------------

    def registered_at(self, instance_id: str) -> float | None:
        """Wall time this joiner registered the instance's Node, if it did."""
        boot = self._boots.get(instance_id)
        return None if boot is None else boot.registered_at

    def refusal(self, instance_id: str) -> str:
        """Why the instance's kubelet refused to start (empty: it did not)."""
        boot = self._boots.get(instance_id)
        return "" if boot is None else boot.refused

    # -- the loop ---------------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.tick()
            except Exception:  # a bug in a step must not end the simulated fleet's kubelets
                log.exception("joiner: tick failed")
            await asyncio.sleep(max(0.0, self.config.poll_interval - (time.monotonic() - started)))

    async def tick(self) -> None:
        try:
            instances = await self.ec2.instances()
        except _RETRIED as exc:
            log.warning("joiner: DescribeInstances failed, retrying next poll: %s", exc)
            return
        now = self.clock()
        for instance in instances.values():
            boot = self._boots.get(instance.id)
            if boot is not None:
                boot.instance = instance
            elif instance.state in ("pending", "running"):
                self._boots[instance.id] = _Boot(instance, instance.launch_time + self.boot_time(instance.id))
        steps: list[Awaitable[None]] = []
        for instance_id, boot in list(self._boots.items()):
            seen = instances.get(instance_id)
            state = seen.state if seen is not None else "gone"
            if state in ("shutting-down", "terminated", "gone"):
                steps.append(self._retire(boot, state))
            elif state != "running" or boot.refused:
                continue
            elif boot.registered_at is None and now >= boot.due:
                steps.append(self._register(boot))
            elif (
                boot.registered_at is not None
                and not boot.ready
                and now >= boot.registered_at + self.config.ready_delay
            ):
                steps.append(self._post_ready(boot))
        await asyncio.gather(*(self._bounded(step) for step in steps))

    def boot_time(self, instance_id: str) -> float:
        """Seconds from the instance's LaunchTime to its registration (boot delay plus its jitter)."""
        if self.config.jitter <= 0:
            return self.config.boot_delay
        rng = random.Random(f"{self.config.seed}/{instance_id}")
        return self.config.boot_delay + rng.uniform(0.0, self.config.jitter)

    async def _bounded(self, step: Awaitable[None]) -> None:
        async with self._limit:
            try:
                await step
            except _RETRIED as exc:
                log.warning("joiner: %s; retrying next poll", exc)
            except Exception:
                log.exception("joiner: step failed; retrying next poll")

    # -- the steps ----------------------------------------------------------------------------------

    async def _register(self, boot: _Boot) -> None:
        instance = boot.instance
        if boot.boot is None:
            boot.boot = parse(await self.ec2.user_data(instance.id))
            if boot.boot.problem:
                log.warning(
                    "joiner: %s: %s; registering without extra labels or taints",
                    instance.id,
                    boot.boot.problem,
                )
        refusal = boot.boot.refusal or kubelet_flags.refusal(boot.boot.labels)
        if refusal:
            boot.refused = refusal
            log.warning(
                "joiner: the kubelet of %s refuses to start, no Node registers: %s", instance.id, refusal
            )
            return
        facts = await self.ec2.instance_type(instance.type)
        now = self.clock()
        node = registration(instance, facts, boot.boot, now=now, ready_delay=self.config.ready_delay)
        created = await self.kube.create_node(node)
        boot.registered_at = now
        if created:
            log.info("joiner: %s registered as node %s", instance.id, node_name(instance))
        else:  # a Node of that name exists (a restarted joiner): its kubelet is already up
            boot.ready = True
            log.info("joiner: node %s of %s exists already; left as it is", node_name(instance), instance.id)

    async def _post_ready(self, boot: _Boot) -> None:
        name = node_name(boot.instance)
        if not await self.kube.patch_status(name, ready_patch(self.clock())):
            log.info("joiner: node %s was deleted before it became Ready", name)
        boot.ready = True

    async def _retire(self, boot: _Boot, state: str) -> None:
        instance_id = boot.instance.id
        if boot.registered_at is None:
            self._boots.pop(instance_id, None)  # never registered here: nothing to clean up
            return
        name = node_name(boot.instance)
        if not boot.going:
            await self.kube.set_kubelet(name, running=False)
            await self.kube.patch_status(name, gone_patch(self.clock()))
            boot.going = True
            log.info("joiner: %s is %s; node %s NotReady", instance_id, state, name)
        if state in ("terminated", "gone"):
            if not await self.kube.delete_node(name):
                return  # finalizers hold it (Karpenter's): asked again next poll until it is gone
            await self.kube.set_kubelet(name, running=True)
            self._boots.pop(instance_id, None)
            log.info("joiner: %s is %s; node %s deleted", instance_id, state, name)
