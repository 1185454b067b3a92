"""API errors and the upstream ``Status`` bodies they are reported with."""

from __future__ import annotations

from typing import Any

from .resources import ResourceType

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An error the API server reports to the client as a ``Status`` object."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        retry_after: int | None = None,
        plain_text: bool = False,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details
        self.retry_after = retry_after
        #: Answered as Go's ``http.Error`` does (a text line, no ``Status``): the API server's
        #: request filters (priority and fairness, max-in-flight) reject that way, before any handler.
        self.plain_text = plain_text

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(rt: ResourceType, name: str | None) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": rt.plural}
    if name:
        d["name"] = name
    if rt.group:
        d["group"] = rt.group
    return d


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, f'{rt.qualified} "{name}" not found', details=_details(rt, name))


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409, f'{rt.qualified} "{name}" already exists', reason="AlreadyExists", details=_details(rt, name)
    )


def conflict(rt: ResourceType, name: str, why: str | None = None) -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {rt.qualified} "{name}": {why}',
        reason="Conflict",
        details=_details(rt, name),
    )


def invalid(rt: ResourceType, name: str, field: str, message: str) -> ApiError:
    details = _details(rt, name)
    details["kind"] = rt.kind
    details["causes"] = [{"reason": "FieldValueInvalid", "message": message, "field": field}]
    return ApiError(
        422, f'{rt.kind} "{name}" is invalid: {field}: {message}', reason="Invalid", details=details
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, message)


#: The body of every 429 from API Priority and Fairness and the max-in-flight filter.
THROTTLED_MESSAGE = "Too many requests, please try again later."


def throttled(retry_after: int) -> ApiError:
    """A request rejected by API Priority and Fairness (or the max-in-flight limit), as upstream does.

    k8s.io/apiserver pkg/server/filters priority-and-fairness.go and maxinflight.go,
    ``tooManyRequests``: ``w.Header().Set("Retry-After", ...)`` then
    ``http.Error(w, "Too many requests, please try again later.", 429)`` — a text body, no
    ``Status`` and so no ``DisruptionBudget`` cause, unlike an eviction a budget refuses.
    """
    return ApiError(429, THROTTLED_MESSAGE, retry_after=retry_after, plain_text=True)


def gone(message: str) -> ApiError:
    return ApiError(410, message, reason="Expired")
