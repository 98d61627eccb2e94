"""Area of concern: `dsx sentinel monitor kernel-log` as its own process — it sends what it reads to a
store or to a sentinel's /v1/events, keeps its cursor so a second run sends nothing twice, keeps
the lines when the sentinel refuses them (bad token: nothing committed), and refuses bad flags."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dsx import errors
from dsx.api import security
from dsx.cli.main import main
from dsx.controllers import http, monitors, telemetry
from dsx.health.decisions import pipeline_status
from dsx.health.parsing import ingest
from dsx.model.health import HealthEvent
from dsx.store import open_store
from dsx.testing.inmemory import InMemoryEventStore

TOKEN = "monitor-test-token-0123456789"
LINES = [
    "[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.",
    "[ 1300.1] some unrelated kernel line",
    "[ 1301.0] NVRM: Xid (PCI:0000:86:00): 48, pid=9, name=python, An uncorrectable double bit error",
]


def dsx(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    return int(exit_info.value.code or 0), capsys.readouterr().err


@pytest.fixture
def kern_log(tmp_path: Path) -> Path:
    path = tmp_path / "kern.log"
    path.write_text("\n".join(LINES) + "\n")
    return path


def test_kernel_log_lines_go_to_a_store_once(capsys, tmp_path: Path, kern_log: Path) -> None:
    url = f"sqlite:///{tmp_path / 'events.db'}"
    args = [
        "sentinel",
        "monitor",
        "kernel-log",
        "--node",
        "n1",
        "--path",
        str(kern_log),
        "--state",
        str(tmp_path / "cursor.json"),
        "--store",
        url,
        "--once",
    ]
    code, err = dsx(capsys, *args)
    assert code == 0 and "2 new event(s)" in err
    with kern_log.open("a") as handle:
        handle.write("[ 1400.0] NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception\n")
    code, err = dsx(capsys, *args)
    assert "1 new event(s)" in err
    store = open_store(url)
    try:
        assert [s.event.error_codes for s in store.events()] == [("79",), ("48",), ("13",)]
        assert {s.event.node_name for s in store.events()} == {"n1"}
    finally:
        store.close()


@pytest.fixture
def sentinel_endpoint() -> Iterator[tuple[str, InMemoryEventStore]]:
    store = InMemoryEventStore()

    def accept(events: Sequence[HealthEvent]) -> dict[str, Any]:
        appended = store.append(events)
        return {"accepted": len(appended), "created": sum(1 for a in appended if a.created), "sequences": []}

    server = http.SentinelHttpServer(
        http.Routes(
            ready=lambda: None,
            metrics=telemetry.SentinelTelemetry().exposition,
            status=lambda: pipeline_status.document(store, None, now=datetime.now(UTC)),
            ingest=accept,
            authenticator=security.TokenAuthenticator(frozenset({security._digest(TOKEN)})),
        ),
        port=0,
    )
    server.start()
    try:
        yield f"http://127.0.0.1:{server.port}", store
    finally:
        server.stop()


def test_kernel_log_lines_are_posted_to_a_sentinel_and_kept_when_refused(
    capsys, tmp_path: Path, kern_log: Path, sentinel_endpoint
) -> None:
    url, store = sentinel_endpoint
    cursor = tmp_path / "cursor.json"
    wrong, right = tmp_path / "wrong", tmp_path / "right"
    wrong.write_text("not-the-token-0123456789\n")
    right.write_text(TOKEN + "\n")
    base = [
        "sentinel",
        "monitor",
        "kernel-log",
        "--node",
        "n1",
        "--path",
        str(kern_log),
        "--state",
        str(cursor),
        "--url",
        url,
        "--once",
    ]
    code, err = dsx(capsys, *base, "--token-file", str(wrong))
    assert code == 4 and "401" in err
    assert store.last_sequence() == 0
    code, err = dsx(capsys, *base, "--token-file", str(right))
    assert code == 0 and "2 new event(s)" in err  # the refused lines were not committed: sent now
    assert [s.event.error_codes for s in store.events()] == [("79",), ("48",)]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["kernel-log", "--path", "x", "--store", "memory:"], "--node is required"),
        (["kernel-log", "--node", "n1", "--store", "memory:"], "give --path FILE or --journal"),
        (["kernel-log", "--node", "n1", "--path", "x", "--url", "http://127.0.0.1:1"], "--url needs --token-file"),
        (
            ["kernel-log", "--node", "n1", "--path", "x", "--driver-version", "r575", "--store", "memory:"],
            "--driver-version: driver version: 'r575' is not a version like 575.57.08",
        ),
    ],
)
def test_bad_flags_are_one_line(capsys, argv: list[str], message: str) -> None:
    code, err = dsx(capsys, "sentinel", "monitor", *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


class FakeSentinel:
    """An /v1/events endpoint that refuses batches with a bad event (400) or over `limit` events (413)."""

    def __init__(self, *, limit: int, statuses: list[int] | None = None) -> None:
        import http.server
        import json
        import threading

        self.posts: list[int] = []
        self.statuses = list(statuses or [])
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                events = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["events"]
                outer.posts.append(len(events))
                status = outer.statuses.pop(0) if outer.statuses else 200
                if status == 200 and len(events) > limit:
                    status = 413
                if status == 200 and any(e["errorCodes"] == ["13"] for e in events):
                    status = 400
                body = json.dumps({"created": len(events)} if status == 200 else {"error": "refused"}).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                """Quiet."""

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_refused_batch_is_split_the_bad_event_dropped_and_only_408_429_5xx_retried(caplog) -> None:
    import logging

    from dsx import errors
    from dsx.controllers import monitors

    from .builders import xid

    events = [xid(f"n{i}", "13" if i == 2 else "79") for i in range(5)]
    sentinel = FakeSentinel(limit=2)
    try:
        sink = monitors.HttpSink(sentinel.url, TOKEN)
        with caplog.at_level(logging.ERROR, logger="dsx.sentinel.monitor"):
            assert monitors.deliver(sink, events) == 4  # all but the bad one
        assert sentinel.posts == [5, 2, 3, 1, 2]  # 413 → halves, again for 3; the 400 on [n2] alone drops it
        (dropped,) = [r for r in caplog.records if "dropped" in r.getMessage()]
        assert dropped.event["nodeName"] == "n2"  # type: ignore[attr-defined]
        for status, kind in [
            (408, errors.UnavailableError),
            (429, errors.UnavailableError),
            (503, errors.UnavailableError),
            (404, errors.NotFoundError),
            (422, errors.BadInputError),
        ]:
            sentinel.statuses = [status]
            with pytest.raises(kind):
                sink.send(events[:1])
    finally:
        sentinel.close()


def test_batch_sizes_agree_from_the_log_reader_to_the_sender_to_ingest(tmp_path: Path) -> None:
    import inspect

    from dsx.controllers import monitors
    from dsx.host.kernel_log import KernelLogMonitor

    from .builders import xid

    limit = ingest.MAX_EVENTS_PER_REQUEST
    assert inspect.signature(KernelLogMonitor).parameters["batch_lines"].default == limit
    sentinel = FakeSentinel(limit=limit)
    try:
        many = [xid(f"n{i}") for i in range(2 * limit + 1)]
        assert monitors.HttpSink(sentinel.url, TOKEN).send(many) == len(many)
        assert sentinel.posts == [limit, limit, 1]
    finally:
        sentinel.close()


def test_the_monitor_posts_with_the_first_token_of_the_sentinels_token_file(tmp_path: Path) -> None:
    """The chart mounts one tokens Secret into the sentinel (every token) and the monitors (the first)."""
    shared = tmp_path / "tokens"
    shared.write_text("# rotated 2026-12-01\nmonitor-token-0123456789abcdef\nprometheus-token-0123456789abcdef\n")
    assert monitors.read_token(str(shared)) == "monitor-token-0123456789abcdef"
    empty = tmp_path / "empty"
    empty.write_text("# nothing yet\n\n")
    with pytest.raises(errors.BadInputError, match="no token in the file"):
        monitors.read_token(str(empty))


def test_a_rotated_projected_token_is_read_again(tmp_path: Path) -> None:
    """kubelet rewrites the projected token before it expires; the monitor posts with the new one."""
    path = tmp_path / "token"
    path.write_text("first-token-0123456789\n")
    token = monitors.TokenFile(str(path))
    assert token() == "first-token-0123456789"
    path.write_text("second-token-0123456789abc\n")
    assert token() == "second-token-0123456789abc"
    empty = tmp_path / "empty-file"
    empty.write_text("")
    with pytest.raises(errors.BadInputError, match="no token in the file"):
        monitors.TokenFile(str(empty))
