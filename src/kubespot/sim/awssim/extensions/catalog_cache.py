"""DescribeInstanceTypes and DescribeInstanceTypeOfferings: moto's answer kept, and paged as AWS pages it.

moto filters its ~1 400 instance types and serialises the answer (5.8 MB of XML) on every call:
4 s for DescribeInstanceTypes, 0.7 s for the zonal offerings, per call, so every test that reads
the catalog paid seconds before doing anything. Both answers depend only on the account, the region
and the request's filters (moto's instance types and offerings are static data), so:

- the filtered list is computed once per (account, region, filters) and kept;
- each page is serialised once per (that, offset, size) and replayed byte for byte;
- ``MaxResults`` and ``NextToken`` page the list as the EC2 API does (moto ignored them and answered
  everything at once): at most ``MaxResults`` entries, a ``NextToken`` while more follow, an
  ``InvalidNextToken`` error for a token it did not issue for this request's list, and
  ``InvalidParameterValue`` for a ``MaxResults`` outside the operation's range (5-100 for
  DescribeInstanceTypes, 5-1000 for DescribeInstanceTypeOfferings; boto3 checks only the minimum).
  Without ``MaxResults`` everything comes in one answer, as before.

The wire protocol is unchanged: the client still sends each request and parses the XML.
"""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError, InvalidNextToken
from moto.ec2.responses.instances import InstanceResponse

__all__ = ["clear", "install"]

_MARK = "_kubespot_catalog_cache"
_RESULT_KEYS = {
    "DescribeInstanceTypes": "InstanceTypes",
    "DescribeInstanceTypeOfferings": "InstanceTypeOfferings",
}
#: The EC2 API reference's MaxResults range per operation.
_PAGE_RANGE = {
    "DescribeInstanceTypes": (5, 100),
    "DescribeInstanceTypeOfferings": (5, 1000),
}
_lock = threading.Lock()
#: (operation, account, region, filters) → moto's whole filtered list.
_lists: dict[tuple[str, ...], list[Any]] = {}
#: (operation, account, region, filters, offset, size) → the serialised answer.
_answers: dict[tuple[Any, ...], Any] = {}
#: (list key, token) for every NextToken handed out: only those are accepted back.
_issued: set[tuple[tuple[str, ...], str]] = set()


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def _offset(token: str | None, list_key: tuple[str, ...]) -> int:
    """Where ``token`` continues the list; -1 when it was not issued for this list."""
    if not token:
        return 0
    with _lock:
        if (list_key, token) not in _issued:
            return -1
    return int(json.loads(base64.urlsafe_b64decode(token.encode()))["o"])


def _size(operation: str, param: Any) -> int | None:
    """``MaxResults`` as EC2 checks it (None: not given)."""
    if param in (None, ""):
        return None
    low, high = _PAGE_RANGE[operation]
    try:
        size = int(param)
    except (TypeError, ValueError):
        size = -1
    if not low <= size <= high:
        raise EC2ClientError(
            "InvalidParameterValue",
            f"Value ( {param} ) for parameter maxResults is invalid. "
            f"Parameter must be between {low} and {high}.",
        )
    return size


class _Replayed(ActionResult):
    """Serialises ``result`` once per key; later requests with the key get the same bytes."""

    def __init__(self, result: object, key: tuple[Any, ...]) -> None:
        super().__init__(result)
        self._key = key

    def execute_result(self, context: Any) -> Any:
        with _lock:
            hit = _answers.get(self._key)
        if hit is None:
            hit = super().execute_result(context)
            with _lock:
                _answers[self._key] = hit
        return hit


def _list_key(response: Any, operation: str) -> tuple[str, ...]:
    skip = ("Action", "Version", "MaxResults", "NextToken")
    params = sorted((str(k), str(v)) for k, v in response.querystring.items() if k not in skip)
    return (operation, str(response.current_account), str(response.region), repr(params))


def _paged(operation: str, original: Any) -> Any:
    field = _RESULT_KEYS[operation]

    def answer(self: Any) -> ActionResult:
        list_key = _list_key(self, operation)
        token = self._get_param("NextToken")
        offset = _offset(token, list_key)
        if offset < 0:
            raise InvalidNextToken(token)
        size_param = _size(operation, self._get_param("MaxResults"))
        with _lock:
            items = _lists.get(list_key)
        if items is None:
            items = list(original(self).result[field])
            with _lock:
                _lists[list_key] = items
        size = size_param if size_param is not None else max(len(items), 1)
        key = (*list_key, offset, size)
        with _lock:
            known = key in _answers
        if known:
            return _Replayed(None, key)
        result: dict[str, Any] = {field: items[offset : offset + size]}
        if offset + size < len(items):
            result["NextToken"] = _token(offset + size)
            with _lock:
                _issued.add((list_key, result["NextToken"]))
        return _Replayed(result, key)

    return answer


def clear() -> None:
    """Forget every kept list and answer (tests of moto's own behaviour)."""
    with _lock:
        _lists.clear()
        _answers.clear()
        _issued.clear()


def install() -> None:
    """Patch moto's EC2 instance response class (once)."""
    cls: Any = InstanceResponse
    if getattr(cls, _MARK, False):
        return
    for operation, method in (
        ("DescribeInstanceTypes", "describe_instance_types"),
        ("DescribeInstanceTypeOfferings", "describe_instance_type_offerings"),
    ):
        setattr(cls, method, _paged(operation, getattr(cls, method)))
    setattr(cls, _MARK, True)
