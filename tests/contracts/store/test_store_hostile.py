"""Area of concern: a store is never started over silently and one bad row never stops a reader.

An existing empty or foreign file is refused naming it unless `--init` (a new path is still
created); a damaged file is refused on open (integrity check); a damaged row is skipped and
reported by its sequence by `events`, `status` and `replay`, and the pipeline parks it as a dead
letter instead of stalling. The CLI cases run `dsx.cli.main.main` in-process."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from dsx.cli.main import main
from dsx.errors import BadInputError
from dsx.health.decisions import policy
from dsx.health.decisions.eventstore import StageStatus
from dsx.store import open_store, sql

from .conftest import Backend, make_event


def _dsx(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def test_an_empty_store_file_is_refused_naming_it_unless_init(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "events.db"
    empty.touch()
    url = f"sqlite:///{empty}"

    code, _, err = _dsx(capsys, "sentinel", "events", "--store", url, "--format", "json")
    assert code == 2 and f"{url}: the file is empty (0 bytes)" in err and "--init" in err
    assert empty.stat().st_size == 0  # refused before anything was written

    code, out, _ = _dsx(capsys, "sentinel", "events", "--store", url, "--init", "--format", "json")
    assert (code, json.loads(out)) == (0, [])
    code, _, _ = _dsx(capsys, "sentinel", "status", "--store", url)  # now a store: no --init needed
    assert code == 0


def test_a_missing_store_file_is_still_created_without_init(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = _dsx(capsys, "sentinel", "events", "--store", f"sqlite:///{tmp_path / 'new.db'}")
    assert code == 0 and (tmp_path / "new.db").stat().st_size > 0


def test_a_foreign_database_is_refused_naming_its_tables(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(BadInputError, match=r"app\.db: not a dsx event store \(its tables: invoices\)"):
        open_store(f"sqlite:///{path}")
    open_store(f"sqlite:///{path}", init=True).close()  # --init adds dsx's tables beside them
    open_store(f"sqlite:///{path}").close()


def test_a_foreign_table_with_dsx_names_is_refused_even_with_init(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE events (id INTEGER, payload TEXT)")
    with pytest.raises(BadInputError, match="table events is not dsx's"):
        open_store(f"sqlite:///{path}", init=True)


def test_a_text_file_is_bad_input_even_with_init(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("not sqlite at all\n" * 100)
    with pytest.raises(BadInputError, match=r"notes\.db"):
        open_store(f"sqlite:///{path}", init=True)
    assert path.read_text().startswith("not sqlite")


def test_a_damaged_file_is_refused_on_open_by_the_integrity_check(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    store = open_store(f"sqlite:///{path}")
    store.append([make_event(i) for i in range(300)])
    store.close()
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    data[3 * page + 8 : 3 * page + 400] = b"\xff" * 392  # a b-tree page of the events table, scribbled over
    path.write_bytes(bytes(data))
    with pytest.raises(BadInputError) as raised:
        open_store(f"sqlite:///{path}")
    assert f"sqlite:///{path}" in str(raised.value)


def _damage_event(backend: Backend, sequence: int, document: str) -> None:
    store = backend.open()
    assert isinstance(store, sql.SqlEventStore)
    with store.transaction(write=True) as cur:
        cur.execute("UPDATE events SET document = ? WHERE sequence = ?", (document, sequence))


@pytest.mark.parametrize("document", ["{not json", '{"agent": 7}', "[]"])
def test_a_damaged_event_row_is_skipped_and_named_by_readers(durable_backend: Backend, document: str) -> None:
    store = durable_backend.open()
    store.append([make_event(i) for i in range(3)])
    _damage_event(durable_backend, 2, document)

    reader = durable_backend.open()
    assert [e.sequence for e in reader.events()] == [1, 3]
    assert isinstance(reader, sql.SqlEventStore) and list(reader.damaged) == ["events 2"]
    with pytest.raises(BadInputError, match="events 2 is damaged"):
        reader.get(2)


def test_a_row_altered_after_it_was_read_is_read_as_it_now_is(durable_backend: Backend) -> None:
    """Stored events are parsed once per process (`sql._DecodedEvents`): keyed by the whole row, so
    a row changed behind the store's back is parsed and checked again, never served from memory."""
    store = durable_backend.open()
    store.append([make_event(i) for i in range(2)])
    before = store.get(2)
    assert before is not None and [e.sequence for e in store.claim("quarantine", "me")] == [1, 2]
    other = make_event(7)
    _damage_event(durable_backend, 2, other.canonical_json)
    after = durable_backend.open().get(2)
    assert after is not None and after.event == other != before.event


def test_a_damaged_event_becomes_a_dead_letter_and_the_consumer_goes_on(durable_backend: Backend) -> None:
    store = durable_backend.open()
    store.append([make_event(i) for i in range(3)])
    _damage_event(durable_backend, 2, "{not json")

    claimed = store.claim("quarantine", "me")
    assert [e.sequence for e in claimed] == [1, 3]
    parked = store.dead_letters()
    assert [(r.stage, r.sequence, r.status) for r in parked] == [("quarantine", 2, StageStatus.DEAD_LETTER)]
    assert "damaged row" in parked[0].detail["error"]


def test_events_status_and_replay_report_a_damaged_row_by_its_sequence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'events.db'}"
    store = open_store(url)
    store.append([make_event(i) for i in range(3)])
    assert isinstance(store, sql.SqlEventStore)
    with store.transaction(write=True) as cur:
        cur.execute("UPDATE events SET document = '{' WHERE sequence = 2")
        cur.execute(
            "INSERT INTO node_states (node_name, state, reason, since, event_sequence)"
            " VALUES ('n9', 'melted', '', 0, 1)"
        )
    store.close()
    warning = "dsx: warning: event store: events 2 is damaged and was skipped"

    code, out, err = _dsx(capsys, "sentinel", "events", "--store", url, "--format", "json")
    assert code == 0 and [e["sequence"] for e in json.loads(out)] == [1, 3] and warning in err
    code, _, err = _dsx(capsys, "sentinel", "status", "--store", url, "--format", "json")
    assert code == 0 and "node_states n9 is damaged" in err
    code, _, err = _dsx(
        capsys, "sentinel", "replay", "--policy", str(policy.DEFAULT_PATH), "--store", url, "--format", "json"
    )
    assert code == 0 and warning in err


def test_stores_opened_at_once_on_a_new_path_all_open(tmp_path: Path) -> None:
    """A store being created is neither empty nor foreign to the processes that open it meanwhile."""
    from concurrent.futures import ThreadPoolExecutor

    url = f"sqlite:///{tmp_path / 'events.db'}"
    for _ in range(5):
        (tmp_path / "events.db").unlink(missing_ok=True)
        with ThreadPoolExecutor(8) as pool:
            stores = list(pool.map(lambda _: open_store(url), range(8)))
        for store in stores:
            store.close()
