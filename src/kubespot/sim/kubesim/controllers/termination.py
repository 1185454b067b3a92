"""When and how each container of a deleted pod exits: preStop, SIGTERM, SIGKILL (pure).

The simulated kubelet (``kubelet.py``) asks :func:`plan` once it notices a pod's deletion and again
when a later delete shortens the grace period; it then waits for the last exit and writes the
statuses. Nothing here reads the clock or the store.

Upstream (kubelet 1.32, ``pkg/kubelet/kuberuntime/kuberuntime_container.go`` ``killContainer`` and
``executePreStopHook``), per container and in parallel, with ``grace`` the pod's
``deletionGracePeriodSeconds``:

1. a declared ``lifecycle.preStop`` hook runs first, for at most ``grace`` seconds; whole seconds it
   took (``int64(elapsed.Seconds())``, truncated) are taken off the grace period;
2. SIGTERM is sent when the hook ends (or is abandoned), and the container gets what is left of the
   grace period but never less than ``minimumGracePeriodInSeconds`` (2 s): so a hook that overruns
   the grace period gets its 2 s extension before SIGKILL;
3. SIGKILL at the end of that window; the runtime reports exit code 137 (128 + 9), reason ``Error``.

The simulator cannot run hooks or processes, so pods declare them (``conventions``):

- a hook's duration: the ``sleep`` action's ``seconds`` as written; an ``exec`` or ``httpGet`` hook
  runs ``conventions.PRESTOP_SECONDS`` (default 0), except an ``exec`` of a plain ``sleep N``
  (directly or through ``sh -c``), which runs N seconds as it would in the container;
- what the process does with SIGTERM, ``conventions.SIGTERM``: ``handled`` (default) exits 0 after
  ``conventions.SHUTDOWN_SECONDS``; ``default`` has no handler, so the signal's default action ends it
  at once with 143 (128 + 15); ``ignored`` is a PID 1 without a handler, which the kernel does not
  let SIGTERM end, so it runs until SIGKILL (137).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .. import conventions

#: Upstream ``minimumGracePeriodInSeconds``: the least SIGTERM-to-SIGKILL window a container gets.
MINIMUM_GRACE_SECONDS: Final = 2
SIGTERM_EXIT_CODE: Final = 143
SIGKILL_EXIT_CODE: Final = 137

HANDLED, DEFAULT, IGNORED = "handled", "default", "ignored"
_SLEEP = re.compile(r"^\s*(?:exec\s+)?(?:/usr)?(?:/bin/)?sleep\s+(\d+(?:\.\d+)?)s?\s*$")


@dataclass(frozen=True, slots=True)
class ContainerExit:
    """One container's end, in seconds after the kubelet started killing the pod."""

    name: str
    sigterm_at: float
    kill_at: float
    exit_at: float
    exit_code: int

    @property
    def reason(self) -> str:
        return "Completed" if self.exit_code == 0 else "Error"


def _seconds(raw: Any, default: float) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) and value >= 0 else default


def prestop_seconds(container: Mapping[str, Any], annotations: Mapping[str, Any]) -> float | None:
    """How long the container's preStop hook runs; None without a hook."""
    hook = (container.get("lifecycle") or {}).get("preStop")
    if not isinstance(hook, dict) or not hook:
        return None
    sleep = hook.get("sleep")
    if isinstance(sleep, dict):
        return _seconds(sleep.get("seconds"), 0.0)
    declared = annotations.get(conventions.PRESTOP_SECONDS)
    if declared is not None:
        return _seconds(declared, 0.0)
    command = (hook.get("exec") or {}).get("command") if isinstance(hook.get("exec"), dict) else None
    if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
        text = command[-1] if len(command) == 3 and command[1] == "-c" else " ".join(command)
        m = _SLEEP.match(text)
        if m:
            return float(m.group(1))
    return 0.0


def plan(
    containers: list[Mapping[str, Any]], annotations: Mapping[str, Any], grace: int
) -> list[ContainerExit]:
    """Each container's preStop end, SIGKILL deadline and exit, for a kill with ``grace`` seconds."""
    behaviour = str(annotations.get(conventions.SIGTERM, HANDLED))
    shutdown = _seconds(annotations.get(conventions.SHUTDOWN_SECONDS), conventions.DEFAULT_SHUTDOWN_SECONDS)
    out = []
    for c in containers:
        left = grace
        sigterm_at = 0.0
        hook = prestop_seconds(c, annotations)
        if hook is not None and left > 0:
            sigterm_at = min(hook, float(left))
            left -= int(sigterm_at)  # whole seconds, truncated, as upstream measures the hook
        kill_at = sigterm_at + max(left, MINIMUM_GRACE_SECONDS)
        if behaviour == DEFAULT:
            exit_at, code = sigterm_at, SIGTERM_EXIT_CODE
        elif behaviour == IGNORED or sigterm_at + shutdown > kill_at:
            exit_at, code = kill_at, SIGKILL_EXIT_CODE
        else:
            exit_at, code = sigterm_at + shutdown, 0
        out.append(ContainerExit(str(c.get("name", "")), sigterm_at, kill_at, exit_at, code))
    return out


def shortened(exits: list[ContainerExit], elapsed: float, grace: int) -> list[ContainerExit]:
    """The plan after a later delete shortened the grace period to ``grace``, ``elapsed`` seconds in.

    The kubelet restarts the kill with the shorter grace period; a container that would still be
    running past it is SIGKILLed then (never later than already planned).
    """
    deadline = elapsed + max(grace, MINIMUM_GRACE_SECONDS)
    out = []
    for e in exits:
        if e.exit_at <= deadline:
            out.append(e)
        else:
            kill_at = min(e.kill_at, deadline)
            out.append(ContainerExit(e.name, min(e.sigterm_at, kill_at), kill_at, kill_at, SIGKILL_EXIT_CODE))
    return out
