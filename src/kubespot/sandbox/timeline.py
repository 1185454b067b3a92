"""What the person running ``kubespot sandbox`` sees: the live timeline, a status panel, the summary table.

Owns all terminal output of the sandbox (rich). One line per thing that happened, timed from the
notice of the scenario whose node it concerns; a small live panel of where each scenario stands;
and at the end one table row per scenario with its verdict. With ``--json`` nothing is drawn and
the lines are only kept for the JSON summary.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .observer import TimelineEntry
from .summary import REBALANCE, ScenarioRecord, judge


def fmt_rel(seconds: float | None, *, sign: bool = True) -> str:
    if seconds is None:
        return "—"
    if sign:
        return f"{seconds:+.2f}s" if abs(seconds) < 10 else f"{seconds:+.1f}s"
    return f"{seconds:.2f}s" if abs(seconds) < 10 else f"{seconds:.1f}s"


class Timeline:
    """Collects timeline entries and, unless quiet, prints them as they come with a live status panel."""

    def __init__(
        self,
        console: Console | None,
        records: Callable[[], dict[str, ScenarioRecord]],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.console = console
        self._records = records
        self._clock = clock
        self.lines: list[dict[str, Any]] = []
        #: Replaces the scenario panel while set (the load-balancer runs show their request counts).
        self.panel: Callable[[], Table] | None = None
        self._live: Live | None = None
        #: Set once the summary is out: later stragglers (a last Event) are kept, not drawn under it.
        self.closed = False

    # -- context: the live panel ----------------------------------------------------------------

    def __enter__(self) -> Timeline:
        if self.console is not None and self.console.is_terminal:
            self._live = Live(
                get_renderable=self._panel, console=self.console, refresh_per_second=4, transient=True
            )
            self._live.__enter__()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.__exit__(et, e, tb)
            self._live = None

    # -- lines ----------------------------------------------------------------------------------

    def note(self, text: str, style: str = "dim") -> None:
        """A line that belongs to no scenario (setup, teardown)."""
        self.lines.append({"t": round(self._clock(), 3), "node": None, "text": text})
        if self.console is not None and not self.closed:
            self.console.print(Text(f"          {text}", style=style), soft_wrap=True)

    def add(self, entry: TimelineEntry) -> None:
        rec = self._records().get(entry.node)
        rel = entry.at - rec.notice_at if rec is not None else None
        line: dict[str, Any] = {
            "t": round(entry.at, 3),
            "rel_s": None if rel is None else round(rel, 3),
            "node": entry.node,
            "scenario": (rec.label or rec.scenario) if rec is not None else None,
            "text": entry.text,
        }
        self.lines.append(line)
        if self.console is None or self.closed:
            return
        text = Text()
        text.append(f"{fmt_rel(rel):>9} " if rel is not None else " " * 10, style="dim")
        text.append(f"{entry.node:<12} ", style="magenta")
        if rec is not None:
            text.append(f"[{rec.label or rec.scenario}] ", style="dim")
        text.append(entry.text, style=entry.style or None)
        # soft_wrap: one line per entry, left to the terminal to wrap (and intact when piped).
        self.console.print(text, soft_wrap=True)

    # -- live panel -----------------------------------------------------------------------------

    def _panel(self) -> Table:
        if self.panel is not None:
            return self.panel()
        now = self._clock()
        table = Table(box=None, show_header=True, header_style="dim", padding=(0, 1))
        for col in ("scenario", "node", "state", "pods left", "deadline in"):
            table.add_column(col)
        for rec in self._records().values():
            left = [p for p in rec.evictable() if p.gone_at is None]
            deadline = "—" if rec.deadline is None else fmt_rel(max(0.0, rec.deadline - now), sign=False)
            pods = "-" if rec.scenario == REBALANCE else str(len(left))
            table.add_row(rec.scenario, rec.node, state_of(rec), pods, deadline)
        return table

    # -- summary --------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the live panel: a summary printed by its scenario's own code comes next."""
        self._close()

    def _close(self) -> None:
        self.closed = True
        if self._live is not None:  # the panel's job is done; the table replaces it
            self._live.stop()
            self._live = None

    def print_summary(self, summary: dict[str, Any], *, footer: list[str]) -> None:
        self._close()
        if self.console is None:
            return
        table = Table(title="kubespot sandbox: summary", title_justify="left", header_style="bold")
        for col, justify in (
            ("scenario", "left"),
            ("node", "left"),
            ("cordon after", "right"),
            ("evicted", "right"),
            ("PDB 429s", "right"),
            ("moved", "right"),
            ("empty at", "right"),
            ("deadline", "right"),
            ("margin", "right"),
            ("verdict", "left"),
        ):
            table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
        notes: list[Text] = []
        for s in summary["scenarios"].values():
            ok = bool(s["ok"])
            table.add_row(
                s["scenario"],
                s["node"],
                fmt_rel(s["cordon_latency_s"], sign=False),
                str(s["evictions"]),
                str(s["pdb_429s"]),
                f"{s['pods_moved']}/{s['pods_to_move']}" if s["scenario"] != REBALANCE else "-",
                fmt_rel(s["time_to_empty_s"], sign=False),
                fmt_rel(s["deadline_s"], sign=False),
                fmt_rel(s["margin_s"], sign=False),
                Text("met" if ok else "MISSED", style="green" if ok else "bold red"),
            )
            if ok:
                notes.append(Text(f"  {s['scenario']}: {_verdict_short(s)}", style="green"))
            for reason in s["reasons"]:
                notes.append(Text(f"  {s['scenario']}: {reason}", style="red"))
        overall = (
            Text("every scenario kept its promise (exit 0)", style="bold green")
            if summary["ok"]
            else Text("at least one scenario missed (exit 1)", style="bold red")
        )
        self.console.print(Group(Text(""), table, *notes, overall, *(Text(f, style="dim") for f in footer)))

    def print_loadbalancer_summary(self, summary: dict[str, Any], *, footer: list[str]) -> None:
        """The load-balancer scenario: one row per run, then what each run shows, then the verdict."""
        self._close()
        if self.console is None:
            return
        table = Table(
            title="kubespot sandbox: load balancer, one spot interruption twice",
            title_justify="left",
            header_style="bold",
        )
        for col, justify in (
            ("run", "left"),
            ("node", "left"),
            ("sent", "right"),
            ("failed", "right"),
            ("error window", "right"),
            ("deregistered", "right"),
            ("out of rotation", "right"),
            ("drain time", "right"),
            ("deadline", "right"),
            ("verdict", "left"),
        ):
            table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
        notes: list[Text] = []
        for key in ("without_deregistration", "with_deregistration"):
            r = summary.get(key)
            if r is None:
                continue
            label = key.split("_", 1)[0]
            ok = bool(r["ok"])
            table.add_row(
                key.replace("_", " "),
                r["node"],
                str(r["sent"]),
                Text(str(r["failed"]), style="red" if r["failed"] else "green"),
                fmt_rel(r["error_window_s"], sign=False) if r["failed"] else "—",
                fmt_rel(r["deregistered_s"], sign=False),
                fmt_rel(r["stopped_routing_s"], sign=False),
                fmt_rel(r["drain_time_s"], sign=False),
                fmt_rel(r["deadline_s"], sign=False),
                Text("met" if ok else "MISSED", style="green" if ok else "bold red"),
            )
            notes.append(Text(f"  {label}: {_lb_story(r)}", style="green" if ok else "red"))
            for reason in r["reasons"]:
                notes.append(Text(f"  {label}: {reason}", style="red"))
        overall = (
            Text(
                "no request failed with deregistration, and every drain met its deadline (exit 0)",
                style="bold green",
            )
            if summary["ok"]
            else Text("the load-balancer scenario missed (exit 1)", style="bold red")
        )
        self.console.print(Group(Text(""), table, *notes, overall, *(Text(f, style="dim") for f in footer)))


def _lb_story(r: dict[str, Any]) -> str:
    """One run of the load-balancer scenario in a sentence."""
    failed = f"{r['failed']} of {r['sent']} requests failed"
    if r["failed"]:
        reasons = ", ".join(f"{n} {why}" for why, n in r["failures_by_reason"].items())
        failed += f" over {fmt_rel(r['error_window_s'], sign=False)} ({reasons})"
    how = "; ".join(sorted(set(r["left_rotation"].values()))) or "—"
    if r["deregistered_by_kubespot"]:
        return (
            f"{failed}; kubespot deregistered {len(r['target_pods'])} target pod(s) at "
            f"{fmt_rel(r['deregistered_s'])}, out of rotation at {fmt_rel(r['stopped_routing_s'])}, first "
            f"evicted at {fmt_rel(r['first_target_evicted_s'])}; node empty at {fmt_rel(r['drain_time_s'])}"
        )
    return (
        f"{failed}; target pods first evicted at {fmt_rel(r['first_target_evicted_s'])}, out of rotation "
        f"at {fmt_rel(r['stopped_routing_s'])} ({how}); node empty at {fmt_rel(r['drain_time_s'])}"
    )


def _verdict_short(s: dict[str, Any]) -> str:
    if s["scenario"] == REBALANCE:
        return (
            f"fenced {fmt_rel(s['notice_to_cordon_s'], sign=False)} after the notice, nothing evicted, "
            f"undone by itself at {fmt_rel(s.get('undone_s'), sign=False)} (undo time "
            f"{fmt_rel(s.get('undo_after_s'), sign=False)})"
        )
    moved = f"{s['pods_moved']}/{s['pods_to_move']} pods running elsewhere"
    if s["scenario"] == "scheduled-reboot":
        return (
            f"fenced at NotBefore - lead ({fmt_rel(s['cordon_latency_s'])}), {moved}, deadline met with "
            f"{fmt_rel(s['margin_s'], sign=False)} to spare, uncordoned "
            f"{fmt_rel(_minus(s.get('cleaned_up_s'), s.get('back_up_s')), sign=False)} after the reboot"
        )
    return f"{moved}, deadline met with {fmt_rel(s['margin_s'], sign=False)} to spare"


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def state_of(rec: ScenarioRecord) -> str:
    """A word or two for the live panel."""
    if rec.finished_at is not None:
        return "met" if judge(rec).ok else "FAILED"
    if rec.terminated_at is not None:
        return "terminated"
    if rec.reboot_done_at is not None:
        return "rebooted; cleanup?" if rec.cleaned_at is None else "cleaned up"
    if rec.reboot_started_at is not None:
        return "rebooting"
    if rec.cleaned_at is not None:
        return "undone"
    if rec.fenced_at is None:
        return "notice; waiting for fence"
    left = [p for p in rec.evictable() if p.gone_at is None]
    if rec.scenario == REBALANCE:
        return "fenced; undo pending"
    if left:
        return "draining"
    return "empty" if rec.restored_at is not None else "empty; replacements starting"
