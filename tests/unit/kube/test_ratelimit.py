"""The client-side token bucket: burst first, then the sustained rate, first come first served."""

from __future__ import annotations

from kubespot.kube import TokenBucket


class FakeTime:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_burst_is_free_then_callers_queue_at_the_rate() -> None:
    now = FakeTime()
    bucket = TokenBucket(qps=10, burst=3, monotonic=now)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    waits = [bucket.reserve() for _ in range(3)]
    assert waits == [0.1, 0.2, 0.30000000000000004] or all(
        abs(w - e) < 1e-9 for w, e in zip(waits, (0.1, 0.2, 0.3), strict=True)
    )


def test_tokens_refill_over_time_up_to_the_burst() -> None:
    now = FakeTime()
    bucket = TokenBucket(qps=2, burst=2, monotonic=now)
    bucket.reserve(), bucket.reserve()
    now.t = 100.0
    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]
    assert bucket.reserve() > 0


def test_zero_qps_is_unlimited() -> None:
    bucket = TokenBucket(qps=0, burst=1, monotonic=FakeTime())
    assert all(bucket.reserve() == 0.0 for _ in range(1000))
