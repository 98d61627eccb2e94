"""Kernel-log monitor: follows a log file (dmesg/syslog/kern.log) or journald and turns NVRM Xid
and NVSwitch SXid lines into HealthEvents.

Why it is careful about positions: NVSentinel lost Xids after journald rotation and before the
monitor started after a reboot (upstream #1417, #1532), and re-emitted every line of a storm.
Here:

- `FileFollower` behaves like `tail -F`: it keeps reading the old file after a rename, then
  moves to the new one; a truncated file (copytruncate) is re-read from the start, after the
  rest of its copy (`kern.log.1`) has been read. Its position is (inode, byte offset, hash and
  length of the last line), so a restart finds the exact line again, in the live file or in
  the rotated one, and notices a file that was replaced underneath it.
- `JournalReader` runs `journalctl -k -o json --after-cursor CURSOR` (an argument list, never a
  shell) and reads at most one batch of its output, stopping journalctl there: a catch-up after
  a long outage is paged through, never held in memory whole. With no cursor yet it starts at
  the beginning of the current boot, so faults logged before the monitor started are seen —
  or, with `from_end` (`monitors.start_at_end`), after the newest kernel entry at its first
  read, so an existing boot's log is not replayed as new events.
- `KernelLogMonitor` writes its position to a state file only after the store has the events
  (`commit`). Lines read but not yet committed are recorded as *pending* with the time they
  were read, so after a crash the same lines produce the same events (same idempotency keys):
  a restart neither loses nor repeats a line.

Hostile or odd input never costs a fault on the same node or another one:

- a line the parser raises on (a parser bug, whatever the text) becomes a stored *unparsed
  kernel line* event (`KernelLogUnparsed`, store-only, the raw text cut to `MAX_UNPARSED_CHARS`)
  and the rest of its batch is read as usual: one line never takes its batch with it;
- each poll reads at most `batch_lines` lines and about `batch_bytes` bytes, so one node writing
  80 KB garbage lines takes a bounded share of the one thread that serves every node (the
  sentinel polls its monitors round-robin, `behind` says a source has more to read).

Parsing and verdicts come from `dsx.health.parsing.xid` (the catalog kept as data). One
`xid.KernelLogReader` per monitor joins the multi-line "fallen off the bus" message and takes the
driver version (which IntrInfo layout NVLink5 Xids use) from the NVRM banner, else from the
version the monitor was given (configuration, else the node's labels). Its state (an open
multi-line message, the banner's version) is committed with the position, so a message split
across a restart is still joined, and a replayed batch starts from the same state. Its
`BurstDeduplicator` turns a storm of one code on one GPU into one event per window (10 s for a
fatal code, so a fault after the repair is a new event); the lines it folds in are counted
(`repeats_suppressed`, the sentinel's `dsx_sentinel_kernel_log_repeats_total`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, BinaryIO, Protocol

from dsx import atomic
from dsx.errors import BadInputError, UnavailableError
from dsx.health.parsing import ingest, xid
from dsx.model.health import ComponentClass, Entity, EntityType, HealthEvent, ProcessingStrategy, bounded_message

log = logging.getLogger("dsx.sentinel.monitor")

AGENT = "kernel-log-monitor"
XID_CHECK = "KernelLogXid"
SXID_CHECK = "KernelLogSXid"
GPU_LOST_CHECK = "KernelLogGpuLost"
"""Driver messages without a code that mean a GPU is lost (RmInitAdapter failed, probe failed)."""
CHECKS = {xid.Family.XID: XID_CHECK, xid.Family.SXID: SXID_CHECK, xid.Family.NVRM: GPU_LOST_CHECK}
STATE_VERSION = 1
COMPRESSED = (".gz", ".xz", ".bz2", ".zst")
UNPARSED_CHECK = "KernelLogUnparsed"
"""A line the parser raised on: stored for the record (and for the fix), never acted on."""
MAX_LINE_BYTES = 64 * 1024
"""A longer line is cut there; kernel lines are well under 1 KiB."""
BATCH_BYTES = 256 * 1024
"""Bytes one monitor reads per poll at most (past its first line): one node's flood is read in
slices, between the other nodes' polls."""
MAX_JOURNAL_ENTRY_BYTES = 1024 * 1024
"""journalctl's JSON for one entry, at most (journald keeps messages under 48 KiB, escaped maybe 6x that)."""
MAX_UNPARSED_CHARS = 4096
"""How much of an unparsed line its event keeps."""

Position = Mapping[str, Any]
"""Where reading resumes, JSON-ready and opaque to the monitor (file: inode/offset/hash; journal: cursor)."""


@dataclass(frozen=True)
class LogLine:
    text: str
    position: Position
    """Resume point just after this line."""
    timestamp: datetime | None = None
    """When the source knows it (journald); files leave it to the line's own prefix."""


class LineReader(Protocol):
    source: str
    """Written into each event's metadata, e.g. "file:/var/log/kern.log" or "journald"."""

    def seek(self, position: Position | None) -> None:
        """Continue after `position` (None: from the reader's starting point)."""
        ...

    def read(self, max_lines: int, max_bytes: int = BATCH_BYTES) -> list[LogLine]:
        """Up to `max_lines` lines, stopping once `max_bytes` were read (always at least one line)."""
        ...

    def close(self) -> None: ...


# -- files ---------------------------------------------------------------------------------------


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class _Open:
    handle: BinaryIO
    inode: int
    offset: int
    last_hash: str
    last_length: int


class FileFollower:
    """`tail -F` over one path, resumable from a position (see the module docstring)."""

    def __init__(self, path: str | Path, *, from_end: bool = False) -> None:
        self.path = Path(path)
        self.source = f"file:{self.path}"
        self._from_end = from_end
        self._open: _Open | None = None
        self._after_current: _Open | None = None
        """A truncated live file waiting while its rotated copy is finished."""

    # positioning
    def seek(self, position: Position | None) -> None:
        current = self._open
        if (
            position is not None
            and current is not None
            and current.inode == position["inode"]
            and self._after_current is None
        ):
            current.handle.seek(position["offset"])
            current.offset = position["offset"]
            current.last_hash, current.last_length = position["line_hash"], position["line_length"]
            return
        self._close_all()
        if position is None:
            self._start_fresh()
            return
        found = self._find(position)
        if found is None:
            self._start_fresh(at_end=False)  # the file we were reading is gone: everything in the new one is new
            return
        self._open = found

    def _start_fresh(self, *, at_end: bool | None = None) -> None:
        opened = self._open_path(self.path)
        if opened is None:
            return
        if self._from_end if at_end is None else at_end:
            opened.offset = opened.handle.seek(0, os.SEEK_END)
        self._open = opened

    def _open_path(self, path: Path) -> _Open | None:
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENOTDIR):  # no retry makes this a log file
                raise BadInputError(f"{path}: not a log file: {exc.strerror}") from exc
            raise UnavailableError(f"{path}: cannot read: {exc.strerror}") from exc
        return _Open(handle, os.fstat(handle.fileno()).st_ino, 0, "", 0)

    def _candidates(self) -> list[Path]:
        """The live file first, then rotated siblings (kern.log.1, kern.log-20261129), uncompressed only."""
        found = [self.path]
        try:
            siblings = sorted(self.path.parent.iterdir())
        except OSError:
            return found
        stem = self.path.name
        for sibling in siblings:
            name = sibling.name
            if name.startswith((stem + ".", stem + "-")) and not name.endswith(COMPRESSED) and sibling.is_file():
                found.append(sibling)
        return found

    def _matches(self, opened: _Open, position: Position) -> bool:
        offset, length = int(position["offset"]), int(position["line_length"])
        size = os.fstat(opened.handle.fileno()).st_size
        if size < offset or length > offset:
            return False
        if length == 0:
            return offset == 0
        opened.handle.seek(offset - length)
        return _hash(opened.handle.read(length)) == str(position["line_hash"])

    def _find(self, position: Position, *, exclude_inode: int | None = None) -> _Open | None:
        """The file holding the line at `position`: same inode first, else a copy with the same line there."""
        opened_all = [o for o in (self._open_path(p) for p in self._candidates()) if o is not None]
        ordered = sorted(opened_all, key=lambda o: o.inode != position["inode"])
        chosen: _Open | None = None
        for opened in ordered:
            if chosen is None and opened.inode != exclude_inode and self._matches(opened, position):
                chosen = opened
                continue
            opened.handle.close()
        if chosen is not None:
            chosen.handle.seek(position["offset"])
            chosen.offset = position["offset"]
            chosen.last_hash, chosen.last_length = position["line_hash"], position["line_length"]
            live = self._open_path(self.path)
            if live is not None and live.inode == chosen.inode:
                live.handle.close()
            elif live is not None:
                # reading a rotated file (or a copy): the live file follows from its start
                self._after_current = live
        return chosen

    # reading
    def read(self, max_lines: int, max_bytes: int = BATCH_BYTES) -> list[LogLine]:
        if self._open is None:
            self._start_fresh(at_end=False)  # the file appeared after we started: all of it is new
            if self._open is None:
                return []
        lines = self._read_lines(self._open, max_lines, max_bytes)
        if lines:
            return lines
        switched = self._switch_if_rotated()
        return self._read_lines(self._open, max_lines, max_bytes) if switched and self._open else []

    def _read_lines(self, opened: _Open, max_lines: int, max_bytes: int) -> list[LogLine]:
        lines: list[LogLine] = []
        opened.handle.seek(opened.offset)
        budget = max_bytes
        while len(lines) < max_lines and budget > 0:
            raw = opened.handle.readline(MAX_LINE_BYTES)
            if not raw:
                break
            if not raw.endswith(b"\n") and len(raw) < MAX_LINE_BYTES and not self._is_final(opened):
                break  # a line still being written: wait for its newline
            opened.offset += len(raw)
            budget -= len(raw)
            opened.last_hash, opened.last_length = _hash(raw), len(raw)
            lines.append(LogLine(raw.rstrip(b"\r\n").decode("utf-8", errors="replace"), self._position(opened)))
        return lines

    def _is_final(self, opened: _Open) -> bool:
        """A file that was rotated away never gets the rest of its last line."""
        return self._after_current is not None or self._live_inode() not in (None, opened.inode)

    def _live_inode(self) -> int | None:
        try:
            return self.path.stat().st_ino
        except FileNotFoundError:
            return None

    def _switch_if_rotated(self) -> bool:
        """At the end of the current file: move on if it was rotated or truncated."""
        current = self._open
        if current is None:
            return False
        if self._after_current is not None:
            current.handle.close()
            self._open, self._after_current = self._after_current, None
            return True
        live_inode = self._live_inode()
        if live_inode is None:
            return False
        if live_inode != current.inode:
            replacement = self._open_path(self.path)
            if replacement is None:
                return False
            current.handle.close()
            self._open = replacement
            return True
        if os.fstat(current.handle.fileno()).st_size < current.offset:
            # copytruncate: finish the copy first when it is there, then the live file from 0
            position = self._position(current)
            copy = self._find(position, exclude_inode=current.inode)
            current.handle.close()
            if copy is not None:
                self._open = copy
            else:
                self._open = self._open_path(self.path)
            return True
        return False

    def _position(self, opened: _Open) -> dict[str, Any]:
        return {
            "inode": opened.inode,
            "offset": opened.offset,
            "line_hash": opened.last_hash,
            "line_length": opened.last_length,
        }

    def _close_all(self) -> None:
        for opened in (self._open, self._after_current):
            if opened is not None:
                opened.handle.close()
        self._open = self._after_current = None

    def close(self) -> None:
        self._close_all()


# -- journald ------------------------------------------------------------------------------------


class JournalReader:
    """Kernel messages from journald through `journalctl` (an argument list; `command` is replaceable)."""

    source = "journald"

    def __init__(
        self,
        *,
        command: Sequence[str] = ("journalctl",),
        timeout_seconds: float = 30.0,
        from_end: bool = False,
    ) -> None:
        self._command = list(command)
        self._timeout_seconds = timeout_seconds
        self._from_end = from_end
        self._cursor: str | None = None
        self._placed = False
        """False until the starting point of a fresh start (boot start or newest entry) is settled."""

    def _base(self) -> list[str]:
        return [*self._command, "-k", "-o", "json", "--no-pager"]

    def arguments(self) -> list[str]:
        """The journalctl argument list for the current cursor."""
        return [*self._base(), "--after-cursor", self._cursor] if self._cursor else [*self._base(), "-b"]

    def newest_arguments(self) -> list[str]:
        """The argument list that shows only the newest kernel entry of this boot (where `from_end` starts)."""
        return [*self._base(), "-b", "-n", "1"]

    def seek(self, position: Position | None) -> None:
        self._cursor = None if position is None else str(position["cursor"])
        self._placed = position is not None or not self._from_end

    def read(self, max_lines: int, max_bytes: int = BATCH_BYTES) -> list[LogLine]:
        if not self._placed:
            newest = self._run(self.newest_arguments(), 1)
            self._cursor = str(newest[-1].position["cursor"]) if newest else None  # an empty boot: all is new
            self._placed = True
        lines = self._run(self.arguments(), max_lines, max_bytes)
        if lines:
            self._cursor = str(lines[-1].position["cursor"])
        return lines

    def _run(self, arguments: list[str], max_lines: int, max_bytes: int = BATCH_BYTES) -> list[LogLine]:
        """Up to `max_lines` entries (about `max_bytes` of output) of journalctl's; journalctl is stopped there."""
        try:
            process = subprocess.Popen(arguments, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            raise UnavailableError(f"journalctl: {exc}") from exc
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            process.kill()

        watchdog = threading.Timer(self._timeout_seconds, expire)
        watchdog.start()
        lines: list[LogLine] = []
        try:
            assert process.stdout is not None and process.stderr is not None
            number = 0
            budget = max_bytes
            while len(lines) < max_lines and budget > 0:
                raw = process.stdout.readline(MAX_JOURNAL_ENTRY_BYTES)
                if not raw:
                    break
                number += 1
                budget -= len(raw)
                if not raw.endswith(b"\n") and len(raw) >= MAX_JOURNAL_ENTRY_BYTES:
                    _skip_rest_of_line(process.stdout)
                if not raw.strip():
                    continue
                try:
                    lines.append(_journal_line(raw, number))
                except UnavailableError as exc:  # one bad entry must not stop the cursor: skip it, say so
                    log.warning("%s; skipped", exc, extra={"line": raw[:500].decode(errors="replace")})
            cut_short = (len(lines) >= max_lines or budget <= 0) and process.poll() is None
            if cut_short:
                process.kill()
            process.stdout.close()
            detail = process.stderr.read().decode(errors="replace").strip().splitlines()
            code = process.wait()
        finally:
            watchdog.cancel()
            if process.poll() is None:
                process.kill()
                process.wait()
        if expired.is_set():
            raise UnavailableError(f"journalctl: ran past {self._timeout_seconds:g} s")
        if code != 0 and not cut_short:
            raise UnavailableError(f"journalctl exited with {code}: {detail[0] if detail else 'no output'}")
        return lines

    def close(self) -> None:
        """Each read is its own process; nothing stays open."""


def _skip_rest_of_line(stream: IO[bytes]) -> None:
    """Drop an over-long entry's remainder without holding it (its start fails as JSON and is reported)."""
    while True:
        chunk = stream.readline(MAX_JOURNAL_ENTRY_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return


def _journal_line(raw: bytes, number: int) -> LogLine:
    """One entry; without a cursor it is skipped (reported), an odd time or message is kept as well as it reads."""
    try:
        entry = json.loads(raw)
        cursor = str(entry["__CURSOR"])
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise UnavailableError(f"journalctl output line {number}: not a journal JSON entry ({exc!r:.200})") from exc
    return LogLine(
        _journal_message(entry.get("MESSAGE", "")), {"cursor": cursor}, _journal_time(entry.get("__REALTIME_TIMESTAMP"))
    )


def _journal_message(message: object) -> str:
    if isinstance(message, list):  # journald sends non-UTF-8 messages as a byte array
        try:
            return bytes(message).decode("utf-8", errors="replace")
        except (ValueError, TypeError):
            pass
    return str(message)


def _journal_time(realtime_us: object) -> datetime | None:
    """The entry's time, or None when it is not a readable microsecond count (the line's own prefix decides)."""
    try:
        return datetime.fromtimestamp(int(str(realtime_us)[:20]) / 1_000_000, UTC)
    except (ValueError, TypeError, OverflowError, OSError):
        return None


# -- the monitor ---------------------------------------------------------------------------------


class StateFile:
    """The monitor's committed position and pending batch, replaced atomically on every save."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"version": STATE_VERSION, "position": None, "pending": None}
        except (OSError, ValueError) as exc:
            raise BadInputError(
                f"{self.path}: unreadable kernel-log monitor state ({exc}); remove it to start over"
            ) from exc
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise BadInputError(f"{self.path}: version: expected {STATE_VERSION}; remove the file to start over")
        return data

    def save(self, state: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_file(self.path, json.dumps(dict(state), sort_keys=True))


class KernelLogMonitor:
    """HealthSource over one LineReader; see the module docstring for the position protocol."""

    agent = AGENT

    def __init__(
        self,
        node_name: str,
        reader: LineReader,
        state_path: str | Path,
        *,
        xid_catalog: xid.XidCatalog | None = None,
        driver: xid.DriverVersion | None = None,
        dedup_window_seconds: float = 300.0,
        batch_lines: int = ingest.MAX_EVENTS_PER_REQUEST,
        batch_bytes: int = BATCH_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.node_name = node_name
        self._reader = reader
        self._state_file = StateFile(state_path)
        self._lines = xid.KernelLogReader(xid_catalog, driver)
        self._dedup = xid.BurstDeduplicator(dedup_window_seconds)
        self._batch_lines = batch_lines
        self._batch_bytes = batch_bytes
        self._clock = clock
        self.behind = False
        """True when the last poll stopped at its line or byte bound: more is waiting to be read."""
        self.unparsed = 0
        """Lines the parser raised on since start (each stored as an unparsed kernel line)."""
        self.repeats_suppressed = 0
        """Records folded into an earlier event of their burst since start: counted, not stored (a
        count in the next event would change its content, and so its key, when a batch is replayed)."""
        self._state = self._state_file.load()
        try:
            self._lines.restore(self._state.get("reader"))
        except (KeyError, TypeError, ValueError) as exc:
            raise BadInputError(
                f"{self._state_file.path}: reader: unreadable ({exc}); remove the file to start over"
            ) from exc
        self._uncommitted: list[HealthEvent] | None = None
        self._reader.seek(self._state["position"])

    @property
    def replaying(self) -> bool:
        """True while a batch read before a crash is being read again."""
        return self._state["pending"] is not None

    def poll(self) -> list[HealthEvent]:
        if self._uncommitted is not None:
            return self._uncommitted
        pending = self._state["pending"]
        lines = self._reader.read(self._batch_lines, self._batch_bytes)
        # a false "behind" costs one empty poll; a missed one, a poll interval of the backlog
        read_chars = sum(len(line.text) + 1 for line in lines)
        self.behind = len(lines) >= self._batch_lines or read_chars * 2 >= self._batch_bytes
        if pending is not None:
            # after a crash: replay exactly the batch that was read before, with its read time
            cut = next((i + 1 for i, line in enumerate(lines) if dict(line.position) == pending["until"]), None)
            if cut is not None:
                lines = lines[:cut]
                self._reader.seek(pending["until"])
            read_at = float(pending["read_at"])
        else:
            read_at = self._clock()
        if not lines:
            self._uncommitted = []
            return []
        try:
            self._state = {**self._state, "pending": {"until": dict(lines[-1].position), "read_at": read_at}}
            self._state_file.save(self._state)
            events = [event for line in lines if (event := self._contained(line, read_at)) is not None]
        except BaseException:
            # not even pending could be recorded: read the batch again next time, from the committed position
            self._reader.seek(self._state["position"])
            raise
        self._uncommitted = events
        return events

    def commit(self) -> None:
        pending = self._state["pending"]
        self._uncommitted = None
        if pending is None:
            return
        self._state = {
            "version": STATE_VERSION,
            "position": pending["until"],
            "pending": None,
            "reader": self._lines.snapshot(),
        }
        self._state_file.save(self._state)

    def close(self) -> None:
        self._reader.close()

    def _contained(self, line: LogLine, read_at: float) -> HealthEvent | None:
        """The line's event; a line the parser raises on is kept as an unparsed-line event instead."""
        try:
            return self._event(line, read_at)
        except Exception as exc:  # a parser bug costs this line's reading, never its batch
            self.unparsed += 1
            log.warning(
                "kernel-log line not parsed; stored as an unparsed kernel line",
                exc_info=True,
                extra={"node": self.node_name, "source": self._reader.source, "line": line.text[:500]},
            )
            return self._unparsed(line, read_at, exc)

    def _unparsed(self, line: LogLine, read_at: float, error: Exception) -> HealthEvent:
        text = line.text[:MAX_UNPARSED_CHARS]
        return HealthEvent(
            agent=AGENT,
            component_class=ComponentClass.NODE,
            check_name=UNPARSED_CHECK,
            node_name=self.node_name,
            generated_at=line.timestamp or datetime.fromtimestamp(read_at, UTC),
            is_fatal=False,
            is_healthy=False,
            message=f"unparsed kernel line: {text}",
            error_codes=("UNPARSED",),
            metadata={
                "source": self._reader.source,
                "position": json.dumps(dict(line.position), sort_keys=True),
                "raw_chars": str(len(line.text)),
                "truncated": "true" if len(line.text) > MAX_UNPARSED_CHARS else "false",
                "parser_error": f"{type(error).__name__}: {str(error)[:200]}",
            },
            processing_strategy=ProcessingStrategy.STORE_ONLY,
        )

    def _event(self, line: LogLine, read_at: float) -> HealthEvent | None:
        record = None
        for part in line.text.split("\n"):  # journald keeps a multi-line printk as one message
            record = self._lines.feed(part) or record
        if record is None:
            return None
        generated_at = line.timestamp or _aware(record.timestamp) or datetime.fromtimestamp(read_at, UTC)
        admission = self._dedup.admit(self.node_name, record, generated_at.timestamp())
        if not admission.admitted:
            self.repeats_suppressed += 1
            return None
        entities: list[Entity] = []
        if record.pci_bdf:
            entities.append(Entity(EntityType.PCI, record.pci_bdf))
        if record.nvlink is not None:
            entities.append(Entity(EntityType.NVLINK, str(record.nvlink)))
        if record.device:
            entities.append(Entity(EntityType.NVSWITCH, record.device))
        sxid = record.family is xid.Family.SXID
        return HealthEvent(
            agent=AGENT,
            component_class=ComponentClass.NVSWITCH if sxid else ComponentClass.GPU,
            check_name=CHECKS[record.family],
            node_name=self.node_name,
            generated_at=generated_at,
            is_fatal=record.is_fatal,
            is_healthy=False,
            message=bounded_message(record.raw if record.lines > 1 else line.text),
            recommended_action=record.recommended_action,
            error_codes=(record.error_code,),
            entities=tuple(entities),
            metadata=_metadata(record, self._reader.source, line.position),
        )


def _metadata(record: xid.XidRecord, source: str, position: Position) -> dict[str, str]:
    """What the event carries beyond the verdict: NVIDIA's buckets, and how an NVLink5 line was decoded."""
    verdict = record.verdict
    found = {
        "source": source,
        "position": json.dumps(dict(position), sort_keys=True),
        "immediate_action": verdict.immediate_action,
        "mnemonic": record.mnemonic or "",
        "investigatory_action": verdict.investigatory_action or "",
        "lost_gpu": record.kind or "",
        "recovery_action": verdict.recovery_action or "",
    }
    if verdict.decode is not None:
        found["nvlink5_decode"] = json.dumps(verdict.decode.to_dict(), sort_keys=True)
        found["nvlink5_note"] = verdict.decode.note
        found["driver_version"] = verdict.decode.driver_version or ""
        found["driver_version_source"] = verdict.decode.driver_source or ""
    return {key: value for key, value in found.items() if value}


def _aware(moment: datetime | None) -> datetime | None:
    """Line timestamps without a zone are taken as UTC (node clocks in a cluster run on UTC)."""
    if moment is None:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
