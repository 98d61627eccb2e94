"""nccl-tests output: read every layout people post.

The local executor prints its measurements in the same format (`nccl_writer`, which shares this
module's row model and bus-bandwidth factors), so this reader reads them back unchanged.

Reading is driven by the header line, not by a fixed regex: the header names the columns
(`size count type redop root time algbw busbw #wrong ...` today, `size count type time algbw
busbw error ...` in 2020 builds, `bytes N type op time algbw busbw res ...` in NCCL 1's tests
and nccl-tests until March 2019, whose `time` is in milliseconds: `deltaSec * 1.0E3` in
nccl-tests src/common.cu@b188a15, `deltaSec*1.0E6` from cbe7f65 on), and the first
`time/algbw/busbw` group is out-of-place, the second in-place. Lines are taken per launcher
stream (see `lines.py`), so tables printed by several ranks into one log stay apart, and NCCL
INFO noise between rows is skipped.

Verdict of a table: FAILED when it has no rows, a row has #wrong > 0, the footer says `Out of
bounds values : N FAILED` or `Avg bus bandwidth : X FAILED` (NCCL_TESTS_MIN_BW), or a `Test ...
failure` line appears while it is open. `NCCL WARN` lines are kept as evidence but do not fail a
table that completed cleanly. A log with no table at all is FAILED. A missing `Avg bus bandwidth`
line is reported as None (excerpts and killed runs), never as 0.

`max_busbw_gbps` is the maximum out-of-place bus bandwidth over message sizes, the figure
NVCRE's thresholds use; the in-place maximum is reported beside it.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dsx.certify.parsing import lines

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
    "gather",
    "scatter",
    "hypercube",
)
"""nccl-tests collectives by the stem of their binary (`all_reduce_perf` → `all_reduce`).

Names, not an enum: a log may name any of them, and `dsx.model.certification.Collective` (the
ones dsx runs) is a `StrEnum` whose members are these same strings.
"""

_FACTOR_ONE = frozenset({"broadcast", "reduce", "sendrecv"})
_FACTOR_ALL_REDUCE = frozenset({"all_reduce"})


def busbw_factor(collective: str, ranks: int) -> float:
    """nccl-tests' busbw/algbw ratio (NVIDIA/nccl-tests doc/PERFORMANCE.md): all-reduce 2(n-1)/n; reduce-scatter,
    all-gather, alltoall, gather, scatter, hypercube (n-1)/n; broadcast, reduce, sendrecv 1."""
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}; known: {', '.join(COLLECTIVES)}")
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    if collective in _FACTOR_ONE:
        return 1.0
    if collective in _FACTOR_ALL_REDUCE:
        return 2.0 * (ranks - 1) / ranks
    return (ranks - 1) / ranks


def bandwidths_gbps(collective: str, size_bytes: int, time_us: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes) for `size_bytes` moved in `time_us` microseconds."""
    if time_us <= 0:
        return 0.0, 0.0
    algbw = size_bytes / time_us / 1e3
    return algbw, algbw * busbw_factor(collective, ranks)


class Status(enum.Enum):
    PASSED = "passed"
    FAILED = "failed"


class FailureKind(enum.Enum):
    """Why a line is evidence; `decisive` kinds fail the table they occur in."""

    NCCL_WARN = "nccl_warn"
    TEST_FAILURE = "test_failure"
    """`Test NCCL failure`, `Test CUDA failure`, `Test failure` lines from nccl-tests' checks."""
    OUT_OF_BOUNDS = "out_of_bounds"
    WRONG_RESULTS = "wrong_results"
    BANDWIDTH_BELOW_MINIMUM = "bandwidth_below_minimum"
    NO_RESULTS = "no_results"

    @property
    def decisive(self) -> bool:
        return self is not FailureKind.NCCL_WARN


class Layout(enum.Enum):
    CURRENT = "current"
    """`#wrong` columns (nccl-tests 2.x since 2020)."""
    LEGACY = "legacy"
    """`error` columns holding the maximum error, no `#wrong` (early nccl-tests)."""


@dataclass(frozen=True, slots=True)
class Measurement:
    """One placement (out-of-place or in-place) of one row."""

    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None = None
    """Wrong elements; None when printed `N/A` (no check for this placement) or the layout has no column."""
    error: float | None = None
    """Maximum error, only in the legacy layout."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "time_us": self.time_us,
            "algbw_gbps": self.algbw_gbps,
            "busbw_gbps": self.busbw_gbps,
            "wrong": self.wrong,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One message size of a table."""

    size_bytes: int
    count: int
    type: str
    redop: str | None
    root: int | None
    out_of_place: Measurement
    in_place: Measurement | None
    line_number: int = 0

    @property
    def wrong(self) -> int:
        """Wrong elements over both placements (N/A counts as none)."""
        placements = (self.out_of_place, self.in_place)
        return sum(p.wrong or 0 for p in placements if p is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line_number,
            "size_bytes": self.size_bytes,
            "count": self.count,
            "type": self.type,
            "redop": self.redop,
            "root": self.root,
            "out_of_place": self.out_of_place.to_dict(),
            "in_place": self.in_place.to_dict() if self.in_place else None,
        }


@dataclass(frozen=True, slots=True)
class FailureLine:
    line_number: int
    kind: FailureKind
    text: str
    host: str | None = None
    """The host named by the line's NCCL prefix (`h100-4:739787:739914 [1] ...`), when it has one."""

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line_number, "kind": self.kind.value, "host": self.host, "text": self.text}


@dataclass(frozen=True, slots=True)
class RankDevice:
    """A `#  Rank N Group G Pid P on HOST device D [BUS] NAME` line."""

    rank: int
    host: str
    pid: int
    device: int
    bus_id: str
    name: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "host": self.host,
            "pid": self.pid,
            "device": self.device,
            "bus_id": self.bus_id,
            "name": self.name,
        }


@dataclass(frozen=True)
class NcclTable:
    """One result table with its footer and the evidence seen while it was open."""

    collective: str | None
    """The binary's stem (`all_reduce`, `alltoall`, ...); None when neither printed nor inferable."""
    collective_inferred: bool
    """True when no binary name was printed and the collective was read off redop, root and busbw/algbw."""
    stream: str
    header_line: int | None
    """None when rows appeared without a header (a log cut at the top); the current layout is assumed."""
    layout: Layout
    rows: tuple[ResultRow, ...]
    out_of_bounds: int | None
    avg_busbw_gbps: float | None
    failure_lines: tuple[FailureLine, ...] = ()
    devices: tuple[RankDevice, ...] = ()

    @property
    def status(self) -> Status:
        return Status.FAILED if any(f.kind.decisive for f in self.failure_lines) else Status.PASSED

    @property
    def peak_row(self) -> ResultRow | None:
        """The row with the highest out-of-place busbw (the largest size wins a tie)."""
        rows = [r for r in self.rows if r.out_of_place.busbw_gbps is not None]
        return max(rows, key=lambda r: (r.out_of_place.busbw_gbps, r.size_bytes), default=None)

    @property
    def max_busbw_gbps(self) -> float | None:
        peak = self.peak_row
        return peak.out_of_place.busbw_gbps if peak else None

    @property
    def max_in_place_busbw_gbps(self) -> float | None:
        values = [r.in_place.busbw_gbps for r in self.rows if r.in_place and r.in_place.busbw_gbps is not None]
        return max(values, default=None)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(sorted({d.host for d in self.devices}))

    def to_dict(self) -> dict[str, Any]:
        peak = self.peak_row
        return {
            "collective": self.collective,
            "collective_inferred": self.collective_inferred,
            "stream": self.stream,
            "header_line": self.header_line,
            "layout": self.layout.value,
            "status": self.status.value,
            "row_count": len(self.rows),
            "max_busbw_gbps": self.max_busbw_gbps,
            "max_busbw_size_bytes": peak.size_bytes if peak else None,
            "max_in_place_busbw_gbps": self.max_in_place_busbw_gbps,
            "avg_busbw_gbps": self.avg_busbw_gbps,
            "out_of_bounds": self.out_of_bounds,
            "hosts": list(self.hosts),
            "failure_lines": [f.to_dict() for f in self.failure_lines],
            "devices": [d.to_dict() for d in self.devices],
            "rows": [r.to_dict() for r in self.rows],
        }


@dataclass(frozen=True)
class NcclLog:
    """Everything read from one log: its tables (in order of their first line) and all evidence."""

    tables: tuple[NcclTable, ...]
    failure_lines: tuple[FailureLine, ...]

    @property
    def status(self) -> Status:
        if not self.tables:
            return Status.FAILED
        failed = any(t.status is Status.FAILED for t in self.tables)
        stray = any(f.kind.decisive for f in self.failure_lines)
        return Status.FAILED if failed or stray else Status.PASSED

    @property
    def failure_reasons(self) -> tuple[FailureLine, ...]:
        """The decisive lines, plus a synthetic NO_RESULTS line when no table was printed."""
        decisive = tuple(f for f in self.failure_lines if f.kind.decisive)
        if not self.tables:
            return (FailureLine(0, FailureKind.NO_RESULTS, "no nccl-tests result table in the log"), *decisive)
        return decisive

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "table_count": len(self.tables),
            "failure_lines": [f.to_dict() for f in self.failure_lines],
            "tables": [t.to_dict() for t in self.tables],
        }


# --- reading -------------------------------------------------------------------------------------

_COLLECTIVE_NAMES = "|".join(sorted(COLLECTIVES, key=len, reverse=True))
_BINARY = re.compile(rf"(?<![A-Za-z])({_COLLECTIVE_NAMES})_perf(?:_mpi)?\b")
_EARLY_COLLECTIVES = {
    f.replace("_", ""): f for f in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
}
_EARLY_BINARY = re.compile(rf"(?<![A-Za-z])({'|'.join(sorted(_EARLY_COLLECTIVES, key=len, reverse=True))})_test\b")
"""NCCL 1's test binaries (`./build/test/allreduce_test`, NVIDIA/nccl README 2015)."""
_EARLY_COLUMNS = {"bytes": "size", "N": "count", "op": "redop", "res": "error"}
"""The earliest header's names for today's columns."""
_MILLISECONDS = 1e3
_DEVICE = re.compile(
    r"#\s+Rank\s+(?P<rank>\d+)(?:\s+Group\s+\d+)?\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*)$"  # stripped in code: `.*?\s*$` is O(n²)
)
_OUT_OF_BOUNDS = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_AVG = re.compile(r"Avg bus bandwidth\s*:\s*(" + lines.NUMBER + r"|nan|-?inf)\s*(OK|FAILED)?", re.IGNORECASE)
_TEST_FAILURE = re.compile(r"\bTest (?:NCCL |CUDA |NVSHMEM )?failure\b")
_NCCL_PREFIX_HOST = re.compile(r"^\s*(?:\.\.\s+)?([A-Za-z0-9][\w.-]*)(?::\d+:\d+ \[\d+\]|: Test | pid \d+:)")

_PLACEMENT_COLUMNS = ("time", "algbw", "busbw", "wrong", "error")


def parse(text: str) -> NcclLog:
    """Read every table and every piece of failure evidence in an nccl-tests log."""
    reader = _Reader()
    for line in lines.log_lines(text):
        reader.feed(line)
    return reader.finish()


@dataclass
class _TableBuilder:
    stream: str
    header_line: int | None
    columns: tuple[str, ...]
    collective: str | None
    devices: tuple[RankDevice, ...]
    first_line: int
    rows: list[ResultRow] = field(default_factory=list)
    failures: list[FailureLine] = field(default_factory=list)
    out_of_bounds: int | None = None
    avg_busbw_gbps: float | None = None
    closed: bool = False
    time_scale_us: float = 1.0
    """Microseconds per unit of the `time` columns (1000 under the earliest, millisecond header)."""

    def build(self) -> NcclTable:
        rows = tuple(self.rows)
        failures = list(self.failures)
        if not rows:
            failures.append(FailureLine(self.first_line, FailureKind.NO_RESULTS, "table header without result rows"))
        for row in rows:
            if row.wrong > 0:
                text = f"{row.size_bytes} bytes: {row.wrong} wrong elements"
                failures.append(FailureLine(row.line_number, FailureKind.WRONG_RESULTS, text))
        collective, inferred = self.collective, False
        if collective is None:
            collective = _infer_collective(rows)
            inferred = collective is not None
        failures.sort(key=lambda f: f.line_number)
        return NcclTable(
            collective=collective,
            collective_inferred=inferred,
            stream=self.stream,
            header_line=self.header_line,
            layout=Layout.LEGACY if "error" in self.columns else Layout.CURRENT,
            rows=rows,
            out_of_bounds=self.out_of_bounds,
            avg_busbw_gbps=self.avg_busbw_gbps,
            failure_lines=tuple(failures),
            devices=self.devices,
        )


_CURRENT_COLUMNS = (
    "size",
    "count",
    "type",
    "redop",
    "root",
    "time",
    "algbw",
    "busbw",
    "wrong",
    "time",
    "algbw",
    "busbw",
    "wrong",
)


class _Reader:
    """The state machine: per stream a collective hint, the device lines seen, the open table."""

    def __init__(self) -> None:
        self.tables: list[_TableBuilder] = []
        self.open: dict[str, _TableBuilder] = {}
        self.hints: dict[str, str] = {}
        self.last_hint: str | None = None
        self.devices: dict[str, list[RankDevice]] = {}
        self.failures: list[FailureLine] = []

    def feed(self, line: lines.LogLine) -> None:
        text = line.text
        stripped = text.lstrip()
        table = self.open.get(line.stream)
        leading = table is not None and table.columns[:1] != ("size",)
        if (stripped[:1].isdigit() or leading) and not stripped.startswith("#") and self._row(line, stripped):
            return
        body = stripped.lstrip("#").strip()
        if "busbw" in body:
            words = body.split()
            if ("size" in words and "count" in words) or ("bytes" in words and "N" in words):
                self._header(line, body)
                return
        if "Out of bounds values" in text or "Avg bus bandwidth" in text:
            self._footer(line, text)
            return
        if "Rank" in text and "Pid" in text:
            device = _DEVICE.match(stripped)
            if device:
                self._device(line.stream, device)
                return
        if "_perf" in text:
            binary = _BINARY.search(text)
            if binary:
                self.hints[line.stream] = self.last_hint = binary.group(1)
        elif "_test" in text:
            early = _EARLY_BINARY.search(text)
            if early:
                self.hints[line.stream] = self.last_hint = _EARLY_COLLECTIVES[early.group(1)]
        if "NCCL WARN" in text:
            self._failure(line, FailureKind.NCCL_WARN)
        elif "failure" in text and _TEST_FAILURE.search(text):
            self._failure(line, FailureKind.TEST_FAILURE)

    def _row(self, line: lines.LogLine, stripped: str) -> bool:
        tokens = stripped.split()
        table = self.open.get(line.stream)
        columns = table.columns if table else _CURRENT_COLUMNS
        lead = columns.index("size")  # the header's columns before `size` (a rank, a host) are read as named
        if len(tokens) < lead + 6 or not tokens[lead].isdigit() or not tokens[lead + 1].isdigit():
            return False
        row = _parse_row(tokens, columns, line.number, table.time_scale_us if table else 1.0)
        if row is None:
            return False
        if table is None:
            if len(tokens) != len(_CURRENT_COLUMNS):
                return False
            table = self._start(line, None, _CURRENT_COLUMNS)
        table.rows.append(row)
        return True

    def _header(self, line: lines.LogLine, body: str) -> None:
        words = body.split()
        earliest = "bytes" in words and "N" in words and "size" not in words
        aliases = _EARLY_COLUMNS if earliest else {}
        columns = tuple("wrong" if t in ("#wrong", "wrong") else aliases.get(t, t) for t in words)
        table = self._start(line, line.number, columns)
        if earliest:
            table.time_scale_us = _MILLISECONDS

    def _start(self, line: lines.LogLine, header_line: int | None, columns: tuple[str, ...]) -> _TableBuilder:
        previous = self.open.pop(line.stream, None)
        if previous:
            previous.closed = True
        hint = self.hints.get(line.stream, self.last_hint)
        devices = tuple(self.devices.pop(line.stream, ()))
        table = _TableBuilder(line.stream, header_line, columns, hint, devices, line.number)
        self.tables.append(table)
        self.open[line.stream] = table
        return table

    def _footer(self, line: lines.LogLine, text: str) -> None:
        table = self._table_for(line.stream, include_closed=True)
        oob = _OUT_OF_BOUNDS.search(text)
        if oob:
            try:
                count: int | None = lines.parse_count(oob.group(1))
            except ValueError:
                count = None  # more digits than any count: certainly not zero
            failed = oob.group(2) == "FAILED" or (oob.group(2) is None and (count is None or count > 0))
            if table:
                table.out_of_bounds = count
            if failed:
                self._failure(line, FailureKind.OUT_OF_BOUNDS, table)
            return
        avg = _AVG.search(text)
        if avg:
            if table:
                try:
                    table.avg_busbw_gbps = lines.parse_number(avg.group(1))
                except ValueError:  # nan, inf, or a number no bandwidth is
                    table.avg_busbw_gbps = None
                table.closed = True
                self.open.pop(line.stream, None)
            if avg.group(2) == "FAILED":
                self._failure(line, FailureKind.BANDWIDTH_BELOW_MINIMUM, table)

    def _device(self, stream: str, match: re.Match[str]) -> None:
        try:
            rank, pid, index = (lines.parse_count(match[k]) for k in ("rank", "pid", "device"))
        except ValueError:
            return  # not a device line nccl-tests prints
        device = RankDevice(
            rank=rank,
            host=match["host"],
            pid=pid,
            device=index,
            bus_id=match["bus"],
            name=match["name"].rstrip(),
        )
        self.devices.setdefault(stream, []).append(device)

    def _table_for(self, stream: str, *, include_closed: bool = False) -> _TableBuilder | None:
        table = self.open.get(stream)
        if table is None and self.open:
            table = max(self.open.values(), key=lambda t: t.first_line)
        if table is None and include_closed and self.tables:
            candidates = [t for t in self.tables if t.stream == stream] or self.tables
            table = candidates[-1]
        return table

    def _failure(self, line: lines.LogLine, kind: FailureKind, table: _TableBuilder | None = None) -> None:
        text = line.text.strip()
        host = _NCCL_PREFIX_HOST.match(text)
        failure = FailureLine(line.number, kind, text, host.group(1) if host else None)
        self.failures.append(failure)
        owner = table or self._table_for(line.stream)
        if owner is not None:
            owner.failures.append(failure)

    def finish(self) -> NcclLog:
        tables = tuple(t.build() for t in sorted(self.tables, key=lambda t: t.first_line))
        return NcclLog(tables=tables, failure_lines=tuple(self.failures))


def _parse_row(
    tokens: Sequence[str], columns: Sequence[str], line_number: int, time_scale_us: float = 1.0
) -> ResultRow | None:
    """Map row tokens onto the header's columns; None when the line is not a result row."""
    values: dict[str, str] = {}
    placements: list[dict[str, str]] = []
    for name, token in zip(columns, tokens, strict=False):
        if name in _PLACEMENT_COLUMNS:
            if name == "time":
                placements.append({})
            if placements:
                placements[-1][name] = token
        else:
            values[name] = token
    try:
        size, count = lines.parse_count(values["size"]), lines.parse_count(values["count"])
        root = lines.parse_count(values["root"]) if "root" in values else None
        measured = [_measurement(p, time_scale_us) for p in placements]
    except (KeyError, ValueError):
        return None
    if not measured or measured[0].busbw_gbps is None or "type" not in values:
        return None
    return ResultRow(
        size_bytes=size,
        count=count,
        type=values["type"],
        redop=values.get("redop"),
        root=root,
        out_of_place=measured[0],
        in_place=measured[1] if len(measured) > 1 and measured[1].busbw_gbps is not None else None,
        line_number=line_number,
    )


def _measurement(columns: dict[str, str], time_scale_us: float = 1.0) -> Measurement:
    wrong = columns.get("wrong")
    error = columns.get("error")
    time = _optional_float(columns.get("time"))
    return Measurement(
        time_us=None if time is None else time * time_scale_us,
        algbw_gbps=_optional_float(columns.get("algbw")),
        busbw_gbps=_optional_float(columns.get("busbw")),
        wrong=None if wrong is None or wrong == "N/A" else int(_optional_float(wrong) or 0),
        error=_optional_float(error),
    )


def _optional_float(text: str | None) -> float | None:
    """A column's value; None for `N/A`. Non-finite text (`inf`, `nan`) is not a result row."""
    if text is None or text == "N/A":
        return None
    return lines.parse_number(text)


TYPE_BYTES = {
    "int8": 1,
    "uint8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "float": 4,
    "float32": 4,
    "int64": 8,
    "uint64": 8,
    "double": 8,
    "float64": 8,
}
"""nccl-tests' data types (`-d`) and their element sizes (`wordSize` in nccl-tests' common.cu)."""


def elements_per_count(row: ResultRow) -> float | None:
    """size / (count × element size): 1 for all_reduce, broadcast and reduce, the rank count for
    reduce_scatter, all_gather and alltoall (nccl-tests prints the whole buffer's bytes beside one
    rank's count); None for a type it does not know or a zero count."""
    width = TYPE_BYTES.get(row.type.lower())
    if width is None or row.count == 0:
        return None
    return row.size_bytes / (row.count * width)


def _infer_collective(rows: Sequence[ResultRow]) -> str | None:
    """Name an unnamed table from what its rows show, only where every row agrees and nothing rules
    the name out.

    The rows' size/count ratio (`elements_per_count`) must be the same on every row with a count:
    1 allows all_reduce, broadcast, reduce; n > 1 (the rank count) reduce_scatter, all_gather,
    alltoall. root >= 0 with redop `none` is a broadcast, with a reduction op a reduce (ratio 1).
    root -1 with a reduction op: all_reduce at ratio 1 with busbw/algbw = 2(n-1)/n >= 1, or
    reduce_scatter at ratio n with busbw/algbw = (n-1)/n. `none` with root -1 (all_gather or
    alltoall) stays unknown; so does anything the rows contradict.
    """
    if not rows:
        return None
    first = rows[0]
    if first.redop is None or any((r.redop, r.root, r.type) != (first.redop, first.root, first.type) for r in rows):
        return None
    ratios = {round(ratio, 3) for r in rows if r.count and (ratio := elements_per_count(r)) is not None}
    if len(ratios) > 1:
        return None
    ratio = ratios.pop() if ratios else None
    if first.root is not None and first.root >= 0:
        if ratio not in (None, 1.0):
            return None
        return "broadcast" if first.redop == "none" else "reduce"
    if first.redop == "none":
        return None
    biggest = max(rows, key=lambda r: r.size_bytes)
    algbw, busbw = biggest.out_of_place.algbw_gbps, biggest.out_of_place.busbw_gbps
    if not algbw or busbw is None or busbw == 0:
        return None
    factor = busbw / algbw
    if factor >= 0.995:
        return "all_reduce" if ratio in (None, 1.0) else None
    if ratio is None:
        return "reduce_scatter"
    if ratio > 1 and abs(factor - (ratio - 1) / ratio) <= 0.02:
        return "reduce_scatter"
    return None
