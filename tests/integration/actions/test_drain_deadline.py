"""The deadline: a budget that never allows eviction, grace periods cut to fit, and tiers."""

from __future__ import annotations

import dataclasses

from kubespot.actions.drain import Outcome
from kubespot.sim.kubesim.testing import deployment, pdb

from .conftest import NODE, QUICK, Env, drain_env, template


def _stuck() -> list[dict]:
    """One replica whose budget demands it stays: eviction is refused for ever."""
    return [
        template(deployment("db", 1, grace=2), shutdown=0.3),
        pdb("db", selector={"matchLabels": {"app": "db"}}, min_available=1),
    ]


async def test_pdb_that_never_allows_eviction_is_deleted_at_the_deadline() -> None:
    async with drain_env(*_stuck()) as env:
        deadline = Env.deadline(4)
        result = await env.drain(deadline, events=True)
        (db,) = result.pods
        assert db.outcome is Outcome.DELETED_AT_DEADLINE, db
        assert db.blocked > 0
        # Deleted once the time left fell under grace (2 s) + margin (0.5 s), and gone in time.
        assert db.evicted_at is not None and (deadline - db.evicted_at).total_seconds() <= 2.5 + 0.3
        assert db.gone_at is not None and db.gone_at <= deadline
        assert result.emptied
        assert env.pods(NODE) == []
        assert env.events("DeletedAtDeadline")


async def test_pdb_that_never_allows_eviction_is_left_running_with_keep() -> None:
    async with drain_env(*_stuck()) as env:
        settings = dataclasses.replace(QUICK, pdb_deadline_action="keep")
        result = await env.drain(2, settings)
        (db,) = result.pods
        assert db.outcome is Outcome.STILL_RUNNING
        assert db.blocked > 1 and db.gone_at is None
        assert not result.emptied
        (still,) = env.pods(NODE)
        assert not still["metadata"].get("deletionTimestamp")


async def test_grace_period_is_cut_to_finish_before_the_deadline() -> None:
    # The app would use all of its 30 s grace period; the node has 3 s left.
    async with drain_env(template(deployment("slow", 2, grace=30), shutdown=30)) as env:
        deadline = Env.deadline(3)
        result = await env.drain(deadline)
        assert all(p.outcome is Outcome.EVICTED for p in result.pods)
        assert all(p.grace_seconds is not None and p.grace_seconds <= 2 for p in result.pods)
        assert all(p.gone_at is not None and p.gone_at <= deadline for p in result.pods)
        assert result.emptied


async def test_critical_pods_leave_after_the_others_are_gone() -> None:
    objects = [
        template(deployment("web", 3, grace=5), shutdown=0.4),
        template(deployment("dns", 2, namespace="kube-system"), priority_class="system-cluster-critical"),
    ]
    async with drain_env(*objects, expect_pods=5) as env:
        result = await env.drain(15)
        assert result.emptied
        web = [p for p in result.pods if p.name.startswith("web-")]
        dns = [p for p in result.pods if p.name.startswith("dns-")]
        assert {p.tier for p in web} == {0} and {p.tier for p in dns} == {1}
        last_web_gone = max(p.gone_at for p in web if p.gone_at)
        assert all(p.evicted_at is not None and p.evicted_at >= last_web_gone for p in dns)


async def test_empty_dir_pods_refuse_the_drain_unless_local_data_may_go() -> None:
    objects = [template(deployment("cache", 1), empty_dir=True), deployment("web", 1)]
    async with drain_env(*objects, expect_pods=2) as env:
        keep_data = dataclasses.replace(QUICK, delete_local_data=False)
        refused = await env.drain(5, keep_data)
        assert refused.refused and not refused.emptied
        by = {p.name.split("-")[0]: p.outcome for p in refused.pods}
        assert by == {"cache": Outcome.REFUSED, "web": Outcome.STILL_RUNNING}
        assert len(env.pods(NODE)) == 2
        assert not any(p["metadata"].get("deletionTimestamp") for p in env.pods(NODE))

        drained = await env.drain(5)
        assert drained.emptied
        assert {p.outcome for p in drained.pods} == {Outcome.EVICTED}


async def test_dry_run_changes_nothing_and_says_so_in_events() -> None:
    objects = [
        deployment("web", 2),
        pdb("web", selector={"matchLabels": {"app": "web"}}, max_unavailable=1),
    ]
    async with drain_env(*objects, expect_pods=2) as env:
        before = {p["metadata"]["uid"]: p["metadata"]["resourceVersion"] for p in env.pods(NODE)}
        result = await env.drain(5, events=True, dry_run=True)
        assert result.dry_run and result.ok and not result.emptied
        assert {p.outcome for p in result.pods} == {Outcome.WOULD_EVICT}
        after = {p["metadata"]["uid"]: p["metadata"]["resourceVersion"] for p in env.pods(NODE)}
        assert after == before
        assert len(env.events("DryRun")) == 3  # one per pod, one on the node
