"""The one retry and polling loop: attempts spaced by a back-off, within a deadline.

Every "try, and if it did not work wait and try again" in dsx is

    for attempt in retry.attempts(timeout_seconds=30, backoff=retry.Backoff(0.2)):
        if done():
            return ...
    raise DeadlineExceededError(...)  # or whatever giving up means there

so the loop, the sleeping and the deadline arithmetic are written once. The caller keeps what
differs: what one attempt is, what success returns and what giving up says. The clock and the
sleep are parameters, so tests and simulations drive time themselves.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Waits of `initial_seconds`, multiplied by `factor` after each, capped at `max_seconds`.

    `jitter` (0 to 1) shortens each wait by up to that fraction at random, so many clients that
    failed together do not retry together; 0 keeps the waits exact.
    """

    initial_seconds: float = 0.2
    factor: float = 1.0
    max_seconds: float = math.inf
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if not (self.initial_seconds >= 0 and self.factor >= 1 and self.max_seconds >= 0 and 0 <= self.jitter <= 1):
            raise ValueError(f"back-off out of range: {self}")

    def delay(self, retry: int) -> float:
        """The wait before retry number `retry` (1 before the second attempt): initial × factor^(retry-1), capped."""
        try:
            raw = self.initial_seconds * self.factor ** max(0, retry - 1)
        except OverflowError:
            raw = math.inf
        capped = min(raw, self.max_seconds)
        return capped * (1.0 - self.jitter * random.random()) if self.jitter else capped

    def delays(self) -> Iterator[float]:
        """The waits before the second, third, … attempt."""
        retry = 1
        while True:
            yield self.delay(retry)
            retry += 1


IMMEDIATE = Backoff(initial_seconds=0.0)
"""Try again at once (an optimistic-concurrency conflict: re-read and re-apply)."""


def attempts(
    *,
    timeout_seconds: float = math.inf,
    max_attempts: int | None = None,
    backoff: Backoff = Backoff(),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[int]:
    """Attempt numbers 1, 2, …; between two it sleeps the next back-off wait.

    The first attempt always comes. The iteration ends, and the caller gives up, after
    `max_attempts`, or when the next wait would end past `timeout_seconds` from the start (an
    attempt is never begun after the deadline).
    """
    deadline = clock() + timeout_seconds
    waits = backoff.delays()
    attempt = 1
    while True:
        yield attempt
        if max_attempts is not None and attempt >= max_attempts:
            return
        wait = next(waits)
        if clock() + wait > deadline:
            return
        if wait > 0:
            sleep(wait)
        attempt += 1
