"""nccl-tests output written the way nccl-tests prints it, for the local executor and the fake.

Why a writer beside the reader (`nccl`): the local executor measures collectives with torch and
prints them so that `nccl.parse` (and anyone's nccl-tests tooling) reads them back unchanged.
The column widths and number formats live here; the bus-bandwidth factors and the row model
live in `nccl`, which both directions share. tests/unit/certify/parsing/test_nccl_parsing.py
round-trips every piece.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dsx.certify.parsing.nccl import COLLECTIVES, Measurement, RankDevice, ResultRow, bandwidths_gbps

_LABEL_LINE = "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place" + " " * 10
_HEADER_LINE = (
    "#       size         count      type   redop    root"
    "     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
)
_UNITS_LINE = (
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
    "            (us)  (GB/s)  (GB/s)       "
)


def measure_row(
    collective: str,
    *,
    size_bytes: int,
    count: int,
    type_name: str,
    redop: str,
    root: int,
    ranks: int,
    out_of_place_us: float,
    in_place_us: float,
    out_of_place_wrong: int | None = 0,
    in_place_wrong: int | None = 0,
) -> ResultRow:
    """A result row from measured times, with algbw/busbw computed as nccl-tests does."""
    out_alg, out_bus = bandwidths_gbps(collective, size_bytes, out_of_place_us, ranks)
    in_alg, in_bus = bandwidths_gbps(collective, size_bytes, in_place_us, ranks)
    return ResultRow(
        size_bytes=size_bytes,
        count=count,
        type=type_name,
        redop=redop,
        root=root,
        out_of_place=Measurement(out_of_place_us, out_alg, out_bus, out_of_place_wrong),
        in_place=Measurement(in_place_us, in_alg, in_bus, in_place_wrong),
    )


def format_table(rows: Iterable[ResultRow], *, avg_busbw_gbps: float | None = None) -> str:
    """The table as nccl-tests prints it: label, header and units lines, rows and the footer.

    The average is the mean busbw over both placements of every row unless given.
    """
    rows = list(rows)
    return format_table_head() + "".join(format_row(r) + "\n" for r in rows) + format_footer(rows, avg_busbw_gbps)


def format_table_head() -> str:
    """The four lines above the rows (`#`, the placement labels, column names, units); for streaming."""
    return "\n".join(["#", _LABEL_LINE, _HEADER_LINE, _UNITS_LINE]) + "\n"


def format_footer(rows: Sequence[ResultRow], avg_busbw_gbps: float | None = None) -> str:
    """`# Out of bounds values`, `# Avg bus bandwidth` and the closing `#`, computed from `rows`."""
    oob = sum(1 for r in rows for p in (r.out_of_place, r.in_place) if p is not None and (p.wrong or 0) > 0)
    if avg_busbw_gbps is None:
        values = [p.busbw_gbps for r in rows for p in (r.out_of_place, r.in_place) if p and p.busbw_gbps is not None]
        avg_busbw_gbps = sum(values) / len(values) if values else 0.0
    return (
        f"# Out of bounds values : {oob} {'FAILED' if oob else 'OK'}\n# Avg bus bandwidth    : {avg_busbw_gbps:g} \n#\n"
    )


def format_row(row: ResultRow) -> str:
    """One row in nccl-tests' column widths (`%12li  %12li  %8s  %6s  %6i` then two placements)."""
    root = -1 if row.root is None else row.root
    text = f"{row.size_bytes:12d}  {row.count:12d}  {row.type:>8}  {row.redop or 'none':>6}  {root:6d}"
    for placement in (row.out_of_place, row.in_place):
        if placement is not None:
            text += _format_placement(placement)
    return text


def _format_placement(m: Measurement) -> str:
    wrong = "N/A" if m.wrong is None else str(m.wrong)
    return f"  {_format_time(m.time_us or 0.0):>7}  {m.algbw_gbps or 0.0:6.2f}  {m.busbw_gbps or 0.0:6.2f}  {wrong:>5}"


def _format_time(time_us: float) -> str:
    if time_us >= 10000:
        return f"{time_us:.0f}"
    if time_us >= 100:
        return f"{time_us:.1f}"
    return f"{time_us:.2f}"


def format_device(device: RankDevice) -> str:
    return (
        f"#  Rank {device.rank:2d} Group  0 Pid {device.pid:6d} on {device.host:>10} "
        f"device {device.device:2d} [{device.bus_id}] {device.name}"
    )


def format_preamble(
    collective: str,
    *,
    min_bytes: int,
    max_bytes: int,
    devices: Sequence[RankDevice] = (),
    step_factor: int = 2,
    warmup_iterations: int = 5,
    iterations: int = 20,
) -> str:
    """The lines before the table: start banner, run parameters and `# Using devices` with one line per rank."""
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}; known: {', '.join(COLLECTIVES)}")
    head = [
        f"# Collective test starting: {collective}_perf",
        f"# nThread 1 nGpus 1 minBytes {min_bytes} maxBytes {max_bytes} step: {step_factor}(factor) "
        f"warmup iters: {warmup_iterations} iters: {iterations} agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
        *(format_device(d) for d in devices),
    ]
    return "\n".join(head) + "\n"


def format_conclusion(collective: str) -> str:
    return f"# Collective test concluded: {collective}_perf\n"


def format_run(
    collective: str,
    rows: Sequence[ResultRow],
    *,
    devices: Sequence[RankDevice] = (),
    warmup_iterations: int = 5,
    iterations: int = 20,
) -> str:
    """A whole nccl-tests run: `format_preamble`, `format_table`, `format_conclusion`.

    A workload that prints rows as it measures them writes the same pieces one by one:
    preamble and `format_table_head()`, then `format_row(row)` per size, then `format_footer(rows)`.
    """
    sizes = [r.size_bytes for r in rows] or [0]
    preamble = format_preamble(
        collective,
        min_bytes=min(sizes),
        max_bytes=max(sizes),
        devices=devices,
        warmup_iterations=warmup_iterations,
        iterations=iterations,
    )
    return preamble + format_table(rows) + format_conclusion(collective)
