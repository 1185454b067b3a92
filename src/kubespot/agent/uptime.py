"""When the host booted, from its uptime: tells the agent that a scheduled reboot has happened."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

log = logging.getLogger("kubespot.agent")

DEFAULT_UPTIME_FILE = "/proc/uptime"


def boot_time_reader(path: str, now: Callable[[], datetime]) -> Callable[[], datetime | None]:
    """A function giving the boot time from ``path`` (``/proc/uptime`` format: seconds first), or
    None when the file cannot be read; the failure is logged once, not at every call."""
    file = Path(path or DEFAULT_UPTIME_FILE)
    warned = False

    def read() -> datetime | None:
        nonlocal warned
        try:
            uptime = float(file.read_text(encoding="ascii").split()[0])
        except (OSError, ValueError, IndexError, UnicodeDecodeError) as exc:
            if not warned:
                log.warning("cannot read uptime from %s (%s): reboots will not be detected", file, exc)
                warned = True
            return None
        return now() - timedelta(seconds=uptime)

    return read
