"""DescribeInstanceTypes and DescribeInstanceTypeOfferings answered from a cache of moto's own answer.

moto filters its ~1 400 instance types and serialises the answer (5.8 MB of XML) on every call:
4 s for DescribeInstanceTypes, 0.7 s for the zonal offerings, per call, so every test that reads
the catalog paid seconds before doing anything. Both answers depend only on the account, the region
and the request's parameters (moto's instance types and offerings are static data), so the first
answer to a given request is kept and replayed byte for byte. The wire protocol is unchanged: the
client still sends the request and parses the same XML; only moto's repeated work is skipped.
"""

from __future__ import annotations

import threading
from typing import Any

from moto.core.responses import ActionResult
from moto.ec2.responses.instances import InstanceResponse

__all__ = ["clear", "install"]

_MARK = "_kubespot_catalog_cache"
_lock = threading.Lock()
_answers: dict[tuple[str, ...], Any] = {}


class _Replayed(ActionResult):
    """Serialises ``result`` once per key; later requests with the key get the same bytes."""

    def __init__(self, result: object, key: tuple[str, ...]) -> None:
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


def _key(response: Any, operation: str) -> tuple[str, ...]:
    params = sorted(
        (str(k), str(v)) for k, v in response.querystring.items() if k not in ("Action", "Version")
    )
    return (operation, str(response.current_account), str(response.region), repr(params))


def _cached(operation: str, original: Any) -> Any:
    def answer(self: Any) -> ActionResult:
        key = _key(self, operation)
        with _lock:
            known = key in _answers
        if known:
            return _Replayed(None, key)
        result = original(self)
        return _Replayed(result.result, key)

    return answer


def clear() -> None:
    """Forget every kept answer (tests of moto's own behaviour)."""
    with _lock:
        _answers.clear()


def install() -> None:
    """Patch moto's EC2 instance response class (once)."""
    cls: Any = InstanceResponse
    if getattr(cls, _MARK, False):
        return
    cls.describe_instance_types = _cached("DescribeInstanceTypes", cls.describe_instance_types)
    cls.describe_instance_type_offerings = _cached(
        "DescribeInstanceTypeOfferings", cls.describe_instance_type_offerings
    )
    setattr(cls, _MARK, True)
