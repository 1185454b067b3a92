"""The policy/v1 Eviction subresource (``POST .../pods/<name>/eviction``), as the API server does it.

Mirrors ``pkg/registry/core/pod/storage/eviction.go`` of kubernetes/kubernetes:

- pods that already finished, are still Pending, or are terminating (``canIgnorePDB``) are deleted
  without looking at any PodDisruptionBudget;
- otherwise the PDBs of the pod's namespace whose selector matches the pod are found (nil selector:
  none, ``{}``: all); more than one is a 500, none means plain deletion;
- with one PDB, a pod that is not Ready may skip the budget (``unhealthyPodEvictionPolicy``
  ``AlwaysAllow``, or the default ``IfHealthyBudget`` when ``currentHealthy >= desiredHealthy > 0``);
  every other pod goes through ``checkAndDecrement``, which trusts the PDB's *status* as the
  disruption controller last wrote it (nothing is recomputed here, as upstream), refuses with 429
  while the status is stale or ``disruptionsAllowed`` is 0, and otherwise writes the decremented
  status plus a ``disruptedPods`` entry *before* the pod is deleted;
- the pod then gets the ``DisruptionTarget`` condition and is deleted gracefully.

Concurrent evictions under one budget contend as upstream's do. Upstream's status write is an
optimistic-concurrency ``UpdateStatus`` of the budget as read, retried on conflict with
``EvictionsRetry`` (20 attempts, 500 ms apart plus up to 10 % jitter, the budget read again before
each); an eviction whose read another write overtook conflicts. kubesim serves requests on one loop
and would never see that window, so each decrement waits ``ControllerConfig.eviction_write_seconds``
(the read-to-commit latency of the real handler's list and update) between its read and its
write, with the budget's resourceVersion as the precondition: two evictions of one budget within
that window conflict, and the loser is retried after upstream's delay. After the last attempt the
client gets the last conflict, a 409 on ``poddisruptionbudgets.policy``: client-go's
``retry.OnError`` turns the backoff's ``ErrWaitTimeout`` into the last error, so the handler's
``NewTimeoutError`` (504 "couldn't update PodDisruptionBudget ... due to conflicts") is never reached.

Evictions are a hot path (drains run thousands a second): the matching PDBs come from the disruption
controller's per-namespace ``key=value`` selector index (``matching_pdbs``), and the status writes
share unchanged parts with the stored objects instead of deep-copying them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from . import errors
from .controllers import ControllerConfig
from .controllers.disruption import matching_pdbs
from .errors import ApiError
from .resources import ResourceType
from .store import Obj, Store, rfc3339

ACCEPTED_VERSIONS: Final = ("policy/v1", "policy/v1beta1")

#: Upstream ``MaxDisruptedPodSize``: evictions the PDB controller has not confirmed yet.
MAX_DISRUPTED_POD_SIZE: Final = 2000
#: Upstream ``policyv1.DisruptionBudgetCause``.
DISRUPTION_BUDGET_CAUSE: Final = "DisruptionBudget"
VIOLATION_MESSAGE: Final = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_PDBS_MESSAGE: Final = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)
#: Upstream ``EvictionsRetry``: attempts at the budget's status write and the jitter of the wait
#: between two (its ``Duration``, 500 ms, is ``ControllerConfig.eviction_retry_seconds``).
EVICTIONS_RETRY_STEPS: Final = 20
EVICTIONS_RETRY_JITTER: Final = 0.1
#: Retry-After upstream suggests while a budget's status is older than its spec.
STALE_BUDGET_RETRY_SECONDS: Final = 10

DISRUPTION_TARGET: Final = "DisruptionTarget"
EVICTION_REASON: Final = "EvictionByEvictionAPI"
EVICTION_CONDITION_MESSAGE: Final = "Eviction API: evicting"

_SUCCESS: Final[dict[str, Any]] = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Success",
    "code": 201,
}


class _StatusWithoutReason(ApiError):
    """A failure ``Status`` with no ``reason``, as upstream reports a ``metav1.Status`` a REST
    handler returned instead of an error (the 500 for several PDBs carries only code and message)."""

    def status(self) -> dict[str, Any]:
        body = super().status()
        body.pop("reason", None)
        return body


@dataclass(frozen=True, slots=True)
class _DeleteOptions:
    grace_period_seconds: int | None
    uid: str | None
    resource_version: str | None
    dry_run: bool

    def preconditions(self) -> dict[str, Any] | None:
        pre = {k: v for k, v in (("uid", self.uid), ("resourceVersion", self.resource_version)) if v}
        return pre or None


async def evict(
    store: Store,
    namespace: str,
    name: str,
    body: Any,
    *,
    dry_run: Sequence[str] = (),
    config: ControllerConfig | None = None,
) -> dict[str, Any]:
    """Evict pod ``namespace/name`` for the Eviction ``body``; returns the ``Status`` of the 201.

    ``dry_run`` is the request's ``dryRun`` query parameter (a list, as upstream's CreateOptions);
    ``config`` gives the budget write's conflict window and retry delay (defaults: upstream's).
    Raises ``ApiError`` with upstream's code, reason, message and causes on every refusal.
    """
    opts = _parse(namespace, name, body, list(dry_run))
    pod_rt = _rt(store, "", "v1", "pods")
    pod = store.get(pod_rt, namespace, name)

    if _can_ignore_pdb(pod):
        _add_condition_and_delete(store, pod_rt, pod, opts)
        return dict(_SUCCESS)

    pdb_rt = _rt(store, "policy", "v1", "poddisruptionbudgets")
    pdbs = matching_pdbs(store, pod)
    if len(pdbs) > 1:
        raise _StatusWithoutReason(500, MULTIPLE_PDBS_MESSAGE)
    if pdbs:
        pdb = pdbs[0]
        if not _skips_budget(pod, pdb) and await _decrement_retrying(
            store, pdb_rt, pdb, name, opts.dry_run, config or ControllerConfig()
        ):
            # Time passed while the budget was written: delete the pod as it is now.
            pod = store.get(pod_rt, namespace, name)
    _add_condition_and_delete(store, pod_rt, pod, opts)
    return dict(_SUCCESS)


async def _decrement_retrying(
    store: Store, pdb_rt: ResourceType, pdb: Obj, pod_name: str, dry_run: bool, config: ControllerConfig
) -> bool:
    """Upstream's ``retry.RetryOnConflict(EvictionsRetry, ...)`` around ``checkAndDecrement``.

    Returns whether it waited (the pod may have changed meanwhile). A refusal (429, 403) ends the
    retries at once, as upstream's only retriable error is the conflict.
    """
    window = config.eviction_write_seconds
    last: ApiError | None = None
    for attempt in range(EVICTIONS_RETRY_STEPS):
        if attempt:
            await asyncio.sleep(
                config.eviction_retry_seconds * (1 + EVICTIONS_RETRY_JITTER * random.random())
            )
            meta = pdb["metadata"]
            pdb = store.get(pdb_rt, meta.get("namespace"), meta["name"])  # upstream refreshes with a Get
        status = _check_and_decrement(store, pdb, pod_name, dry_run)
        if status is None:
            return attempt > 0
        if window > 0:
            await asyncio.sleep(window)
        try:
            # The resourceVersion read is the precondition: a write in between is a conflict.
            _write_status(store, pdb_rt, pdb, status)
        except ApiError as exc:
            if exc.code != 409:
                raise
            last = exc
            continue
        return attempt > 0 or window > 0
    assert last is not None
    raise last


# -- request parsing --------------------------------------------------------------------------------


def _parse(namespace: str, name: str, body: Any, query_dry_run: list[str]) -> _DeleteOptions:
    """Decode and validate the Eviction as the API server's create handler does."""
    if not isinstance(body, dict):
        raise errors.bad_request(
            "the object provided is unrecognized (must be of type Eviction): "
            f"json: cannot unmarshal {_json_type(body)} into Go value of type policy.Eviction"
        )
    api_version = body.get("apiVersion") or "policy/v1"
    kind = body.get("kind") or "Eviction"
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise _cannot_handle("policy/v1", "Eviction", "apiVersion/kind must be strings")
    if kind != "Eviction":
        source = api_version.rpartition("/")[2]
        raise _cannot_handle(
            source, kind, f"converting ({source}.{kind}) to (policy.Eviction): unknown conversion"
        )
    if api_version not in ACCEPTED_VERSIONS:
        raise _cannot_handle(
            api_version,
            kind,
            f'no kind "Eviction" is registered for version "{api_version}" in scheme '
            '"pkg/api/legacyscheme/scheme.go:30"',
        )
    version = api_version.rpartition("/")[2]
    meta = body.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise _unmarshal(version, meta, "metadata", "v1.ObjectMeta")
    if meta.get("namespace") not in (None, "", namespace):
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    if meta.get("name", "") != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")

    raw = body.get("deleteOptions")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise _unmarshal(version, raw, "deleteOptions", "v1.DeleteOptions")
    grace = raw.get("gracePeriodSeconds")
    if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool)):
        raise _unmarshal(version, grace, "deleteOptions.gracePeriodSeconds", "int64")
    pre = raw.get("preconditions")
    if pre is None:
        pre = {}
    if not isinstance(pre, dict):
        raise _unmarshal(version, pre, "deleteOptions.preconditions", "v1.Preconditions")
    uid, rv = pre.get("uid"), pre.get("resourceVersion")
    for field, value in (("uid", uid), ("resourceVersion", rv)):
        if value is not None and not isinstance(value, str):
            raise _unmarshal(version, value, f"deleteOptions.preconditions.{field}", "string")
    body_dry_run = raw.get("dryRun")
    if body_dry_run is None:
        body_dry_run = []
    if not isinstance(body_dry_run, list) or not all(isinstance(v, str) for v in body_dry_run):
        raise _unmarshal(version, body_dry_run, "deleteOptions.dryRun", "[]string")

    _validate_dry_run("CreateOptions", query_dry_run)
    # propagateDryRun: the query's dryRun fills an absent body value; two different ones are an error.
    if body_dry_run and query_dry_run and body_dry_run != query_dry_run:
        raise ApiError(
            500,
            "Non-matching dry-run options in request and content: "
            f"[{' '.join(query_dry_run)}] and [{' '.join(body_dry_run)}]",
            reason="Unknown",
        )
    effective = body_dry_run or query_dry_run
    _validate_dry_run("DeleteOptions", effective)
    return _DeleteOptions(grace, uid or None, rv or None, bool(effective))


def _validate_dry_run(kind: str, values: list[str]) -> None:
    if any(v != "All" for v in values):
        shown = ", ".join(f'"{v}"' for v in values)
        why = f'Unsupported value: []string{{{shown}}}: supported values: "All"'
        details = {
            "kind": kind,
            "group": "meta.k8s.io",
            "causes": [
                {
                    "reason": "FieldValueNotSupported",
                    "field": "dryRun",
                    "message": why,
                }
            ],
        }
        raise ApiError(
            422, f'{kind}.meta.k8s.io "" is invalid: dryRun: {why}', reason="Invalid", details=details
        )


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _cannot_handle(version: str, kind: str, why: str) -> ApiError:
    return errors.bad_request(f'{kind} in version "{version}" cannot be handled as a Eviction: {why}')


def _unmarshal(version: str, value: Any, field: str, go_type: str) -> ApiError:
    return _cannot_handle(
        version,
        "Eviction",
        f"json: cannot unmarshal {_json_type(value)} into Go struct field Eviction.{field} of type {go_type}",
    )


# -- decisions --------------------------------------------------------------------------------------


def _can_ignore_pdb(pod: Obj) -> bool:
    """Upstream ``canIgnorePDB``: finished, not yet started, or already terminating."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def _is_ready(pod: Obj) -> bool:
    """``podutil.IsPodReady``: the Ready condition is True (what the PDB controller counts as healthy)."""
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _skips_budget(pod: Obj, pdb: Obj) -> bool:
    """A not-Ready pod is already a disruption: it may go without consuming ``disruptionsAllowed``."""
    if _is_ready(pod):
        return False
    if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    status = pdb.get("status") or {}
    desired = int(status.get("desiredHealthy") or 0)
    return int(status.get("currentHealthy") or 0) >= desired and desired > 0


def _check_and_decrement(store: Store, pdb: Obj, pod_name: str, dry_run: bool) -> dict[str, Any] | None:
    """Upstream ``checkAndDecrement``: refuse on the PDB's recorded status, else the status that takes
    one disruption (None for a dry run, which writes nothing)."""
    meta = pdb["metadata"]
    pdb_name = meta["name"]
    status = pdb.get("status") or {}
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise _too_many_requests(
            f"The disruption budget {pdb_name} is still being processed by the server.",
            STALE_BUDGET_RETRY_SECONDS,
        )
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise _pdb_forbidden(pdb_name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
        raise _pdb_forbidden(
            pdb_name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        )
    if allowed == 0:
        raise _too_many_requests(
            f"The disruption budget {pdb_name} needs {int(status.get('desiredHealthy') or 0)} healthy pods "
            f"and has {int(status.get('currentHealthy') or 0)} currently",
            0,
        )
    if dry_run:
        return None
    now = rfc3339(store.clock())
    new_status = dict(status)
    new_status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        new_status["conditions"] = _with_condition(
            status.get("conditions"), _disruption_allowed_false(status, now)
        )
    # Tells the disruption controller this pod is going, so it stops counting it as healthy before
    # the pod's own delete shows up.
    new_status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: now}
    return new_status


def _disruption_allowed_false(status: Mapping[str, Any], now: str) -> dict[str, Any]:
    """The condition ``pdbhelper.UpdateDisruptionAllowedCondition`` sets once no disruption is left."""
    cond: dict[str, Any] = {
        "type": "DisruptionAllowed",
        "status": "False",
        "reason": "InsufficientPods",
        "message": "",
        "lastTransitionTime": now,
    }
    if status.get("observedGeneration"):
        cond["observedGeneration"] = status["observedGeneration"]
    return cond


def _with_condition(conditions: Any, new: dict[str, Any]) -> list[Any]:
    """``conditions`` with ``new`` set by type; the transition time is kept while the status is unchanged
    (``apimeta.SetStatusCondition`` and ``podutil.UpdatePodCondition`` alike)."""
    out = list(conditions) if isinstance(conditions, list) else []
    for i, cond in enumerate(out):
        if isinstance(cond, dict) and cond.get("type") == new["type"]:
            if cond.get("status") == new["status"] and cond.get("lastTransitionTime"):
                new = {**new, "lastTransitionTime": cond["lastTransitionTime"]}
            out[i] = new
            return out
    out.append(new)
    return out


def _write_status(store: Store, rt: ResourceType, obj: Obj, status: dict[str, Any]) -> None:
    """A status-subresource write of ``status``, which shares unchanged parts with the stored object.

    Stored objects are never mutated, so sharing is safe, and it spares the deep copy ``Store.mutate``
    makes: this runs for every eviction.
    """
    meta = obj["metadata"]
    body = {
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "resourceVersion": meta["resourceVersion"],
        },
        "status": status,
    }
    store.replace(rt, meta.get("namespace"), meta["name"], body, subresource="status")


def _add_condition_and_delete(store: Store, pod_rt: ResourceType, pod: Obj, opts: _DeleteOptions) -> None:
    """Upstream ``addConditionAndDeletePod``: mark the pod ``DisruptionTarget``, then delete it."""
    meta = pod["metadata"]
    ns, name = meta.get("namespace"), meta["name"]
    if opts.dry_run:
        store.delete(
            pod_rt,
            ns,
            name,
            grace_period_seconds=opts.grace_period_seconds,
            preconditions=opts.preconditions(),
            dry_run=True,
        )
        return
    # The preconditions are checked against the pod as read, then hold by construction: nothing else
    # runs between this check, the condition write and the delete.
    if opts.uid and opts.uid != meta.get("uid"):
        raise _pod_conflict(
            name,
            f"the UID in the precondition ({opts.uid}) does not match the UID in record "
            f"({meta.get('uid')}). The object might have been deleted and then recreated",
        )
    if opts.resource_version and opts.resource_version != meta.get("resourceVersion"):
        raise _pod_conflict(
            name,
            f"the ResourceVersion in the precondition ({opts.resource_version}) does not match the "
            f"ResourceVersion in record ({meta.get('resourceVersion')}). The object might have been modified",
        )
    condition = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(store.clock()),
        "reason": EVICTION_REASON,
        "message": EVICTION_CONDITION_MESSAGE,
    }
    status = dict(pod.get("status") or {})
    status["conditions"] = _with_condition(status.get("conditions"), condition)
    _write_status(store, pod_rt, pod, status)
    store.delete(pod_rt, ns, name, grace_period_seconds=opts.grace_period_seconds)


# -- errors -----------------------------------------------------------------------------------------


def _too_many_requests(cause: str, retry_after: int) -> ApiError:
    details: dict[str, Any] = {"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]}
    if retry_after > 0:
        details["retryAfterSeconds"] = retry_after
    return ApiError(
        429, VIOLATION_MESSAGE, reason="TooManyRequests", details=details, retry_after=retry_after or None
    )


def _pdb_forbidden(pdb_name: str, why: str) -> ApiError:
    # Upstream names the resource policy.Resource("poddisruptionbudget"), singular.
    return ApiError(
        403,
        f'poddisruptionbudget.policy "{pdb_name}" is forbidden: {why}',
        reason="Forbidden",
        details={"name": pdb_name, "group": "policy", "kind": "poddisruptionbudget"},
    )


def _pod_conflict(name: str, why: str) -> ApiError:
    # Upstream builds this conflict with the group resource {Resource: "Pod"}, hence "on Pod".
    return ApiError(
        409,
        f'Operation cannot be fulfilled on Pod "{name}": {why}',
        reason="Conflict",
        details={"name": name, "kind": "Pod"},
    )


def _rt(store: Store, group: str, version: str, plural: str) -> ResourceType:
    rt = store.registry.lookup(group, version, plural)
    if rt is None:
        raise ApiError(404, "the server could not find the requested resource")
    return rt
