"""Throttling is no budget refusal, and the delete at the deadline removes only the pod it meant.

Through kubesim over HTTP:

- API Priority and Fairness rejects a request before any handler sees it with a 429, a Retry-After
  header and a text body (k8s.io/apiserver pkg/server/filters priority-and-fairness.go
  ``tooManyRequests``); a PodDisruptionBudget refuses an eviction with a 429 ``Status`` whose
  ``details.causes`` name ``DisruptionBudget`` (pkg/registry/core/pod/storage/eviction.go
  ``checkAndDecrement``). Only the second is a refusal the deadline action may override.
- The delete at the deadline carries ``preconditions.uid`` as the eviction does: the API server
  answers 409 Conflict when the name now belongs to another pod (k8s.io/apiserver
  pkg/storage/interfaces.go ``Preconditions.Check``: "Precondition failed: UID in precondition",
  turned into a Conflict by the registry's ``Store.Delete``), so a StatefulSet's next pod stays.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from typing import Any

from kubespot.actions.drain import Outcome, drain_node
from kubespot.kube import KubeClient
from kubespot.sim.kubesim.testing import deployment, pdb, until

from .conftest import CLOCK, NODE, QUICK, Env, drain_env, template


def _apf(count: int) -> str:
    """kubesim's injected 429s on evictions are API Priority and Fairness's (Retry-After: 1)."""
    return f"verb=create,resource=pods/eviction,rate=1,code=429,count={count}"


async def test_throttled_eviction_at_the_deadline_is_sent_again_after_retry_after_not_deleted() -> None:
    # Half the window (1.5 s) + a 2 s margin against a 3 s deadline: the deadline action is due
    # from the start, so a throttled first eviction taken for a budget's refusal is deleted at once.
    async with drain_env(template(deployment("web", 1, grace=2), shutdown=0.2)) as env:
        env.sim.faults.add(_apf(1))
        started = CLOCK.now()
        result = await env.drain(3, dataclasses.replace(QUICK, safety_margin=2.0), events=True)
        (web,) = result.pods
        assert web.outcome is Outcome.EVICTED, web
        assert (web.blocked, web.throttled, web.attempts) == (0, 1, 2)
        # The server's Retry-After (1 s) was honoured before the eviction was sent again.
        assert web.evicted_at is not None and (web.evicted_at - started).total_seconds() >= 0.9
        assert result.emptied
        assert not env.events("EvictionBlocked") and not env.events("DeletedAtDeadline")


async def test_throttling_neither_counts_as_refusal_nor_spends_the_budget_backoff() -> None:
    # A budget that never allows the eviction, behind two throttled attempts: the budget's refusals
    # are counted (and end in the delete at the deadline), the throttled attempts apart.
    objects = [
        template(deployment("db", 1, grace=1), shutdown=0.2),
        pdb("db", selector={"matchLabels": {"app": "db"}}, min_available=1),
    ]
    async with drain_env(*objects) as env:
        env.sim.faults.add(_apf(2))
        result = await env.drain(4, events=True)
        (db,) = result.pods
        assert db.outcome is Outcome.DELETED_AT_DEADLINE, db
        assert db.throttled == 2 and db.blocked == db.attempts - 2 and db.blocked > 0
        assert env.events("EvictionBlocked")
        for event in env.events("EvictionBlocked"):
            assert "disruption budget" in event["message"]


async def test_only_throttled_until_the_deadline_is_not_called_a_budget() -> None:
    async with drain_env(template(deployment("web", 1, grace=1), shutdown=0.2)) as env:
        env.sim.faults.add(_apf(100))
        result = await env.drain(2.5)
        (web,) = result.pods
        assert web.outcome is Outcome.STILL_RUNNING and web.blocked == 0
        assert web.throttled == web.attempts and 2 <= web.attempts <= 4  # once per Retry-After
        assert "throttled" in web.reason and "PodDisruptionBudget" not in web.reason
        (still,) = env.pods(NODE)
        assert not still["metadata"].get("deletionTimestamp")


def _statefulset(name: str) -> dict[str, Any]:
    sts = template(deployment(name, 1, grace=2), shutdown=0.2)
    sts["kind"] = "StatefulSet"
    sts["spec"]["serviceName"] = name
    sts["spec"].pop("strategy", None)
    return sts


class _ReplacedBeforeDelete:
    """The real client, but the pod is force-deleted and re-created by its StatefulSet (on another
    node, same name, new uid) just before the drain's delete at the deadline reaches the server."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.kube: KubeClient = env.kube
        self.replaced_uid: str | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kube, name)

    async def delete_pod(self, namespace: str, name: str, **kwargs: Any) -> bool:
        old = self.env.pod(namespace, name)
        assert old is not None
        await self.kube.delete_pod(namespace, name, grace_period_seconds=0)

        async def recreated() -> bool:
            pod = self.env.pod(namespace, name)
            return pod is not None and pod["metadata"]["uid"] != old["metadata"]["uid"]

        await until(recreated, within=5)
        new = self.env.pod(namespace, name)
        assert new is not None
        self.replaced_uid = new["metadata"]["uid"]
        return await self.kube.delete_pod(namespace, name, **kwargs)


async def test_delete_at_the_deadline_spares_a_namesake_created_since() -> None:
    objects = [
        _statefulset("db"),
        pdb("db", selector={"matchLabels": {"app": "db"}}, min_available=1),
    ]
    async with drain_env(*objects) as env:
        kube = _ReplacedBeforeDelete(env)
        result = await drain_node(
            NODE,
            kube=kube,  # type: ignore[arg-type]
            settings=dataclasses.replace(QUICK, pdb_deadline_action="delete"),
            deadline=Env.deadline(3),
            clock=CLOCK,
        )
        (db,) = result.pods
        assert kube.replaced_uid is not None and kube.replaced_uid != db.uid
        # Our pod went (force-deleted); its successor, same name, is none of the drain's business.
        assert db.outcome is Outcome.GONE, db
        successor = copy.deepcopy(env.pod("default", "db-0"))
        assert successor is not None and successor["metadata"]["uid"] == kube.replaced_uid
        assert not successor["metadata"].get("deletionTimestamp")


async def test_the_deadline_delete_carries_its_capped_grace_in_the_body() -> None:
    # The delete with a UID precondition has a DeleteOptions body, and the API server then reads
    # every option from the body alone (apiserver handlers/delete.go): a grace period sent in the
    # query would be ignored and the pod would outlive the instance with its own 600 s.
    objects = [
        template(deployment("slow", 1, grace=600), shutdown=600.0),
        pdb("slow", selector={"matchLabels": {"app": "slow"}}, min_available=1),
    ]
    async with drain_env(*objects) as env:
        result = await env.drain(3, dataclasses.replace(QUICK, pdb_deadline_action="delete"))
        (slow,) = result.pods
        assert slow.outcome in (Outcome.DELETED_AT_DEADLINE, Outcome.GONE), slow
        assert slow.grace_seconds is not None and slow.grace_seconds <= 3, slow

        async def gone() -> bool:
            return env.pod("default", slow.name) is None

        # The kubelet kills it at the capped grace; with its own 600 s it would still be there.
        await until(gone, within=8)


async def test_throttling_from_the_due_moment_on_does_not_save_a_refused_pod_from_its_delete() -> None:
    # A budget refused the pod; from then on every eviction is throttled. The budget's refusal
    # stands: at the due moment the pod is deleted, throttling must not carry it past (review).
    objects = [
        template(deployment("db", 1, grace=1), shutdown=0.2),
        pdb("db", selector={"matchLabels": {"app": "db"}}, min_available=1),
    ]
    async with drain_env(*objects) as env:

        async def throttle_later() -> None:
            await asyncio.sleep(1.0)
            env.sim.faults.add(_apf(10_000))

        later = asyncio.ensure_future(throttle_later())
        result = await env.drain(4, dataclasses.replace(QUICK, pdb_deadline_action="delete"))
        await later
        (db,) = result.pods
        assert db.blocked > 0 and db.throttled > 0, db
        assert db.outcome is Outcome.DELETED_AT_DEADLINE, db
