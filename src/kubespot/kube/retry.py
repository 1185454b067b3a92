"""Retry policy for API calls: which failures are transient (the waits: ``model.backoff``)."""

from __future__ import annotations

#: Statuses worth another attempt on any call: throttling and server-side trouble.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
