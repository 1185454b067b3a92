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
3. SIGKILL at the end of that window; the runtime reports exit code 137 (128 + 9), reason ``Error``;
4. sidecars (restartable init containers) wait, after their hook, until the regular containers and
   the sidecars declared after them have exited (``terminationOrdering``, in
   ``kuberuntime_termination_order.go``), the wait also coming off their grace period.

The simulator cannot run hooks or processes, so pods declare them (``conventions``):

- a hook's duration: the ``sleep`` action's ``seconds`` as written; an ``exec`` or ``httpGet`` hook
  runs ``conventions.PRESTOP_SECONDS`` (default 0), except an ``exec`` of a plain ``sleep N``
  (directly or through ``sh -c``), which runs N seconds as it would in the container;
- what the process does with SIGTERM, ``conventions.SIGTERM``: ``handled`` (default) exits 0 after
  ``conventions.SHUTDOWN_SECONDS``; ``default`` has no handler, so the signal's default action ends it
  at once with 143 (128 + 15); ``ignored`` is a PID 1 without a handler, which the kernel does not
  let SIGTERM end, so it runs until SIGKILL (137).

Each of these annotations may also be given for one container, as ``<annotation>.<container name>``
(e.g. ``kubesim.kubespot.io/sigterm.istio-proxy: default``), which wins over the pod-wide one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
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
    #: A restartable init container (``initContainerStatuses``; its exit does not decide the phase).
    sidecar: bool = False

    @property
    def reason(self) -> str:
        return "Completed" if self.exit_code == 0 else "Error"


def _seconds(raw: Any, default: float) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) and value >= 0 else default


def _knob(annotations: Mapping[str, Any], key: str, container: str) -> Any:
    """A pod annotation, or its ``<key>.<container>`` form for that container alone."""
    value = annotations.get(f"{key}.{container}")
    return annotations.get(key) if value is None else value


def prestop_seconds(container: Mapping[str, Any], annotations: Mapping[str, Any]) -> float | None:
    """How long the container's preStop hook runs; None without a hook."""
    hook = (container.get("lifecycle") or {}).get("preStop")
    if not isinstance(hook, dict) or not hook:
        return None
    sleep = hook.get("sleep")
    if isinstance(sleep, dict):
        return _seconds(sleep.get("seconds"), 0.0)
    declared = _knob(annotations, conventions.PRESTOP_SECONDS, str(container.get("name", "")))
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
    containers: list[Mapping[str, Any]],
    annotations: Mapping[str, Any],
    grace: int,
    sidecars: Sequence[Mapping[str, Any]] = (),
) -> list[ContainerExit]:
    """Each container's preStop end, SIGKILL deadline and exit, for a kill with ``grace`` seconds.

    ``sidecars`` are the running restartable init containers (``restartPolicy: Always``) in spec
    order: upstream's ``terminationOrdering`` stops each only once every regular container and
    every later sidecar has exited (waiting at most what is left of its grace period).
    """

    def one(c: Mapping[str, Any], turn: float | None) -> ContainerExit:
        name = str(c.get("name", ""))
        behaviour = str(_knob(annotations, conventions.SIGTERM, name) or HANDLED)
        shutdown = _seconds(
            _knob(annotations, conventions.SHUTDOWN_SECONDS, name), conventions.DEFAULT_SHUTDOWN_SECONDS
        )
        left = grace
        sigterm_at = 0.0
        hook = prestop_seconds(c, annotations)
        if hook is not None and left > 0:
            sigterm_at = min(hook, float(left))
            left -= int(sigterm_at)  # whole seconds, truncated, as upstream measures the hook
        if turn is not None and left > 0:
            # ``waitForTurn``: until the containers before it exited, or the grace period is used up.
            waited = min(max(turn - sigterm_at, 0.0), float(left))
            sigterm_at += waited
            left -= int(waited)
        kill_at = sigterm_at + max(left, MINIMUM_GRACE_SECONDS)
        if behaviour == DEFAULT:
            exit_at, code = sigterm_at, SIGTERM_EXIT_CODE
        elif behaviour == IGNORED or sigterm_at + shutdown > kill_at:
            exit_at, code = kill_at, SIGKILL_EXIT_CODE
        else:
            exit_at, code = sigterm_at + shutdown, 0
        return ContainerExit(name, sigterm_at, kill_at, exit_at, code, turn is not None)

    out = [one(c, None) for c in containers]
    turn = max((e.exit_at for e in out), default=0.0)
    for c in reversed(sidecars):
        e = one(c, turn)
        out.append(e)
        turn = max(turn, e.exit_at)
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
            sigterm_at = min(e.sigterm_at, kill_at)
            out.append(ContainerExit(e.name, sigterm_at, kill_at, kill_at, SIGKILL_EXIT_CODE, e.sidecar))
    return out
