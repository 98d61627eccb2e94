"""`dsx.retry`: the one retry loop gives up at its deadline or attempt cap, with the waits it promises."""

from __future__ import annotations

import pytest

from dsx import retry


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_gives_up_when_the_next_wait_would_pass_the_deadline() -> None:
    t = FakeTime()
    backoff = retry.Backoff(initial_seconds=1.0, factor=2.0, max_seconds=4.0)
    tried = list(retry.attempts(timeout_seconds=10.0, backoff=backoff, clock=t.clock, sleep=t.sleep))
    assert tried == [1, 2, 3, 4]
    assert t.slept == [1.0, 2.0, 4.0]  # a fourth wait (4 s) would end at 11 s, past the 10 s deadline
    assert t.now <= 10.0


def test_the_first_attempt_always_comes_even_with_no_time() -> None:
    t = FakeTime()
    assert list(retry.attempts(timeout_seconds=0.0, clock=t.clock, sleep=t.sleep)) == [1]
    assert t.slept == []


def test_attempt_cap_and_immediate_retries_never_sleep() -> None:
    t = FakeTime()
    assert list(retry.attempts(max_attempts=5, backoff=retry.IMMEDIATE, clock=t.clock, sleep=t.sleep)) == [
        1,
        2,
        3,
        4,
        5,
    ]
    assert t.slept == []


def test_stops_as_soon_as_the_caller_succeeds() -> None:
    t = FakeTime()
    for attempt in retry.attempts(timeout_seconds=60.0, backoff=retry.Backoff(0.5), clock=t.clock, sleep=t.sleep):
        if attempt == 3:
            break
    assert t.slept == [0.5, 0.5]


def test_jitter_only_shortens_waits() -> None:
    waits = retry.Backoff(initial_seconds=1.0, factor=2.0, max_seconds=8.0, jitter=0.5).delays()
    for ceiling in (1.0, 2.0, 4.0, 8.0, 8.0):
        assert ceiling * 0.5 <= next(waits) <= ceiling


@pytest.mark.parametrize("fields", [{"initial_seconds": -1.0}, {"factor": 0.5}, {"jitter": 1.5}])
def test_nonsense_back_off_is_refused(fields: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="back-off out of range"):
        retry.Backoff(**fields)


def test_delay_n_is_the_nth_wait_and_huge_retries_stay_capped() -> None:
    backoff = retry.Backoff(initial_seconds=0.5, factor=2.0, max_seconds=30.0)
    waits = backoff.delays()
    assert [backoff.delay(n) for n in range(1, 8)] == [next(waits) for _ in range(7)] == [0.5, 1, 2, 4, 8, 16, 30]
    assert backoff.delay(100_000) == 30.0
