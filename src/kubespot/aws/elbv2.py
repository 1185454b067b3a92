"""ELBv2 (ALB, NLB) targets: which target groups hold an instance or a pod IP; deregistration.

AWS answers "what is registered in this target group" but not "which target groups hold this
target", so ``TargetDirectory`` builds the reverse index itself: it lists the target groups
(DescribeTargetGroups, 400 a page), optionally keeps those carrying a tag (DescribeTags, 20 ARNs a
call), asks each group for its targets (DescribeTargetHealth, a few groups at a time) and indexes
the answers by target id: the instance id in ``instance`` target groups, the IP address in ``ip``
ones (the AWS Load Balancer Controller registers pods by IP). The index lives ``ttl`` seconds and
is rebuilt by one task every concurrent caller shares (``kubespot.aws.snapshot``); a lookup that
misses in an index older than ``miss_refresh_after`` rebuilds it once, to catch targets registered
since.

``deregister`` sends one DeregisterTargets per target group; ``target_states`` and
``wait_draining`` read DescribeTargetHealth for explicit targets, so the drain can hold a pod until
its load balancer has started draining it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Generic, Literal, TypeVar

from kubespot.aws.session import AwsClients, AwsError
from kubespot.aws.snapshot import Snapshot
from kubespot.model import Clock, SystemClock

__all__ = [
    "DeregisterOutcome",
    "Registration",
    "TargetDirectory",
    "TargetState",
    "TargetType",
    "merge_outcomes",
]

_log = logging.getLogger(__name__)

TargetType = Literal["instance", "ip"]
#: Target types the index keeps: ``lambda`` and ``alb`` targets are never an instance or a pod.
_INDEXED_TYPES: Final = frozenset({"instance", "ip"})
#: DescribeTargetGroups' largest page.
PAGE_SIZE: Final = 400
#: DescribeTags takes at most 20 ARNs per call.
MAX_TAG_ARNS: Final = 20
#: How long an index is trusted. Registrations change when pods come and go; a minute-old index
#: misses only pods registered since, and a miss rebuilds it (below).
DEFAULT_TTL: Final = 45.0
#: A lookup that finds nothing rebuilds an index older than this, once: a pod registered a moment
#: ago must not be missed, but a burst of misses must not rebuild it again and again.
MISS_REFRESH_AFTER: Final = 5.0
#: After a failed rebuild, the old index is used for this long before AWS is asked again.
RETRY_AFTER: Final = 5.0
#: Tag matches are kept this long: tags of a target group rarely change, and asking again for
#: every group at every rebuild would double the calls.
TAGS_TTL: Final = 600.0
#: Target groups described at once during a rebuild (the AWS thread pool is shared with the queue).
DESCRIBE_CONCURRENCY: Final = 8
#: DescribeTargetHealth's answer for a deregistered target, and ours for a vanished group/target.
_GONE_REASONS: Final = frozenset({"Target.NotRegistered", "TargetGroupNotFound", "InvalidTarget"})
_DRAINING_STATES: Final = frozenset({"draining", "unhealthy.draining"})

_R = TypeVar("_R")


@dataclass(frozen=True, order=True)
class Registration:
    """One target in one target group, as DeregisterTargets and DescribeTargetHealth name it.

    ``port`` is the registered port (a target may be registered several times on different ports);
    None means the group's own port. ``availability_zone`` is kept only to pass back ``all`` for IP
    targets outside the group's VPC, which AWS requires; it is not part of the identity.
    """

    target_group_arn: str
    target_id: str
    port: int | None = None
    availability_zone: str | None = field(default=None, compare=False)

    @property
    def target_type(self) -> TargetType:
        """``instance`` for an instance id, ``ip`` for an address."""
        return "instance" if self.target_id.startswith("i-") else "ip"

    @property
    def target_group_name(self) -> str:
        """The name in ``arn:…:targetgroup/<name>/<id>`` (the ARN itself if it has no such part)."""
        parts = self.target_group_arn.rsplit(":", 1)[-1].split("/")
        return parts[1] if len(parts) == 3 and parts[0] == "targetgroup" else self.target_group_arn

    def description(self) -> dict[str, Any]:
        """The ``TargetDescription`` the ELBv2 API takes."""
        out: dict[str, Any] = {"Id": self.target_id}
        if self.port is not None:
            out["Port"] = self.port
        if self.availability_zone == "all":
            out["AvailabilityZone"] = "all"
        return out


@dataclass(frozen=True)
class TargetState:
    """What DescribeTargetHealth says of one target.

    ``state`` is AWS's (``initial``, ``healthy``, ``unhealthy``, ``unhealthy.draining``, ``unused``,
    ``draining``, ``unavailable``). A target that is not (or no longer) registered has reason
    ``Target.NotRegistered``; one whose group or instance has gone has reason
    ``TargetGroupNotFound`` or ``InvalidTarget`` (state ``unused``).
    """

    state: str
    reason: str | None = None
    description: str | None = None

    @property
    def deregistering(self) -> bool:
        """Deregistration under way: the load balancer sends no new requests, lets others finish."""
        return self.state in _DRAINING_STATES

    @property
    def gone(self) -> bool:
        """Not registered (any more): deregistration is over, or never had anything to do."""
        return self.reason in _GONE_REASONS

    @property
    def draining_started(self) -> bool:
        """The load balancer no longer routes new requests here."""
        return self.deregistering or self.gone


@dataclass(frozen=True)
class DeregisterOutcome(Generic[_R]):
    """What a deregistration did, per target.

    ``deregistered``: AWS accepted the request (the target drains, then goes). ``gone``: the target
    or its group no longer existed, nothing to do. ``failed``: the call failed (AccessDenied,
    throttling past the SDK's retries …), with the error.
    """

    deregistered: tuple[_R, ...] = ()
    gone: tuple[_R, ...] = ()
    failed: Mapping[_R, AwsError] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def ok(self) -> bool:
        """Nothing failed."""
        return not self.failed


@dataclass(frozen=True)
class _Index:
    by_target: Mapping[str, tuple[Registration, ...]]
    by_group: Mapping[str, tuple[Registration, ...]]
    #: target group ARN -> (monotonic time of the check, whether its tags match)
    tag_checks: Mapping[str, tuple[float, bool]]


class TargetDirectory:
    """The target groups an instance id or IP address is registered in, and their deregistration.

    ``tag_key`` (and ``tag_value``) limit the index to target groups carrying that tag, e.g.
    ``elbv2.k8s.aws/cluster`` = the cluster name for groups the AWS Load Balancer Controller made.
    Use from one event loop.
    """

    def __init__(
        self,
        clients: AwsClients,
        *,
        tag_key: str | None = None,
        tag_value: str | None = None,
        ttl: float = DEFAULT_TTL,
        miss_refresh_after: float = MISS_REFRESH_AFTER,
        retry_after: float = RETRY_AFTER,
        tags_ttl: float = TAGS_TTL,
        concurrency: int = DESCRIBE_CONCURRENCY,
        clock: Clock | None = None,
    ) -> None:
        if tag_value is not None and not tag_key:
            raise ValueError("tag_value needs tag_key")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._clients = clients
        self._tag_key = tag_key or None
        self._tag_value = tag_value
        self._miss_refresh_after = miss_refresh_after
        self._tags_ttl = tags_ttl
        self._clock = clock or SystemClock()
        # Separate limits: a rebuild describing hundreds of groups must not queue a deregistration.
        self._describe_limit = asyncio.Semaphore(concurrency)
        self._act_limit = asyncio.Semaphore(concurrency)
        self._snapshot: Snapshot[_Index] = Snapshot(
            self._build, ttl=ttl, retry_after=retry_after, name="elbv2-targets", clock=self._clock
        )

    @property
    def refreshes(self) -> int:
        """Index rebuilds started so far (failed ones included)."""
        return self._snapshot.builds

    @property
    def index_age(self) -> float | None:
        """Seconds since the current index's rebuild started; None before the first."""
        return self._snapshot.age

    # -- lookup ----------------------------------------------------------------------------------

    async def lookup(self, target_ids: Iterable[str]) -> dict[str, tuple[Registration, ...]]:
        """Registrations of each of ``target_ids`` (instance ids or IP addresses) that has any.

        Answers from the index when it is fresh; concurrent callers share one rebuild. Raises
        ``AwsError`` only if no index could ever be built (afterwards a failed rebuild falls back
        to the previous index, and logs it).
        """
        ids = list(dict.fromkeys(target_ids))
        if not ids:
            return {}
        index = await self._snapshot.get()
        if any(i not in index.by_target for i in ids):
            age = self._snapshot.age
            if age is not None and age > self._miss_refresh_after:
                index = await self._snapshot.get(max_age=self._miss_refresh_after)
        return {i: index.by_target[i] for i in ids if i in index.by_target}

    async def refresh(self) -> None:
        """Rebuild the index now (joining a rebuild under way)."""
        self._snapshot.invalidate()
        await self._snapshot.get()

    def invalidate(self) -> None:
        """Make the next lookup rebuild the index."""
        self._snapshot.invalidate()

    # -- deregistration --------------------------------------------------------------------------

    async def deregister(self, registrations: Iterable[Registration]) -> DeregisterOutcome[Registration]:
        """Deregister the targets: one DeregisterTargets per target group, groups concurrently.

        A target or group that no longer exists counts as ``gone`` (AWS accepts deregistering an
        unregistered target; ``InvalidTarget`` and ``TargetGroupNotFound`` are treated alike).
        Never raises for AWS errors: they are in ``failed``.
        """
        by_group = _by_group(registrations)
        results = await asyncio.gather(
            *(self._bounded(self._deregister_group(arn, regs)) for arn, regs in by_group.items())
        )
        return merge_outcomes(results)

    async def _deregister_group(self, arn: str, regs: list[Registration]) -> DeregisterOutcome[Registration]:
        try:
            await self._clients.call(
                "elbv2",
                "DeregisterTargets",
                TargetGroupArn=arn,
                Targets=[r.description() for r in regs],
            )
        except AwsError as exc:
            if exc.code == "TargetGroupNotFound":
                _log.debug("target group %s is gone; nothing to deregister", arn)
                return DeregisterOutcome(gone=tuple(regs))
            if exc.code == "InvalidTarget":
                if len(regs) == 1:
                    _log.debug("%s is not registered in %s: already gone", regs[0].target_id, arn)
                    return DeregisterOutcome(gone=tuple(regs))
                # The error names no target, and a call that fails may have deregistered some
                # targets and not others: each target is asked again on its own.
                return merge_outcomes([await self._deregister_group(arn, [r]) for r in regs])
            return DeregisterOutcome(failed=MappingProxyType(dict.fromkeys(regs, exc)))
        return DeregisterOutcome(deregistered=tuple(regs))

    # -- progress --------------------------------------------------------------------------------

    async def target_states(self, registrations: Iterable[Registration]) -> dict[Registration, TargetState]:
        """The current state of each target (one DescribeTargetHealth per target group).

        Raises ``AwsError`` if a call fails for another reason than a vanished group or target.
        """
        by_group = _by_group(registrations)
        answers = await asyncio.gather(
            *(self._bounded(self._group_states(arn, regs)) for arn, regs in by_group.items())
        )
        states: dict[Registration, TargetState] = {}
        for answer in answers:
            states.update(answer)
        return states

    async def draining_started(self, registrations: Iterable[Registration]) -> bool:
        """True when every target is draining or no longer registered."""
        states = await self.target_states(registrations)
        return all(s.draining_started for s in states.values())

    async def wait_draining(
        self, registrations: Iterable[Registration], *, max_wait: float, interval: float = 2.0
    ) -> bool:
        """Poll until every target is draining or gone (True) or ``max_wait`` seconds pass (False).

        Only targets not yet draining are asked again. AWS errors while polling are logged and
        polled through: the caller bounds the wait, not the load balancer.
        """
        pending = list(dict.fromkeys(registrations))
        deadline = self._clock.monotonic() + max_wait
        while pending:
            try:
                states = await self.target_states(pending)
                pending = [r for r in pending if not states[r].draining_started]
            except AwsError as exc:
                _log.info("target health not known yet, asking again: %s", exc)
            if not pending:
                break
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                return False
            await self._clock.sleep(min(interval, remaining))
        return True

    async def _group_states(self, arn: str, regs: list[Registration]) -> dict[Registration, TargetState]:
        try:
            answer = await self._clients.call(
                "elbv2",
                "DescribeTargetHealth",
                TargetGroupArn=arn,
                Targets=[r.description() for r in regs],
            )
        except AwsError as exc:
            if exc.code == "TargetGroupNotFound":
                return dict.fromkeys(regs, TargetState("unused", "TargetGroupNotFound", exc.message))
            if exc.code == "InvalidTarget":
                if len(regs) == 1:
                    return {regs[0]: TargetState("unused", "InvalidTarget", exc.message)}
                # One unknown target fails the whole call; ask for each on its own.
                states: dict[Registration, TargetState] = {}
                for reg in regs:
                    states.update(await self._group_states(arn, [reg]))
                return states
            raise
        by_id_port: dict[tuple[str, int | None], TargetState] = {}
        for desc in answer.get("TargetHealthDescriptions") or []:
            target = desc.get("Target") or {}
            health = desc.get("TargetHealth") or {}
            state = TargetState(
                str(health.get("State") or "unavailable"),
                health.get("Reason") or None,
                health.get("Description") or None,
            )
            port = target.get("Port")
            by_id_port[(str(target.get("Id", "")), int(port) if port is not None else None)] = state
            by_id_port.setdefault((str(target.get("Id", "")), None), state)
        not_listed = TargetState("unused", "Target.NotRegistered", "not in DescribeTargetHealth's answer")
        return {r: by_id_port.get((r.target_id, r.port), not_listed) for r in regs}

    async def _bounded(self, work: Awaitable[_R]) -> _R:
        async with self._act_limit:
            return await work

    # -- the index -------------------------------------------------------------------------------

    async def _build(self, previous: _Index | None) -> _Index:
        groups = await self._target_groups()
        tag_checks: dict[str, tuple[float, bool]] = {}
        if self._tag_key is not None:
            tag_checks = await self._check_tags(groups, previous)
            groups = [arn for arn in groups if tag_checks[arn][1]]
        answers = await asyncio.gather(*(self._group_targets(arn) for arn in groups), return_exceptions=True)
        by_group: dict[str, tuple[Registration, ...]] = {}
        errors: list[AwsError] = []
        for arn, answer in zip(groups, answers, strict=True):
            if isinstance(answer, AwsError):
                if answer.code == "TargetGroupNotFound":
                    continue  # deleted since it was listed
                errors.append(answer)
                if previous is not None and arn in previous.by_group:
                    by_group[arn] = previous.by_group[arn]
                continue
            if isinstance(answer, BaseException):
                raise answer
            by_group[arn] = answer
        if errors:
            if len(errors) == len(groups):
                raise errors[0]  # nothing answered (AccessDenied, throttling): the rebuild failed
            _log.warning(
                "elbv2 index: %d of %d target groups could not be described (kept their previous "
                "targets where known): %s",
                len(errors),
                len(groups),
                errors[0],
            )
        by_target: dict[str, list[Registration]] = {}
        for regs in by_group.values():
            for reg in regs:
                by_target.setdefault(reg.target_id, []).append(reg)
        return _Index(
            by_target=MappingProxyType({k: tuple(v) for k, v in by_target.items()}),
            by_group=MappingProxyType(by_group),
            tag_checks=MappingProxyType(tag_checks),
        )

    async def _target_groups(self) -> list[str]:
        """ARNs of every instance and ip target group, in AWS's order."""
        arns: list[str] = []
        marker: str | None = None
        while True:
            answer = await self._clients.call(
                "elbv2", "DescribeTargetGroups", PageSize=PAGE_SIZE, **({"Marker": marker} if marker else {})
            )
            for group in answer.get("TargetGroups") or []:
                if group.get("TargetType", "instance") in _INDEXED_TYPES and group.get("TargetGroupArn"):
                    arns.append(str(group["TargetGroupArn"]))
            marker = answer.get("NextMarker") or None
            if not marker:
                return arns

    async def _check_tags(self, arns: list[str], previous: _Index | None) -> dict[str, tuple[float, bool]]:
        now = self._clock.monotonic()
        known = previous.tag_checks if previous is not None else {}
        checks = {a: known[a] for a in arns if a in known and now - known[a][0] <= self._tags_ttl}
        unknown = [a for a in arns if a not in checks]
        batches = [unknown[i : i + MAX_TAG_ARNS] for i in range(0, len(unknown), MAX_TAG_ARNS)]
        for found in await asyncio.gather(*(self._tags_of(batch) for batch in batches)):
            for arn, tags in found.items():
                checks[arn] = (now, self._matches(tags))
        for arn in unknown:
            checks.setdefault(arn, (now, False))  # absent from the answer: deleted meanwhile
        return checks

    async def _tags_of(self, arns: list[str]) -> dict[str, dict[str, str]]:
        try:
            async with self._describe_limit:
                answer = await self._clients.call("elbv2", "DescribeTags", ResourceArns=arns)
        except AwsError as exc:
            if exc.code != "TargetGroupNotFound":
                raise
            if len(arns) == 1:
                return {}
            # A group of the batch was deleted since it was listed: ask for each on its own.
            found: dict[str, dict[str, str]] = {}
            for arn in arns:
                found.update(await self._tags_of([arn]))
            return found
        return {
            str(d.get("ResourceArn", "")): {
                str(t.get("Key", "")): str(t.get("Value", "")) for t in d.get("Tags") or []
            }
            for d in answer.get("TagDescriptions") or []
        }

    def _matches(self, tags: Mapping[str, str]) -> bool:
        assert self._tag_key is not None
        if self._tag_key not in tags:
            return False
        return self._tag_value is None or tags[self._tag_key] == self._tag_value

    async def _group_targets(self, arn: str) -> tuple[Registration, ...]:
        async with self._describe_limit:
            answer = await self._clients.call("elbv2", "DescribeTargetHealth", TargetGroupArn=arn)
        regs: list[Registration] = []
        for desc in answer.get("TargetHealthDescriptions") or []:
            target = desc.get("Target") or {}
            if not target.get("Id"):
                continue
            port = target.get("Port")
            regs.append(
                Registration(
                    target_group_arn=arn,
                    target_id=str(target["Id"]),
                    port=int(port) if port is not None else None,
                    availability_zone=target.get("AvailabilityZone") or None,
                )
            )
        return tuple(regs)


def _by_group(registrations: Iterable[Registration]) -> dict[str, list[Registration]]:
    by_group: dict[str, list[Registration]] = {}
    for reg in dict.fromkeys(registrations):
        by_group.setdefault(reg.target_group_arn, []).append(reg)
    return by_group


def merge_outcomes(parts: Iterable[DeregisterOutcome[_R]]) -> DeregisterOutcome[_R]:
    """One outcome from several (per target group, per load balancer)."""
    done: list[_R] = []
    gone: list[_R] = []
    failed: dict[_R, AwsError] = {}
    for part in parts:
        done.extend(part.deregistered)
        gone.extend(part.gone)
        failed.update(part.failed)
    return DeregisterOutcome(tuple(done), tuple(gone), MappingProxyType(failed))
