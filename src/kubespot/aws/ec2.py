"""Instance facts from EC2 (private DNS name, zone, state, tags, lifecycle), coalesced and cached.

The reference handler made one DescribeInstances call per message, which is what throttles it in a
burst. ``InstanceDirectory.lookup`` instead gathers the ids every concurrent caller asks for during
a short window and sends them together (up to 1 000 ids per call), and keeps answers for the
configured TTL, so a thousand interruptions cost about one call.

DescribeInstances by ``InstanceIds`` fails as a whole when one id is unknown
(``InvalidInstanceID.NotFound``) or malformed. Ids that cannot be instance ids are answered absent
without asking; ids AWS names in the error are dropped and the call repeated; if that does not
converge (moto names one id per error, AWS all of them), the batch is asked again through the
``instance-id`` filter, which simply leaves unknown ids out.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from kubespot.aws.session import AwsClients, AwsError
from kubespot.model import Clock, SystemClock

__all__ = ["COALESCE_WINDOW", "InstanceDirectory", "InstanceInfo"]

#: How long a lookup waits for other callers' ids before the call goes out. Interruption bursts
#: arrive as ~10-message receives handled concurrently; 20 ms collects a burst and costs little
#: against the 2 minutes a spot notice gives.
COALESCE_WINDOW: Final = 0.020
#: DescribeInstances accepts at most 1 000 explicit instance ids.
MAX_IDS_PER_CALL: Final = 1000
#: EC2 caps the values of one filter at 200.
MAX_FILTER_VALUES: Final = 200
#: Retries of a by-id call after dropping the ids AWS said it does not know.
_NOT_FOUND_RETRIES: Final = 2
#: Unknown ids are remembered briefly only: a just-launched instance may be invisible for a moment
#: (EC2 is eventually consistent), and an absent answer must not outlive that by much.
NEGATIVE_TTL: Final = 5.0

_INSTANCE_ID = re.compile(r"^i-(?:[0-9a-f]{8}|[0-9a-f]{17})$")
_ID_IN_MESSAGE = re.compile(r"\bi-[0-9a-f]{8,17}\b")
_NOT_FOUND_CODES: Final = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})


@dataclass(frozen=True)
class InstanceInfo:
    """What the controller needs to know about an instance."""

    instance_id: str
    private_dns_name: str
    availability_zone: str
    state: str
    """pending, running, shutting-down, terminated, stopping, stopped."""
    tags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    lifecycle: str | None = None
    """``spot`` or ``scheduled``; None for on-demand (EC2 leaves InstanceLifecycle out)."""

    @property
    def provider_id(self) -> str:
        """The Kubernetes node's ``spec.providerID`` for this instance."""
        return f"aws:///{self.availability_zone}/{self.instance_id}"

    def is_managed(self, managed_tag: str, cluster: str = "") -> bool:
        """Handled here: it carries ``managed_tag`` (NTH's rule), or kubespot's provisioner launched
        it for ``cluster`` (a NodePool tag and the cluster's tag, docs/designs/launching.md §3), as
        Karpenter's interruption controller handles the instances of its own NodeClaims."""
        if managed_tag in self.tags:
            return True
        if not cluster or "karpenter.sh/nodepool" not in self.tags:
            return False
        tags = self.tags
        return (
            tags.get("eks:eks-cluster-name") == cluster
            or tags.get(f"kubernetes.io/cluster/{cluster}") == "owned"
        )


def _parse_instance(raw: Mapping[str, Any]) -> InstanceInfo:
    tags = {str(t.get("Key", "")): str(t.get("Value", "")) for t in raw.get("Tags") or []}
    lifecycle = raw.get("InstanceLifecycle")
    return InstanceInfo(
        instance_id=str(raw.get("InstanceId", "")),
        private_dns_name=str(raw.get("PrivateDnsName") or ""),
        availability_zone=str((raw.get("Placement") or {}).get("AvailabilityZone") or ""),
        state=str((raw.get("State") or {}).get("Name") or ""),
        tags=MappingProxyType(tags),
        lifecycle=str(lifecycle) if lifecycle else None,
    )


def _instances(answer: Mapping[str, Any]) -> Iterable[InstanceInfo]:
    for reservation in answer.get("Reservations") or []:
        for raw in reservation.get("Instances") or []:
            yield _parse_instance(raw)


class InstanceDirectory:
    """Looks instances up by id, coalescing concurrent callers and caching answers.

    ``api_calls`` counts DescribeInstances calls made (pages included), so tests and benchmarks can
    check the batching.
    """

    def __init__(
        self,
        clients: AwsClients,
        *,
        cache_ttl: float = 30.0,
        clock: Clock | None = None,
        window: float = COALESCE_WINDOW,
    ) -> None:
        self._clients = clients
        self._ttl = cache_ttl
        self._negative_ttl = min(cache_ttl, NEGATIVE_TTL)
        self._clock = clock or SystemClock()
        self._window = window
        self._cache: dict[str, tuple[float, InstanceInfo | None]] = {}
        # Ids waiting for the next call, and ids whose call is under way: both map to the future
        # that call resolves, so a second caller for the same id joins instead of asking again.
        self._pending: dict[str, asyncio.Future[InstanceInfo | None]] = {}
        self._in_flight: dict[str, asyncio.Future[InstanceInfo | None]] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.api_calls = 0

    async def lookup(self, instance_ids: Iterable[str]) -> dict[str, InstanceInfo]:
        """The instances among ``instance_ids`` that exist; unknown ids are absent from the answer.

        Raises ``AwsError`` if DescribeInstances fails for another reason than unknown ids.
        """
        now = self._clock.monotonic()
        found: dict[str, InstanceInfo] = {}
        waits: dict[str, asyncio.Future[InstanceInfo | None]] = {}
        loop = asyncio.get_running_loop()
        for instance_id in dict.fromkeys(instance_ids):
            cached = self._cache.get(instance_id)
            if cached is not None and cached[0] > now:
                if cached[1] is not None:
                    found[instance_id] = cached[1]
                continue
            if not _INSTANCE_ID.match(instance_id):
                continue  # cannot exist; asking would fail the whole call
            fut = self._in_flight.get(instance_id) or self._pending.get(instance_id)
            if fut is None:
                fut = loop.create_future()
                self._pending[instance_id] = fut
            waits[instance_id] = fut
        if not waits:
            return found
        if len(self._pending) >= MAX_IDS_PER_CALL:
            self._start_flush(delay=0.0)
        elif self._pending and (self._flusher is None or self._flusher.done()):
            self._start_flush(delay=self._window)
        # asyncio.wait: cancelling this caller must not cancel futures other callers share.
        await asyncio.wait(waits.values())
        for instance_id, fut in waits.items():
            info = fut.result()  # raises the call's AwsError
            if info is not None:
                found[instance_id] = info
        return found

    def invalidate(self, instance_ids: Iterable[str] | None = None) -> None:
        """Forget cached answers (all of them, or for ``instance_ids``)."""
        if instance_ids is None:
            self._cache.clear()
        else:
            for instance_id in instance_ids:
                self._cache.pop(instance_id, None)

    # -- the batched call ------------------------------------------------------------------------

    def _start_flush(self, *, delay: float) -> None:
        if delay <= 0:
            batch, self._pending = self._pending, {}
            self._dispatch(batch)
        else:
            # The flusher takes whatever is pending when its window ends.
            self._flusher = asyncio.create_task(self._flush_after(delay), name="kubespot-ec2-describe")

    async def _flush_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        batch, self._pending = self._pending, {}
        if batch:
            self._dispatch(batch)

    def _dispatch(self, batch: dict[str, asyncio.Future[InstanceInfo | None]]) -> None:
        # Marked in flight before the task runs, so a caller arriving meanwhile joins this call.
        self._in_flight.update(batch)
        task = asyncio.create_task(self._resolve(batch), name="kubespot-ec2-describe")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _resolve(self, batch: dict[str, asyncio.Future[InstanceInfo | None]]) -> None:
        ids = list(batch)
        chunks = [ids[i : i + MAX_IDS_PER_CALL] for i in range(0, len(ids), MAX_IDS_PER_CALL)]
        try:
            results = await asyncio.gather(
                *(self._describe(chunk) for chunk in chunks), return_exceptions=True
            )
            now = self._clock.monotonic()
            for chunk, result in zip(chunks, results, strict=True):
                for instance_id in chunk:
                    fut = batch[instance_id]
                    if fut.done():
                        continue
                    if isinstance(result, BaseException):
                        fut.set_exception(result)
                        fut.add_done_callback(_consume_exception)
                        continue
                    info = result.get(instance_id)
                    ttl = self._ttl if info is not None else self._negative_ttl
                    if ttl > 0:
                        self._cache[instance_id] = (now + ttl, info)
                    fut.set_result(info)
        finally:
            for instance_id, fut in batch.items():
                if self._in_flight.get(instance_id) is fut:
                    del self._in_flight[instance_id]
                if not fut.done():  # cancelled mid-call (shutdown): waiters must not hang
                    fut.set_exception(AwsError("Cancelled", "lookup abandoned", service="ec2"))
                    fut.add_done_callback(_consume_exception)
            self._prune()

    async def _describe(self, ids: list[str]) -> dict[str, InstanceInfo]:
        """DescribeInstances for ≤ 1 000 ids, dropping ids AWS says are unknown."""
        remaining = list(ids)
        for _ in range(_NOT_FOUND_RETRIES + 1):
            if not remaining:
                return {}
            try:
                return await self._describe_pages(InstanceIds=remaining)
            except AwsError as exc:
                if exc.code not in _NOT_FOUND_CODES:
                    raise
                named = set(_ID_IN_MESSAGE.findall(exc.message)) & set(remaining)
                if not named:
                    break
                remaining = [i for i in remaining if i not in named]
        # The by-id call did not converge: the filter leaves unknown ids out instead of failing.
        found: dict[str, InstanceInfo] = {}
        for start in range(0, len(remaining), MAX_FILTER_VALUES):
            values = remaining[start : start + MAX_FILTER_VALUES]
            found.update(
                await self._describe_pages(
                    Filters=[{"Name": "instance-id", "Values": values}], MaxResults=MAX_IDS_PER_CALL
                )
            )
        return found

    async def _describe_pages(self, **kwargs: Any) -> dict[str, InstanceInfo]:
        found: dict[str, InstanceInfo] = {}
        token: str | None = None
        while True:
            self.api_calls += 1
            answer = await self._clients.call(
                "ec2", "DescribeInstances", **kwargs, **({"NextToken": token} if token else {})
            )
            for info in _instances(answer):
                found[info.instance_id] = info
            token = answer.get("NextToken") or None
            if not token:
                return found

    def _prune(self) -> None:
        # Keeps the cache bounded by the instances seen within one TTL.
        if len(self._cache) < 4 * MAX_IDS_PER_CALL:
            return
        now = self._clock.monotonic()
        for instance_id in [k for k, (expires, _) in self._cache.items() if expires <= now]:
            del self._cache[instance_id]


def _consume_exception(fut: asyncio.Future[InstanceInfo | None]) -> None:
    if not fut.cancelled():
        fut.exception()
