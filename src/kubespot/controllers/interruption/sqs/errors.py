"""What can be wrong with a message on the interruption queue.

A message that is understood but asks for nothing (a ``running`` state change, a test notification)
is not an error: the parser says so with ``ParsedMessage.ignore_reason``.
"""

from __future__ import annotations

#: How much of a body an error message carries: enough to recognise it, never a whole payload.
EXCERPT_CHARS = 200


class MessageError(ValueError):
    """A body that is not JSON, has no known shape, or lacks a field its shape needs.

    ``reason`` says what is wrong; the message adds an excerpt of at most ``EXCERPT_CHARS``
    characters of the body, and ``body`` keeps the whole text for whoever wants to store it.
    """

    def __init__(self, reason: str, body: str = "") -> None:
        excerpt = body[:EXCERPT_CHARS] + ("…" if len(body) > EXCERPT_CHARS else "")
        super().__init__(f"{reason} (body: {excerpt!r})" if body else reason)
        self.reason = reason
        self.body = body
