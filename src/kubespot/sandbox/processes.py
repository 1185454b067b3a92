"""The sandbox's child processes: one real ``kubespot agent`` per spot node (and, for the load-balancer
scenario, one ``kubespot controller``), and the agents' uptime files.

Owns starting, restarting (the simulated reboot) and stopping the agents, so that whatever ends the
sandbox (a verdict, an exception, Ctrl-C, SIGTERM) no child outlives it: ``ProcessGroup.stop_all``
sends SIGTERM, waits, then SIGKILLs stragglers, and an ``atexit`` hook kills what is left if the
interpreter exits some other way. The agents stay in the sandbox's process group on purpose: Ctrl-C
or a closed terminal reaches them too (the agent treats SIGINT like SIGTERM), which also covers the
sandbox being killed outright.

Each agent writes its log (stderr and stdout) to one file in the run directory, appended across a
restart, so a reader can follow one node's agent from start to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: Seconds an agent gets to exit after SIGTERM before it is killed.
STOP_TIMEOUT = 5.0


def agent_command(role: str = "agent") -> list[str]:
    """The agent (or controller) exactly as a user runs it, with this interpreter (so the venv's kubespot)."""
    return [sys.executable, "-m", "kubespot", role]


@dataclass
class UptimeFile:
    """A stand-in for the node's /proc/uptime ("<seconds up> <seconds idle>"), kept current.

    The agent reads it to tell that its instance rebooted; ``reboot()`` restarts the count.
    """

    path: Path
    booted_at: float = field(default_factory=lambda: time.time() - 86_400.0)  # up a day already

    def write(self) -> None:
        up = max(0.0, time.time() - self.booted_at)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"{up:.2f} {up * 1.9:.2f}\n")
        os.replace(tmp, self.path)  # atomic: the agent never reads half a line

    def reboot(self) -> None:
        self.booted_at = time.time()
        self.write()


@dataclass
class AgentProcess:
    """One node's agent process (stopped, running, or restarted after a reboot); with ``role``
    "controller", the cluster's controller (``node`` is then just its name in the group)."""

    node: str
    env: Mapping[str, str]
    log_path: Path
    role: str = "agent"
    #: Variables of the sandbox's own environment not to pass on, by prefix (the controller must
    #: not see the user's AWS profile or session token beside the simulated account's keys).
    drop_env: tuple[str, ...] = ()
    proc: asyncio.subprocess.Process | None = None
    starts: int = 0
    exit_codes: list[int] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    @property
    def label(self) -> str:
        return f"agent for {self.node}" if self.role == "agent" else self.role

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    async def start(self) -> None:
        if self.running:
            return
        self.starts += 1
        # A new run starts the log afresh; a restart (the reboot) continues it.
        with self.log_path.open("ab" if self.starts > 1 else "wb") as log:
            head = f"--- sandbox: {self.role} start #{self.starts} for {self.node} at {time.time():.3f}\n"
            log.write(head.encode())
            log.flush()
            self.proc = await asyncio.create_subprocess_exec(
                *agent_command(self.role),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={
                    **{
                        k: v
                        for k, v in os.environ.items()
                        if not (self.drop_env and k.startswith(self.drop_env))
                    },
                    **self.env,
                },
            )

    async def stop(self, grace: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM, wait up to ``grace`` seconds, then SIGKILL; the exit code (None: never started)."""
        proc = self.proc
        if proc is None:
            return None
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        code = proc.returncode
        assert code is not None
        self.exit_codes.append(code)
        self.proc = None
        return code

    def kill_now(self) -> None:
        """Last resort from synchronous cleanup (atexit): no waiting possible."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class ProcessGroup:
    """Every process the sandbox started, so one call stops them all."""

    agents: dict[str, AgentProcess] = field(default_factory=dict)

    def add(self, agent: AgentProcess) -> AgentProcess:
        self.agents[agent.node] = agent
        return agent

    async def start_all(self) -> None:
        await asyncio.gather(*(a.start() for a in self.agents.values()))

    async def stop_all(self) -> None:
        await asyncio.gather(*(a.stop() for a in self.agents.values()), return_exceptions=True)

    def kill_all_now(self) -> None:
        for agent in self.agents.values():
            agent.kill_now()
