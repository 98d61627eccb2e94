"""Folding Xid storms: one event per (node, family, GPU, code) and window, with the repeats counted."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dsx.health.parsing.xid.lines import KernelLogReader, XidRecord

FATAL_WINDOW_SECONDS = 10.0
"""How long repeats of a fatal record are folded into its event: short enough that a fault seen
again after its node was repaired and released is stored and acted on (issue 29), long enough
that a storm is a handful of events a minute per GPU and code."""


@dataclass(frozen=True)
class Admission:
    admitted: bool
    repeats_suppressed: int
    """Admitted: repeats dropped since the previous admission of this key. Suppressed: repeats so far."""


class BurstDeduplicator:
    """Admit the first record per (node, family, GPU, code) in each window; count the rest.

    Times are seconds on any clock the caller chooses (event time or monotonic), as long as it
    does not go backwards for one key. Keys whose window closed are forgotten once more than
    `max_keys` are held, so memory stays bounded on a node that logs every code.
    """

    def __init__(
        self,
        window_seconds: float = 300.0,
        *,
        fatal_window_seconds: float = FATAL_WINDOW_SECONDS,
        max_keys: int = 65536,
    ) -> None:
        if window_seconds <= 0 or fatal_window_seconds <= 0:
            raise ValueError("window_seconds and fatal_window_seconds must be positive")
        self.window_seconds = window_seconds
        self.fatal_window_seconds = min(fatal_window_seconds, window_seconds)
        self.max_keys = max_keys
        self._opened: dict[tuple[str, str, str, str], tuple[float, int]] = {}

    @staticmethod
    def key(node: str, record: XidRecord) -> tuple[str, str, str, str]:
        gpu = record.pci_bdf or record.pci_address or ""
        return (node, record.family.value, gpu, record.error_code)

    def admit(self, node: str, record: XidRecord, at_seconds: float) -> Admission:
        key = self.key(node, record)
        opened = self._opened.get(key)
        window = self.fatal_window_seconds if record.is_fatal else self.window_seconds
        if opened is not None and at_seconds - opened[0] < window:
            repeats = opened[1] + 1
            self._opened[key] = (opened[0], repeats)
            return Admission(False, repeats)
        if len(self._opened) >= self.max_keys:
            self._forget_closed(at_seconds)
        self._opened[key] = (at_seconds, 0)
        return Admission(True, opened[1] if opened else 0)

    def replay(self, node: str, admitted: Iterable[tuple[str, float]], reader: Callable[[], KernelLogReader]) -> int:
        """Reopen the windows of records admitted before a restart, from their (message, time) in order.

        Why: the windows live in memory, so a monitor killed mid-storm would admit the storm's
        next line again; the stored events are what it admitted, so replaying them restores the
        windows. Returns how many messages were records again."""
        count = 0
        for message, at_seconds in admitted:
            lines, record = reader(), None
            for part in message.split("\n"):
                record = lines.feed(part) or record
            if record is not None:
                self.admit(node, record, at_seconds)
                count += 1
        return count

    def _forget_closed(self, now: float) -> None:
        closed = [k for k, (start, _) in self._opened.items() if now - start >= self.window_seconds]
        for k in closed:
            del self._opened[k]
        if len(self._opened) >= self.max_keys:
            oldest = min(self._opened, key=lambda k: self._opened[k][0])
            del self._opened[oldest]
