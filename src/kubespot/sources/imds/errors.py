"""What can go wrong reading IMDS, as types the monitor can log and carry on from.

"Absent" (404) is not an error: it is how IMDS says there is no notice.
"""

from __future__ import annotations


class ImdsError(Exception):
    """Base of every IMDS failure; ``path`` is the metadata path involved."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class ImdsUnavailable(ImdsError):
    """No answer: connection refused, reset, or the request timed out (after every try)."""


class ImdsHttpError(ImdsError):
    """An answer with an unexpected status (after every try, for the retriable ones)."""

    def __init__(self, path: str, status: int) -> None:
        super().__init__(path, f"HTTP {status}")
        self.status = status


class ImdsTokenError(ImdsError):
    """No IMDSv2 session token could be had and falling back to IMDSv1 is not allowed."""


class ImdsParseError(ImdsError):
    """A body that is not what the path serves; carries an excerpt for the log."""

    def __init__(self, path: str, reason: str, body: str | bytes = "") -> None:
        excerpt = body[:200]
        super().__init__(path, f"{reason} (body: {excerpt!r})")
        self.reason = reason
        self.body = body
