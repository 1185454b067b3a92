"""The policy/v1 Eviction subresource over real HTTP, checked against upstream's behaviour.

Main source: kubernetes/kubernetes ``pkg/registry/core/pod/storage/eviction.go`` (``Create``,
``canIgnorePDB``, ``checkAndDecrement``, ``getPodDisruptionBudgets``, ``addConditionAndDeletePod``),
plus the docs pages "API-initiated Eviction" and "Specifying a Disruption Budget for your
Application" and the PodDisruptionBudgetSpec API reference (``selector``, ``unhealthyPodEvictionPolicy``).

Budgets are loaded with a hand-written status whose numbers are exactly what upstream's disruption
controller computes for the hand-built pods (minAvailable int: expected = matching pods; maxUnavailable
or a percentage: expected = the owning ReplicaSet's replicas, percentages rounded up). So the checks
hold whether or not kubesim's disruption controller has recomputed the status in the meantime.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from kubespot.sim.kubesim.app import KubeSim, ThreadedKubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.errors import ApiError
from kubespot.sim.kubesim.eviction import evict
from kubespot.sim.kubesim.testing import condition, namespace, node, pdb, pod, replicaset

QUIET = ControllerConfig(scheduler=False, kubelet=False, workloads=False)
NS = "shop"
RS_UID = str(uuid.uuid4())
PDBS = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets"
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
WEB_LABELS = {"app": "web"}
WEB_SELECTOR = {"matchLabels": WEB_LABELS}

Obj = dict[str, Any]


# -- fixtures ---------------------------------------------------------------------------------------


def web_replicaset(replicas: int) -> Obj:
    rs = replicaset("web", replicas, namespace=NS)
    rs["metadata"]["uid"] = RS_UID  # fixed: the pods name it as their owner before it is loaded
    rs["status"] = {"replicas": replicas}
    return rs


def web_pod(
    name: str,
    *,
    ready: bool = True,
    phase: str = "Running",
    labels: dict[str, str] | None = None,
    node_name: str | None = "node-a",
) -> Obj:
    """A pod of ReplicaSet ``web`` on node-a, Running and Ready unless told otherwise."""
    return pod(
        name,
        namespace=NS,
        node=node_name,
        labels=WEB_LABELS if labels is None else labels,
        owner=web_replicaset(0),
        grace=30,
        phase=phase,
        ready=ready,
    )


def settled_pdb(
    name: str,
    *,
    allowed: int,
    current: int,
    desired: int,
    expected: int,
    selector: Obj | None = WEB_SELECTOR,
    namespace_: str = NS,
    **rule: Any,
) -> Obj:
    """A PDB loaded with the status the disruption controller computes for these pods."""
    status = {
        "observedGeneration": 1,
        "disruptionsAllowed": allowed,
        "currentHealthy": current,
        "desiredHealthy": desired,
        "expectedPods": expected,
    }
    body = pdb(name, namespace=namespace_, selector=selector, status=status, **rule)
    body["metadata"]["generation"] = 1
    return body


def cluster_objects(pods: list[Obj], *pdbs: Obj, replicas: int | None = None) -> list[Obj]:
    return [
        namespace(NS),
        node("node-a", ready=True),
        web_replicaset(len(pods) if replicas is None else replicas),
        *pods,
        *pdbs,
    ]


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def evict_http(
    http: aiohttp.ClientSession,
    sim: KubeSim,
    name: str,
    body: Any = "default",
    params: dict[str, str] | None = None,
) -> tuple[int, Any, aiohttp.typedefs.LooseHeaders]:
    if isinstance(body, str) and body == "default":
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    url = f"{sim.url}/api/v1/namespaces/{NS}/pods/{name}/eviction"
    async with http.post(
        url, data=data, params=params or {}, headers={"Content-Type": "application/json"}
    ) as resp:
        return resp.status, orjson.loads(await resp.read()), resp.headers


async def get(http: aiohttp.ClientSession, sim: KubeSim, path: str) -> tuple[int, Any]:
    async with http.get(sim.url + path) as resp:
        return resp.status, orjson.loads(await resp.read())


async def get_pod(http: aiohttp.ClientSession, sim: KubeSim, name: str) -> tuple[int, Any]:
    return await get(http, sim, f"/api/v1/namespaces/{NS}/pods/{name}")


# -- tests ------------------------------------------------------------------------------------------


async def test_no_budget_evicts_gracefully_with_disruption_target(http: aiohttp.ClientSession) -> None:
    """No matching PDB: the pod is deleted gracefully and the answer is a 201 Success ``Status``.

    eviction.go ``Create``: ``len(pdbs) == 0`` falls through to ``addConditionAndDeletePod`` and
    returns ``&metav1.Status{Status: StatusSuccess}``; the create handler (apiserver
    ``handlers/create.go``) fills ``code`` with 201. ``addConditionAndDeletePod`` first sets the
    ``DisruptionTarget`` condition (status True, reason ``EvictionByEvictionAPI``, message
    "Eviction API: evicting"), then deletes with the request's DeleteOptions, so the pod's own
    terminationGracePeriodSeconds applies ("API-initiated Eviction": the pod is terminated gracefully).
    """
    async with KubeSim(objects=cluster_objects([web_pod("web-0")]), controllers=QUIET) as sim:
        status, body, _ = await evict_http(http, sim, "web-0")
        assert (status, body) == (201, SUCCESS)
        code, evicted = await get_pod(http, sim, "web-0")
        assert code == 200
        assert evicted["metadata"]["deletionTimestamp"]
        assert evicted["metadata"]["deletionGracePeriodSeconds"] == 30
        target = condition(evicted, "DisruptionTarget")
        assert target is not None
        assert (target["status"], target["reason"], target["message"]) == (
            "True",
            "EvictionByEvictionAPI",
            "Eviction API: evicting",
        )
        assert target["lastTransitionTime"]


async def test_exhausted_budget_answers_429_with_cause(http: aiohttp.ClientSession) -> None:
    """``disruptionsAllowed == 0``: 429 TooManyRequests, upstream's message and cause.

    eviction.go ``checkAndDecrement``: ``errors.NewTooManyRequests("Cannot evict pod as it would
    violate the pod's disruption budget.", 0)`` with a cause of type ``DisruptionBudget`` (serialized
    as ``reason``) and message "The disruption budget %s needs %d healthy pods and has %d currently".
    A retryAfter of 0 means no ``retryAfterSeconds`` and no Retry-After header. The pod is untouched.
    """
    objs = cluster_objects(
        [web_pod("web-0"), web_pod("web-1")],
        settled_pdb("web", allowed=0, current=2, desired=2, expected=2, min_available=2),
    )
    async with KubeSim(objects=objs, controllers=QUIET) as sim:
        status, body, headers = await evict_http(http, sim, "web-0")
        assert status == 429
        assert body["kind"] == "Status" and body["status"] == "Failure"
        assert body["reason"] == "TooManyRequests" and body["code"] == 429
        assert body["message"] == VIOLATION
        assert body["details"]["causes"] == [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
            }
        ]
        assert "retryAfterSeconds" not in body["details"]
        assert "Retry-After" not in headers
        _, still = await get_pod(http, sim, "web-0")
        assert "deletionTimestamp" not in still["metadata"]
        assert condition(still, "DisruptionTarget") is None


async def test_decrement_records_disrupted_pod_and_refuses_the_next(http: aiohttp.ClientSession) -> None:
    """A granted eviction writes the PDB status first (disruptionsAllowed - 1, ``disruptedPods[pod]``)
    and then deletes the pod; the next eviction sees 0 and gets 429.

    eviction.go ``checkAndDecrement``: ``pdb.Status.DisruptionsAllowed--``; when it reaches 0,
    ``pdbhelper.UpdateDisruptionAllowedCondition`` sets DisruptionAllowed=False/InsufficientPods;
    ``DisruptedPods[podName] = now`` and ``UpdateStatus`` — before ``addConditionAndDeletePod``.
    The PDB is watched so the status write is seen even if the disruption controller later drops
    the entry (it does once the pod is terminating: ``buildDisruptedPodMap``).
    """
    objs = cluster_objects(
        [web_pod("web-0"), web_pod("web-1"), web_pod("web-2")],
        settled_pdb("web", allowed=1, current=3, desired=2, expected=3, min_available=2),
    )
    async with KubeSim(objects=objs, controllers=QUIET) as sim:
        _, listing = await get(http, sim, PDBS)
        rv = listing["metadata"]["resourceVersion"]
        watch_url = f"{sim.url}{PDBS}?watch=true&resourceVersion={rv}&timeoutSeconds=5"
        async with http.get(watch_url) as stream:
            status, body, _ = await evict_http(http, sim, "web-0")
            assert (status, body) == (201, SUCCESS)
            event: Obj = {}
            # The disruption controller may write the status too; find the eviction's own write.
            while "web-0" not in ((event.get("object") or {}).get("status") or {}).get("disruptedPods", {}):
                event = orjson.loads(await asyncio.wait_for(stream.content.readline(), 5))
        assert event["type"] == "MODIFIED"
        st = event["object"]["status"]
        assert st["disruptionsAllowed"] == 0
        assert set(st["disruptedPods"]) == {"web-0"}
        allowed_cond = condition(event["object"], "DisruptionAllowed")
        assert allowed_cond is not None
        assert (allowed_cond["status"], allowed_cond["reason"]) == ("False", "InsufficientPods")
        # The status write came before the pod delete: the pod was still live in that event's world.
        _, evicted = await get_pod(http, sim, "web-0")
        assert int(evicted["metadata"]["resourceVersion"]) > int(
            event["object"]["metadata"]["resourceVersion"]
        )

        status, body, _ = await evict_http(http, sim, "web-1")
        assert status == 429 and body["message"] == VIOLATION
        _, other = await get_pod(http, sim, "web-1")
        assert "deletionTimestamp" not in other["metadata"]


@pytest.mark.parametrize(
    ("spec", "replicas", "numbers"),
    [
        ({"min_available": 2}, None, (1, 3, 2, 3)),
        ({"min_available": "50%"}, 4, (1, 3, 2, 4)),  # ceil(4 * 50%) = 2 desired, 3 healthy
        ({"max_unavailable": 1}, 3, (1, 3, 2, 3)),
        ({"max_unavailable": "34%"}, 3, (2, 3, 1, 3)),  # ceil(3 * 34%) = 2 unavailable -> desired 1
    ],
)
async def test_min_available_and_max_unavailable(
    http: aiohttp.ClientSession, spec: Obj, replicas: int | None, numbers: tuple[int, int, int, int]
) -> None:
    """minAvailable / maxUnavailable, as int and as percentage: one budgeted eviction passes, and the
    next is refused once ``disruptionsAllowed`` is used up.

    "Specifying a Disruption Budget for your Application": percentages are of the expected pods
    (the controller's scale), rounded up. The eviction handler itself never recomputes these numbers,
    it only checks ``status.disruptionsAllowed`` (eviction.go ``checkAndDecrement``), so the status
    here is the one the disruption controller writes for these pods (3 Ready pods).
    """
    allowed, current, desired, expected = numbers
    objs = cluster_objects(
        [web_pod("web-0"), web_pod("web-1"), web_pod("web-2")],
        settled_pdb("web", allowed=allowed, current=current, desired=desired, expected=expected, **spec),
        replicas=replicas,
    )
    async with KubeSim(objects=objs, controllers=QUIET) as sim:
        for i in range(allowed):
            status, body, _ = await evict_http(http, sim, f"web-{i}")
            assert (status, body) == (201, SUCCESS), body
        status, body, _ = await evict_http(http, sim, f"web-{allowed}")
        assert status == 429
        assert body["details"]["causes"][0]["message"].startswith(
            f"The disruption budget web needs {desired} "
        )


async def test_two_matching_budgets_answer_500(http: aiohttp.ClientSession) -> None:
    """Two PDBs selecting the pod: 500 with upstream's message and no reason; nothing changes.

    eviction.go ``Create``: ``len(pdbs) > 1`` returns ``&metav1.Status{Status: StatusFailure,
    Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does
    not support.", Code: 500}``; the apiserver's ``finishRequest`` turns a non-Success Status into
    an error with that code (``errors.FromObject``), so the HTTP status is 500 and ``reason`` is empty.
    An empty selector ``{}`` matches every pod of the namespace (API reference, PodDisruptionBudgetSpec
    ``selector``: "an empty ({}) selector will select all pods within the namespace").
    """
    objs = cluster_objects(
        [web_pod("web-0"), web_pod("web-1")],
        settled_pdb("web", allowed=1, current=2, desired=1, expected=2, min_available=1),
        settled_pdb("everything", allowed=1, current=2, desired=1, expected=2, min_available=1, selector={}),
    )
    async with KubeSim(objects=objs, controllers=QUIET) as sim:
        status, body, _ = await evict_http(http, sim, "web-0")
        assert status == 500
        assert body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "code": 500,
            "message": MULTIPLE,
        }
        _, still = await get_pod(http, sim, "web-0")
        assert "deletionTimestamp" not in still["metadata"]


async def test_selector_scope_nil_selector_and_other_namespace(http: aiohttp.ClientSession) -> None:
    """Only PDBs of the pod's namespace count, and a PDB without a selector matches no pod.

    eviction.go ``getPodDisruptionBudgets`` lists PDBs in ``pod.Namespace`` and converts each
    selector with ``metav1.LabelSelectorAsSelector``, which maps nil to ``labels.Nothing()`` (API
    reference: "A null selector will match no pods"). Both exhausted budgets here are therefore
    irrelevant and the eviction is a plain delete.
    """
    objs = cluster_objects(
        [web_pod("web-0")],
        settled_pdb(
            "no-selector", allowed=0, current=0, desired=0, expected=0, min_available=1, selector=None
        ),
        namespace("other"),
        settled_pdb(
            "elsewhere",
            allowed=0,
            current=0,
            desired=1,
            expected=0,
            min_available=1,
            selector={},
            namespace_="other",
        ),
    )
    async with KubeSim(objects=objs, controllers=QUIET) as sim:
        status, body, _ = await evict_http(http, sim, "web-0")
        assert (status, body) == (201, SUCCESS)


async def test_budgets_created_and_deleted_later_are_seen(http: aiohttp.ClientSession) -> None:
    """The per-namespace PDB index follows creates and deletes made after start-up.

    A PDB created with ``maxUnavailable: 0`` blocks evictions (API reference: "one can prevent all
    voluntary evictions by specifying 0"): 429, either because the budget is exhausted or, before
    the disruption controller has observed it, because ``status.observedGeneration <
    metadata.generation`` (eviction.go ``checkAndDecrement`` → ``createTooManyRequestsError``).
    """
    async with KubeSim(
        objects=cluster_objects([web_pod("web-0"), web_pod("web-1")]), controllers=QUIET
    ) as sim:
        status, _, _ = await evict_http(http, sim, "web-0")
        assert status == 201
        new = pdb("freeze", max_unavailable=0, selector=WEB_SELECTOR)
        async with http.post(sim.url + PDBS, json=new) as resp:
            assert resp.status == 201
        status, body, _ = await evict_http(http, sim, "web-1")
        assert status == 429 and body["reason"] == "TooManyRequests"
        async with http.delete(f"{sim.url}{PDBS}/freeze") as resp:
            assert resp.status == 200
        status, _, _ = await evict_http(http, sim, "web-1")
        assert status == 201


async def test_unobserved_budget_is_still_being_processed() -> None:
    """``status.observedGeneration < metadata.generation``: 429 with retryAfterSeconds 10.

    eviction.go ``createTooManyRequestsError``: ``NewTooManyRequests(<violation message>, 10)`` and a
    ``DisruptionBudget`` cause "The disruption budget %s is still being processed by the server.".
    Called in-process so the disruption controller cannot observe the budget in between.
    """
    stale = settled_pdb("web", allowed=5, current=2, desired=1, expected=2, min_available=1)
    stale["metadata"]["generation"] = 2
    async with KubeSim(
        objects=cluster_objects([web_pod("web-0"), web_pod("web-1")], stale), controllers=QUIET
    ) as sim:
        with pytest.raises(ApiError) as refused:
            await evict(sim.store, NS, "web-0", {"metadata": {"name": "web-0"}})
        err = refused.value
        assert (err.code, err.reason, err.message, err.retry_after) == (429, "TooManyRequests", VIOLATION, 10)
        assert err.details == {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget web is still being processed by the server.",
                }
            ],
            "retryAfterSeconds": 10,
        }


async def test_pending_terminal_and_terminating_pods_skip_the_budget(http: aiohttp.ClientSession) -> None:
    """Pending, Succeeded/Failed and already-terminating pods are deleted without a PDB check.

    eviction.go ``canIgnorePDB``: ``Phase == Succeeded || Failed || Pending ||
    DeletionTimestamp != nil``; such a pod goes straight to ``addConditionAndDeletePod`` and the
    answer is 201 Success. An unbound Pending pod and a finished pod are removed at once (pod
    strategy ``CheckGracefulDelete``: grace 0); a terminating pod keeps terminating.
    """
    objs = cluster_objects(
        [
            web_pod("web-0"),
            web_pod("pending", phase="Pending", ready=False, node_name=None),
            web_pod("done", phase="Succeeded", ready=False),
            web_pod("failed", phase="Failed", ready=False),
        ],
        settled_pdb("web", allowed=0, current=1, desired=1, expected=1, min_available=1),
    )
    async with KubeSim(objects=objs, controllers=QUIET) as sim:
        for name in ("pending", "done", "failed"):
            status, body, _ = await evict_http(http, sim, name)
            assert (status, body) == (201, SUCCESS), name
            code, _ = await get_pod(http, sim, name)
            assert code == 404, name
        # web-0 is the only healthy pod: a plain eviction is refused, but once it is terminating
        # (deleted by someone else) an eviction is accepted without consulting the budget.
        status, _, _ = await evict_http(http, sim, "web-0")
        assert status == 429
        async with http.delete(f"{sim.url}/api/v1/namespaces/{NS}/pods/web-0") as resp:
            assert resp.status == 200
        status, body, _ = await evict_http(http, sim, "web-0")
        assert (status, body) == (201, SUCCESS)
        _, terminating = await get_pod(http, sim, "web-0")
        assert terminating["metadata"]["deletionTimestamp"]
        assert condition(terminating, "DisruptionTarget") is not None


async def test_unhealthy_pod_eviction_policy(http: aiohttp.ClientSession) -> None:
    """``unhealthyPodEvictionPolicy``: IfHealthyBudget (the default) and AlwaysAllow.

    eviction.go ``Create``: for a pod that is not Ready (``podutil.IsPodReady``), ``AlwaysAllow``
    deletes it without touching the budget; otherwise it is deleted without touching the budget only
    if ``CurrentHealthy >= DesiredHealthy && DesiredHealthy > 0``, else it goes through
    ``checkAndDecrement`` like a healthy pod. API reference (PodDisruptionBudgetSpec): "If no policy
    is specified, the default behavior will be used, which corresponds to the IfHealthyBudget policy."
    """
    guarded = [
        web_pod("a-0", labels={"app": "a"}),
        web_pod("a-1", labels={"app": "a"}),
        web_pod("a-sick", labels={"app": "a"}, ready=False),
    ]
    disrupted = [
        web_pod("b-0", labels={"app": "b"}),
        web_pod("b-sick", labels={"app": "b"}, ready=False),
        web_pod("c-0", labels={"app": "c"}),
        web_pod("c-sick", labels={"app": "c"}, ready=False),
    ]
    objs = cluster_objects(
        guarded + disrupted,
        # Default policy, application healthy (2 of 2 desired): the unready pod may go for free.
        settled_pdb(
            "a",
            allowed=0,
            current=2,
            desired=2,
            expected=3,
            min_available=2,
            selector={"matchLabels": {"app": "a"}},
        ),
        # IfHealthyBudget, application disrupted (1 of 2): the unready pod is protected.
        settled_pdb(
            "b",
            allowed=0,
            current=1,
            desired=2,
            expected=2,
            min_available=2,
            selector={"matchLabels": {"app": "b"}},
            unhealthy_pod_eviction_policy="IfHealthyBudget",
        ),
        # AlwaysAllow, application disrupted (1 of 2): the unready pod may still go.
        settled_pdb(
            "c",
            allowed=0,
            current=1,
            desired=2,
            expected=2,
            min_available=2,
            selector={"matchLabels": {"app": "c"}},
            unhealthy_pod_eviction_policy="AlwaysAllow",
        ),
    )
    async with KubeSim(objects=objs, controllers=QUIET) as sim:
        status, _, _ = await evict_http(http, sim, "a-sick")
        assert status == 201
        status, body, _ = await evict_http(http, sim, "a-0")
        assert status == 429 and body["message"] == VIOLATION
        status, body, _ = await evict_http(http, sim, "b-sick")
        assert status == 429
        assert body["details"]["causes"][0]["message"] == (
            "The disruption budget b needs 2 healthy pods and has 1 currently"
        )
        status, _, _ = await evict_http(http, sim, "c-sick")
        assert status == 201
        status, _, _ = await evict_http(http, sim, "c-0")
        assert status == 429
        for name in ("a", "c"):
            # The unready pods went without consuming the budget.
            _, budget = await get(http, sim, f"{PDBS}/{name}")
            assert f"{name}-sick" not in (budget["status"].get("disruptedPods") or {})


async def test_dry_run_checks_everything_and_changes_nothing(http: aiohttp.ClientSession) -> None:
    """dryRun=All (query or ``deleteOptions.dryRun``): all checks run, nothing is written.

    eviction.go ``propagateDryRun`` merges the query's CreateOptions.dryRun into the DeleteOptions;
    ``checkAndDecrement`` returns before ``UpdateStatus`` on a dry run, and
    ``addConditionAndDeletePod`` skips the condition update, passing the dry run on to the delete.
    """
    objs = cluster_objects(
        [web_pod("web-0"), web_pod("web-1")],
        settled_pdb("web", allowed=1, current=2, desired=1, expected=2, min_available=1),
    )
    async with KubeSim(objects=objs, controllers=QUIET) as sim:
        _, before = await get(http, sim, f"{PDBS}/web")
        status, body, _ = await evict_http(http, sim, "web-0", params={"dryRun": "All"})
        assert (status, body) == (201, SUCCESS)
        in_body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "web-1"},
            "deleteOptions": {"dryRun": ["All"]},
        }
        status, body, _ = await evict_http(http, sim, "web-1", in_body)
        assert (status, body) == (201, SUCCESS)
        _, after = await get(http, sim, f"{PDBS}/web")
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        for name in ("web-0", "web-1"):
            _, p = await get_pod(http, sim, name)
            assert "deletionTimestamp" not in p["metadata"]
            assert condition(p, "DisruptionTarget") is None
        status, body, _ = await evict_http(http, sim, "web-0", params={"dryRun": "Bogus"})
        assert status == 422
    # A dry run still refuses what a real eviction would refuse.
    exhausted = cluster_objects(
        [web_pod("web-0")], settled_pdb("web", allowed=0, current=1, desired=1, expected=1, min_available=1)
    )
    async with KubeSim(objects=exhausted, controllers=QUIET) as sim:
        status, body, _ = await evict_http(http, sim, "web-0", params={"dryRun": "All"})
        assert status == 429


async def test_grace_period_from_delete_options(http: aiohttp.ClientSession) -> None:
    """``deleteOptions.gracePeriodSeconds`` overrides the pod's terminationGracePeriodSeconds.

    eviction.go passes the Eviction's DeleteOptions to the pod store's ``Delete``; the pod strategy
    (``CheckGracefulDelete``) uses ``options.GracePeriodSeconds`` when set, recorded as
    ``metadata.deletionGracePeriodSeconds``. kubectl drain sends it for ``--grace-period``.
    """
    async with KubeSim(objects=cluster_objects([web_pod("web-0")]), controllers=QUIET) as sim:
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "web-0", "namespace": NS},
            "deleteOptions": {"gracePeriodSeconds": 5},
        }
        status, _, _ = await evict_http(http, sim, "web-0", body)
        assert status == 201
        _, evicted = await get_pod(http, sim, "web-0")
        assert evicted["metadata"]["deletionGracePeriodSeconds"] == 5


async def test_preconditions_and_v1beta1(http: aiohttp.ClientSession) -> None:
    """``deleteOptions.preconditions`` are enforced; policy/v1beta1 Evictions are accepted.

    eviction.go ``AcceptsGroupVersion`` takes policy/v1 and policy/v1beta1; ``addConditionAndDeletePod``
    compares ``Preconditions.UID`` with the stored pod and answers 409 Conflict "the UID in the
    precondition (%s) does not match the UID in record (%s). The object might have been deleted and
    then recreated".
    """
    async with KubeSim(objects=cluster_objects([web_pod("web-0")]), controllers=QUIET) as sim:
        _, current = await get_pod(http, sim, "web-0")
        wrong = {
            "apiVersion": "policy/v1beta1",
            "kind": "Eviction",
            "metadata": {"name": "web-0"},
            "deleteOptions": {"preconditions": {"uid": "not-the-uid"}},
        }
        status, body, _ = await evict_http(http, sim, "web-0", wrong)
        assert status == 409 and body["reason"] == "Conflict"
        assert "the UID in the precondition (not-the-uid) does not match" in body["message"]
        right = {
            "apiVersion": "policy/v1beta1",
            "kind": "Eviction",
            "metadata": {"name": "web-0"},
            "deleteOptions": {"preconditions": {"uid": current["metadata"]["uid"]}},
        }
        status, body, _ = await evict_http(http, sim, "web-0", right)
        assert (status, body) == (201, SUCCESS)


async def test_malformed_bodies_and_unknown_pod(http: aiohttp.ClientSession) -> None:
    """Malformed Evictions are 400 BadRequest; evicting a pod that does not exist is 404.

    eviction.go ``Create``: "name in URL does not match name in Eviction object" (400); the create
    handler's decoder rejects bodies that are not an Eviction (``transformDecodeError``: "... cannot
    be handled as a Eviction: ..."). The pod lookup (``r.store.Get``) answers NotFound
    ``pods "<name>" not found``.
    """
    async with KubeSim(objects=cluster_objects([web_pod("web-0")]), controllers=QUIET) as sim:
        cases: list[tuple[Any, str]] = [
            (
                {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}},
                "name in URL does not match name in Eviction object",
            ),
            (
                {"apiVersion": "policy/v1", "kind": "Eviction"},
                "name in URL does not match name in Eviction object",
            ),
            ([1, 2], "must be of type Eviction"),
            (
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"}},
                "cannot be handled as a Eviction",
            ),
            (
                {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": "web-0"},
                    "deleteOptions": "now",
                },
                "cannot be handled as a Eviction",
            ),
            (
                {"metadata": {"name": "web-0"}, "deleteOptions": {"gracePeriodSeconds": "5"}},
                "cannot be handled as a Eviction",
            ),
            (b"{not json", ""),
        ]
        for body, fragment in cases:
            status, answer, _ = await evict_http(http, sim, "web-0", body)
            assert status == 400, body
            assert answer["reason"] == "BadRequest" and fragment in answer["message"], answer
        _, still = await get_pod(http, sim, "web-0")
        assert "deletionTimestamp" not in still["metadata"]

        status, answer, _ = await evict_http(http, sim, "nope")
        assert status == 404
        assert (answer["reason"], answer["message"]) == ("NotFound", 'pods "nope" not found')


def test_official_python_client_201_and_429(tmp_path: Any) -> None:
    """The official ``kubernetes`` client's ``create_namespaced_pod_eviction`` (policy/v1 V1Eviction):
    201 for a pod its budget allows, ``ApiException`` 429 with the DisruptionBudget cause after that.

    Same upstream rules as above (eviction.go ``checkAndDecrement``); kubectl drain and client-go's
    ``EvictPod`` rely on exactly this 429 (``apierrors.IsTooManyRequests``) to retry.
    """
    objs = cluster_objects(
        [web_pod("web-0"), web_pod("web-1")],
        settled_pdb("web", allowed=1, current=2, desired=1, expected=2, min_available=1),
    )
    runner = ThreadedKubeSim(objects=objs, controllers=QUIET, kubeconfig_path=tmp_path / "kubeconfig")
    with runner as sim:
        api_client = config.new_client_from_config(config_file=str(sim.kubeconfig_path))
        try:
            core = client.CoreV1Api(api_client)

            def eviction(name: str) -> client.V1Eviction:
                return client.V1Eviction(
                    api_version="policy/v1",
                    kind="Eviction",
                    metadata=client.V1ObjectMeta(name=name, namespace=NS),
                )

            core.create_namespaced_pod_eviction("web-0", NS, eviction("web-0"))
            assert core.read_namespaced_pod("web-0", NS).metadata.deletion_timestamp is not None
            with pytest.raises(ApiException) as refused:
                core.create_namespaced_pod_eviction("web-1", NS, eviction("web-1"))
            assert refused.value.status == 429
            status = json.loads(refused.value.body)
            assert status["message"] == VIOLATION
            assert status["details"]["causes"][0]["reason"] == "DisruptionBudget"
        finally:
            api_client.close()


# -- contention on one budget -----------------------------------------------------------------------

# A wide conflict window and a short retry delay, so contention shows within a fast test.
CONTENDED = ControllerConfig(
    scheduler=False, kubelet=False, workloads=False, eviction_write_seconds=0.03, eviction_retry_seconds=0.05
)


async def test_concurrent_evictions_of_one_budget_conflict_and_are_retried(
    http: aiohttp.ClientSession,
) -> None:
    """Evictions racing on one budget's status: the first write wins, the others conflict and try again
    after ``EvictionsRetry.Duration`` with the budget read again, until each has its disruption.

    eviction.go ``Create``: ``retry.RetryOnConflict(EvictionsRetry, ...)`` around ``checkAndDecrement``
    (``refresh = true`` after an error, so the next attempt Gets the budget); ``UpdateStatus`` is
    optimistic on the resourceVersion read.
    """
    pods = [web_pod(f"web-{i}") for i in range(3)]
    objs = cluster_objects(
        pods, settled_pdb("web", allowed=3, current=3, desired=0, expected=3, max_unavailable=3)
    )
    async with KubeSim(objects=objs, controllers=CONTENDED) as sim:
        started = asyncio.get_running_loop().time()
        answers = await asyncio.gather(*(evict_http(http, sim, f"web-{i}") for i in range(3)))
        took = asyncio.get_running_loop().time() - started
        assert [status for status, _body, _h in answers] == [201, 201, 201]
        # Serialized by conflicts: at least one retry delay, not three concurrent windows.
        assert took >= 0.05 + 0.03
        for i in range(3):
            _, evicted = await get_pod(http, sim, f"web-{i}")
            assert evicted["metadata"].get("deletionTimestamp")


async def test_evictions_without_a_window_do_not_conflict(http: aiohttp.ClientSession) -> None:
    """``eviction_write_seconds=0`` (the switch): each budget write follows its read at once, so
    concurrent evictions never conflict and none waits for ``EvictionsRetry``."""
    pods = [web_pod(f"web-{i}") for i in range(3)]
    objs = cluster_objects(
        pods, settled_pdb("web", allowed=3, current=3, desired=0, expected=3, max_unavailable=3)
    )
    quiet = ControllerConfig(
        scheduler=False, kubelet=False, workloads=False, eviction_write_seconds=0, eviction_retry_seconds=5
    )
    async with KubeSim(objects=objs, controllers=quiet) as sim:
        started = asyncio.get_running_loop().time()
        answers = await asyncio.gather(*(evict_http(http, sim, f"web-{i}") for i in range(3)))
        assert [status for status, _body, _h in answers] == [201, 201, 201]
        assert asyncio.get_running_loop().time() - started < 1.0


async def test_a_budget_that_keeps_changing_fails_the_eviction_with_the_last_conflict(
    http: aiohttp.ClientSession,
) -> None:
    """After ``EvictionsRetry.Steps`` (20) conflicting attempts the client gets the last conflict: 409
    on ``poddisruptionbudgets.policy``, and the pod stays.

    client-go util/retry/util.go ``OnError`` returns the last retriable error when the backoff runs
    out (``ErrWaitTimeout`` becomes ``lastErr``), so eviction.go's ``NewTimeoutError`` (504) branch is
    not reached; apimachinery ``errors.NewConflict`` gives the message.
    """
    objs = cluster_objects(
        [web_pod("web-0"), web_pod("web-1")],
        settled_pdb("web", allowed=1, current=2, desired=1, expected=2, min_available=1),
    )
    fast = ControllerConfig(
        scheduler=False,
        kubelet=False,
        workloads=False,
        eviction_write_seconds=0.02,
        eviction_retry_seconds=0.005,
    )
    async with KubeSim(objects=objs, controllers=fast) as sim:
        pdb_rt = sim.store.registry.lookup("policy", "v1", "poddisruptionbudgets")
        assert pdb_rt is not None
        writes = 0

        async def churn() -> None:
            nonlocal writes
            while True:

                def touch(o: Obj, n: int = writes) -> None:
                    o["metadata"].setdefault("labels", {})["churn"] = str(n)

                sim.store.mutate(pdb_rt, NS, "web", touch)
                writes += 1
                await asyncio.sleep(0.004)

        churner = asyncio.create_task(churn())
        try:
            started = asyncio.get_running_loop().time()
            status, body, _ = await evict_http(http, sim, "web-0")
            took = asyncio.get_running_loop().time() - started
        finally:
            churner.cancel()
        assert status == 409
        assert body["reason"] == "Conflict"
        assert body["message"] == (
            'Operation cannot be fulfilled on poddisruptionbudgets.policy "web": the object has been '
            "modified; please apply your changes to the latest version and try again"
        )
        assert body["details"]["name"] == "web"
        # 20 attempts, each with its window, and 19 waits between them.
        assert took >= 20 * 0.02 + 19 * 0.005
        _, still = await get_pod(http, sim, "web-0")
        assert "deletionTimestamp" not in still["metadata"]
