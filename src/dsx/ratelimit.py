"""The one rate limiter: a token bucket per key, shared by threads.

Used by `dsx serve` and the sentinel's API (a bucket per client token, `dsx.api.security`) and
by the drain stage (one bucket for every node's evictions, `dsx.health.decisions.drain`). A bucket holds
up to `burst` tokens and refills at `rate_per_second`; each request spends one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """Token buckets by key (one bucket when the key is left out); thread-safe."""

    def __init__(self, rate_per_second: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if not rate_per_second > 0 or burst < 1:
            raise ValueError(f"a token bucket needs a positive rate and a burst >= 1, not {rate_per_second}, {burst}")
        self.rate_per_second, self.burst, self.clock = rate_per_second, burst, clock
        self._state: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def wait(self, key: str = "") -> float:
        """Spend a token of `key`'s bucket: 0.0 when there was one, else the seconds until there is."""
        with self._lock:
            now = self.clock()
            tokens, last = self._state.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + max(0.0, now - last) * self.rate_per_second)
            if tokens >= 1.0:
                self._state[key] = (tokens - 1.0, now)
                return 0.0
            self._state[key] = (tokens, now)
            return (1.0 - tokens) / self.rate_per_second

    def take(self, key: str = "") -> bool:
        """Spend a token if there is one; False (nothing spent) when the bucket is empty."""
        return self.wait(key) == 0.0
