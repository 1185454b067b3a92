"""IMDSv2 token rules as pure logic, with a fake clock.

Sources: FACTS.md ("EC2 instance metadata service": TTL 1..21600, out of range → 400, missing or
expired token on an IMDSv2-only instance → 401); the EC2 User Guide page "Configure the instance
metadata service options", quoted in JuliaCloud/AWS.jl PR #736 ("When token usage is set to required,
requests without a valid token or with an expired token receive a 401 - Unauthorized"); kube2iam
PR #279 (IMDS answers 403 to token-bearing requests that carry X-Forwarded-For).
"""

from __future__ import annotations

import pytest

from kubespot.sim.imdssim.clock import FakeClock
from kubespot.sim.imdssim.tokens import (
    MAX_LIVE_TOKENS,
    Access,
    TokenStore,
    authorize_get,
    parse_ttl,
)


@pytest.mark.parametrize(("header", "expected"), [("1", 1), ("60", 60), ("21600", 21600), (" 300 ", 300)])
def test_ttl_in_range_is_accepted(header: str, expected: int) -> None:
    assert parse_ttl(header) == expected


@pytest.mark.parametrize(
    "header", [None, "", "0", "21601", "-1", "1.5", "abc", "1e3", "\uff16\uff10", "9999999999"]
)
def test_ttl_missing_or_out_of_range_is_refused(header: str | None) -> None:
    assert parse_ttl(header) is None


def test_token_is_valid_until_its_ttl_then_expires() -> None:
    clock = FakeClock()
    store = TokenStore(clock)
    token = store.issue(10)
    assert store.remaining(token) == 10
    clock.advance(9.5)
    assert store.remaining(token) == 1
    clock.advance(0.5)
    assert store.remaining(token) is None


def test_unknown_token_is_invalid_and_tokens_are_distinct() -> None:
    store = TokenStore(FakeClock())
    a, b = store.issue(60), store.issue(60)
    assert a != b
    assert store.remaining("not-a-token") is None


def test_issue_refuses_out_of_range_ttl() -> None:
    store = TokenStore(FakeClock())
    with pytest.raises(ValueError):
        store.issue(0)
    with pytest.raises(ValueError):
        store.issue(21601)


def test_store_is_bounded_and_drops_oldest_first() -> None:
    counter = iter(range(MAX_LIVE_TOKENS + 5))
    store = TokenStore(FakeClock(), make_token=lambda: f"t{next(counter)}")
    for _ in range(MAX_LIVE_TOKENS + 5):
        store.issue(60)
    assert len(store) == MAX_LIVE_TOKENS
    assert store.remaining("t0") is None
    assert store.remaining(f"t{MAX_LIVE_TOKENS + 4}") == 60


def test_expired_tokens_are_purged_when_issuing() -> None:
    clock = FakeClock()
    store = TokenStore(clock)
    store.issue(1)
    clock.advance(2)
    token = store.issue(60)
    assert len(store) == 1
    store.revoke_all()
    assert store.remaining(token) is None


def test_authorize_matrix() -> None:
    clock = FakeClock()
    store = TokenStore(clock)
    good = store.issue(30)

    assert authorize_get(store, token=None, require_v2=False, forwarded=False).access is Access.ALLOWED
    assert authorize_get(store, token=None, require_v2=True, forwarded=False).access is Access.UNAUTHORIZED
    # A bad token is refused even when IMDSv1 is allowed.
    assert (
        authorize_get(store, token="bogus", require_v2=False, forwarded=False).access is Access.UNAUTHORIZED
    )
    ok = authorize_get(store, token=good, require_v2=True, forwarded=False)
    assert ok.access is Access.ALLOWED and ok.ttl_remaining == 30
    assert authorize_get(store, token=good, require_v2=True, forwarded=True).access is Access.FORBIDDEN
    clock.advance(31)
    assert authorize_get(store, token=good, require_v2=False, forwarded=False).access is Access.UNAUTHORIZED
