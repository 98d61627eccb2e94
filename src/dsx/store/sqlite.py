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
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from dsx import retry
from dsx.errors import BadInputError, ConflictError, InternalError, UnavailableError
from dsx.store import sql

_log = logging.getLogger(__name__)

_TRANSIENT = ("locked", "busy", "unable to open", "disk i/o", "disk is full", "interrupted")
"""OperationalError messages that retrying may cure; the others (no such column, syntax) are defects."""


def classify(error: BaseException) -> sql.ErrorKind:
    """Which dsx error a sqlite3 error is (see `sql.translated_errors`)."""
    text = str(error).lower()
    if isinstance(error, sqlite3.IntegrityError):
        return ConflictError
    if isinstance(error, sqlite3.OperationalError) and any(part in text for part in _TRANSIENT):
        return UnavailableError
    if type(error) is sqlite3.DatabaseError and ("not a database" in text or "malformed" in text):
        return BadInputError
    return InternalError


_CHECKED: set[Path] = set()
"""Files whose integrity this process has checked: a sentinel opens one store several times."""

_INIT_HINT = "give --init to create the event store in it, or --store the right file"

_WRITERS: dict[Path, threading.RLock] = {}
_WRITERS_GUARD = threading.Lock()


def _writer_lock(path: Path) -> threading.RLock:
    """One lock per file for this process's write transactions.

    A sentinel opens one file on many connections (ingestion, analyzer, each stage). Left to
    SQLite, a writer that finds the file locked sleeps in its busy handler (1, 2, 5 … 100 ms
    steps) even when the lock is released a microsecond later; under fleet traffic those sleeps
    were most of a fault's time to cordon. Queued here, the next writer starts the moment the
    last one commits; other processes still queue on the file lock (`busy_timeout_seconds`).
    """
    with _WRITERS_GUARD:
        return _WRITERS.setdefault(path.resolve(), threading.RLock())


def _stays_empty(path: Path, *, wait_seconds: float = 1.0) -> bool:
    """A zero-byte file that stays so: another process creating the store writes its header within milliseconds."""
    deadline = time.monotonic() + wait_seconds
    while path.is_file() and path.stat().st_size == 0:
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.05)
    return False


class SqliteEventStore(sql.SqlEventStore):
    """EventStore in one SQLite file (created with its tables when missing).

    A file that exists but holds no dsx store — zero bytes, or a database without dsx's tables —
    is refused unless `init`: opening it would silently start history over. On first open in a
    process the file is checked (`PRAGMA quick_check`, one pass over the pages) so a damaged
    file is reported before anything is read or written.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout_seconds: float = 30.0,
        poll_interval_seconds: float = 0.05,
        init: bool = False,
    ) -> None:
        super().__init__(clock=clock)
        self.path = Path(path)
        self._poll_interval_seconds = poll_interval_seconds
        self._lock = threading.RLock()
        self._appended = threading.Condition(self._lock)
        if not self.path.parent.is_dir():
            raise BadInputError(f"sqlite:///{self.path}: directory {self.path.parent} does not exist")
        self._writer = _writer_lock(self.path)
        existed = self.path.exists()
        if existed and not init and _stays_empty(self.path):
            raise BadInputError(f"sqlite:///{self.path}: the file is empty (0 bytes), not an event store; {_INIT_HINT}")
        # this process's openers of one file take turns: switching a new file to WAL while another
        # connection reads it can fail at once with "database is locked" (SQLite skips the busy
        # handler where waiting could deadlock); other processes' openers retry below
        with self._writer, self._errors():
            self._connection = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_seconds
            )
            if existed:
                self._check_existing(init=init)
            for attempt in retry.attempts(timeout_seconds=busy_timeout_seconds):
                try:
                    self._connection.execute("PRAGMA journal_mode=WAL")
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) and "busy" not in str(exc):
                        raise
                    _log.debug("sqlite:///%s: WAL switch found the file locked (attempt %d)", self.path, attempt)
            else:
                self._connection.execute("PRAGMA journal_mode=WAL")  # the last try raises what it finds
            self._connection.execute("PRAGMA synchronous=NORMAL")
            self._connection.execute("PRAGMA foreign_keys=ON")
            self.create_schema("INTEGER PRIMARY KEY AUTOINCREMENT")

    def _check_existing(self, *, init: bool) -> None:
        """Refuse a foreign database (unless `init`) and a damaged one, naming the file."""
        # a database without any table holds no history: it is a store another process is creating
        tables = self._tables()
        if tables and "dsx_schema" not in tables and not init:
            self._connection.close()
            raise BadInputError(
                f"sqlite:///{self.path}: not a dsx event store (its tables: {', '.join(sorted(tables)[:5])});"
                f" {_INIT_HINT}"
            )
        resolved = self.path.resolve()
        if resolved in _CHECKED:
            return
        problems = [str(row[0]) for row in self._connection.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            self._connection.close()
            raise BadInputError(
                f"sqlite:///{self.path}: the file is damaged (integrity check: {'; '.join(problems)});"
                " recover it (sqlite3 FILE .recover) or restore a copy"
            )
        _CHECKED.add(resolved)

    def _tables(self) -> set[str]:
        return {str(row[0]) for row in self._connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _errors(self) -> contextlib.AbstractContextManager[None]:
        return sql.translated_errors(f"sqlite:///{self.path}", sqlite3.Error, classify)

    @contextlib.contextmanager
    def transaction(self, *, write: bool) -> Iterator[sql.Cursor]:
        with self._lock, self._writer if write else contextlib.nullcontext(), self._errors():
            cur = self._connection.cursor()
            cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def bookkeeping(self, cur: sql.Cursor) -> None:
        """Nothing to relax: in WAL mode with synchronous=NORMAL no commit waits for the disk."""

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
