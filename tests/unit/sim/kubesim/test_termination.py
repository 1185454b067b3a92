"""The kill plan of a deleted pod's containers (``controllers/termination.py``), pure.

Upstream: pkg/kubelet/kuberuntime/kuberuntime_container.go ``killContainer`` (preStop first, the
grace period minus its whole seconds, never below ``minimumGracePeriodInSeconds`` = 2) and
``executePreStopHook`` (the hook is abandoned after the grace period).
"""

from __future__ import annotations

from typing import Any

from kubespot.sim.kubesim import conventions
from kubespot.sim.kubesim.controllers.termination import plan, prestop_seconds, shortened


def _c(name: str = "app", pre_stop: dict[str, Any] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "nginx"}
    if pre_stop is not None:
        c["lifecycle"] = {"preStop": pre_stop}
    return c


def test_handled_sigterm_exits_zero_after_its_shutdown() -> None:
    """killContainer: no hook, SIGTERM at once; the process exits in time: exit code 0."""
    (e,) = plan([_c()], {conventions.SHUTDOWN_SECONDS: "3"}, 30)
    assert (e.sigterm_at, e.kill_at, e.exit_at, e.exit_code, e.reason) == (0, 30, 3, 0, "Completed")


def test_a_grace_period_below_two_seconds_still_gets_two_before_sigkill() -> None:
    """killContainer: ``if gracePeriod < minimumGracePeriodInSeconds`` the window is 2 s."""
    (e,) = plan([_c()], {conventions.SHUTDOWN_SECONDS: "60"}, 1)
    assert (e.kill_at, e.exit_at, e.exit_code, e.reason) == (2, 2, 137, "Error")


def test_no_handler_exits_143_at_sigterm_and_pid1_without_handler_runs_until_sigkill() -> None:
    """A process killed by SIGTERM's default action exits 128+15; a PID 1 ignoring it is SIGKILLed."""
    (die,) = plan([_c()], {conventions.SIGTERM: "default"}, 30)
    assert (die.exit_at, die.exit_code) == (0, 143)
    (pid1,) = plan([_c()], {conventions.SIGTERM: "ignored", conventions.SHUTDOWN_SECONDS: "0"}, 5)
    assert (pid1.exit_at, pid1.exit_code) == (5, 137)


def test_prestop_delays_sigterm_within_the_grace_period() -> None:
    """killContainer: the hook runs first and its duration comes off the grace period."""
    (e,) = plan([_c(pre_stop={"sleep": {"seconds": 10}})], {conventions.SHUTDOWN_SECONDS: "60"}, 30)
    assert (e.sigterm_at, e.kill_at, e.exit_code) == (10, 30, 137)
    (ok,) = plan([_c(pre_stop={"sleep": {"seconds": 10}})], {conventions.SHUTDOWN_SECONDS: "4"}, 30)
    assert (ok.sigterm_at, ok.exit_at, ok.exit_code) == (10, 14, 0)


def test_an_overrunning_prestop_is_cut_at_the_grace_period_and_gets_two_more_seconds() -> None:
    """executePreStopHook gives up after gracePeriod; the minimum window then adds 2 s."""
    (e,) = plan([_c(pre_stop={"sleep": {"seconds": 60}})], {}, 30)
    assert (e.sigterm_at, e.kill_at) == (30, 32)
    assert (e.exit_at, e.exit_code) == (31, 0)  # the default 1 s shutdown fits in the extension


def test_the_hook_time_taken_off_is_truncated_to_whole_seconds() -> None:
    """``int64(metav1.Now().Sub(start.Time).Seconds())``: 2.5 s of hook takes 2 s off."""
    annotations = {conventions.PRESTOP_SECONDS: "2.5", conventions.SIGTERM: "ignored"}
    (e,) = plan([_c(pre_stop={"exec": {"command": ["/bin/drain"]}})], annotations, 5)
    assert (e.sigterm_at, e.kill_at) == (2.5, 5.5)


def test_hook_durations_declared_or_read_from_a_plain_sleep() -> None:
    assert prestop_seconds(_c(), {}) is None
    assert prestop_seconds(_c(pre_stop={"exec": {"command": ["sleep", "7"]}}), {}) == 7
    assert prestop_seconds(_c(pre_stop={"exec": {"command": ["/bin/sh", "-c", "sleep 5"]}}), {}) == 5
    assert prestop_seconds(_c(pre_stop={"exec": {"command": ["/bin/drain"]}}), {}) == 0
    http = _c(pre_stop={"httpGet": {"path": "/stop", "port": 8080}})
    assert prestop_seconds(http, {conventions.PRESTOP_SECONDS: "1.5"}) == 1.5


def test_each_container_has_its_own_plan() -> None:
    exits = plan(
        [_c("a"), _c("b", pre_stop={"sleep": {"seconds": 3}})], {conventions.SHUTDOWN_SECONDS: "1"}, 30
    )
    assert [(e.name, e.exit_at) for e in exits] == [("a", 1), ("b", 4)]


def test_a_shorter_grace_period_later_brings_sigkill_forward_only() -> None:
    """The kubelet restarts killPod with the shorter grace period (pod_workers.go)."""
    exits = plan([_c("slow"), _c("quick")], {conventions.SHUTDOWN_SECONDS: "60"}, 30)
    (slow, _quick) = shortened(exits, 5.0, 3)
    assert (slow.kill_at, slow.exit_at, slow.exit_code) == (8, 8, 137)
    early = plan([_c()], {conventions.SHUTDOWN_SECONDS: "1"}, 30)
    assert shortened(early, 0.5, 3) == early  # exits before the new deadline anyway


def test_sidecars_stop_after_the_regular_containers_and_later_sidecars_first() -> None:
    """kuberuntime_termination_order.go ``newTerminationOrdering``: a restartable init container
    waits for every regular container and for the sidecars declared after it; the wait comes off
    its grace period (``killContainer``: ``gracePeriod -= int64(ordering.waitForTurn(...))``)."""
    annotations = {conventions.SHUTDOWN_SECONDS: "3"}
    exits = plan([_c("app")], annotations, 30, sidecars=[_c("proxy"), _c("logs")])
    by_name = {e.name: e for e in exits}
    assert (by_name["app"].exit_at, by_name["app"].sidecar) == (3, False)
    assert (by_name["logs"].sigterm_at, by_name["logs"].exit_at, by_name["logs"].sidecar) == (3, 6, True)
    assert (by_name["proxy"].sigterm_at, by_name["proxy"].exit_at) == (6, 9)
    assert by_name["proxy"].kill_at == 6 + 30 - 6  # six whole seconds waited come off its 30


def test_a_sidecar_waits_no_longer_than_its_grace_period() -> None:
    (app, proxy) = plan([_c("app")], {conventions.SIGTERM: "ignored"}, 5, sidecars=[_c("proxy")])
    assert app.exit_at == 5
    assert (proxy.sigterm_at, proxy.kill_at, proxy.exit_code) == (5, 7, 137)  # then its 2 s minimum


def test_a_container_may_have_its_own_knobs() -> None:
    annotations = {
        conventions.SIGTERM: "ignored",
        f"{conventions.SIGTERM}.app": "handled",
        f"{conventions.SHUTDOWN_SECONDS}.app": "4",
    }
    (app, proxy) = plan([_c("app"), _c("proxy")], annotations, 10)
    assert (app.exit_at, app.exit_code) == (4, 0)
    assert (proxy.exit_at, proxy.exit_code) == (10, 137)
