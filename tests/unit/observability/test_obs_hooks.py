"""``call_hook``: the metrics hooks of the IMDS monitor and the leader election are called through it.

Product behaviour, not an upstream Kubernetes one: no upstream source applies.
"""

from __future__ import annotations

import logging

import pytest

from kubespot.observability.hooks import call_hook

log = logging.getLogger("kubespot.test.hooks")


def test_the_hook_gets_the_argument_and_no_hook_is_no_call() -> None:
    seen: list[str] = []
    call_hook(seen.append, "meta-data/spot", what="IMDS on_error", log=log)
    call_hook(None, "ignored", what="IMDS on_error", log=log)
    assert seen == ["meta-data/spot"]


def test_a_hook_that_raises_is_logged_and_goes_no_further(caplog: pytest.LogCaptureFixture) -> None:
    def broken(leading: bool) -> None:
        raise RuntimeError("registry gone")

    with caplog.at_level(logging.ERROR, logger=log.name):
        call_hook(broken, True, what="leadership", log=log)
    [record] = caplog.records
    assert record.getMessage() == "leadership hook failed"
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)
