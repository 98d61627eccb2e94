"""The EventStore contract written once in SQL that SQLite and PostgreSQL both speak.

Why one module: the semantics (gap-free sequences, leases, cursor advance, node transitions)
must not drift between the two back ends, so the statements live here and the dialect
modules supply only what differs: the connection and its transactions, how a writer
serialises with other writers, and the wake-up channel.

Statements use `?` placeholders; the PostgreSQL adapter rewrites them. Every write runs in
one transaction. Writers that must not interleave (appends, one consumer's claims and acks,
one node's transitions, validation starts) take a named lock first: SQLite's
`BEGIN IMMEDIATE` already serialises all writers, PostgreSQL takes an advisory
transaction lock. Appends computing `MAX(sequence) + 1` under that lock is what makes
sequences gap-free and visible in order, so a cursor can never step over an event that
commits later.

Times are stored as epoch seconds (double precision) and handed out as UTC datetimes.
"""

from __future__ import annotations

import abc
import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from dsx.errors import BadInputError, ConflictError, DsxError, InternalError, NotFoundError
from dsx.health.decisions import eventstore
from dsx.health.decisions.eventstore import (
    Appended,
    NodeStatus,
    NodeTransition,
    StageOutcome,
    StageRecord,
    StageStatus,
    StoredEvent,
    ValidationRequest,
    ValidationStatus,
)
from dsx.model.health import HealthEvent, NodeState

SCHEMA_VERSION = 1
"""Version of the table layout below; a store written by a newer dsx is refused."""

T = TypeVar("T")

_log = logging.getLogger(__name__)

_DAMAGE = (ValueError, TypeError, KeyError, OverflowError, DsxError)
"""What converting a stored row raises when the row was altered by hand or by a bad disk."""

_IN_CHUNK = 500
"""Keys per `IN (...)` list: well under SQLite's variable limit."""

# `{id}` is the dialect's auto-increment primary key column type.
SCHEMA = """
CREATE TABLE IF NOT EXISTS dsx_schema (
    name TEXT PRIMARY KEY,
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    sequence BIGINT PRIMARY KEY,
    idempotency_key TEXT NOT NULL UNIQUE,
    node_name TEXT NOT NULL,
    generated_at DOUBLE PRECISION NOT NULL,
    stored_at DOUBLE PRECISION NOT NULL,
    document TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_node ON events (node_name, sequence);
CREATE INDEX IF NOT EXISTS events_by_generated_at ON events (generated_at);
CREATE TABLE IF NOT EXISTS consumer_cursors (
    consumer TEXT PRIMARY KEY,
    position BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS deliveries (
    consumer TEXT NOT NULL,
    sequence BIGINT NOT NULL,
    owner TEXT NOT NULL,
    lease_until DOUBLE PRECISION NOT NULL,
    acked INTEGER NOT NULL,
    PRIMARY KEY (consumer, sequence)
);
CREATE TABLE IF NOT EXISTS stage_records (
    stage TEXT NOT NULL,
    sequence BIGINT NOT NULL,
    status TEXT NOT NULL,
    detail TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (sequence, stage)
);
CREATE INDEX IF NOT EXISTS stage_records_dead_letters ON stage_records (sequence) WHERE status = 'dead_letter';
CREATE TABLE IF NOT EXISTS node_states (
    node_name TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    reason TEXT NOT NULL,
    since DOUBLE PRECISION NOT NULL,
    event_sequence BIGINT
);
CREATE TABLE IF NOT EXISTS node_transitions (
    transition_id {id},
    node_name TEXT NOT NULL,
    from_state TEXT NOT NULL,
    to_state TEXT NOT NULL,
    reason TEXT NOT NULL,
    event_sequence BIGINT,
    at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS node_transitions_by_node ON node_transitions (node_name, transition_id);
CREATE TABLE IF NOT EXISTS remediations (
    node_name TEXT NOT NULL,
    action TEXT NOT NULL,
    event_sequence BIGINT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (node_name, action, event_sequence)
);
CREATE TABLE IF NOT EXISTS validation_requests (
    request_id {id},
    node_name TEXT NOT NULL,
    reason TEXT NOT NULL,
    status TEXT NOT NULL,
    requested_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS validation_requests_by_status ON validation_requests (status, request_id);
CREATE TABLE IF NOT EXISTS breakers (
    name TEXT PRIMARY KEY,
    document TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
)
"""

LAYOUT: dict[str, str] = {
    match[1]: ", ".join(
        line.split()[0] for line in match[2].split(",\n") if line.split() and line.split()[0] != "PRIMARY"
    )
    for match in re.finditer(r"CREATE TABLE IF NOT EXISTS (\w+) \((.*?)\n\)", SCHEMA, re.S)
}
"""Table → its columns, read from SCHEMA: what a store must have to be dsx's."""

_EVENT_COLUMNS = "sequence, stored_at, document"
_NODE_COLUMNS = "node_name, state, reason, since, event_sequence"
_VALIDATION_COLUMNS = "request_id, node_name, reason, status, requested_at, updated_at, detail"


class Cursor(Protocol):
    """The DB-API subset the statements need, with `?` placeholders."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    @property
    def rowcount(self) -> int: ...


class SqlEventStore(abc.ABC):
    """EventStore over a SQL connection; subclasses provide the dialect hooks."""

    for_update = ""
    """Suffix that locks selected rows until commit (PostgreSQL); SQLite's write lock covers it."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.damaged: dict[str, str] = {}
        """Rows skipped on read because they could not be read back ("events 42" → why), for the caller to report."""

    # dialect hooks
    @abc.abstractmethod
    def transaction(self, *, write: bool) -> contextlib.AbstractContextManager[Cursor]:
        """One transaction; foreign errors leave as dsx errors."""

    @abc.abstractmethod
    def serialize(self, cur: Cursor, name: str) -> None:
        """Hold the writer lock called `name` until the transaction ends."""

    @abc.abstractmethod
    def notify(self, cur: Cursor, sequence: int) -> None:
        """Announce, on commit, that events up to `sequence` exist."""

    @abc.abstractmethod
    def wait_hint(self, timeout_seconds: float) -> None:
        """Sleep until a notification may have arrived, at most `timeout_seconds`."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def bookkeeping(self, cur: Cursor) -> None:
        """This write is a consumer's bookkeeping (claim, acknowledgement, cursor follow): its commit
        need not wait for the disk. Losing the last of these to a database crash only offers those
        events again, and every handler gives the same result twice (begin records, node state,
        remediation records and appends stay durable)."""

    def create_schema(self, id_column: str) -> None:
        if self._schema_current():
            return
        try:
            self._create_schema(id_column)
        except InternalError:
            self.check_layout(missing_ok=True)  # a same-named table of another program is bad input, named
            raise
        self.check_layout()

    def _create_schema(self, id_column: str) -> None:
        with self.transaction(write=True) as cur:
            self.serialize(cur, "schema")
            for statement in SCHEMA.format(id=id_column).split(";"):
                cur.execute(statement)
            cur.execute("SELECT version FROM dsx_schema WHERE name = ?", ("events",))
            row = cur.fetchone()
            if row is None:
                cur.execute("INSERT INTO dsx_schema (name, version) VALUES (?, ?)", ("events", SCHEMA_VERSION))
            elif int(row[0]) > SCHEMA_VERSION:  # not retryable: refuse, naming both versions
                raise BadInputError(
                    f"event store: schema version {row[0]} was written by a newer dsx; this dsx reads schema"
                    f" version {SCHEMA_VERSION}: upgrade dsx, or give --store another store"
                )

    def _schema_current(self) -> bool:
        """The store is at this dsx's version with every table and column: opening it again runs no DDL.

        A sentinel opens a store per part while the parts opened first already write. PostgreSQL's
        `CREATE INDEX IF NOT EXISTS` locks its table (SHARE) before it finds the index there, so a
        second opening's schema transaction and a stage's write each held a lock the other waited
        for: a deadlock that ended the restarted sentinel (test_crash_safety).
        """
        try:
            with self.transaction(write=False) as cur:
                cur.execute("SELECT version FROM dsx_schema WHERE name = ?", ("events",))
                row = cur.fetchone()
                if row is None or int(row[0]) != SCHEMA_VERSION:
                    return False
                for table, columns in LAYOUT.items():
                    cur.execute(f"SELECT {columns} FROM {table} LIMIT 0")  # noqa: S608 - names from SCHEMA
        except InternalError:  # a table or column is missing: create (or refuse) below
            return False
        return True

    def check_layout(self, *, missing_ok: bool = False) -> None:
        """Every dsx table with every column: a same-named table of another program is refused, not misread."""
        for table, columns in LAYOUT.items():
            try:
                with self.transaction(write=False) as cur:
                    cur.execute(f"SELECT {columns} FROM {table} LIMIT 0")  # noqa: S608 - names from SCHEMA
            except InternalError as exc:
                cause = _first_line(exc.__cause__ or exc)
                if missing_ok and ("no such table" in cause or ("does not exist" in cause and "relation" in cause)):
                    continue
                raise BadInputError(
                    f"event store: table {table} is not dsx's ({cause}); give --store another store"
                ) from exc

    def _skip_damaged(self, table: str, key: object, error: BaseException) -> None:
        """Note a row that cannot be read back (once per row), so reads go on and the caller reports it."""
        name = f"{table} {key}"
        if name not in self.damaged:
            self.damaged[name] = _first_line(error)
            _log.warning("event store: %s is damaged and was skipped: %s", name, self.damaged[name])

    def _rows(self, table: str, rows: Sequence[Sequence[Any]], convert: Callable[[Sequence[Any]], T]) -> list[T]:
        """Convert rows, skipping (and noting, by their first column) the damaged ones."""
        found: list[T] = []
        for row in rows:
            try:
                found.append(convert(row))
            except _DAMAGE as exc:
                self._skip_damaged(table, row[0], exc)
        return found

    def _row(self, table: str, row: Sequence[Any], convert: Callable[[Sequence[Any]], T]) -> T:
        """One row the caller asked for by key: a damaged one is bad input naming it."""
        try:
            return convert(row)
        except _DAMAGE as exc:
            raise BadInputError(
                f"event store: {table} {row[0]} is damaged: {_first_line(exc)}; remove or repair that row"
            ) from exc

    # events
    def append(self, events: Sequence[HealthEvent]) -> list[Appended]:
        if not events:
            return []
        stored_at = self._clock()
        keys = [event.idempotency_key for event in events]
        with self.transaction(write=True) as cur:
            self.serialize(cur, "append")
            known = self._existing_keys(cur, sorted(set(keys)))
            cur.execute("SELECT COALESCE(MAX(sequence), 0) FROM events")
            last = int(cur.fetchone()[0])
            rows: list[tuple[Any, ...]] = []
            out: list[Appended] = []
            written: list[tuple[tuple[int, float, str], StoredEvent]] = []
            for key, event in zip(keys, events, strict=True):
                existing = known.get(key)
                if existing is not None:
                    out.append(Appended(existing, key, created=False))
                    continue
                last += 1
                known[key] = last
                document = _document(event)
                rows.append((last, key, event.node_name, event.generated_at.timestamp(), stored_at, document))
                out.append(Appended(last, key, created=True))
                written.append(((last, stored_at, document), StoredEvent(last, _at(stored_at), event)))
            if rows:
                cur.executemany(
                    "INSERT INTO events (sequence, idempotency_key, node_name, generated_at, stored_at, document)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    rows,
                )
                self.notify(cur, last)
        for row_key, stored in written:  # committed: the consumers will read these rows back
            _DECODED.put(row_key, stored)
        return out

    def _existing_keys(self, cur: Cursor, keys: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for start in range(0, len(keys), _IN_CHUNK):
            chunk = keys[start : start + _IN_CHUNK]
            marks = ", ".join("?" * len(chunk))
            cur.execute(f"SELECT idempotency_key, sequence FROM events WHERE idempotency_key IN ({marks})", chunk)  # noqa: S608 - placeholders only
            found.update({str(k): int(s) for k, s in cur.fetchall()})
        return found

    def get(self, sequence: int) -> StoredEvent | None:
        return self._one_event("sequence = ?", (sequence,))

    def find(self, idempotency_key: str) -> StoredEvent | None:
        return self._one_event("idempotency_key = ?", (idempotency_key,))

    def _one_event(self, where: str, params: tuple[Any, ...]) -> StoredEvent | None:
        with self.transaction(write=False) as cur:
            cur.execute(f"SELECT {_EVENT_COLUMNS} FROM events WHERE {where}", params)  # noqa: S608 - fixed clauses
            row = cur.fetchone()
        return None if row is None else self._row("events", row, _stored_event)

    def events(
        self,
        *,
        after_sequence: int = 0,
        limit: int = 1000,
        node_name: str | None = None,
        since: datetime | None = None,
    ) -> list[StoredEvent]:
        clauses: list[str] = ["sequence > ?"]
        params: list[Any] = [after_sequence]
        if node_name is not None:
            clauses.append("node_name = ?")
            params.append(node_name)
        if since is not None:
            clauses.append("generated_at >= ?")
            params.append(since.timestamp())
        where = " AND ".join(clauses)
        with self.transaction(write=False) as cur:
            cur.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE {where} ORDER BY sequence LIMIT ?",  # noqa: S608 - fixed clauses
                [*params, limit],
            )
            rows = cur.fetchall()
        return self._rows("events", rows, _stored_event)

    def last_sequence(self) -> int:
        with self.transaction(write=False) as cur:
            cur.execute("SELECT COALESCE(MAX(sequence), 0) FROM events")
            return int(cur.fetchone()[0])

    def wait_for_events(self, after_sequence: int, timeout_seconds: float) -> bool:
        deadline = time.monotonic() + timeout_seconds
        while True:
            if self.last_sequence() > after_sequence:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.wait_hint(remaining)

    # consumers
    def _lock_consumer(self, cur: Cursor, consumer: str) -> int:
        self.serialize(cur, f"consumer:{consumer}")
        cur.execute(
            "INSERT INTO consumer_cursors (consumer, position) VALUES (?, 0) ON CONFLICT (consumer) DO NOTHING",
            (consumer,),
        )
        cur.execute(f"SELECT position FROM consumer_cursors WHERE consumer = ?{self.for_update}", (consumer,))  # noqa: S608
        return int(cur.fetchone()[0])

    def claim(self, consumer: str, owner: str, *, limit: int = 100, lease_seconds: float = 30.0) -> list[StoredEvent]:
        now = self._clock()
        with self.transaction(write=True) as cur:
            self.bookkeeping(cur)
            position = self._lock_consumer(cur, consumer)
            cur.execute(  # events re-opened behind the cursor (dead letters retried) come first
                "SELECT e.sequence, e.stored_at, e.document FROM deliveries d JOIN events e ON e.sequence = d.sequence"
                " WHERE d.consumer = ? AND d.sequence <= ? AND d.acked = 0 AND (d.owner = ? OR d.lease_until <= ?)"
                " ORDER BY d.sequence LIMIT ?",
                (consumer, position, owner, now, limit),
            )
            rows = cur.fetchall()
            cur.execute(
                "SELECT e.sequence, e.stored_at, e.document FROM events e"
                " LEFT JOIN deliveries d ON d.consumer = ? AND d.sequence = e.sequence"
                " WHERE e.sequence > ?"
                " AND (d.sequence IS NULL OR (d.acked = 0 AND (d.owner = ? OR d.lease_until <= ?)))"
                " ORDER BY e.sequence LIMIT ?",
                (consumer, position, owner, now, limit - len(rows)),
            )
            rows += cur.fetchall()
            return self._lease(cur, consumer, owner, position, rows, now + lease_seconds)

    def claim_these(
        self, consumer: str, owner: str, sequences: Sequence[int], *, lease_seconds: float = 30.0
    ) -> list[StoredEvent]:
        wanted = sorted({int(s) for s in sequences})
        if not wanted:
            return []
        now = self._clock()
        with self.transaction(write=True) as cur:
            self.bookkeeping(cur)
            position = self._lock_consumer(cur, consumer)
            wanted = [s for s in wanted if s > position]
            rows: list[Any] = []
            for start in range(0, len(wanted), _IN_CHUNK):
                chunk = wanted[start : start + _IN_CHUNK]
                marks = ", ".join("?" for _ in chunk)
                cur.execute(
                    "SELECT e.sequence, e.stored_at, e.document FROM events e"  # noqa: S608 - placeholders only
                    " LEFT JOIN deliveries d ON d.consumer = ? AND d.sequence = e.sequence"
                    f" WHERE e.sequence IN ({marks})"
                    " AND (d.sequence IS NULL OR (d.acked = 0 AND (d.owner = ? OR d.lease_until <= ?)))"
                    " ORDER BY e.sequence",
                    (consumer, *chunk, owner, now),
                )
                rows += cur.fetchall()
            return self._lease(cur, consumer, owner, position, rows, now + lease_seconds)

    def _lease(
        self, cur: Cursor, consumer: str, owner: str, position: int, rows: list[Any], until: float
    ) -> list[StoredEvent]:
        """Lease the claimed rows to `owner` until `until`; a row that does not parse is parked."""
        if rows:
            cur.executemany(
                "INSERT INTO deliveries (consumer, sequence, owner, lease_until, acked) VALUES (?, ?, ?, ?, 0)"
                " ON CONFLICT (consumer, sequence)"
                " DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until",
                [(consumer, int(row[0]), owner, until) for row in rows],
            )
        claimed = self._rows("events", rows, _stored_event)
        if len(claimed) < len(rows):
            self._park_damaged(cur, consumer, position, {int(r[0]) for r in rows} - {e.sequence for e in claimed})
        return claimed

    def _park_damaged(self, cur: Cursor, consumer: str, position: int, sequences: set[int]) -> None:
        """A damaged event becomes a dead letter of this consumer (acknowledged), so the pipeline goes on
        and `dsx sentinel status` lists it with its sequence."""
        outcomes = [
            StageOutcome(s, StageStatus.DEAD_LETTER, {"error": f"damaged row: {self.damaged.get(f'events {s}', '')}"})
            for s in sorted(sequences)
        ]
        self._put_stage_records(cur, consumer, outcomes, self._clock())
        cur.executemany(
            "UPDATE deliveries SET acked = 1 WHERE consumer = ? AND sequence = ?", [(consumer, s) for s in sequences]
        )
        self._advance(cur, consumer, position)

    def begin(self, consumer: str, sequence: int, detail: Mapping[str, Any]) -> StageRecord | None:
        now = self._clock()
        with self.transaction(write=True) as cur:
            self._require_event(cur, sequence)
            previous = self._stage_record(cur, consumer, sequence)
            self._put_stage_records(cur, consumer, [StageOutcome(sequence, StageStatus.IN_PROGRESS, detail)], now)
        return previous

    def ack(self, consumer: str, owner: str, outcomes: Sequence[StageOutcome]) -> int:
        if not outcomes:
            return 0
        now = self._clock()
        with self.transaction(write=True) as cur:
            self.bookkeeping(cur)
            position = self._lock_consumer(cur, consumer)
            wanted = sorted({o.sequence for o in outcomes})
            for sequence in (wanted[0], wanted[-1]):
                self._require_event(cur, sequence)
            done = self._acked(cur, consumer, wanted)
            reopened = self._reopened(cur, consumer, [s for s in wanted if s <= position])
            fresh: dict[int, StageOutcome] = {}
            for outcome in outcomes:
                if (outcome.sequence > position and outcome.sequence not in done) or outcome.sequence in reopened:
                    fresh.setdefault(outcome.sequence, outcome)
            if fresh:
                self._put_stage_records(cur, consumer, list(fresh.values()), now)
                run_end = position  # the run right after the cursor moves it directly: no delivery row to mark
                while run_end + 1 in fresh:
                    run_end += 1
                cur.executemany(
                    "INSERT INTO deliveries (consumer, sequence, owner, lease_until, acked) VALUES (?, ?, ?, ?, 1)"
                    " ON CONFLICT (consumer, sequence) DO UPDATE SET acked = 1",
                    [(consumer, sequence, owner, now) for sequence in fresh if not position < sequence <= run_end],
                )
                self._advance(cur, consumer, position, run_end)
        return len(fresh)

    def follow(self, consumer: str, upstream: str | None) -> int:
        target = self.last_sequence() if upstream is None else self.cursor(upstream)
        if target <= self.cursor(consumer):
            return 0  # nothing to move: no write transaction
        with self.transaction(write=True) as cur:
            self.bookkeeping(cur)
            position = self._lock_consumer(cur, consumer)
            if target <= position:
                return 0
            cur.execute("UPDATE consumer_cursors SET position = ? WHERE consumer = ?", (target, consumer))
            cur.execute("DELETE FROM deliveries WHERE consumer = ? AND sequence <= ?", (consumer, target))
        return target - position

    def _acked(self, cur: Cursor, consumer: str, sequences: Sequence[int], *, acked: int = 1) -> set[int]:
        found: set[int] = set()
        for start in range(0, len(sequences), _IN_CHUNK):
            chunk = list(sequences[start : start + _IN_CHUNK])
            marks = ", ".join("?" * len(chunk))
            cur.execute(
                f"SELECT sequence FROM deliveries WHERE consumer = ? AND acked = ? AND sequence IN ({marks})",  # noqa: S608 - placeholders only
                [consumer, acked, *chunk],
            )
            found.update(int(row[0]) for row in cur.fetchall())
        return found

    def _reopened(self, cur: Cursor, consumer: str, behind: Sequence[int]) -> set[int]:
        """Events behind the cursor with an open delivery: re-opened, so they may be acknowledged again."""
        return self._acked(cur, consumer, behind, acked=0) if behind else set()

    def _advance(self, cur: Cursor, consumer: str, position: int, acked_through: int | None = None) -> None:
        """Move the cursor over the acknowledged run right after it; sequences have no gaps.

        `acked_through`: the caller just acknowledged every event from the cursor to here (their
        delivery rows, still open, go now)."""
        new_position = position if acked_through is None else acked_through
        if new_position > position:
            cur.execute(
                "DELETE FROM deliveries WHERE consumer = ? AND sequence > ? AND sequence <= ?",
                (consumer, position, new_position),
            )
        cur.execute(
            "SELECT sequence FROM deliveries WHERE consumer = ? AND acked = 1 AND sequence > ? ORDER BY sequence",
            (consumer, new_position),
        )
        for (sequence,) in cur.fetchall():
            if int(sequence) != new_position + 1:
                break
            new_position += 1
        if new_position != position:
            cur.execute("UPDATE consumer_cursors SET position = ? WHERE consumer = ?", (new_position, consumer))
        # acknowledged rows up to the cursor are no longer needed (open ones there are re-opened events)
        cur.execute(
            "DELETE FROM deliveries WHERE consumer = ? AND acked = 1 AND sequence <= ?", (consumer, new_position)
        )

    def _require_event(self, cur: Cursor, sequence: int) -> None:
        cur.execute("SELECT 1 FROM events WHERE sequence = ?", (sequence,))
        if cur.fetchone() is None:
            raise NotFoundError(f"event {sequence}: no such event in the store")

    def _put_stage_records(self, cur: Cursor, stage: str, outcomes: Sequence[StageOutcome], now: float) -> None:
        cur.executemany(
            "INSERT INTO stage_records (stage, sequence, status, detail, updated_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (sequence, stage)"
            " DO UPDATE SET status = excluded.status, detail = excluded.detail, updated_at = excluded.updated_at",
            [(stage, o.sequence, o.status.value, _json(o.detail), now) for o in outcomes],
        )

    def _stage_record(self, cur: Cursor, stage: str, sequence: int) -> StageRecord | None:
        cur.execute(
            "SELECT stage, sequence, status, detail, updated_at FROM stage_records WHERE stage = ? AND sequence = ?",
            (stage, sequence),
        )
        row = cur.fetchone()
        return None if row is None else self._row("stage_records", row, _stage)

    def stage_record(self, consumer: str, sequence: int) -> StageRecord | None:
        with self.transaction(write=False) as cur:
            return self._stage_record(cur, consumer, sequence)

    def dead_letters(self) -> list[StageRecord]:
        with self.transaction(write=False) as cur:
            cur.execute(
                "SELECT stage, sequence, status, detail, updated_at FROM stage_records"
                " WHERE status = 'dead_letter' ORDER BY sequence, stage"
            )
            return self._rows("stage_records", cur.fetchall(), _stage)

    def reopen(self, consumer: str, sequence: int) -> None:
        with self.transaction(write=True) as cur:
            self._lock_consumer(cur, consumer)
            self._require_event(cur, sequence)
            cur.execute("DELETE FROM stage_records WHERE stage = ? AND sequence = ?", (consumer, sequence))
            cur.execute(
                "INSERT INTO deliveries (consumer, sequence, owner, lease_until, acked) VALUES (?, ?, '', 0, 0)"
                " ON CONFLICT (consumer, sequence) DO UPDATE SET owner = '', lease_until = 0, acked = 0",
                (consumer, sequence),
            )

    def stage_records(self, sequence: int) -> list[StageRecord]:
        with self.transaction(write=False) as cur:
            cur.execute(
                "SELECT stage, sequence, status, detail, updated_at FROM stage_records"
                " WHERE sequence = ? ORDER BY stage",
                (sequence,),
            )
            return self._rows("stage_records", cur.fetchall(), _stage)

    def cursor(self, consumer: str) -> int:
        with self.transaction(write=False) as cur:
            cur.execute("SELECT position FROM consumer_cursors WHERE consumer = ?", (consumer,))
            row = cur.fetchone()
        return 0 if row is None else int(row[0])

    def cursors(self) -> dict[str, int]:
        with self.transaction(write=False) as cur:
            cur.execute("SELECT consumer, position FROM consumer_cursors ORDER BY consumer")
            return {str(c): int(p) for c, p in cur.fetchall()}

    # node state projection
    def _node_state(self, cur: Cursor, node_name: str) -> NodeStatus:
        cur.execute(
            "SELECT node_name, state, reason, since, event_sequence FROM node_states WHERE node_name = ?",
            (node_name,),
        )
        row = cur.fetchone()
        if row is None:
            return NodeStatus(node_name, NodeState.HEALTHY, "", _at(0.0), None)
        return self._row("node_states", row, _node)

    def node_state(self, node_name: str) -> NodeStatus:
        with self.transaction(write=False) as cur:
            return self._node_state(cur, node_name)

    def node_states(self) -> list[NodeStatus]:
        with self.transaction(write=False) as cur:
            cur.execute("SELECT node_name, state, reason, since, event_sequence FROM node_states ORDER BY node_name")
            return self._rows("node_states", cur.fetchall(), _node)

    def node_states_of(self, node_names: Collection[str]) -> dict[str, NodeStatus]:
        names = sorted(set(node_names))
        found: dict[str, NodeStatus] = {}
        with self.transaction(write=False) as cur:
            for start in range(0, len(names), _IN_CHUNK):
                chunk = names[start : start + _IN_CHUNK]
                marks = ", ".join("?" * len(chunk))
                cur.execute(f"SELECT {_NODE_COLUMNS} FROM node_states WHERE node_name IN ({marks})", chunk)  # noqa: S608 - placeholders only
                found.update((s.node_name, s) for s in self._rows("node_states", cur.fetchall(), _node))
        return {name: found.get(name) or NodeStatus(name, NodeState.HEALTHY, "", _at(0.0), None) for name in node_names}

    def transition(
        self,
        node_name: str,
        target: NodeState,
        *,
        reason: str,
        event_sequence: int | None = None,
        expected: NodeState | None = None,
        intent: tuple[str, Mapping[str, Any]] | None = None,
    ) -> NodeStatus:
        now = self._clock()
        with self.transaction(write=True) as cur:
            self.serialize(cur, f"node:{node_name}")
            current = self._node_state(cur, node_name)
            if not eventstore.move_needed(node_name, current.state, target, expected):
                return current
            cur.execute(
                "INSERT INTO node_states (node_name, state, reason, since, event_sequence) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (node_name) DO UPDATE SET state = excluded.state, reason = excluded.reason,"
                " since = excluded.since, event_sequence = excluded.event_sequence",
                (node_name, target.value, reason, now, event_sequence),
            )
            cur.execute(
                "INSERT INTO node_transitions (node_name, from_state, to_state, reason, event_sequence, at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (node_name, current.state.value, target.value, reason, event_sequence, now),
            )
            if intent is not None:
                if event_sequence is None:
                    raise BadInputError("transition: an intent needs the event's sequence")
                self._require_event(cur, event_sequence)
                consumer, detail = intent
                self._put_stage_records(
                    cur, consumer, [StageOutcome(event_sequence, StageStatus.IN_PROGRESS, detail)], now
                )
        return NodeStatus(node_name, target, reason, _at(now), event_sequence)

    def node_history(self, node_name: str) -> list[NodeTransition]:
        with self.transaction(write=False) as cur:
            cur.execute(
                "SELECT node_name, from_state, to_state, reason, event_sequence, at FROM node_transitions"
                " WHERE node_name = ? ORDER BY transition_id",
                (node_name,),
            )
            rows = cur.fetchall()
        return self._rows(
            "node_transitions of",
            rows,
            lambda r: NodeTransition(
                str(r[0]), NodeState(r[1]), NodeState(r[2]), str(r[3]), _optional_int(r[4]), _at(r[5])
            ),
        )

    # remediations
    def record_remediation(self, node_name: str, action: str, event_sequence: int) -> bool:
        with self.transaction(write=True) as cur:
            cur.execute(
                "INSERT INTO remediations (node_name, action, event_sequence, at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (node_name, action, event_sequence) DO NOTHING",
                (node_name, action, event_sequence, self._clock()),
            )
            return bool(cur.rowcount == 1)

    def count_remediations(self, node_name: str, since: datetime) -> int:
        with self.transaction(write=False) as cur:
            cur.execute(
                "SELECT COUNT(*) FROM remediations WHERE node_name = ? AND at >= ?", (node_name, since.timestamp())
            )
            return int(cur.fetchone()[0])

    # validation requests
    def request_validation(self, node_name: str, reason: str) -> ValidationRequest:
        now = self._clock()
        with self.transaction(write=True) as cur:
            self.serialize(cur, "validations")
            cur.execute(
                f"SELECT {_VALIDATION_COLUMNS} FROM validation_requests"  # noqa: S608 - fixed columns
                " WHERE node_name = ? AND status IN (?, ?) ORDER BY request_id LIMIT 1",
                (node_name, *(s.value for s in eventstore.OPEN_VALIDATION)),
            )
            row = cur.fetchone()
            if row is not None:
                return _validation(row)
            cur.execute(
                "INSERT INTO validation_requests (node_name, reason, status, requested_at, updated_at, detail)"  # noqa: S608
                f" VALUES (?, ?, ?, ?, ?, '') RETURNING {_VALIDATION_COLUMNS}",
                (node_name, reason, ValidationStatus.PENDING.value, now, now),
            )
            return _validation(cur.fetchone())

    def start_validations(self, max_running: int) -> list[ValidationRequest]:
        now = self._clock()
        with self.transaction(write=True) as cur:
            self.serialize(cur, "validations")
            cur.execute("SELECT COUNT(*) FROM validation_requests WHERE status = ?", (ValidationStatus.RUNNING.value,))
            free = max_running - int(cur.fetchone()[0])
            if free <= 0:
                return []
            cur.execute(
                "SELECT request_id FROM validation_requests WHERE status = ? ORDER BY request_id LIMIT ?",
                (ValidationStatus.PENDING.value, free),
            )
            ids = [int(row[0]) for row in cur.fetchall()]
            started = []
            for request_id in ids:
                cur.execute(
                    f"UPDATE validation_requests SET status = ?, updated_at = ? WHERE request_id = ?"  # noqa: S608 - fixed columns
                    f" RETURNING {_VALIDATION_COLUMNS}",
                    (ValidationStatus.RUNNING.value, now, request_id),
                )
                started.append(_validation(cur.fetchone()))
            return started

    def finish_validation(self, request_id: int, *, passed: bool, detail: str) -> ValidationRequest:
        status = ValidationStatus.PASSED if passed else ValidationStatus.FAILED
        with self.transaction(write=True) as cur:
            self.serialize(cur, "validations")
            cur.execute("SELECT status FROM validation_requests WHERE request_id = ?", (request_id,))
            row = cur.fetchone()
            if row is None:
                raise NotFoundError(f"validation request {request_id}: not found")
            if row[0] != ValidationStatus.RUNNING.value:
                raise ConflictError(f"validation request {request_id}: is {row[0]}, only a running request can finish")
            cur.execute(
                "UPDATE validation_requests SET status = ?, updated_at = ?, detail = ? WHERE request_id = ?"  # noqa: S608
                f" RETURNING {_VALIDATION_COLUMNS}",
                (status.value, self._clock(), detail, request_id),
            )
            return _validation(cur.fetchone())

    def validation_requests(self, status: ValidationStatus | None = None) -> list[ValidationRequest]:
        with self.transaction(write=False) as cur:
            if status is None:
                cur.execute(f"SELECT {_VALIDATION_COLUMNS} FROM validation_requests ORDER BY request_id")  # noqa: S608
            else:
                cur.execute(
                    f"SELECT {_VALIDATION_COLUMNS} FROM validation_requests WHERE status = ? ORDER BY request_id",  # noqa: S608
                    (status.value,),
                )
            return self._rows("validation_requests", cur.fetchall(), _validation)

    # circuit breakers
    def load_breaker(self, name: str) -> dict[str, Any] | None:
        with self.transaction(write=False) as cur:
            cur.execute("SELECT document FROM breakers WHERE name = ?", (name,))
            row = cur.fetchone()
        if row is None:
            return None
        return self._row("breakers", (name, row[0]), _breaker)

    def save_breaker(self, name: str, document: Mapping[str, Any]) -> None:
        with self.transaction(write=True) as cur:
            self._put_breaker(cur, name, document)

    def update_breaker(self, name: str, change: eventstore.BreakerChange[T]) -> T:
        """Read, decide, write under the breaker's writer lock (advisory lock / BEGIN IMMEDIATE)."""
        with self.transaction(write=True) as cur:
            self.serialize(cur, f"breaker:{name}")
            cur.execute(f"SELECT document FROM breakers WHERE name = ?{self.for_update}", (name,))  # noqa: S608
            row = cur.fetchone()
            document, result = change(None if row is None else self._row("breakers", (name, row[0]), _breaker))
            if document is not None:
                self._put_breaker(cur, name, document)
        return result

    def _put_breaker(self, cur: Cursor, name: str, document: Mapping[str, Any]) -> None:
        cur.execute(
            "INSERT INTO breakers (name, document, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT (name) DO UPDATE SET document = excluded.document, updated_at = excluded.updated_at",
            (name, _json(document), self._clock()),
        )

    def __enter__(self) -> SqlEventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


ErrorKind = type[DsxError]
"""What a driver error means for the caller: UnavailableError (retry), ConflictError (re-read and
retry), InternalError (a bug or a damaged store: retrying will not help), BadInputError."""


@contextlib.contextmanager
def translated_errors(
    backend: str, driver_error: type[BaseException], classify: Callable[[BaseException], ErrorKind]
) -> Iterator[None]:
    """Map a driver's exceptions into the dsx tree at the seam, keeping the cause (and its traceback).

    Only an unreachable, busy or locked database is "unavailable": a missing column or a
    syntax error is a defect, and retrying it forever would hide it.
    """
    try:
        yield
    except driver_error as exc:
        kind = classify(exc)
        if kind is ConflictError:
            raise ConflictError(f"{backend}: concurrent write conflict: {_first_line(exc)}") from exc
        if kind is InternalError:
            raise InternalError(
                f"{backend}: {type(exc).__name__}: {_first_line(exc)} (a bug in dsx or a damaged store;"
                " the log has the traceback)"
            ) from exc
        raise kind(f"{backend}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _document(event: HealthEvent) -> str:
    return event.canonical_json  # the key is derived again on read


def _json(data: Mapping[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


def _at(epoch_seconds: float) -> datetime:
    return datetime.fromtimestamp(float(epoch_seconds), UTC)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


class _DecodedEvents:
    """Stored events already parsed in this process, keyed by their row (sequence, time, document).

    Why: every consumer of the store (analyzer, each stage) reads every event, and a stage
    re-reads the events it holds when it renews their leases; parsing and validating the same
    document again each time was most of the sentinel's CPU under fleet traffic. A stored row
    never changes, and the key holds the whole document, so a hit is the same event as a parse
    (an altered row is a new key, parsed and checked again). Appends put what they wrote here,
    pushing the oldest out; a read that misses does not (a consumer catching up on a backlog
    larger than the cache would otherwise push out each entry just before it is read).
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._events: dict[tuple[int, float, str], StoredEvent] = {}
        self._lock = threading.Lock()

    def get(self, row: Sequence[Any]) -> StoredEvent:
        key = (int(row[0]), float(row[1]), str(row[2]))
        found = self._events.get(key)
        if found is None:
            found = StoredEvent(key[0], _at(key[1]), HealthEvent.from_dict(json.loads(key[2]), source="event store"))
            if len(self._events) < self.capacity:
                self.put(key, found)
        return found

    def put(self, key: tuple[int, float, str], stored: StoredEvent) -> None:
        with self._lock:
            self._events[key] = stored
            while len(self._events) > self.capacity:
                del self._events[next(iter(self._events))]


_DECODED = _DecodedEvents(8192)


def _stored_event(row: Sequence[Any]) -> StoredEvent:
    return _DECODED.get(row)


def _breaker(row: Sequence[Any]) -> dict[str, Any]:
    document = json.loads(row[1])
    if not isinstance(document, dict):
        raise TypeError(f"expected a JSON object, got {type(document).__name__}")
    return document


def _stage(row: Sequence[Any]) -> StageRecord:
    stage, sequence, status, detail, updated_at = row
    return StageRecord(str(stage), int(sequence), StageStatus(status), json.loads(detail), _at(updated_at))


def _node(row: Sequence[Any]) -> NodeStatus:
    node_name, state, reason, since, event_sequence = row
    return NodeStatus(str(node_name), NodeState(state), str(reason), _at(since), _optional_int(event_sequence))


def _validation(row: Sequence[Any]) -> ValidationRequest:
    request_id, node_name, reason, status, requested_at, updated_at, detail = row
    return ValidationRequest(
        int(request_id),
        str(node_name),
        str(reason),
        ValidationStatus(status),
        _at(requested_at),
        _at(updated_at),
        str(detail),
    )
