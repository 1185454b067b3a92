"""IMDSv2 session tokens: the TTL rule, issuing, expiry, and the per-request access decision.

Pure logic over an injected clock; the HTTP layer only maps the outcomes to status codes.
"""

from __future__ import annotations

import heapq
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from kubespot.sim.imdssim.clock import Clock

TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
MIN_TTL_SECONDS = 1
MAX_TTL_SECONDS = 21600
"""Six hours: the largest TTL real IMDS accepts."""

# A misbehaving client that asks for a token per request must not grow memory without bound; the
# oldest live tokens are dropped first, which a well-behaved client (one token, reused) never sees.
MAX_LIVE_TOKENS = 10_000


def parse_ttl(header: str | None) -> int | None:
    """The TTL a token request asked for, or ``None`` when the header is missing or invalid.

    Only a plain decimal integer in 1..21600 is accepted; anything else earns a 400.
    """
    if header is None:
        return None
    text = header.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 6:
        return None
    ttl = int(text)
    if not MIN_TTL_SECONDS <= ttl <= MAX_TTL_SECONDS:
        return None
    return ttl


def _random_token() -> str:
    # Real tokens are opaque base64 text of about this length; clients must not parse them.
    return secrets.token_urlsafe(42)


class TokenStore:
    """Tokens issued by one simulated instance; a token is only valid on the instance that issued it."""

    def __init__(self, clock: Clock, *, make_token: Callable[[], str] = _random_token) -> None:
        self._clock = clock
        self._make_token = make_token
        self._expiry: OrderedDict[str, float] = OrderedDict()
        # Expiry order for cheap purging; may hold entries for tokens already dropped (checked on pop).
        self._by_expiry: list[tuple[float, str]] = []

    def issue(self, ttl: int) -> str:
        """A new token valid for ``ttl`` seconds from now."""
        if not MIN_TTL_SECONDS <= ttl <= MAX_TTL_SECONDS:
            raise ValueError(f"TTL must be in {MIN_TTL_SECONDS}..{MAX_TTL_SECONDS}, got {ttl}")
        self._purge()
        token = self._make_token()
        expiry = self._clock() + ttl
        self._expiry[token] = expiry
        heapq.heappush(self._by_expiry, (expiry, token))
        while len(self._expiry) > MAX_LIVE_TOKENS:
            self._expiry.popitem(last=False)
        if len(self._by_expiry) > 2 * MAX_LIVE_TOKENS:
            self._by_expiry = [(exp, tok) for tok, exp in self._expiry.items()]
            heapq.heapify(self._by_expiry)
        return token

    def remaining(self, token: str) -> int | None:
        """Whole seconds the token stays valid, or ``None`` if it is unknown or expired."""
        expiry = self._expiry.get(token)
        if expiry is None:
            return None
        left = expiry - self._clock()
        if left <= 0:
            del self._expiry[token]
            return None
        return max(1, int(left))

    def revoke_all(self) -> None:
        """Forget every token (what a real instance does on stop/start)."""
        self._expiry.clear()
        self._by_expiry.clear()

    def __len__(self) -> int:
        return len(self._expiry)

    def _purge(self) -> None:
        now = self._clock()
        heap = self._by_expiry
        while heap and heap[0][0] <= now:
            expiry, token = heapq.heappop(heap)
            if self._expiry.get(token) == expiry:
                del self._expiry[token]


class Access(Enum):
    """Outcome of checking a metadata GET against the token rules."""

    ALLOWED = 200
    UNAUTHORIZED = 401
    FORBIDDEN = 403


@dataclass(frozen=True)
class AccessDecision:
    access: Access
    ttl_remaining: int | None = None
    """Seconds left on the presented token, echoed back in the TTL response header."""


def authorize_get(
    store: TokenStore, *, token: str | None, require_v2: bool, forwarded: bool
) -> AccessDecision:
    """Apply the IMDS token rules to a metadata read.

    - a token that is present but unknown or expired is refused (401) even when v1 is allowed;
    - no token at all is refused (401) only when the instance requires IMDSv2;
    - a v2 request carrying ``X-Forwarded-For`` is refused (403): IMDS treats it as proxied.
    """
    if token is None:
        if require_v2:
            return AccessDecision(Access.UNAUTHORIZED)
        return AccessDecision(Access.ALLOWED)
    if forwarded:
        return AccessDecision(Access.FORBIDDEN)
    left = store.remaining(token)
    if left is None:
        return AccessDecision(Access.UNAUTHORIZED)
    return AccessDecision(Access.ALLOWED, left)
