"""What happened in each scenario, and the verdict: pure data and pure judgement, no I/O.

The observer fills one ``ScenarioRecord`` per interrupted node from what it sees over the Kubernetes
API (node taints, cordon and annotation; pods leaving and replacements turning Ready; the agent's
Events). ``judge`` decides from the record alone whether the scenario met its promise, and
``scenario_summary`` / ``run_summary`` turn records into the JSON the command prints (and the tests
read). All times are epoch seconds; the summary gives them relative to the scenario's notice.

The promises:

- spot interruption: the node is fenced, every evictable pod is gone and every workload that had a
  pod there runs all its replicas elsewhere before the instance-action time;
- rebalance recommendation: the node is fenced but nothing is evicted, and the fence is undone by
  itself once the undo time has passed without an interruption;
- scheduled reboot: the node is fenced no earlier than NotBefore minus the lead time, emptied (as for
  a spot interruption) before NotBefore, and uncordoned and cleaned up after the reboot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SPOT_ITN = "spot-itn"
REBALANCE = "rebalance"
SCHEDULED_REBOOT = "scheduled-reboot"
SCENARIOS: tuple[str, ...] = (SPOT_ITN, REBALANCE, SCHEDULED_REBOOT)

#: The taint the agent puts on for each scenario.
TAINT_KEYS: dict[str, str] = {
    SPOT_ITN: "kubespot.io/spot-itn",
    REBALANCE: "kubespot.io/rebalance-recommendation",
    SCHEDULED_REBOOT: "kubespot.io/scheduled-maintenance",
}
#: IMDS shows whole seconds and the agent polls: a fence this much before the expected time is
#: still "on time"; earlier means the agent acted on the announcement, not on NotBefore - lead.
EARLY_FENCE_TOLERANCE = 1.5
#: A rebalance fence undone this much before its undo time is still "on time" (same reasons).
EARLY_UNDO_TOLERANCE = 1.5


@dataclass
class PodTrack:
    """A pod seen on the scenario's node after the notice."""

    namespace: str
    name: str
    uid: str
    #: The controlling owner as "namespace/Kind/name"; None for a bare pod.
    owner: str | None
    daemon: bool = False
    seen_at: float = 0.0
    terminating_at: float | None = None
    gone_at: float | None = None
    #: Evictions refused with 429 (the agent's EvictionBlocked events, counted with their repeats).
    blocked: int = 0
    first_blocked_at: float | None = None
    #: The agent's last word on the pod (Evicted, DeletedAtDeadline, BarePodDeleted).
    outcome: str | None = None

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pdb_wait(self) -> float | None:
        """Seconds between the first 429 and the eviction that went through."""
        if self.first_blocked_at is None or self.terminating_at is None:
            return None
        return max(0.0, self.terminating_at - self.first_blocked_at)


@dataclass
class OwnerTrack:
    """A workload that had a pod on the node: when did all its replicas run elsewhere again?"""

    key: str
    desired: int
    ready_elsewhere: int = 0
    restored_at: float | None = None


@dataclass
class ScenarioRecord:
    scenario: str
    node: str
    instance_id: str
    notice_at: float
    #: What the timeline calls it when not the scenario's name (the load-balancer runs).
    label: str | None = None
    #: When the instance goes: spot instance-action time; scheduled NotBefore. None for rebalance.
    deadline: float | None = None
    #: Scheduled reboot: NotBefore - lead time, when the agent should fence.
    act_at: float | None = None
    #: Rebalance: seconds after the fence at which the agent should undo it.
    undo_after: float | None = None
    #: Scheduled reboot: seconds after the reboot within which the agent must clean up.
    cleanup_within: float | None = None
    tainted_at: float | None = None
    cordoned_at: float | None = None
    annotated_at: float | None = None
    phases: list[tuple[float, str]] = field(default_factory=list)
    drain_started_at: float | None = None
    drain_done_at: float | None = None
    drain_done_reason: str | None = None
    untainted_at: float | None = None
    uncordoned_at: float | None = None
    unannotated_at: float | None = None
    reboot_started_at: float | None = None
    reboot_done_at: float | None = None
    terminated_at: float | None = None
    #: The controller's load-balancer step in ``kubespot.io/actions`` as last seen, and when the
    #: observer first saw it ``draining`` (or ``done``: nothing was registered).
    deregistration: dict[str, Any] | None = None
    deregistered_at: float | None = None
    pods: dict[str, PodTrack] = field(default_factory=dict)
    owners: dict[str, OwnerTrack] = field(default_factory=dict)
    node_events: dict[str, int] = field(default_factory=dict)
    #: Set when the driver stopped waiting; ``timed_out`` when it gave up rather than saw the end.
    finished_at: float | None = None
    timed_out: bool = False
    #: Problems the driver saw (an agent that died, a step that failed).
    problems: list[str] = field(default_factory=list)

    @property
    def taint_key(self) -> str:
        return TAINT_KEYS[self.scenario]

    @property
    def fenced_at(self) -> float | None:
        if self.tainted_at is None or self.cordoned_at is None:
            return None
        return max(self.tainted_at, self.cordoned_at)

    def evictable(self) -> list[PodTrack]:
        return [p for p in self.pods.values() if not p.daemon]

    @property
    def emptied_at(self) -> float | None:
        pods = self.evictable()
        if any(p.gone_at is None for p in pods):
            return None
        return max((p.gone_at for p in pods if p.gone_at is not None), default=self.fenced_at)

    @property
    def restored_at(self) -> float | None:
        if any(o.restored_at is None for o in self.owners.values()):
            return None
        return max((o.restored_at for o in self.owners.values() if o.restored_at is not None), default=None)

    @property
    def cleaned_at(self) -> float | None:
        """When the fence was fully undone: uncordoned, taint and annotation removed."""
        marks = (self.uncordoned_at, self.untainted_at, self.unannotated_at)
        if any(m is None for m in marks):
            return None
        return max(m for m in marks if m is not None)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reasons: tuple[str, ...]

    @property
    def text(self) -> str:
        return "met" if self.ok else "; ".join(self.reasons)


def _secs(x: float) -> str:
    return f"{x:.1f}s"


def _blocked_note(p: PodTrack) -> str:
    notes = []
    if p.blocked:
        notes.append(f"PodDisruptionBudget refused {p.blocked} eviction{'s' if p.blocked != 1 else ''}")
    if p.terminating_at is not None:
        notes.append("terminating")
    return f" ({', '.join(notes)})" if notes else ""


def _emptied_reasons(rec: ScenarioRecord, deadline: float, what: str) -> list[str]:
    reasons: list[str] = []
    left = [p for p in rec.evictable() if p.gone_at is None or p.gone_at > deadline]
    if left:
        names = ", ".join(p.label + _blocked_note(p) for p in left[:5])
        more = f" and {len(left) - 5} more" if len(left) > 5 else ""
        reasons.append(f"{len(left)} pod(s) still on {rec.node} at {what}: {names}{more}")
    for owner in rec.owners.values():
        if owner.restored_at is None or owner.restored_at > deadline:
            reasons.append(
                f"{owner.key}: {owner.ready_elsewhere}/{owner.desired} replicas running elsewhere at {what}"
            )
    return reasons


def judge(rec: ScenarioRecord) -> Verdict:
    """Whether the scenario kept its promise (see the module docstring), and if not, why."""
    reasons: list[str] = list(rec.problems)
    fenced = rec.fenced_at
    if fenced is None:
        missing = [w for w, t in (("tainted", rec.tainted_at), ("cordoned", rec.cordoned_at)) if t is None]
        reasons.append(f"{rec.node} was never {' or '.join(missing)} ({rec.taint_key})")
    if rec.scenario in (SPOT_ITN, SCHEDULED_REBOOT):
        assert rec.deadline is not None
        what = "the instance-action time" if rec.scenario == SPOT_ITN else "NotBefore (the reboot)"
        if fenced is not None and fenced > rec.deadline:
            reasons.append(f"fenced {_secs(fenced - rec.deadline)} after {what}")
        reasons += _emptied_reasons(rec, rec.deadline, what)
    if rec.scenario == SCHEDULED_REBOOT:
        assert rec.act_at is not None
        if fenced is not None and fenced < rec.act_at - EARLY_FENCE_TOLERANCE:
            reasons.append(
                f"fenced {_secs(rec.act_at - fenced)} before NotBefore - lead time: it should wait, "
                "not act on the announcement"
            )
        if rec.reboot_done_at is None:
            reasons.append("the reboot did not happen")
        elif (
            rec.reboot_started_at is not None
            and rec.uncordoned_at is not None
            and rec.uncordoned_at < rec.reboot_started_at
        ):
            reasons.append(f"{rec.node} was uncordoned before the reboot, while it was still going down")
        else:
            reasons += _cleanup_reasons(rec, rec.reboot_done_at, rec.cleanup_within, "after the reboot")
    if rec.scenario == REBALANCE:
        evicted = [p for p in rec.evictable() if p.terminating_at is not None]
        if evicted:
            reasons.append(f"{len(evicted)} pod(s) evicted, but a rebalance recommendation only fences")
        if fenced is not None and rec.undo_after is not None:
            undo_due = fenced + rec.undo_after
            cleaned = rec.cleaned_at
            if cleaned is not None and cleaned < undo_due - EARLY_UNDO_TOLERANCE:
                reasons.append(f"fence undone {_secs(undo_due - cleaned)} before the undo time")
            reasons += _cleanup_reasons(rec, undo_due, rec.cleanup_within, "after the undo time")
    return Verdict(not reasons, tuple(reasons))


def _cleanup_reasons(rec: ScenarioRecord, since: float, within: float | None, what: str) -> list[str]:
    limit = since + (within or 0.0)
    left = [
        label
        for label, at in (
            ("cordoned", rec.uncordoned_at),
            (f"tainted {rec.taint_key}", rec.untainted_at),
            ("annotated kubespot.io/interruption", rec.unannotated_at),
        )
        if at is None or at > limit
    ]
    if not left:
        return []
    return [f"{rec.node} still {', '.join(left)} {_secs(within or 0.0)} {what}"]


def _rel(rec: ScenarioRecord, t: float | None) -> float | None:
    return None if t is None else round(t - rec.notice_at, 3)


def scenario_summary(rec: ScenarioRecord) -> dict[str, Any]:
    """One scenario as JSON-ready data; times in seconds after the notice."""
    verdict = judge(rec)
    evictable = rec.evictable()
    # A rebalance recommendation moves nothing: its pods are not "to move".
    owned = [p for p in evictable if p.owner is not None] if rec.scenario != REBALANCE else []
    deadline = rec.deadline
    moved = [
        p
        for p in owned
        if p.gone_at is not None
        and (deadline is None or p.gone_at <= deadline)
        and (o := rec.owners.get(p.owner or "")) is not None
        and o.restored_at is not None
        and (deadline is None or o.restored_at <= deadline)
    ]
    done = [t for t in (rec.emptied_at, rec.restored_at) if t is not None]
    finished = max(done) if len(done) == 2 and evictable else None
    out: dict[str, Any] = {
        "scenario": rec.scenario,
        "node": rec.node,
        "instance_id": rec.instance_id,
        "ok": verdict.ok,
        "verdict": verdict.text,
        "reasons": list(verdict.reasons),
        "deadline_s": _rel(rec, deadline),
        "notice_to_taint_s": _rel(rec, rec.tainted_at),
        "notice_to_cordon_s": _rel(rec, rec.cordoned_at),
        # For a scheduled event the clock starts when the agent should act, not at the announcement.
        "cordon_latency_s": (
            None
            if rec.cordoned_at is None
            else round(rec.cordoned_at - (rec.act_at if rec.act_at is not None else rec.notice_at), 3)
        ),
        "pods_on_node": len(evictable),
        "evictions": sum(1 for p in evictable if p.terminating_at is not None),
        "pdb_429s": sum(p.blocked for p in evictable),
        "pdb_wait_max_s": max(
            (round(w, 3) for p in evictable if (w := p.pdb_wait) is not None), default=None
        ),
        "pods_to_move": len(owned),
        "pods_moved": len(moved),
        "bare_pods_deleted": sum(1 for p in evictable if p.owner is None and p.gone_at is not None),
        "time_to_empty_s": _rel(rec, rec.emptied_at) if evictable else None,
        "all_running_elsewhere_s": _rel(rec, rec.restored_at) if rec.owners else None,
        "margin_s": round(deadline - finished, 3) if deadline is not None and finished is not None else None,
        "deadline_met": (deadline is not None and verdict.ok) if rec.scenario != REBALANCE else None,
        "agent_events": dict(sorted(rec.node_events.items())),
        "pods": [
            {
                "pod": p.label,
                "owner": p.owner,
                "evicted_s": _rel(rec, p.terminating_at),
                "gone_s": _rel(rec, p.gone_at),
                "pdb_429s": p.blocked,
                "outcome": p.outcome,
            }
            for p in sorted(evictable, key=lambda p: (p.gone_at or float("inf"), p.label))
        ],
        "timed_out": rec.timed_out,
    }
    if rec.scenario == REBALANCE:
        out["undo_after_s"] = rec.undo_after
        out["undone"] = rec.cleaned_at is not None
        out["undone_s"] = _rel(rec, rec.cleaned_at)
    if rec.scenario == SCHEDULED_REBOOT:
        out["expected_fence_s"] = _rel(rec, rec.act_at)
        out["fenced_s"] = _rel(rec, rec.fenced_at)
        out["reboot_s"] = _rel(rec, rec.reboot_started_at)
        out["back_up_s"] = _rel(rec, rec.reboot_done_at)
        out["uncordoned_after_reboot"] = (
            rec.cleaned_at is not None
            and rec.reboot_done_at is not None
            and rec.cleaned_at >= rec.reboot_done_at
        )
        out["cleaned_up_s"] = _rel(rec, rec.cleaned_at)
    return out


def run_summary(records: list[ScenarioRecord], **extra: Any) -> dict[str, Any]:
    """The whole run: ok only when every scenario kept its promise."""
    scenarios = {rec.scenario: scenario_summary(rec) for rec in records}
    return {"ok": bool(records) and all(s["ok"] for s in scenarios.values()), "scenarios": scenarios, **extra}
