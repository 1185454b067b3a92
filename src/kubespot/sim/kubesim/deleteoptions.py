"""DeleteOptions as the API server reads them, and what a delete answers.

k8s.io/apiserver pkg/endpoints/handlers/delete.go DeleteResource: a non-empty body is the
DeleteOptions (then the query is not read); without one, ``gracePeriodSeconds``,
``propagationPolicy``, ``orphanDependents`` and ``dryRun`` come from the query. They are checked by
apimachinery's ValidateDeleteOptions (422 on ``DeleteOptions.meta.k8s.io``). The answer: the object
while it is still there (graceful deletion, finalizers), and once it is gone the object for the
registries that return it (``ReturnDeletedObject``: pods, services, service accounts, namespaces)
or a ``Status`` Success naming it (registry/generic/registry/store.go finalizeDelete); 202 instead of
200 when ``orphanDependents: false`` left the object waiting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import bad_request
from .fielderrors import FieldError, invalid, invalid_status, not_supported
from .resources import ResourceType

Obj = dict[str, Any]

POLICIES = ("Foreground", "Background", "Orphan")
_RETURNS_DELETED = frozenset({("", "pods"), ("", "services"), ("", "serviceaccounts"), ("", "namespaces")})


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    grace_period_seconds: int | None = None
    preconditions: Obj | None = None
    dry_run: bool = False
    propagation: str | None = None
    orphan_dependents: bool | None = None

    @property
    def policy(self) -> str | None:
        """The propagation asked for; the deprecated ``orphanDependents`` maps onto it."""
        if self.propagation is not None:
            return self.propagation
        if self.orphan_dependents is not None:
            return "Orphan" if self.orphan_dependents else "Background"
        return None


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise bad_request(f"invalid value for {what}: {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise bad_request(f"invalid value for {what}: {value!r}") from None


def from_body(opts: Any) -> DeleteOptions:
    if not isinstance(opts, dict):
        raise bad_request("DeleteOptions must be a JSON object")
    dry_run = opts.get("dryRun") or []
    if not isinstance(dry_run, list):
        raise bad_request("DeleteOptions.dryRun must be a list")
    parsed = DeleteOptions(
        grace_period_seconds=None
        if opts.get("gracePeriodSeconds") is None
        else _int(opts["gracePeriodSeconds"], "gracePeriodSeconds"),
        preconditions=opts.get("preconditions") or None,
        dry_run="All" in dry_run,
        propagation=opts.get("propagationPolicy"),
        orphan_dependents=opts.get("orphanDependents"),
    )
    _validate(parsed, dry_run)
    return parsed


def from_query(
    grace: str | None, policy: str | None, orphan: str | None, dry_run: list[str]
) -> DeleteOptions:
    parsed = DeleteOptions(
        grace_period_seconds=None if grace is None else _int(grace, "gracePeriodSeconds"),
        dry_run="All" in dry_run,
        propagation=policy,
        orphan_dependents=None if orphan is None else orphan in ("1", "t", "T", "true", "TRUE", "True"),
    )
    _validate(parsed, dry_run)
    return parsed


def _validate(o: DeleteOptions, dry_run: list[Any]) -> None:
    errs: list[FieldError] = []
    if o.orphan_dependents is not None and o.propagation is not None:
        errs.append(
            invalid(
                "propagationPolicy",
                o.propagation,
                "orphanDependents and deletionPropagation cannot be both set",
            )
        )
    if o.propagation is not None and o.propagation not in POLICIES:
        errs.append(not_supported("propagationPolicy", o.propagation, (*POLICIES, "nil")))
    for value in dry_run:
        if value != "All":
            errs.append(not_supported("dryRun", value, ("All",)))
    if errs:
        raise invalid_status("DeleteOptions", "meta.k8s.io", "", errs)


def response(rt: ResourceType, result: Obj, *, gone: bool, opts: DeleteOptions) -> tuple[Obj, int]:
    """The body and status code of a delete whose outcome is ``result`` (``gone``: removed)."""
    if not gone:
        return result, 202 if opts.orphan_dependents is False else 200
    if rt.key in _RETURNS_DELETED:
        return result, 200
    meta = result["metadata"]
    details: Obj = {"name": meta["name"], "kind": rt.plural, "uid": meta.get("uid", "")}
    if rt.group:
        details["group"] = rt.group
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }, 200
