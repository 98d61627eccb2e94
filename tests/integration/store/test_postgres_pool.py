"""Area of concern: a PostgreSQL store's threads get connections of their own from a bounded pool.

With one connection every thread of a sentinel queued for it; at 5,000 nodes the quarantine
workers' reads waited behind ingestion and the other stages until nothing was cordoned. These
tests hold the pool to what the store promises: threads overlap, never more than `pool_size`
connections exist, a nested transaction stays on its thread's connection, and a closed store
refuses new work.
"""

from __future__ import annotations

import threading

import pytest

from dsx.errors import UnavailableError
from dsx.store.postgres import PostgresEventStore

pytestmark = pytest.mark.integration


def backend_pid(store: PostgresEventStore) -> int:
    with store.transaction(write=False) as cur:
        cur.execute("SELECT pg_backend_pid()")
        return int(cur.fetchone()[0])


def pids_held_together(stores: list[PostgresEventStore], rounds: int = 1) -> list[int]:
    """One thread per store; in each round all of them are inside a transaction at once (a barrier
    breaks otherwise). The backend pids they saw."""
    inside = threading.Barrier(len(stores), timeout=30)
    pids: list[int] = []
    errors: list[BaseException] = []

    def work(store: PostgresEventStore) -> None:
        try:
            for _ in range(rounds):
                with store.transaction(write=False) as cur:
                    cur.execute("SELECT pg_backend_pid()")
                    pids.append(int(cur.fetchone()[0]))
                    inside.wait()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    return pids


def test_threads_hold_connections_at_once_up_to_the_pool_size(postgres_url: str) -> None:
    store = PostgresEventStore(postgres_url, pool_size=3)
    pids = pids_held_together([store] * 3, rounds=2)
    assert len(pids) == 6
    assert len(set(pids)) == 3  # three connections, reused on the second round
    assert len({backend_pid(store) for _ in range(10)}) == 1  # alone, one idle connection serves
    store.close()


def test_a_nested_transaction_stays_on_its_threads_connection(postgres_url: str) -> None:
    store = PostgresEventStore(postgres_url, pool_size=1)
    with store.transaction(write=True) as outer:
        outer.execute("SELECT pg_backend_pid()")
        pid = int(outer.fetchone()[0])
        assert backend_pid(store) == pid  # with a pool of one, a second connection would wait forever
    store.close()


def test_a_closed_store_refuses_new_work_and_a_bad_size_is_refused(postgres_url: str) -> None:
    store = PostgresEventStore(postgres_url, pool_size=2)
    store.close()
    with pytest.raises(UnavailableError, match="closed"):
        store.last_sequence()
    with pytest.raises(ValueError, match="pool_size"):
        PostgresEventStore(postgres_url, pool_size=0)


def test_stores_of_one_process_share_the_pool_of_their_server(postgres_url: str) -> None:
    """A sentinel opens a store per stage; their connections together stay within one pool."""
    first = PostgresEventStore(postgres_url, pool_size=2)
    second = PostgresEventStore(postgres_url, pool_size=2)
    pids = pids_held_together([first, second])
    assert backend_pid(first) in pids and backend_pid(second) in pids  # the same two connections
    first.close()
    assert second.last_sequence() == 0  # the other store keeps the pool
    second.close()
