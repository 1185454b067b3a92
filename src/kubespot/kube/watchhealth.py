"""How long each running watch has gone without a word from the API server, and the bound on that.

A watch whose connection went half-open (a control-plane upgrade or a NAT entry reset that sent no
FIN and no RST) is not broken as far as the socket knows: it is silent, and without a bound it stays
so for ever while the index it feeds goes stale (client-go#374, kubernetes#65012). A live watch is
never silent for long: the server ends each one after the ``timeoutSeconds`` it was asked for and,
when asked with ``allowWatchBookmarks``, sends a BOOKMARK about every minute and just before that
end (kubernetes#90560). So a watch that has heard nothing for a little longer than its server
timeout is taken as broken, as kube-rs does (its watcher's idle timeout is ``timeoutSeconds`` + 5 s,
kube-rs#1945) and kopf does (``settings.watching.inactivity_timeout``, 70 s). The transports enforce
the bound on every read (``RawHttp.stream``); this module keeps, per running watch, when it last
heard from the server, which ``/healthz`` reports (``silences``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .transport import WATCH_SERVER_TIMEOUT

#: The default bound on a watch's silence, seconds (``KubeSettings.watch_idle_timeout``).
DEFAULT_IDLE_TIMEOUT = 75.0


def server_timeout(idle_timeout: float) -> int:
    """The ``timeoutSeconds`` a watch asks for: WATCH_SERVER_TIMEOUT, or 4/5 of the idle bound when
    that is shorter (at least 1 s), so a live watch always ends, and so speaks, within the bound."""
    return max(1, min(WATCH_SERVER_TIMEOUT, int(idle_timeout * 0.8)))


class Watch:
    """One running watch: what it follows and when (monotonic seconds) the server last spoke on it."""

    __slots__ = ("_clock", "heard", "what")

    def __init__(self, what: str, clock: Callable[[], float]) -> None:
        self.what = what
        self._clock = clock
        self.heard = clock()

    def hear(self) -> None:
        """The server spoke: an event, a bookmark, or the end of the watch it was asked for."""
        self.heard = self._clock()


class Watches:
    """The running watches of a client and how long each has been silent."""

    def __init__(
        self, idle_timeout: float = DEFAULT_IDLE_TIMEOUT, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.idle_timeout = idle_timeout
        self._clock = clock
        self._running: list[Watch] = []

    @property
    def health_limit(self) -> float:
        """Silence, seconds, after which a watch is reported unhealthy: twice the idle bound. One
        silent bound is a broken connection, re-listed and reopened; a second one in a row means
        the watch is not coming back (each reopened connection goes silent again)."""
        return 2 * self.idle_timeout

    @contextmanager
    def running(self, what: str) -> Iterator[Watch]:
        """Count a watch of ``what`` as running for the length of the ``with`` block."""
        watch = Watch(what, self._clock)
        self._running.append(watch)
        try:
            yield watch
        finally:
            self._running.remove(watch)

    def silences(self) -> list[tuple[str, float]]:
        """(what, seconds since the server last spoke) of every running watch."""
        now = self._clock()
        return [(watch.what, max(0.0, now - watch.heard)) for watch in self._running]
