"""The ``kubespot.io/actions`` annotation: what the controller's AWS action runner did for a node.

One JSON object for ONE event (a new event's record replaces the previous one), written by the
runner with compare-and-set and read by the drain, wherever it runs (docs/designs/
response-actions.md)::

    {"v": 1, "event": "<event id>", "kind": "spot-itn", "instance": "i-…", "source": "imds",
     "runner": "<identity>", "at": "<last write>", "fenced": "<fence>",
     "loadbalancer": {"state": "pending|draining|done|failed|skipped", "at": "<when>", "settle": 5,
                      "node": true, "targets": [{"tg": "<arn or lb name>", "id": "<i-… or ip>",
                      "port": 80}], "more_targets": 0, "pods": ["ns/name"], "more_pods": 0,
                      "error": "…"},
     "isolation": {"state": "done|failed|skipped", "at": "…", "replaced": {"eni-…": ["sg-…"]},
                   "more_interfaces": 0, "error": "…"},
     "post": "<post-drain steps started>",
     "published": {"sns": "<message id>|error: …", "eventbridge": "…"},
     "finished": "<when>"}

Empty and default fields are left out, lists are capped (``more_*`` counts what was cut): every node
watch carries the annotation. The drain reads it through ``deregistration_for``. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import orjson

from kubespot.records.annotation_json import text_field, utc_time

ACTIONS_ANNOTATION = "kubespot.io/actions"
RECORD_VERSION = 1
#: Caps on the lists: the record stays well under 4 KiB with full target-group ARNs.
MAX_TARGETS = 16
MAX_PODS = 32
MAX_INTERFACES = 8
ERROR_CHARS = 200


class StepState(StrEnum):
    """Where one step of the record stands."""

    PENDING = "pending"  # claimed and under way (deregistration: targets known, not yet draining)
    DRAINING = "draining"  # deregistration accepted: the load balancer stops routing to the targets
    DONE = "done"  # finished (deregistration: nothing was registered)
    FAILED = "failed"  # gave up; the error says why; the drain goes ahead
    SKIPPED = "skipped"  # not attempted (not configured for this kind, withdrawn, no time left)


class RecordError(ValueError):
    """The annotation is not a record kubespot wrote (hand-edited, or another version)."""


@dataclass(frozen=True, slots=True)
class TargetRef:
    """One deregistered target: its target group (ARN; a Classic Load Balancer's name), id, port."""

    tg: str
    id: str
    port: int | None = None


@dataclass(frozen=True, slots=True)
class LoadBalancerStep:
    """Deregistration. ``at``: when the state was reached (for draining: when AWS accepted it)."""

    state: StepState
    at: datetime
    #: Seconds the drain keeps holding target pods after ``at`` (the controller's setting).
    settle: float = 0.0
    #: The node itself (its instance id or InternalIP) is a target: every pod on it is held.
    node: bool = False
    targets: tuple[TargetRef, ...] = ()
    more_targets: int = 0
    #: ``namespace/name`` of the pods whose IP is a target: the pods the drain holds.
    pods: tuple[str, ...] = ()
    more_pods: int = 0
    error: str = ""


@dataclass(frozen=True, slots=True)
class IsolationStep:
    """Isolation; ``replaced``: each interface changed and the group ids it had before."""

    state: StepState
    at: datetime
    replaced: tuple[tuple[str, tuple[str, ...]], ...] = ()
    more_interfaces: int = 0
    error: str = ""


@dataclass(frozen=True, slots=True)
class ActionsRecord:
    """What the runner did for one event on one node."""

    event: str
    #: The runner that wrote last, and when: a follower takes over once that is stale.
    runner: str
    at: datetime
    #: The event's kind, instance and source, for the summary once the state annotation is gone.
    kind: str = ""
    instance: str = ""
    source: str = ""
    #: When the node was fenced (the state's ``since`` when the record was created; the start of
    #: the fence-to-draining latency); None when the runner first saw the event already drained.
    fenced: datetime | None = None
    loadbalancer: LoadBalancerStep | None = None
    isolation: IsolationStep | None = None
    #: When the post-drain steps were claimed.
    post: datetime | None = None
    #: target ("sns", "eventbridge") -> message id, or "error: ..."
    published: tuple[tuple[str, str], ...] = ()
    finished: datetime | None = None

    def encode(self) -> str:
        data: dict[str, Any] = {
            "v": RECORD_VERSION,
            "event": self.event,
            "runner": self.runner,
            "at": _iso(self.at),
        }
        for key, value in (("kind", self.kind), ("instance", self.instance), ("source", self.source)):
            if value:
                data[key] = value
        if self.fenced is not None:
            data["fenced"] = _iso(self.fenced)
        if self.loadbalancer is not None:
            data["loadbalancer"] = _lb_json(self.loadbalancer)
        if self.isolation is not None:
            data["isolation"] = _isolation_json(self.isolation)
        if self.post is not None:
            data["post"] = _iso(self.post)
        if self.published:
            data["published"] = dict(self.published)
        if self.finished is not None:
            data["finished"] = _iso(self.finished)
        return orjson.dumps(data).decode()

    def live_other(self, me: str, now: datetime, stale_after: float) -> bool:
        """Whether another runner, still alive as far as the record shows, is working on it."""
        return self.runner != me and self.finished is None and (now - self.at).total_seconds() < stale_after

    def published_to(self, target: str) -> str | None:
        return dict(self.published).get(target)


def loadbalancer_step(
    state: StepState,
    at: datetime,
    *,
    settle: float = 0.0,
    node: bool = False,
    targets: Iterable[TargetRef] = (),
    pods: Iterable[str] = (),
    error: str = "",
) -> LoadBalancerStep:
    """A step with its lists capped (what is cut is counted) and its error shortened."""
    all_targets = sorted(dict.fromkeys(targets), key=lambda t: (t.tg, t.id, t.port or 0))
    all_pods = sorted(dict.fromkeys(pods))
    return LoadBalancerStep(
        state=state,
        at=at,
        settle=settle,
        node=node,
        targets=tuple(all_targets[:MAX_TARGETS]),
        more_targets=max(0, len(all_targets) - MAX_TARGETS),
        pods=tuple(all_pods[:MAX_PODS]),
        more_pods=max(0, len(all_pods) - MAX_PODS),
        error=short(error),
    )


def isolation_step(
    state: StepState, at: datetime, *, replaced: Mapping[str, Iterable[str]] | None = None, error: str = ""
) -> IsolationStep:
    items = sorted((eni, tuple(groups)) for eni, groups in (replaced or {}).items())
    return IsolationStep(
        state=state,
        at=at,
        replaced=tuple(items[:MAX_INTERFACES]),
        more_interfaces=max(0, len(items) - MAX_INTERFACES),
        error=short(error),
    )


def short(text: str) -> str:
    """``text`` on one line, at most ``ERROR_CHARS`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= ERROR_CHARS else flat[: ERROR_CHARS - 1] + "…"


# --- decoding -----------------------------------------------------------------------------------


def decode_record(text: str | None) -> ActionsRecord | None:
    """The record in an annotation value; None when there is none; RecordError when it is garbage."""
    if not text:
        return None
    try:
        data = orjson.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        if data.get("v") != RECORD_VERSION:
            raise ValueError(f"version {data.get('v')!r}, expected {RECORD_VERSION}")
        lb = data.get("loadbalancer")
        iso = data.get("isolation")
        published = data.get("published")
        published = {} if published is None else published
        if not isinstance(published, dict):
            raise TypeError("published is not an object")
        return ActionsRecord(
            event=text_field(data, "event"),
            runner=str(data.get("runner") or ""),
            at=utc_time(data["at"]),
            kind=str(data.get("kind") or ""),
            instance=str(data.get("instance") or ""),
            source=str(data.get("source") or ""),
            fenced=_opt_time(data.get("fenced")),
            loadbalancer=None if lb is None else _lb(lb),
            isolation=None if iso is None else _isolation(iso),
            post=_opt_time(data.get("post")),
            published=tuple(sorted((str(k), str(v)) for k, v in published.items())),
            finished=_opt_time(data.get("finished")),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"annotation {ACTIONS_ANNOTATION} is not a kubespot record: {exc}") from None


def _lb(raw: Any) -> LoadBalancerStep:
    if not isinstance(raw, dict):
        raise TypeError("loadbalancer is not an object")
    targets = []
    for item in raw.get("targets") or ():
        if not isinstance(item, dict):
            raise TypeError("a target is not an object")
        port = item.get("port")
        targets.append(
            TargetRef(text_field(item, "tg"), text_field(item, "id"), None if port is None else int(port))
        )
    return LoadBalancerStep(
        state=StepState(raw["state"]),
        at=utc_time(raw["at"]),
        settle=float(raw.get("settle") or 0.0),
        node=bool(raw.get("node", False)),
        targets=tuple(targets),
        more_targets=int(raw.get("more_targets") or 0),
        pods=tuple(str(p) for p in raw.get("pods") or ()),
        more_pods=int(raw.get("more_pods") or 0),
        error=str(raw.get("error") or ""),
    )


def _isolation(raw: Any) -> IsolationStep:
    if not isinstance(raw, dict):
        raise TypeError("isolation is not an object")
    replaced = raw.get("replaced") or {}
    if not isinstance(replaced, dict):
        raise TypeError("replaced is not an object")
    return IsolationStep(
        state=StepState(raw["state"]),
        at=utc_time(raw["at"]),
        replaced=tuple(sorted((str(k), tuple(str(g) for g in v)) for k, v in replaced.items())),
        more_interfaces=int(raw.get("more_interfaces") or 0),
        error=str(raw.get("error") or ""),
    )


def _lb_json(step: LoadBalancerStep) -> dict[str, Any]:
    out: dict[str, Any] = {"state": step.state.value, "at": _iso(step.at)}
    if step.settle:
        out["settle"] = step.settle
    if step.node:
        out["node"] = True
    if step.targets:
        out["targets"] = [
            {"tg": t.tg, "id": t.id, **({"port": t.port} if t.port is not None else {})} for t in step.targets
        ]
    if step.more_targets:
        out["more_targets"] = step.more_targets
    if step.pods:
        out["pods"] = list(step.pods)
    if step.more_pods:
        out["more_pods"] = step.more_pods
    if step.error:
        out["error"] = step.error
    return out


def _isolation_json(step: IsolationStep) -> dict[str, Any]:
    out: dict[str, Any] = {"state": step.state.value, "at": _iso(step.at)}
    if step.replaced:
        out["replaced"] = {eni: list(groups) for eni, groups in step.replaced}
    if step.more_interfaces:
        out["more_interfaces"] = step.more_interfaces
    if step.error:
        out["error"] = step.error
    return out


def _iso(value: datetime) -> str:
    return value.isoformat(timespec="milliseconds")


def _opt_time(value: Any) -> datetime | None:
    return None if value is None else utc_time(value)


# --- writing ------------------------------------------------------------------------------------


def record_patch(
    annotations: Mapping[str, str], change: Callable[[ActionsRecord | None], ActionsRecord | None]
) -> dict[str, Any] | None:
    """The merge patch applying ``change`` to the record in ``annotations`` (a node's); None when
    ``change`` returns None or the same record. An unparsable record is passed as None: the next
    write replaces it."""
    old_text = annotations.get(ACTIONS_ANNOTATION)
    try:
        old = decode_record(old_text)
    except RecordError:
        old = None
    new = change(old)
    if new is None:
        return None
    new_text = new.encode()
    if new_text == old_text:
        return None
    return {"metadata": {"annotations": {ACTIONS_ANNOTATION: new_text}}}


# --- the drain's side ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Deregistration:
    """What the drain needs to know of an event's load-balancer deregistration.

    ``state``: the step's (``skipped`` when the record has no load-balancer step: nothing to wait
    for). ``since``: when deregistration started (``draining``/``done``), else None. ``settle``:
    seconds to hold target pods after ``since``. ``held``: the ``namespace/name`` of the pods that are
    targets; None means every pod on the node (the node itself is a target, or the list was capped).
    """

    state: StepState
    since: datetime | None
    settle: float = 0.0
    held: frozenset[str] | None = field(default_factory=frozenset)
    error: str = ""

    @property
    def release_at(self) -> datetime | None:
        """When held pods may go: ``since + settle`` once draining or done; None while pending
        (not known yet: hold them, bounded by the drain's own limit) and after a failure or skip
        (nothing to wait for: see ``holds``)."""
        if self.state in (StepState.DRAINING, StepState.DONE) and self.since is not None:
            return self.since + timedelta(seconds=self.settle)
        return None

    def is_target(self, pod: str) -> bool:
        """Whether the pod (``namespace/name``) is, or is behind, a deregistered target."""
        return self.held is None or pod in self.held

    def holds(self, pod: str, now: datetime) -> bool:
        """Whether the drain must not evict ``pod`` (``namespace/name``) yet at ``now``: it is a
        target and its deregistration is pending, or started less than ``settle`` seconds ago.
        A failed or skipped deregistration holds nothing: the drain goes ahead."""
        if not self.is_target(pod):
            return False
        if self.state is StepState.PENDING:
            return True
        release = self.release_at
        return release is not None and now < release


def deregistration_for(record: ActionsRecord | str | None, event_id: str) -> Deregistration | None:
    """The deregistration of ``event_id`` in ``record`` (the record or the annotation's text).

    None when there is no record for that event yet (absent, unparsable, or another event's): the
    design has the drain evict nothing until the record lands, bounded by its own maximum delay.
    A record without a load-balancer step answers ``skipped`` with nothing held.
    """
    if record is None or isinstance(record, str):
        try:
            record = decode_record(record)
        except RecordError:
            return None
    if record is None or record.event != event_id:
        return None
    step = record.loadbalancer
    if step is None:
        return Deregistration(StepState.SKIPPED, None)
    held: frozenset[str] | None = frozenset(step.pods)
    if step.node or step.more_pods:
        held = None
    since = step.at if step.state in (StepState.DRAINING, StepState.DONE) else None
    return Deregistration(step.state, since, step.settle, held, step.error)
