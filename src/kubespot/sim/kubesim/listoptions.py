"""The resourceVersion options of a list or watch, checked and read as upstream reads them.

Validation follows k8s.io/apimachinery pkg/apis/meta/internalversion/validation ValidateListOptions
and validateWatchOptions (WatchList is on by default in 1.32); a failure is 422 on the kind
``ListOptions.meta.k8s.io`` (k8s.io/apiserver pkg/endpoints/handlers/get.go ListResource). What a
list serves for each combination follows the API concepts' table and the watch cache
(staging/src/k8s.io/apiserver/pkg/storage/cacher): unset is the most recent state, "0" any state
(kubesim's is always the most recent), NotOlderThan the most recent unless the version is in the
future, Exact the state at that version (410 Expired once compacted). A version in the future is
504 "Too large resource version" (the cacher waits up to 3 s for it first; kubesim, whose state is
always current, answers at once). A list at "0" comes from the watch cache, which does not page: its
``limit`` is ignored (``page_limit``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ApiError
from .fielderrors import FieldError, forbidden, invalid_status, not_supported

EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"


@dataclass(frozen=True, slots=True)
class ListOptions:
    resource_version: str
    match: str
    send_initial_events: bool | None
    continue_token: str
    limit: int


def _list_errors(o: ListOptions) -> list[FieldError]:
    errs: list[FieldError] = []
    if o.match:
        if not o.resource_version:
            errs.append(
                forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )
            )
        if o.continue_token:
            errs.append(
                forbidden(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"
                )
            )
        if o.match not in (EXACT, NOT_OLDER_THAN):
            errs.append(not_supported("resourceVersionMatch", o.match, (EXACT, NOT_OLDER_THAN, "")))
        if o.match == EXACT and o.resource_version == "0":
            errs.append(
                forbidden(
                    "resourceVersionMatch",
                    'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    if o.send_initial_events is not None:
        errs.append(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return errs


def _watch_errors(o: ListOptions) -> list[FieldError]:
    errs: list[FieldError] = []
    if o.send_initial_events is not None and o.match != NOT_OLDER_THAN:
        errs.append(
            forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            )
        )
    if o.match:
        if o.send_initial_events is None:
            errs.append(
                forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                )
            )
        if o.match != NOT_OLDER_THAN:
            errs.append(not_supported("resourceVersionMatch", o.match, (NOT_OLDER_THAN,)))
        if o.continue_token:
            errs.append(
                forbidden(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"
                )
            )
    return errs


def validate(o: ListOptions, *, watch: bool) -> None:
    errs = _watch_errors(o) if watch else _list_errors(o)
    if errs:
        raise invalid_status("ListOptions", "meta.k8s.io", "", errs)


def exact_version(o: ListOptions) -> int | None:
    """The version a list must be served at exactly, if any: ``Exact``, or (the legacy rule) a
    non-zero resourceVersion with a limit and no match given."""
    if o.match == EXACT or (not o.match and o.limit > 0 and o.resource_version not in ("", "0")):
        return parse_version(o.resource_version)
    return None


def page_limit(o: ListOptions) -> int:
    """The limit a list is paged by: none (0) for a list the watch cache serves, resourceVersion "0"
    without continue (apiserver pkg/storage/cacher delegator.go shouldDelegateList: "Serve paginated
    requests about revision 0 from watch cache"; the cache returns every item, no continue token)."""
    if o.resource_version == "0" and not o.continue_token and o.match in ("", NOT_OLDER_THAN):
        return 0
    return o.limit


def parse_version(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ApiError(400, f'invalid resource version "{text}"') from None


def too_large(requested: int, current: int) -> ApiError:
    """storage.NewTooLargeResourceVersionError: 504 Timeout, retry after 1 s."""
    return ApiError(
        504,
        f"Too large resource version: {requested}, current: {current}",
        reason="Timeout",
        details={
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        },
        retry_after=1,
    )
