"""The joiner's loop: every poll, the cluster's instances from EC2, and for each the kubelet's part.

Per instance (``_Boot``):

- **running**, no Node yet, ``boot_delay`` (plus a seeded per-instance jitter) after its EC2
  ``LaunchTime``: read its user data, check its kubelet flags, create its Node (``node.registration``:
  Ready False, ephemeral storage from the size of the volume the kubelet's filesystem is on);
  ``ready_delay`` later, post Ready True. A kubelet that would refuse to start (``kubelet_flags``,
  a malformed flag) never registers; user data of no known family registers without extra labels.
  A Node of that name already there (a restarted joiner) is left alone.
- **stopping**, **stopped**, **shutting-down**: the machine goes down. At once, stop kubesim's
  simulated kubelet of the Node and write Ready Unknown (what the node lifecycle controller writes
  once heartbeats stop). A **stopped** instance's Node also gets the cloud's
  ``node.cloudprovider.kubernetes.io/shutdown:NoSchedule`` taint (the cloud node lifecycle
  controller's ``MonitorNodes``: not Ready, the instance exists and is shut down; AWS's
  ``InstanceShutdownByProviderID`` is true only for ``stopped``). The Node stays.
- **running again** after a stop: the machine boots again, ``boot_delay`` after the start (the new
  ``LaunchTime`` when EC2 moved it, else when the joiner saw it running: moto keeps the first):
  the kubelet posts Ready False, ``ready_delay`` later kubesim's kubelet runs again, Ready True is
  posted, and the shutdown taint goes (``MonitorNodes`` removes it from a Ready Node).
- **terminated** or gone: as above, then delete the Node (again each pass while finalizers hold
  it; once it is gone kubesim forgets the stopped kubelet, so a later instance given the same
  private DNS name boots a live one), as ``MonitorNodes`` does for a not-Ready node whose instance
  no longer exists (AWS's ``InstanceExistsByProviderID`` is false only for terminated instances).
  ``keep_node`` leaves one instance's Node to the test (a slower cloud node lifecycle controller).

Heartbeats stop as the machine goes down, but Ready turns Unknown only ``node_monitor_grace`` later
(kube-controller-manager's ``--node-monitor-grace-period``: 50 s by default, as upstream; the sandbox
scales it), and a Node is deleted only once it is not Ready, as ``MonitorNodes`` skips a Ready one;
a Node that never became Ready (or was back from a stop but not yet Ready) is not Ready from the
start, so it is deleted (or tainted) at the next pass without waiting for the grace.
The cloud node lifecycle controller's part (the deletion, the shutdown taint) happens on its passes,
every ``node_monitor_period`` (cloud-controller-manager's ``--node-monitor-period``, 5 s), not at
the poll that first could.

Any EC2 or Kubernetes failure (5xx, timeouts, refused connections) is logged and the step tried
again next poll; the loop itself never ends on an error.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from . import kubelet_flags
from .ec2 import Ec2Reader, Instance
from .kube import KubeError, KubeWriter
from .node import SHUTDOWN_TAINT, gone_patch, node_name, not_ready_patch, ready_patch, registration
from .userdata import BootConfig, parse

log = logging.getLogger("kubespot.sim.joiner")

#: States in which the machine is going or gone down but the instance (and its Node) stays.
_DOWN = ("stopping", "stopped", "shutting-down")
#: The device whose volume holds the kubelet's filesystem: Bottlerocket's data volume (Karpenter's
#: ``Bottlerocket.EphemeralBlockDevice``); the root device for the other families.
_KUBELET_DEVICE = {"Bottlerocket": "/dev/xvdb"}

#: kube-controller-manager's ``--node-monitor-grace-period`` default (v1.32) and
#: cloud-controller-manager's ``--node-monitor-period`` default, in seconds of the real world.
NODE_MONITOR_GRACE_SECONDS = 50.0
NODE_MONITOR_PERIOD_SECONDS = 5.0

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
    #: Seconds from the machine going down (heartbeats stop) to its Node's Ready Unknown: the node
    #: lifecycle controller's ``--node-monitor-grace-period`` (kube-controller-manager's default is
    #: 50 s from v1.32, kubernetes/kubernetes#126287), scaled like the other delays; 0: at once.
    node_monitor_grace: float = NODE_MONITOR_GRACE_SECONDS
    #: Seconds between the cloud node lifecycle controller's ``MonitorNodes`` passes, which delete
    #: the Node of a terminated instance and taint a stopped one's (cloud-controller-manager's
    #: ``--node-monitor-period``, 5 s); 0: at every poll.
    node_monitor_period: float = NODE_MONITOR_PERIOD_SECONDS


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
    down_at: float | None = None  # wall time the kubelet stopped (the machine went down)
    stopped: bool = False  # seen stopping or stopped since it last ran
    shutdown_tainted: bool = False  # the cloud's shutdown taint written
    rebooted_at: float | None = None  # a kubelet back after a stop posted Ready False then


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
        #: Instances whose Node this joiner never deletes (``keep_node``).
        self._kept: set[str] = set()
        #: Wall time of the cloud node lifecycle controller's next ``MonitorNodes`` pass.
        self._next_monitor = 0.0
        self._ready_now: asyncio.Future[dict[str, str]] | None = None

    # -- what tests and the sandbox read ----------------------------------------------------------

    def registered_at(self, instance_id: str) -> float | None:
        """Wall time this joiner registered the instance's Node, if it did."""
        boot = self._boots.get(instance_id)
        return None if boot is None else boot.registered_at

    def refusal(self, instance_id: str) -> str:
        """Why the instance's kubelet refused to start (empty: it did not)."""
        boot = self._boots.get(instance_id)
        return "" if boot is None else boot.refused

    def keep_node(self, instance_id: str) -> None:
        """Never delete the instance's Node once it is terminated: a test plays a cloud node
        lifecycle controller slower than the one it studies (the Node still goes Ready Unknown, and
        once someone else deleted it, the joiner forgets the instance)."""
        self._kept.add(instance_id)

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
            if boot is None:
                if instance.state in ("pending", "running"):
                    due = instance.launch_time + self.boot_time(instance.id)
                    self._boots[instance.id] = _Boot(instance, due)
                continue
            if instance.state in ("stopping", "stopped"):
                boot.stopped = True
            elif boot.stopped and instance.state in ("pending", "running"):
                # Started again: EC2 moves LaunchTime to the start; moto does not, so the first
                # poll that sees it back stands in.
                moved = instance.launch_time > boot.instance.launch_time
                boot.due = (instance.launch_time if moved else now) + self.boot_time(instance.id)
                boot.stopped = False
            boot.instance = instance
        # A MonitorNodes pass of the cloud node lifecycle controller is due: it may delete Nodes and
        # taint stopped ones now (wait.Until's period, counted from this pass).
        monitor = now >= self._next_monitor
        self._ready_now = None  # the Nodes' Ready as this pass reads it, when one of its steps asks
        if monitor:
            self._next_monitor = now + self.config.node_monitor_period
        steps: list[Coroutine[Any, Any, None]] = []
        for instance_id, boot in list(self._boots.items()):
            seen = instances.get(instance_id)
            state = seen.state if seen is not None else "gone"
            if state in ("terminated", "gone"):
                steps.append(self._retire(boot, state, monitor=monitor))
            elif state in _DOWN:
                if boot.registered_at is not None and (
                    not boot.going or (state == "stopped" and not boot.shutdown_tainted and monitor)
                ):
                    steps.append(self._shut_down(boot, state, monitor=monitor))
            elif state != "running" or boot.refused:
                continue
            elif boot.registered_at is None:
                if now >= boot.due:
                    steps.append(self._register(boot))
            elif boot.going or boot.down_at is not None:  # its machine started again after a stop
                if boot.rebooted_at is None:
                    if now >= boot.due:
                        steps.append(self._reboot(boot))
                elif now >= boot.rebooted_at + self.config.ready_delay:
                    steps.append(self._back(boot))
            elif not boot.ready and now >= boot.registered_at + self.config.ready_delay:
                steps.append(self._post_ready(boot))
        try:
            await asyncio.gather(*(self._bounded(step) for step in steps))
        finally:
            # Cancelled before gather's tasks first ran (the joiner stopping): a ``_bounded`` that
            # never started never closes its step, which would warn as never awaited. A no-op for
            # the steps that ran.
            for step in steps:
                step.close()

    def boot_time(self, instance_id: str) -> float:
        """Seconds from the instance's LaunchTime to its registration (boot delay plus its jitter)."""
        if self.config.jitter <= 0:
            return self.config.boot_delay
        rng = random.Random(f"{self.config.seed}/{instance_id}")
        return self.config.boot_delay + rng.uniform(0.0, self.config.jitter)

    async def _bounded(self, step: Coroutine[Any, Any, None]) -> None:
        try:
            async with self._limit:
                try:
                    await step
                except _RETRIED as exc:
                    log.warning("joiner: %s; retrying next poll", exc)
                except Exception:
                    log.exception("joiner: step failed; retrying next poll")
        finally:
            # Cancelled while waiting for its turn (the joiner stopping): the step never ran, and
            # an unawaited coroutine would warn at garbage collection. A no-op once it ran.
            step.close()

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
        device = _KUBELET_DEVICE.get(boot.boot.family) or instance.root_device or "/dev/xvda"
        volume_gib = await self.ec2.volume_gib(instance, device)
        now = self.clock()
        node = registration(
            instance, facts, boot.boot, now=now, ready_delay=self.config.ready_delay, volume_gib=volume_gib
        )
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

    async def _machine_down(self, boot: _Boot, state: str) -> bool:
        """The kubelet is gone with its machine: heartbeats stop at once; ``node_monitor_grace``
        later the node lifecycle controller writes Ready Unknown (``pkg/controller/nodelifecycle``
        ``tryUpdateNodeHealth``). True once it is written."""
        name = node_name(boot.instance)
        if boot.down_at is None:
            await self.kube.set_kubelet(name, running=False)
            boot.down_at, boot.ready, boot.rebooted_at = self.clock(), False, None
        if self.clock() < boot.down_at + self.config.node_monitor_grace:
            return False
        await self.kube.patch_status(name, gone_patch(self.clock()))
        boot.going = True
        log.info("joiner: %s is %s; node %s NotReady", boot.instance.id, state, name)
        return True

    async def _not_ready(self, boot: _Boot) -> bool:
        """Whether a ``MonitorNodes`` pass sees the Node as not Ready: it skips only Ready True, read
        from the Node (kubesim's kubelet may have posted it before the joiner did). A Node that was
        Ready keeps it until Unknown is written; one that never was (Ready False, the CNI not up,
        or back from a stop but not yet Ready) is not Ready from the start."""
        if boot.going:
            return True
        if self._ready_now is None:  # one LIST a pass, shared by its steps
            self._ready_now = asyncio.ensure_future(self.kube.ready_statuses())
        statuses = await asyncio.shield(self._ready_now)
        return statuses.get(node_name(boot.instance)) != "True"

    async def _shut_down(self, boot: _Boot, state: str, *, monitor: bool) -> None:
        if not boot.going:
            await self._machine_down(boot, state)
        if state == "stopped" and not boot.shutdown_tainted and monitor and await self._not_ready(boot):
            name = node_name(boot.instance)
            await self.kube.set_taint(name, SHUTDOWN_TAINT, present=True)
            boot.shutdown_tainted = True
            log.info("joiner: %s is stopped; node %s tainted shutdown", boot.instance.id, name)

    async def _reboot(self, boot: _Boot) -> None:
        """The machine booted again: its kubelet posts status, NotReady until the CNI is up."""
        name = node_name(boot.instance)
        if await self.kube.patch_status(name, not_ready_patch(self.clock())):
            boot.rebooted_at = self.clock()
            return
        # The Node was deleted while the machine was down: the kubelet registers it afresh.
        await self.kube.set_kubelet(name, running=True)
        boot.registered_at, boot.going, boot.shutdown_tainted, boot.down_at = None, False, False, None
        log.info("joiner: node %s of %s is gone; registering it again", name, boot.instance.id)

    async def _back(self, boot: _Boot) -> None:
        """Ready again: kubesim's kubelet runs (heartbeats, pods), Ready True; the cloud node
        lifecycle controller removes the shutdown taint from a Ready Node."""
        name = node_name(boot.instance)
        await self.kube.set_kubelet(name, running=True)
        await self.kube.patch_status(name, ready_patch(self.clock()))
        await self.kube.set_taint(name, SHUTDOWN_TAINT, present=False)
        boot.going, boot.ready, boot.rebooted_at, boot.shutdown_tainted = False, True, None, False
        boot.down_at = None
        log.info("joiner: %s is running again; node %s Ready", boot.instance.id, name)

    async def _retire(self, boot: _Boot, state: str, *, monitor: bool) -> None:
        instance_id = boot.instance.id
        if boot.registered_at is None:
            self._boots.pop(instance_id, None)  # never registered here: nothing to clean up
            return
        name = node_name(boot.instance)
        # MonitorNodes deletes only a Node that is not Ready (one that was Ready: once Ready Unknown
        # is written, ``node_monitor_grace`` after the machine went down) whose instance is gone.
        if not boot.going:
            await self._machine_down(boot, state)
        if not monitor or not await self._not_ready(boot):
            return  # the deletion waits for a MonitorNodes pass that finds the Node not Ready
        if instance_id in self._kept:
            # Left to the test; forgotten once someone else deleted it. Only read: Ready Unknown
            # was written once, and its lastTransitionTime must stay (tryUpdateNodeHealth moves it
            # only on a change), or nothing measuring "not ready for X" could ever fire.
            if await self.kube.node_exists(name):
                return
        elif not await self.kube.delete_node(name):
            return  # finalizers hold it (Karpenter's): asked again each pass until it is gone
        await self.kube.set_kubelet(name, running=True)
        self._boots.pop(instance_id, None)
        log.info("joiner: %s is %s; node %s deleted", instance_id, state, name)
