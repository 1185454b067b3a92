"""``kubespot drain NODE``: the drain engine by hand, a deadline-aware ``kubectl drain``.

Cordons the node, then drains it with the same engine the agent uses, and prints what happened to
every pod. Exit code 0 when the node was emptied before the deadline (for ``--dry-run``: when the
drain would be allowed to start), 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from datetime import datetime, timedelta
from typing import TextIO

import orjson

from .actions.drain import DrainResult, drain_node
from .config import loader
from .config.drain import DrainSettings
from .config.kube import KubeSettings
from .kube import EventRecorder, KubeError, connect
from .model.clock import SystemClock
from .process.command import one_shot

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "": 1.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|)")


def parse_duration(text: str) -> float:
    """Seconds in ``text``: ``120``, ``90s``, ``2m``, ``1m30s``, ``500ms``."""
    text = text.strip()
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos or not m.group(0):
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (try 120s, 2m, 1m30s)")
    return total


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("node", metavar="NODE", help="name of the node to drain")
    parser.add_argument(
        "--deadline",
        type=parse_duration,
        default=None,
        help="time until the node goes away, e.g. 120s or 2m (default: NODE_TERMINATION_GRACE_PERIOD, 120s)",
    )
    parser.add_argument("--dry-run", action="store_true", help="report what would happen; change nothing")
    parser.add_argument("--output", "-o", choices=("table", "json"), default="table", help="result format")
    parser.add_argument("--no-events", action="store_true", help="do not record Kubernetes events")
    parser.add_argument("-v", "--verbose", action="store_true", help="log each step to stderr")
    # Every setting of the Kubernetes connection and the drain engine, through the one loader.
    loader.add_arguments(parser, DrainCommandSettings)


@dataclasses.dataclass(frozen=True)
class DrainCommandSettings:
    """What `kubespot drain` is configured with: the Kubernetes connection and the drain engine."""

    kube: KubeSettings = dataclasses.field(default_factory=KubeSettings)
    drain: DrainSettings = dataclasses.field(default_factory=DrainSettings)


def _settings(args: argparse.Namespace) -> tuple[KubeSettings, DrainSettings]:
    """Flags > environment (kubespot's and NTH's names) > ``--config`` file > defaults."""
    settings = loader.load(DrainCommandSettings, namespace=args)
    return settings.kube, settings.drain


async def run(args: argparse.Namespace, *, out: TextIO) -> int:
    kube_settings, drain_settings = _settings(args)
    clock = SystemClock()
    kube = connect(kube_settings)
    try:
        start = clock.now()
        deadline = start + timedelta(
            seconds=args.deadline
            if args.deadline is not None
            else drain_settings.node_termination_grace_period
        )
        node = await kube.get_node(args.node)
        if node is None:
            print(f"error: node {args.node!r} not found", file=sys.stderr)
            return 1
        recorder = None if args.no_events else EventRecorder(kube=kube, component="kubespot-drain")
        if not args.dry_run:
            await kube.cordon(args.node)
            if recorder is not None:
                await recorder.node(node, "Cordon", "Cordoned by kubespot drain")
        result = await drain_node(
            args.node,
            kube=kube,
            settings=drain_settings,
            deadline=deadline,
            clock=clock,
            dry_run=args.dry_run,
            recorder=recorder,
        )
    except KubeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        await kube.close()
    if args.output == "json":
        out.write(orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write(format_table(result))
    return 0 if result.ok else 1


def _rel(t: datetime | None, start: datetime) -> str:
    return "-" if t is None else f"{(t - start).total_seconds():.1f}s"


def format_table(result: DrainResult) -> str:
    """A per-pod table (times relative to the start of the drain) and a one-line summary."""
    header = ("POD", "OUTCOME", "TIER", "GRACE", "TRIES", "429s", "EVICTED", "GONE", "REASON")
    rows = [header]
    order = sorted(result.pods, key=lambda p: (p.outcome.value, p.namespace, p.name))
    for p in order:
        rows.append(
            (
                f"{p.namespace}/{p.name}",
                p.outcome.value,
                str(p.tier),
                "own" if p.grace_seconds is None else f"{p.grace_seconds}s",
                str(p.attempts),
                str(p.blocked),
                _rel(p.evicted_at, result.started_at),
                _rel(p.gone_at, result.started_at),
                p.reason,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows]
    end = result.finished_at or result.started_at
    counts = ", ".join(f"{k} {v}" for k, v in sorted(result.counts().items()))
    verdict = (
        ("dry run: drain would be refused" if result.refused else "dry run: nothing changed")
        if result.dry_run
        else (
            "refused"
            if result.refused
            else ("emptied before the deadline" if result.emptied else "NOT emptied")
        )
    )
    lines.append("")
    lines.append(
        f"node {result.node}: {verdict} in {(end - result.started_at).total_seconds():.1f}s "
        f"(deadline {result.deadline.isoformat()}); {counts}"
    )
    return "\n".join(line.rstrip() for line in lines) + "\n"


def main(args: argparse.Namespace) -> int:
    return one_shot("drain", lambda: run(args, out=sys.stdout), verbose=args.verbose)
