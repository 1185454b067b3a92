"""The informer's re-list backoff after unexpected errors starts afresh after a quiet spell, as
client-go's reflector (k8s.io/client-go/tools/cache/reflector.go ``NewReflectorWithOptions``: its
backoff manager resets after 2 minutes without a failure)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubespot.kube import informer as informer_module
from kubespot.kube.informer import BACKOFF_RESET, LIST_BASE, Informer


async def test_a_failure_after_a_quiet_spell_waits_the_first_step_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    failures = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 7.5 + BACKOFF_RESET + 1.0]
    waits: list[float] = []
    done = asyncio.Event()

    async def follow(self: Any) -> None:
        if not failures:
            done.set()
            await asyncio.Event().wait()
        now[0] = failures.pop(0)
        raise ValueError("garbled answer")

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(Informer, "_follow", follow)
    monkeypatch.setattr(informer_module.asyncio, "sleep", sleep)
    monkeypatch.setattr(
        informer_module, "equal_jitter", lambda attempt, base, cap: min(cap, base * 2**attempt)
    )
    inf = Informer(None, "api/v1/nodes", monotonic=lambda: now[0])  # type: ignore[arg-type]
    task = asyncio.get_running_loop().create_task(inf._loop())
    await asyncio.wait_for(done.wait(), 2.0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert waits[-2] > LIST_BASE * 8  # backed off while the failures came close together
    assert waits[-1] == LIST_BASE  # the blip after two quiet minutes starts afresh
