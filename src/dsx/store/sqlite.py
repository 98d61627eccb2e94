"""SqliteEventStore: the embedded default, one file, no server.

WAL journal so readers (`dsx sentinel events`) never block the pipeline's writer, and
`synchronous=NORMAL`, which in WAL mode still survives a process crash (kill -9) and loses
at most the last commits on a power cut. Every write transaction is `BEGIN IMMEDIATE`, so
writers from several processes queue on the file lock (up to `busy_timeout_seconds`)
instead of failing half-way. SQLite has no LISTEN/NOTIFY: waiting consumers are woken at
once by appends from this process and otherwise re-check every `poll_interval_seconds`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from dsx.errors import BadInputError, ConflictError, InternalError, UnavailableError
from dsx.store import sql

_TRANSIENT = ("locked", "busy", "unable to open", "disk i/o", "disk is full", "interrupted")
"""OperationalError messages that retrying may cure; the others (no such column, syntax) are defects."""


def classify(error: BaseException) -> sql.ErrorKind:
    """Which dsx error a sqlite3 error is (see `sql.translated_errors`)."""
    text = str(error).lower()
    if isinstance(error, sqlite3.IntegrityError):
        return ConflictError
    if isinstance(error, sqlite3.OperationalError) and any(part in text for part in _TRANSIENT):
        return UnavailableError
    if type(error) is sqlite3.DatabaseError and "not a database" in text:
        return BadInputError
    return InternalError


class SqliteEventStore(sql.SqlEventStore):
    """EventStore in one SQLite file (created with its tables when missing)."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout_seconds: float = 30.0,
        poll_interval_seconds: float = 0.05,
    ) -> None:
        super().__init__(clock=clock)
        self.path = Path(path)
        self._poll_interval_seconds = poll_interval_seconds
        self._lock = threading.RLock()
        self._appended = threading.Condition(self._lock)
        if not self.path.parent.is_dir():
            raise BadInputError(f"sqlite:///{self.path}: directory {self.path.parent} does not exist")
        with self._errors():
            self._connection = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_seconds
            )
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("PRAGMA synchronous=NORMAL")
            self._connection.execute("PRAGMA foreign_keys=ON")
        self.create_schema("INTEGER PRIMARY KEY AUTOINCREMENT")

    def _errors(self) -> contextlib.AbstractContextManager[None]:
        return sql.translated_errors(f"sqlite:///{self.path}", sqlite3.Error, classify)

    @contextlib.contextmanager
    def transaction(self, *, write: bool) -> Iterator[sql.Cursor]:
        with self._lock, self._errors():
            cur = self._connection.cursor()
            cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def serialize(self, cur: sql.Cursor, name: str) -> None:
        """BEGIN IMMEDIATE already holds the database's single writer lock."""

    def notify(self, cur: sql.Cursor, sequence: int) -> None:
        # still inside the transaction and holding the lock: waiters wake after it is released
        self._appended.notify_all()

    def wait_hint(self, timeout_seconds: float) -> None:
        with self._appended:
            self._appended.wait(min(timeout_seconds, self._poll_interval_seconds))

    def close(self) -> None:
        with self._lock:
            self._connection.close()
