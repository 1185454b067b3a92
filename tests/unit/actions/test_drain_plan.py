"""The per-pod drain rules and the deadline arithmetic, without a cluster."""

from __future__ import annotations

import dataclasses

from kubespot.actions.drain_plan import Action, capped_grace, deadline_reserve, plan_pod
from kubespot.config.drain import DrainSettings
from kubespot.kube import MIRROR_ANNOTATION, PodView

S = DrainSettings()


def pod(**kw: object) -> PodView:
    base: dict[str, object] = {"namespace": "ns", "name": "p", "uid": "u", "controller_kind": "ReplicaSet"}
    base.update(kw)
    return PodView(**base)  # type: ignore[arg-type]


def test_skips_and_refusals() -> None:
    assert plan_pod(pod(), settings=S, own_pod=("ns", "p")).reason == "own-pod"
    assert plan_pod(pod(annotations={MIRROR_ANNOTATION: "x"}), settings=S).reason == "mirror-pod"
    assert plan_pod(pod(phase="Succeeded"), settings=S).reason == "finished"
    assert plan_pod(pod(controller_kind="DaemonSet"), settings=S).reason == "daemonset"
    strict = dataclasses.replace(S, ignore_daemon_sets=False, delete_local_data=False)
    assert plan_pod(pod(controller_kind="DaemonSet"), settings=strict).action is Action.REFUSE
    assert plan_pod(pod(has_empty_dir=True), settings=strict).action is Action.REFUSE
    assert plan_pod(pod(has_empty_dir=True), settings=S).action is Action.EVICT


def test_bare_terminating_and_critical_pods() -> None:
    assert plan_pod(pod(controller_kind=None), settings=S).action is Action.EVICT_BARE
    from datetime import UTC, datetime

    assert plan_pod(pod(deletion_timestamp=datetime.now(tz=UTC)), settings=S).action is Action.WAIT
    assert plan_pod(pod(priority_class_name="system-node-critical"), settings=S).tier == 1
    assert plan_pod(pod(priority_class_name="high"), settings=S).tier == 0
    assert (
        plan_pod(
            pod(priority_class_name="system-node-critical"), settings=dataclasses.replace(S, critical_last=())
        ).tier
        == 0
    )


def test_grace_is_the_pods_own_until_the_deadline_cuts_it() -> None:
    p = pod(grace_period_seconds=30)
    assert capped_grace(p, settings=S, seconds_left=120) is None
    assert capped_grace(p, settings=S, seconds_left=20.9) == 15  # 20.9 - 5 s margin, rounded down
    assert capped_grace(p, settings=S, seconds_left=2) == 1  # never 0 (an immediate removal)
    assert capped_grace(pod(grace_period_seconds=0), settings=S, seconds_left=2) == 0
    fixed = dataclasses.replace(S, pod_termination_grace_period=10)
    assert capped_grace(p, settings=fixed, seconds_left=120) == 10


def test_deadline_action_reserves_grace_plus_margin_but_at_most_half_the_window() -> None:
    p = pod(grace_period_seconds=30)
    assert deadline_reserve(p, settings=S, window=120) == 35
    assert deadline_reserve(pod(grace_period_seconds=300), settings=S, window=120) == 65
