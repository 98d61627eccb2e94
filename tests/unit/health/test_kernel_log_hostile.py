"""Area of concern: hostile kernel-log input never costs a fault. A line the parser raises on is
stored as an unparsed-line event and its batch is read on (also across a crash and restart);
each poll reads a bounded slice, so one flooding node cannot hold the thread that serves every
node; the parser's work grows linearly with a line's length."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsx.errors import UnavailableError
from dsx.health.parsing import xid
from dsx.health.parsing.xid import lines as xid_lines
from dsx.host import kernel_log
from dsx.host.kernel_log import FileFollower, KernelLogMonitor
from dsx.model.health import ProcessingStrategy
from dsx.pipeline import source
from dsx.testing.inmemory import InMemoryEventStore
from fixtures.bench import bench_module

READ_AT = 1_796_000_000.0
POISON = "[ 99.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, a line this parser cannot read"
XID_79 = "[100.000000] NVRM: Xid (PCI:0000:b3:00): 79, pid=1234, name=python, GPU has fallen off the bus."


def write(path: Path, *lines: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))


def poison_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """A parser bug hit by one line: `parse_line` raises for POISON only."""
    real = xid.parse_line

    def parse_line(line: str, *args: object, **kwargs: object) -> xid.XidRecord | None:
        if "cannot read" in line:
            raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")
        return real(line, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(xid_lines, "parse_line", parse_line)  # where KernelLogReader looks it up


def test_a_line_the_parser_raises_on_is_stored_and_the_xid_79_in_its_batch_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, state = tmp_path / "kern.log", tmp_path / "state.json"
    write(log, POISON, XID_79)
    poison_parser(monkeypatch)
    store = InMemoryEventStore()
    monitor = KernelLogMonitor("n1", FileFollower(log), state, clock=lambda: READ_AT)
    assert source.pump(monitor, store) == 2
    unparsed, fault = (stored.event for stored in store.events())
    assert (fault.error_codes, fault.is_fatal) == (("79",), True)
    assert unparsed.check_name == kernel_log.UNPARSED_CHECK
    assert (unparsed.is_fatal, unparsed.processing_strategy) == (False, ProcessingStrategy.STORE_ONLY)
    assert unparsed.message == f"unparsed kernel line: {POISON}"
    assert unparsed.metadata["parser_error"].startswith("ValueError: Exceeds the limit")
    assert monitor.unparsed == 1
    monitor.close()


def test_after_a_crash_the_replayed_batch_still_stores_the_xid_79(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, state = tmp_path / "kern.log", tmp_path / "state.json"
    write(log, POISON, XID_79)
    poison_parser(monkeypatch)
    first = KernelLogMonitor("n1", FileFollower(log), state, clock=lambda: READ_AT)
    assert len(first.poll()) == 2
    first.close()  # killed before the store had the batch
    assert json.loads(state.read_text())["pending"] is not None

    store = InMemoryEventStore()
    second = KernelLogMonitor("n1", FileFollower(log), state, clock=lambda: READ_AT + 60)
    assert source.pump(second, store) == 2
    codes = [stored.event.error_codes for stored in store.events()]
    assert codes == [("UNPARSED",), ("79",)]
    assert json.loads(state.read_text())["pending"] is None
    second.close()


def test_an_unparsed_lines_event_keeps_a_bounded_part_of_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "kern.log"
    huge = POISON + " " + "x" * 50_000
    write(log, huge)
    poison_parser(monkeypatch)
    monitor = KernelLogMonitor("n1", FileFollower(log), tmp_path / "state.json", clock=lambda: READ_AT)
    (event,) = monitor.poll()
    assert len(event.message) == len("unparsed kernel line: ") + kernel_log.MAX_UNPARSED_CHARS
    assert (event.metadata["raw_chars"], event.metadata["truncated"]) == (str(len(huge)), "true")
    monitor.close()


def test_a_failed_state_save_reads_the_same_batch_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log, state = tmp_path / "kern.log", tmp_path / "state.json"
    write(log, XID_79)
    monitor = KernelLogMonitor("n1", FileFollower(log), state, clock=lambda: READ_AT)
    real_save = kernel_log.StateFile.save

    def full_disk(self: kernel_log.StateFile, state: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(kernel_log.StateFile, "save", full_disk)
    with pytest.raises(OSError):
        monitor.poll()
    monkeypatch.setattr(kernel_log.StateFile, "save", real_save)
    (event,) = monitor.poll()
    assert event.error_codes == ("79",)
    monitor.close()


# -- bounded work per poll ---------------------------------------------------------------------------


def test_a_flooding_log_is_read_in_bounded_slices_and_says_it_is_behind(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    garbage = "G" * 80_000
    write(log, *([garbage] * 20), XID_79)
    monitor = KernelLogMonitor(
        "a", FileFollower(log), tmp_path / "state.json", batch_bytes=256 * 1024, clock=lambda: READ_AT
    )
    slices, found, offset = [], [], 0
    while True:
        found += monitor.poll()
        monitor.commit()
        position = json.loads((tmp_path / "state.json").read_text())["position"]
        slices.append(position["offset"] - offset)
        offset = position["offset"]
        if not monitor.behind:
            break
    # 1.6 MB in slices of 256 KiB, each at most one 64 KiB line past the bound
    assert 6 <= len(slices) <= 8
    assert max(slices) <= 256 * 1024 + kernel_log.MAX_LINE_BYTES
    assert offset == log.stat().st_size
    assert [event.error_codes for event in found] == [("79",)]
    monitor.close()


def test_the_byte_bound_always_admits_one_line(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    write(log, "a" * 1000, "b")
    follower = FileFollower(log)
    assert [len(line.text) for line in follower.read(100, max_bytes=10)] == [1000]
    assert [line.text for line in follower.read(100, max_bytes=10)] == ["b"]
    follower.close()


# -- linear parsing ----------------------------------------------------------------------------------


crafted = bench_module("bench_parsers").crafted_lines  # the benchmark's crafted lines, one list for both


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(crafted(1)))
def test_parsing_grows_linearly_with_the_line(name: str) -> None:
    """Not a speed test (bench/bench_parsers.py measures that) and nothing is timed: a 5 MB crafted
    line must parse inside the test's timeout. Linear parsing takes about a second at that length;
    a quadratic pattern (80 KB took 113 ms when one was) would take 64² times that, over seven minutes."""
    short = xid.KernelLogReader().feed(crafted(80)[name])
    long = xid.KernelLogReader().feed(crafted(5000)[name])
    assert (long is None) == (short is None)  # the same shape, longer: the same verdict
    if long is not None and short is not None:
        assert (long.family, long.code) == (short.family, short.code)


def test_odd_journal_entries_are_kept_or_skipped_never_fatal() -> None:
    """An absurd time or byte array keeps the entry (time from the line, bytes as text); an entry
    nested past the JSON reader's depth has no readable cursor and is skipped, reported."""
    odd = json.dumps({"__CURSOR": "c1", "__REALTIME_TIMESTAMP": "9" * 5000, "MESSAGE": [300, 65]}).encode()
    line = kernel_log._journal_line(odd, 1)
    assert (line.position, line.timestamp, line.text) == ({"cursor": "c1"}, None, "[300, 65]")
    deep = b'{"__CURSOR": "c2", "MESSAGE": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(UnavailableError, match="not a journal JSON entry"):
        kernel_log._journal_line(deep, 2)
