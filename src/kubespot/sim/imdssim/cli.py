"""Command line for imdssim (wired as ``kubespot imds-sim``): flags → scenario → server until a signal.

Example game day: ``kubespot imds-sim --instances 3 --spot-itn-after 30 --target all``, then point
the handler at the printed URL (or at ``/<instance-id>`` for one member of the fleet).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import sys
from typing import TextIO, cast

from kubespot.sim.imdssim.events import SCHEDULED_CODES, SPOT_ACTIONS, ScheduledCode, SpotAction
from kubespot.sim.imdssim.faults import FaultError, parse_fault_spec
from kubespot.sim.imdssim.instance import LIFE_CYCLES
from kubespot.sim.imdssim.scenario import (
    EventSpec,
    InstanceSpec,
    Scenario,
    ScenarioError,
    StateChangeSpec,
    When,
    apply_scenario,
    load_scenario,
)
from kubespot.sim.imdssim.server import DEFAULT_HOST, DEFAULT_PORT, ImdsSim


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"seconds must be a finite number >= 0, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= 10_000:
        raise argparse.ArgumentTypeError("instances must be in 0..10000")
    return value


def _fault(text: str) -> str:
    try:
        parse_fault_spec(text)
    except FaultError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register imdssim's flags on ``parser``."""
    net = parser.add_argument_group("listening")
    net.add_argument("--host", default=DEFAULT_HOST, help="address to bind (default %(default)s)")
    net.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="port; 0 picks a free one (default %(default)s)"
    )
    net.add_argument(
        "--instance-ports",
        action="store_true",
        help="also give every instance a port of its own (port+1, port+2, ...) serving it at the root",
    )

    fleet = parser.add_argument_group("fleet")
    fleet.add_argument(
        "--instances", type=_count, default=None, metavar="N", help="synthetic instances to serve"
    )
    fleet.add_argument("--scenario", metavar="FILE", help="scenario file (.json, or .yaml/.yml with PyYAML)")
    fleet.add_argument("--instance-type", default=None, help="instance type of the synthetic instances")
    fleet.add_argument("--life-cycle", choices=LIFE_CYCLES, default=None, help="instance-life-cycle of them")
    fleet.add_argument(
        "--require-v2", action="store_true", help="refuse requests without an IMDSv2 token (401)"
    )

    ev = parser.add_argument_group("events (times count from start-up)")
    ev.add_argument(
        "--target",
        default="first",
        metavar="first|all|INSTANCE_ID",
        help="which instances the event flags below apply to (default %(default)s)",
    )
    ev.add_argument("--spot-itn-after", type=_seconds, metavar="SECONDS", help="spot interruption notice")
    ev.add_argument(
        "--action", choices=SPOT_ACTIONS, default="terminate", help="spot action (default %(default)s)"
    )
    ev.add_argument("--rebalance-after", type=_seconds, metavar="SECONDS", help="rebalance recommendation")
    ev.add_argument("--scheduled-event", choices=SCHEDULED_CODES, metavar="CODE", help="scheduled event code")
    ev.add_argument(
        "--scheduled-after", type=_seconds, metavar="SECONDS", help="when it appears (default now)"
    )
    ev.add_argument(
        "--not-before-in", type=_seconds, metavar="SECONDS", help="its NotBefore, from appearance"
    )
    ev.add_argument(
        "--scheduled-canceled-after", type=_seconds, metavar="SECONDS", help="cancel it, from appearance"
    )
    ev.add_argument(
        "--scheduled-completed-after", type=_seconds, metavar="SECONDS", help="complete it, from appearance"
    )
    ev.add_argument(
        "--asg-terminated-after", type=_seconds, metavar="SECONDS", help="target-lifecycle-state Terminated"
    )

    fl = parser.add_argument_group("faults")
    fl.add_argument(
        "--fault",
        action="append",
        type=_fault,
        default=[],
        metavar="KIND[,key=value...]",
        help="inject a fault (repeatable): error,status=500,rate=0.2 | latency,seconds=2 | "
        "timeout | token,status=503; keys: path=PREFIX instance=ID count=N",
    )
    fl.add_argument("--seed", type=int, default=None, help="seed for fault rates, for repeatable runs")


def _flag_events(args: argparse.Namespace) -> list[EventSpec]:
    events: list[EventSpec] = []
    if args.spot_itn_after is not None:
        action = cast(SpotAction, args.action)
        events.append(EventSpec(kind="spot-itn", when=When(after_seconds=args.spot_itn_after), action=action))
    if args.rebalance_after is not None:
        events.append(EventSpec(kind="rebalance", when=When(after_seconds=args.rebalance_after)))
    if args.scheduled_event is not None:
        changes = []
        if args.scheduled_canceled_after is not None:
            changes.append(
                StateChangeSpec(state="canceled", when=When(after_seconds=args.scheduled_canceled_after))
            )
        if args.scheduled_completed_after is not None:
            changes.append(
                StateChangeSpec(state="completed", when=When(after_seconds=args.scheduled_completed_after))
            )
        events.append(
            EventSpec(
                kind="scheduled",
                when=When(after_seconds=args.scheduled_after),
                code=cast(ScheduledCode, args.scheduled_event),
                not_before_in=args.not_before_in,
                state_changes=tuple(changes),
            )
        )
    if args.asg_terminated_after is not None:
        events.append(EventSpec(kind="asg-terminated", when=When(after_seconds=args.asg_terminated_after)))
    return events


def build_sim(args: argparse.Namespace) -> ImdsSim:
    """The server the flags describe (not started); raises ``ScenarioError``/``FaultError`` on bad input."""
    scenario = load_scenario(args.scenario) if args.scenario else Scenario()
    count = args.instances if args.instances is not None else (0 if scenario.instances else 1)
    synthetic: dict[str, object] = {}
    if args.instance_type:
        synthetic["instance_type"] = args.instance_type
    if args.life_cycle:
        synthetic["life_cycle"] = args.life_cycle
    scenario = scenario.with_instances(tuple(InstanceSpec(fields=synthetic) for _ in range(count)))
    rng = random.Random(args.seed).random if args.seed is not None else None
    sim = ImdsSim(
        host=args.host,
        port=args.port,
        require_v2=args.require_v2,
        instance_ports=args.instance_ports,
        faults=[parse_fault_spec(f) for f in args.fault],
        rng=rng,
    )
    fleet = sim.fleet
    apply_scenario(fleet, scenario)
    if args.require_v2:
        fleet.require_v2 = True  # the flag wins over a scenario's own setting
    ids = [i.instance_id for i in fleet.instances()]
    if args.target == "all":
        targets = ids
    elif args.target == "first":
        targets = ids[:1]
    elif args.target in fleet:
        targets = [args.target]
    else:
        raise ScenarioError(f"--target: no instance {args.target!r} (have {', '.join(ids) or 'none'})")
    origin = fleet.clock()
    for event in _flag_events(args):
        for iid in targets:
            event.apply(fleet, iid, origin)
    return sim


def print_urls(sim: ImdsSim, out: TextIO) -> None:
    fleet = sim.fleet
    mode = "required" if fleet.require_v2 else "optional"
    print(f"imdssim: {len(fleet)} instance(s), IMDSv2 {mode}", file=out)
    default = fleet.default
    if default is not None:
        print(f"  root     {sim.url}  ({default.instance_id})", file=out)
    for instance in fleet.instances():
        own = sim.instance_port_url(instance.instance_id)
        extra = f"  port {own}" if own else ""
        print(f"  {instance.instance_id}  {sim.instance_url(instance.instance_id)}{extra}", file=out)
    print(f"  control  {sim.control_url}", file=out)
    out.flush()


async def serve(sim: ImdsSim, *, out: TextIO = sys.stdout) -> None:
    """Run ``sim`` until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    async with sim:
        print_urls(sim, out)
        await stop.wait()
    print("imdssim: stopped", file=out)


def main(args: argparse.Namespace) -> int:
    """Entry point for ``kubespot imds-sim``; returns the process exit code."""
    try:
        sim = build_sim(args)
    except (ScenarioError, FaultError) as exc:
        print(f"imdssim: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(sim))
    except OSError as exc:
        print(f"imdssim: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="imdssim", description="EC2 instance metadata service simulator")
    add_arguments(_parser)
    sys.exit(main(_parser.parse_args()))
