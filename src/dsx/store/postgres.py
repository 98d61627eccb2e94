"""PostgresEventStore: the shared store for a sentinel running with several replicas or nodes.

psycopg 3, a pool of connections for statements shared by every store of the process that names
the same server (`pool_size`, opened as needed) and, lazily, one more connection per store that
LISTENs for wake-ups. Why a pool: with one connection every thread of a sentinel (ingestion, the
analyzer, each stage's workers) queued for it, and at fleet traffic the quarantine workers' reads
waited behind each other until nothing was cordoned at all. Threads of one process now meet in
the database, as two replicas always have: advisory locks, row locks and conflict retries keep
them apart.

Appends send `NOTIFY dsx_events, '<last sequence>'` inside their transaction, so it is delivered
on commit; a notification is only a hint (it is lost when no one listens and is never replayed),
so consumers always re-read by cursor.

Writers that must not interleave take `pg_advisory_xact_lock` on a key derived from the
lock name; the lock ends with the transaction, so a crashed client never leaves one behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import psycopg

from dsx.errors import ConflictError, InternalError, UnavailableError
from dsx.store import sql

CHANNEL = "dsx_events"
DEFAULT_POOL_SIZE = 16
"""Connections per process and server, shared by all its stores and opened as needed: enough for
a stage's workers to overlap their round trips (at 5,000 nodes a pool of 4 left the quarantine
workers waiting for a connection half the time); two replicas stay far under PostgreSQL's
default max_connections of 100."""
POOL_WAIT_SECONDS = 30.0
"""How long a call waits for a connection before it fails as unavailable (retried like an outage)."""


class _QmarkCursor:
    """A psycopg cursor that accepts the `?` placeholders of dsx.store.sql."""

    _converted: ClassVar[dict[str, str]] = {}

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    @classmethod
    def _sql(cls, statement: str) -> str:
        converted = cls._converted.get(statement)
        if converted is None:
            converted = statement.replace("%", "%%").replace("?", "%s")
            cls._converted[statement] = converted
        return converted

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        return self._cursor.execute(self._sql(statement), params or None)  # type: ignore[call-overload]

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> Any:
        return self._cursor.executemany(self._sql(statement), rows)  # type: ignore[arg-type]

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount


def classify(error: BaseException) -> sql.ErrorKind:
    """Which dsx error a psycopg error is (see `sql.translated_errors`).

    Conflicts (unique violation, serialization failure, deadlock) re-read and retry; connection,
    shutdown, lock and resource errors (SQLSTATE classes 08, 53, 55, 57: psycopg's
    OperationalError) and a read-only server after a fail-over are unavailable; the rest —
    undefined column or table, syntax, data errors — are defects.
    """
    conflicts = (psycopg.errors.UniqueViolation, psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)
    if isinstance(error, conflicts):
        return ConflictError
    if isinstance(error, psycopg.OperationalError | psycopg.errors.ReadOnlySqlTransaction):
        return UnavailableError
    return InternalError


class _Pool:
    """Connections to one server shared by every store of a process that names it (a sentinel
    opens one store per stage): at most `size` exist, opened as needed, each in autocommit, so a
    write opens its transaction explicitly and a read is one round trip per statement."""

    def __init__(self, url: str, size: int, connect_timeout_seconds: float, display_url: str) -> None:
        self.url, self.size, self.display_url = url, size, display_url
        self._connect_timeout_seconds = connect_timeout_seconds
        self._changed = threading.Condition()
        self._idle: list[psycopg.Connection[Any]] = []
        self._opened = 0
        """Connections that exist now, idle or in use."""
        self.users = 0
        """Stores holding this pool; the last to close it closes the idle connections."""
        self.held = threading.local()
        """The connection this thread is inside a transaction on (a nested transaction reuses it)."""

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection[Any]:
        return psycopg.connect(
            self.url, autocommit=autocommit, connect_timeout=max(1, int(self._connect_timeout_seconds))
        )

    def checkout(self, errors: Callable[[], contextlib.AbstractContextManager[None]]) -> psycopg.Connection[Any]:
        """An idle connection, a new one while fewer than `size` exist, or the next one returned."""
        deadline = time.monotonic() + POOL_WAIT_SECONDS
        with self._changed:
            while not self._idle and self._opened >= self.size:
                if not self._changed.wait(deadline - time.monotonic()):
                    raise UnavailableError(
                        f"{self.display_url}: all {self.size} connections busy for {POOL_WAIT_SECONDS:.0f} s"
                    )
            if self._idle:
                return self._idle.pop()
            self._opened += 1
        try:
            with errors():
                return self.connect()
        except BaseException:
            with self._changed:
                self._opened -= 1
                self._changed.notify()
            raise

    def checkin(self, connection: psycopg.Connection[Any]) -> None:
        """Return a connection; a broken one is closed, and so are the idle ones.

        The server restarted or dropped us: the call that found out was reported, and the idle
        connections are as dead, so the next call reconnects instead of failing again.
        """
        dead = connection.broken or connection.closed
        with self._changed:
            stale = [connection, *self._idle] if dead else []
            if dead:
                self._idle = []
                self._opened -= len(stale)
            else:
                self._idle.append(connection)
            self._changed.notify()
        for each in stale:
            each.close()

    def close_idle(self) -> None:
        with self._changed:
            idle, self._idle = self._idle, []
            self._opened -= len(idle)
        for connection in idle:
            connection.close()


_POOLS: dict[tuple[str, int, float], _Pool] = {}
_POOLS_LOCK = threading.Lock()


class PostgresEventStore(sql.SqlEventStore):
    """EventStore in a PostgreSQL database (tables created when missing)."""

    for_update = " FOR UPDATE"

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float] = time.time,
        connect_timeout_seconds: float = 10.0,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        super().__init__(clock=clock)
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        self.url = url
        self.pool_size = pool_size
        self._closed = False
        self._listener: psycopg.Connection[Any] | None = None
        key = (url, pool_size, connect_timeout_seconds)
        with _POOLS_LOCK:
            pool = _POOLS.get(key)
            if pool is None:
                pool = _POOLS[key] = _Pool(url, pool_size, connect_timeout_seconds, self._display_url)
            pool.users += 1
        self._pool, self._pool_key = pool, key
        try:
            self.create_schema("BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY")
        except BaseException:
            self.close()
            raise

    @property
    def _display_url(self) -> str:
        info = psycopg.conninfo.conninfo_to_dict(self.url)
        return f"postgresql://{info.get('host', '')}:{info.get('port', '')}/{info.get('dbname', '')}"

    def _errors(self) -> contextlib.AbstractContextManager[None]:
        return sql.translated_errors(self._display_url, psycopg.Error, classify)

    @contextlib.contextmanager
    def transaction(self, *, write: bool) -> Iterator[sql.Cursor]:
        if self._closed:
            raise UnavailableError(f"{self._display_url}: the store is closed")
        pool = self._pool
        held: psycopg.Connection[Any] | None = getattr(pool.held, "connection", None)
        if held is not None:  # nested: a savepoint (or a transaction) on this thread's connection
            with self._errors(), held.transaction(), held.cursor() as cursor:
                yield _QmarkCursor(cursor)
            return
        connection = pool.checkout(self._errors)
        pool.held.connection = connection
        try:
            # a read is one round trip per statement: no BEGIN and COMMIT around it. Under READ
            # COMMITTED every statement takes its own snapshot anyway, and no read locks anything
            block = connection.transaction() if write else contextlib.nullcontext()
            with self._errors(), block, connection.cursor() as cursor:
                yield _QmarkCursor(cursor)
        finally:
            pool.held.connection = None
            pool.checkin(connection)

    def bookkeeping(self, cur: sql.Cursor) -> None:
        # fsync per claim and ack was most of a stage's time under fleet traffic; appends, node
        # transitions, begin and remediation records keep the server's synchronous_commit
        cur.execute("SET LOCAL synchronous_commit TO off")

    def serialize(self, cur: sql.Cursor, name: str) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(?)", (_lock_key(name),))

    def notify(self, cur: sql.Cursor, sequence: int) -> None:
        cur.execute("SELECT pg_notify(?, ?)", (CHANNEL, str(sequence)))

    def wait_hint(self, timeout_seconds: float) -> None:
        if self._listener is None:
            with self._errors():
                self._listener = self._pool.connect()
                self._listener.execute(f"LISTEN {CHANNEL}")
            return  # re-check: an append may have committed before LISTEN took effect
        try:
            for _ in self._listener.notifies(timeout=timeout_seconds, stop_after=1):
                pass
        except psycopg.Error:
            # a lost listener is only a lost hint: drop it, let the caller re-check, listen anew next time
            self._listener.close()
            self._listener = None

    def close(self) -> None:
        """This store refuses new work; the pool's idle connections close with its last store."""
        if self._closed:
            return
        self._closed = True
        with _POOLS_LOCK:
            self._pool.users -= 1
            last = self._pool.users == 0
            if last:
                _POOLS.pop(self._pool_key, None)
        if last:
            self._pool.close_idle()
        if self._listener is not None:
            self._listener.close()


def _lock_key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for a lock name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
