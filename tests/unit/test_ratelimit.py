"""`dsx.ratelimit.TokenBucket`: the one limiter (API clients, drain evictions)."""

from __future__ import annotations

import pytest

from dsx.ratelimit import TokenBucket


def test_burst_then_refill_per_key() -> None:
    now = [0.0]
    bucket = TokenBucket(4.0, 2, clock=lambda: now[0])
    assert [bucket.take("a"), bucket.take("a"), bucket.take("a")] == [True, True, False]
    assert bucket.wait("a") == pytest.approx(0.25)
    assert bucket.take("b")  # keys are independent
    now[0] += 0.25
    assert bucket.wait("a") == 0.0
    now[0] += 100.0
    assert [bucket.take("a") for _ in range(3)] == [True, True, False]  # never more than the burst


def test_a_clock_that_steps_back_adds_no_tokens() -> None:
    now = [10.0]
    bucket = TokenBucket(1.0, 1, clock=lambda: now[0])
    assert bucket.take()
    now[0] = 0.0
    assert not bucket.take()


@pytest.mark.parametrize(("rate", "burst"), [(0.0, 1), (-1.0, 1), (1.0, 0), (float("nan"), 1)])
def test_nonsense_limits_are_refused(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="positive rate"):
        TokenBucket(rate, burst)
