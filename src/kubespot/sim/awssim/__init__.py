"""awssim: moto in server mode, extended where kubespot needs more than stock moto.

``MotoServer`` (``server.py``) runs moto's threaded server on 127.0.0.1 with a free port and
installs the extensions in ``extensions/``; ``pytest_plugin.py`` wraps it in fixtures. See
``docs/simulators/awssim.md`` for what moto supports, what the extensions add, and the gaps.
"""

from __future__ import annotations

from kubespot.sim.awssim.extensions.lifecycle import (
    LAUNCHING,
    TERMINATING,
    LifecycleAction,
    LifecycleActionError,
)
from kubespot.sim.awssim.server import (
    DEFAULT_REGION,
    FAKE_ACCESS_KEY_ID,
    FAKE_SECRET_ACCESS_KEY,
    MotoServer,
)

__all__ = [
    "DEFAULT_REGION",
    "FAKE_ACCESS_KEY_ID",
    "FAKE_SECRET_ACCESS_KEY",
    "LAUNCHING",
    "TERMINATING",
    "LifecycleAction",
    "LifecycleActionError",
    "MotoServer",
]
