"""How the sentinel's background loops fail: loudly once, then quietly, and never for good.

Why one place: a loop that catches only `DsxError` dies on the first `KeyError`, and one that
logs every retry with its traceback buries the log. Every loop reports each round here:
`failed` counts the error (`dsx_sentinel_loop_errors_total{loop}`), logs it with its
traceback the first time (the same error again only at debug level), and marks the loop
failing (`dsx_sentinel_loop_failing{loop}`, `/readyz`) until a round succeeds (`ok`).
"""

from __future__ import annotations

import logging
import threading

from dsx import errors
from dsx.controllers.telemetry import SentinelTelemetry

log = logging.getLogger("dsx.sentinel")


class LoopHealth:
    """The last error of each loop that is failing now."""

    def __init__(self, telemetry: SentinelTelemetry) -> None:
        self._telemetry = telemetry
        self._failing: dict[str, str] = {}
        self._repeats: dict[str, int] = {}
        self._lock = threading.Lock()

    def failed(self, loop: str, error: BaseException) -> None:
        text = f"{type(error).__name__}: {error}"
        with self._lock:
            first = self._failing.get(loop) != text
            self._failing[loop] = text
            self._repeats[loop] = self._repeats.get(loop, 0) + 1
        self._telemetry.loop_errors.labels(loop).inc()
        self._telemetry.loop_failing.labels(loop).set(1)
        retryable = isinstance(error, errors.UnavailableError)
        log.log(
            logging.WARNING if first else logging.DEBUG,
            "%s: %s (%s)",
            loop,
            text,
            "will retry" if retryable else "a bug or bad data; will retry",
            exc_info=error if first else None,
            extra={"loop": loop, "error": text},
        )

    def ok(self, loop: str) -> None:
        with self._lock:
            if loop not in self._failing:
                return
            del self._failing[loop]
            repeats = self._repeats.pop(loop, 0)
        self._telemetry.loop_failing.labels(loop).set(0)
        log.info("%s: recovered after %d failed rounds", loop, repeats, extra={"loop": loop})

    def failing(self) -> dict[str, str]:
        """Loop → its last error, for loops whose last round failed."""
        with self._lock:
            return dict(sorted(self._failing.items()))
