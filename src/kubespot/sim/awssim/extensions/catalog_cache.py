"""DescribeInstanceTypes and DescribeInstanceTypeOfferings: moto's answer paged as EC2 pages it, fast.

moto serialises every answer with its generic, shape-walking serialiser: ~5 ms per instance type
on a loaded machine, so paging the ~1 400 types took 8-10 s in every fresh process (every e2e world,
the sandbox). This extension keeps moto's data and filters (the list is asked of moto on every
request, so a change of moto's catalog shows at once) and changes only the cost of the answer:

- each entry (one instance type, one offering) is rendered to its XML fragment by ``xml_writer``
  (compiled from botocore's EC2 output shape, byte for byte moto's serialiser); the fragment is kept
  per entry *content*, so an entry that changes is rendered again;
- the envelope (response element, ``nextToken``, ``requestId``) is still serialised by moto, around
  one marker entry that is then replaced by the page's fragments (``xml_writer.Spliced``);
- ``MaxResults`` and ``NextToken`` page the list as the EC2 API does (moto ignored them and answered
  everything at once): at most ``MaxResults`` entries, a ``NextToken`` while more follow, an
  ``InvalidNextToken`` error for a token it did not issue for this request's list, and
  ``InvalidParameterValue`` for a ``MaxResults`` outside the operation's range (5-100 for
  DescribeInstanceTypes, 5-1000 for DescribeInstanceTypeOfferings; boto3 checks only the minimum).
  Without ``MaxResults`` everything comes in one answer, as before.

A shape the writer does not know makes the extension fall back to moto's own serialiser.
"""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError, InvalidNextToken
from moto.ec2.responses.instances import InstanceResponse

from kubespot.sim.awssim.extensions import xml_writer

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
#: (operation, entry content) → the entry's XML fragment.
_fragments: dict[tuple[str, str], str] = {}
#: (list key, token) for every NextToken handed out: only those are accepted back.
_issued: set[tuple[tuple[str, ...], str]] = set()


def _fragment(operation: str, writer: xml_writer.Writer, entry: Any) -> str:
    # The entry's content is the key (dict.__repr__: moto's InstanceType has a short __repr__).
    key = (operation, dict.__repr__(entry) if isinstance(entry, dict) else repr(entry))
    with _lock:
        hit = _fragments.get(key)
    if hit is None:
        out: list[str] = []
        writer(entry, out)
        hit = out[0]
        with _lock:
            _fragments[key] = hit
    return hit


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
        # moto filters on every request: cheap next to serialising, and never stale.
        items = list(original(self).result[field])
        size = size_param if size_param is not None else max(len(items), 1)
        page = items[offset : offset + size]
        result: dict[str, Any] = {field: page}
        if offset + size < len(items):
            result["NextToken"] = _token(offset + size)
            with _lock:
                _issued.add((list_key, result["NextToken"]))
        writer = xml_writer.entry_writer(operation, field)
        if writer is None or not page:
            return ActionResult(result)
        fragments = [_fragment(operation, writer, entry) for entry in page]
        marker, marker_xml = xml_writer.marker_fragment(writer)
        result[field] = [marker]
        return xml_writer.Spliced(result, marker_xml, fragments)

    return answer


def clear() -> None:
    """Forget every kept fragment and token (tests of moto's own behaviour)."""
    with _lock:
        _fragments.clear()
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
