"""Event store adapters: the only package that talks to SQLite or PostgreSQL.

`open_store(url)` picks the implementation of `dsx.health.decisions.eventstore.EventStore` from a URL:

- `sqlite:///relative/path.db`, `sqlite:////absolute/path.db` — embedded default (WAL);
- `postgresql://user@host:port/dbname` (or `postgres://…`) — shared server, LISTEN/NOTIFY wake-ups;
- `memory:` — the in-memory fake, for dry runs and tests; nothing is kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dsx.errors import BadInputError
from dsx.health.decisions.eventstore import EventStore

SCHEMES = ("sqlite:///PATH", "postgresql://...", "memory:")


def open_store(url: str, *, clock: Callable[[], float] = time.time, init: bool = False) -> EventStore:
    """Open (and create when missing) the store a URL names; a bad URL is a one-line BadInputError.

    An existing file that is empty or holds no dsx store is refused unless `init` (`--init`):
    a store is never started over silently."""
    if url.startswith("sqlite:///"):
        from dsx.store.sqlite import SqliteEventStore

        path = url.removeprefix("sqlite:///")
        if not path or path.endswith("/"):
            raise BadInputError(f"store URL {url!r}: no database file after sqlite:///")
        return SqliteEventStore(path, clock=clock, init=init)
    if url.startswith(("postgresql://", "postgres://")):
        from dsx.store.postgres import PostgresEventStore

        return PostgresEventStore(url, clock=clock)
    if url == "memory:":
        from dsx.testing.inmemory import InMemoryEventStore

        return InMemoryEventStore(clock=clock)
    raise BadInputError(f"store URL {url!r}: unknown scheme; allowed: {', '.join(SCHEMES)}")
