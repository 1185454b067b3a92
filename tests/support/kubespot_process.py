"""``python -m kubespot`` (the agent, the controller) started as the end-to-end suites start it: the
test process's environment without its kubespot, kubeconfig or AWS settings, and the settings every
such process runs with."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from typing import IO

#: The libraries whose per-request lines no end-to-end test reads, kept at warning
#: (``observability.logger_levels``).
QUIET_LIBRARIES = "botocore=warning,urllib3=warning,aiohttp.access=warning"

#: Every kubespot process of the end-to-end suites: drain margins and retries for deadlines of a few
#: seconds, Kubernetes events on, JSON logs (which the tests parse): kubespot's own loggers at debug
#: (tests read their debug lines), everything else at info, and the libraries that log every request
#: (botocore and urllib3 at debug per SQS poll and EC2 call, aiohttp's access log at info per
#: metrics scrape) at warning: their lines cost CPU in every run and no test reads them.
QUICK_ENV = {
    "KUBESPOT_DRAIN_SAFETY_MARGIN": "0.5",
    "KUBESPOT_DRAIN_RETRY_BACKOFF_BASE": "0.05",
    "KUBESPOT_DRAIN_RETRY_BACKOFF_CAP": "0.3",
    "KUBESPOT_OBSERVABILITY_EMIT_KUBERNETES_EVENTS": "true",
    "KUBESPOT_OBSERVABILITY_JSON_LOGGING": "true",
    "KUBESPOT_OBSERVABILITY_LOG_LEVEL": "info",
    "KUBESPOT_OBSERVABILITY_LOGGER_LEVELS": QUIET_LIBRARIES + ",kubespot=debug",
}

#: Seconds a started process (or a fresh simulated cluster) may take to come up. It costs nothing when
#: the start is quick (the tests wait on the condition, not on the clock), and leaves room for a
#: machine busy with the suite's other workers: a cold ``python -m kubespot`` imports boto3 and friends.
STARTUP_WITHIN = 60.0


def clean_environ(*prefixes: str) -> dict[str, str]:
    """This process's environment without the variables starting with ``prefixes``: a setting left in
    the developer's shell must not reach the process under test."""
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


async def spawn_kubespot(
    *args: str, env: dict[str, str], stdout: IO[bytes] | int, stderr: IO[bytes] | int
) -> asyncio.subprocess.Process:
    """``python -m kubespot ARGS`` with ``env`` (and nothing else of ours)."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubespot", *args, env=env, stdout=stdout, stderr=stderr
    )


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, for a kubespot process's metrics or probes server (the
    process binds it a moment later: a clash is possible but rare)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
