"""Area of concern: every nccl-tests layout people post reads to the values its README states,
and the table the local executor writes reads back unchanged."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from dsx.certify.parsing import nccl, nccl_writer

DATA = Path(__file__).resolve().parents[3] / "data" / "nccl"
GiB = 1 << 30
MiB = 1 << 20


def sample(name: str) -> str:
    """The sample without its `# source:` header line (line numbers kept)."""
    lines = (DATA / name).read_text(encoding="utf-8").split("\n")
    return "\n".join(["", *lines[1:]])


@dataclass(frozen=True)
class Expected:
    file: str
    collective: str | None
    inferred: bool
    rows: int
    first_size: int
    last_size: int
    avg: float | None
    max_busbw: float
    max_busbw_size: int
    status: nccl.Status
    out_of_bounds: int | None


# Values as the README in tests/data/nccl states them.
EXPECTED = [
    Expected(
        "01-allreduce-h100-2node-gcp-a3mega.log",
        "all_reduce",
        False,
        31,
        8,
        8 * GiB,
        70.742,
        338.82,
        8 * GiB,
        nccl.Status.PASSED,
        0,
    ),
    Expected(
        "02-allreduce-gb200-nvl72-1rack.log",
        "all_reduce",
        True,
        5,
        512 * MiB,
        8 * GiB,
        745.53,
        839.16,
        4 * GiB,
        nccl.Status.PASSED,
        0,
    ),
    Expected(
        "05-alltoall-gb300-1node-oci.log",
        "alltoall",
        False,
        16,
        512 * 1024,
        16 * GiB,
        381.478,
        627.69,
        16 * GiB,
        nccl.Status.PASSED,
        0,
    ),
    Expected(
        "06-allreduce-h200-1node-16G-azure-nhc.log",
        "all_reduce",
        False,
        1,
        16 * GiB,
        16 * GiB,
        480.11,
        479.97,
        16 * GiB,
        nccl.Status.PASSED,
        0,
    ),
    Expected(
        "07-allgather-v100-outofbounds-FAILED.log",
        "all_gather",
        False,
        1,
        4 * GiB,
        4 * GiB,
        128.942,
        129.05,
        4 * GiB,
        nccl.Status.FAILED,
        2,
    ),
    Expected(
        "11-allreduce-h100-2node-tree-low-busbw.log",
        "all_reduce",
        False,
        5,
        2 * MiB,
        32 * MiB,
        None,
        41.31,
        32 * MiB,
        nccl.Status.PASSED,
        None,
    ),
    Expected(
        "14-allreduce-a100-2node-p4de-srun-label-prefix.log",
        "all_reduce",
        True,
        29,
        8,
        2 * GiB,
        None,
        78.33,
        2 * GiB,
        nccl.Status.PASSED,
        None,
    ),
    Expected(
        "15-allreduce-titanx-nccl1-2015-bytes-header.log",
        "all_reduce",  # named by `./build/test/allreduce_test`
        False,
        20,
        10_000_000,
        10_000_000,
        None,
        9.33,
        10_000_000,
        nccl.Status.PASSED,
        None,
    ),
    Expected(
        "16-allreduce-a100-2node-efa-mpirun-tag-output.log",
        "all_reduce",
        True,
        28,
        8,
        1 * GiB,
        7.80081,
        32.71,
        1 * GiB,
        nccl.Status.PASSED,
        0,
    ),
]


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: e.file[:2])
def test_sample_reads_to_readme_values(expected: Expected) -> None:
    log = nccl.parse(sample(expected.file))
    assert len(log.tables) == 1
    table = log.tables[0]
    assert table.collective == expected.collective
    assert table.collective_inferred is expected.inferred
    assert len(table.rows) == expected.rows
    assert table.rows[0].size_bytes == expected.first_size
    assert table.rows[-1].size_bytes == expected.last_size
    assert table.avg_busbw_gbps == expected.avg
    assert table.max_busbw_gbps == expected.max_busbw
    assert table.peak_row is not None and table.peak_row.size_bytes == expected.max_busbw_size
    assert table.out_of_bounds == expected.out_of_bounds
    assert table.status is expected.status
    assert log.status is expected.status


def test_a3mega_largest_row_and_hosts() -> None:
    table = nccl.parse(sample("01-allreduce-h100-2node-gcp-a3mega.log")).tables[0]
    last = table.rows[-1]
    assert (last.out_of_place.busbw_gbps, last.in_place and last.in_place.busbw_gbps) == (338.82, 337.35)
    assert {r.type for r in table.rows} == {"float"} and {r.redop for r in table.rows} == {"sum"}
    assert all(r.wrong == 0 for r in table.rows)
    assert table.hosts == ("ztan-mig-235z", "ztan-mig-gq73")
    assert len(table.devices) == 16 and table.devices[8].bus_id == "0000:04:00"


def test_nvl72_largest_row_has_in_place_above_out_of_place_peak() -> None:
    table = nccl.parse(sample("02-allreduce-gb200-nvl72-1rack.log")).tables[0]
    last = table.rows[-1]
    assert last.out_of_place.busbw_gbps == 834.57
    assert last.in_place is not None and last.in_place.busbw_gbps == 846.82
    assert table.max_in_place_busbw_gbps == 846.82
    assert table.max_busbw_gbps == 839.16  # out-of-place, the figure thresholds use


def test_alltoall_in_place_not_checked_is_not_an_error() -> None:
    table = nccl.parse(sample("05-alltoall-gb300-1node-oci.log")).tables[0]
    assert all(r.in_place is not None and r.in_place.wrong is None for r in table.rows)
    assert all(r.redop == "none" for r in table.rows)
    peak = table.peak_row
    assert peak is not None and peak.out_of_place.algbw_gbps == 836.92
    assert table.failure_lines == ()


def test_legacy_layout_reads_error_column_and_fails_on_out_of_bounds() -> None:
    log = nccl.parse(sample("07-allgather-v100-outofbounds-FAILED.log"))
    table = log.tables[0]
    assert table.layout is nccl.Layout.LEGACY
    row = table.rows[0]
    assert row.root is None and row.redop is None
    assert row.out_of_place.error == 1.0 and row.out_of_place.wrong is None
    assert (row.out_of_place.busbw_gbps, row.in_place and row.in_place.busbw_gbps) == (129.05, 128.84)
    assert [f.kind for f in table.failure_lines] == [nccl.FailureKind.OUT_OF_BOUNDS]
    assert table.failure_lines[0].text == "Out of bounds values : 2 FAILED"


def test_the_earliest_header_reads_bytes_n_op_res_and_milliseconds() -> None:
    """NCCL 1's tests (2015) and nccl-tests until 2019: `bytes N type op ... res`, time in ms."""
    table = nccl.parse(sample("15-allreduce-titanx-nccl1-2015-bytes-header.log")).tables[0]
    assert table.layout is nccl.Layout.LEGACY
    first = table.rows[0]
    assert (first.size_bytes, first.count, first.type, first.redop) == (10_000_000, 10_000_000, "char", "sum")
    assert first.out_of_place.time_us == pytest.approx(1628.0)  # printed 1.628 (ms)
    assert (first.out_of_place.algbw_gbps, first.out_of_place.busbw_gbps) == (6.14, 9.21)
    assert first.in_place is not None and first.in_place.busbw_gbps == 7.77
    assert [(r.type, r.redop) for r in table.rows[:5]] == [
        ("char", "sum"),
        ("char", "prod"),
        ("char", "max"),
        ("char", "min"),
        ("int", "sum"),
    ]
    errors = {(r.type, r.redop): r.out_of_place.error for r in table.rows if r.out_of_place.error}
    assert errors == {
        ("half", "sum"): 4e-03,
        ("half", "prod"): 1e-03,
        ("float", "sum"): 5e-07,
        ("float", "prod"): 1e-07,
        ("double", "prod"): 2e-16,
    }
    last = table.rows[-1]
    assert (last.type, last.redop, last.out_of_place.busbw_gbps, last.in_place and last.in_place.busbw_gbps) == (
        "double",
        "min",
        9.25,
        9.24,
    )
    # bandwidth agrees with the time only when it is read as milliseconds: 10 MB / 1.628 ms = 6.14 GB/s
    assert first.size_bytes / first.out_of_place.time_us / 1e3 == pytest.approx(6.14, abs=0.01)


def test_mpirun_tag_output_with_info_lines_between_header_and_rows() -> None:
    table = nccl.parse(sample("16-allreduce-a100-2node-efa-mpirun-tag-output.log")).tables[0]
    assert table.stream == "1,0" and table.layout is nccl.Layout.LEGACY
    last = table.rows[-1]
    assert (last.out_of_place.time_us, last.out_of_place.algbw_gbps, last.out_of_place.busbw_gbps) == (
        61556.0,
        17.44,
        32.71,
    )
    assert last.out_of_place.error == 5e-07
    assert last.in_place is not None and (last.in_place.time_us, last.in_place.busbw_gbps) == (61303.0, 32.84)


def test_init_failure_without_table_fails_with_the_warn_and_test_failure_lines() -> None:
    log = nccl.parse(sample("08-allreduce-h100-2node-init-failure-WARN.log"))
    assert log.tables == ()
    assert log.status is nccl.Status.FAILED
    texts = [f.text for f in log.failure_lines]
    assert any("NCCL WARN Net : connecting to address  with family 33621" in t for t in texts)
    assert "h100-4: Test NCCL failure common.cu:1057 'internal error / '" in texts
    assert {f.host for f in log.failure_lines} == {"h100-4"}
    assert log.failure_reasons[0].kind is nccl.FailureKind.NO_RESULTS


def test_srun_label_prefix_becomes_the_stream() -> None:
    table = nccl.parse(sample("14-allreduce-a100-2node-p4de-srun-label-prefix.log")).tables[0]
    assert table.stream == "0"
    assert all(r.wrong == 0 for r in table.rows)


TABLE_06 = sample("06-allreduce-h200-1node-16G-azure-nhc.log")


@pytest.mark.parametrize(
    "prefix",
    [
        "2026-02-16T10:00:04.000000000Z ",
        "2026-02-16T10:00:04.123-07:00 ",
        "[1,0]<stdout>:",
        "[0] ",
        "  3: ",
        "[rank0]:",
    ],
)
def test_rank_and_kubelet_prefixes_are_stripped(prefix: str) -> None:
    text = "\n".join(prefix + line for line in TABLE_06.split("\n"))
    table = nccl.parse(text).tables[0]
    assert table.collective == "all_reduce"
    assert table.rows[0].out_of_place.busbw_gbps == 479.97
    assert table.avg_busbw_gbps == 480.11


def test_interleaved_streams_stay_apart() -> None:
    first = [f"[1,0]<stdout>:{line}" for line in sample("06-allreduce-h200-1node-16G-azure-nhc.log").split("\n")]
    second = [f"[1,8]<stdout>:{line}" for line in sample("11-allreduce-h100-2node-tree-low-busbw.log").split("\n")]
    mixed = [line for pair in zip(first, second, strict=False) for line in pair] + first[len(second) :]
    log = nccl.parse("\n".join(mixed))
    by_stream = {t.stream: t for t in log.tables}
    assert len(by_stream["1,0"].rows) == 1 and by_stream["1,0"].avg_busbw_gbps == 480.11
    assert len(by_stream["1,8"].rows) == 5 and by_stream["1,8"].max_busbw_gbps == 41.31


def test_several_tables_in_one_log_keep_their_collectives() -> None:
    text = sample("01-allreduce-h100-2node-gcp-a3mega.log") + "\n" + sample("05-alltoall-gb300-1node-oci.log")
    log = nccl.parse(text)
    assert [(t.collective, len(t.rows)) for t in log.tables] == [("all_reduce", 31), ("alltoall", 16)]
    assert [t.avg_busbw_gbps for t in log.tables] == [70.742, 381.478]


def test_nccl_info_noise_between_rows_is_skipped() -> None:
    lines = TABLE_06.split("\n")
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("17179869184"))
    lines.insert(at, "node1:5026:5100 [0] NCCL INFO Channel 00/32 : 0 1 2 3 4 5 6 7")
    table = nccl.parse("\n".join(lines)).tables[0]
    assert len(table.rows) == 1 and table.status is nccl.Status.PASSED


def test_rows_without_header_start_a_table() -> None:
    rows = [line for line in TABLE_06.split("\n") if line.lstrip()[:1].isdigit() or "Avg" in line]
    table = nccl.parse("\n".join(rows)).tables[0]
    assert table.header_line is None and len(table.rows) == 1 and table.avg_busbw_gbps == 480.11


def test_wrong_results_fail_the_table() -> None:
    text = TABLE_06.replace("479.97      0", "479.97      3")
    table = nccl.parse(text).tables[0]
    assert table.rows[0].wrong == 3
    assert table.status is nccl.Status.FAILED
    assert [f.kind for f in table.failure_lines] == [nccl.FailureKind.WRONG_RESULTS]


def test_minimum_bandwidth_verdict_in_the_footer_fails_the_table() -> None:
    text = TABLE_06.replace("# Avg bus bandwidth    : 480.11", "# Avg bus bandwidth    : 480.11 FAILED")
    table = nccl.parse(text).tables[0]
    assert table.avg_busbw_gbps == 480.11
    assert [f.kind for f in table.failure_lines] == [nccl.FailureKind.BANDWIDTH_BELOW_MINIMUM]


def test_header_without_rows_is_a_failed_table() -> None:
    text = "\n".join(line for line in TABLE_06.split("\n") if not line.lstrip()[:1].isdigit() and "Avg" not in line)
    log = nccl.parse(text)
    assert log.tables[0].rows == ()
    assert [f.kind for f in log.tables[0].failure_lines] == [nccl.FailureKind.NO_RESULTS]
    assert log.status is nccl.Status.FAILED


def test_test_failure_while_a_table_is_open_fails_it_but_a_warn_alone_does_not() -> None:
    lines = TABLE_06.split("\n")
    at = next(i for i, line in enumerate(lines) if "Out of bounds" in line)
    warned = [*lines[:at], "vm:5026:5100 [0] transport/net.cc:12 NCCL WARN retrying", *lines[at:]]
    assert nccl.parse("\n".join(warned)).tables[0].status is nccl.Status.PASSED
    failed = [*lines[:at], "vm: Test NCCL failure common.cu:1057 'unhandled system error'", *lines[at:]]
    table = nccl.parse("\n".join(failed)).tables[0]
    assert table.status is nccl.Status.FAILED
    assert table.failure_lines[0].host == "vm"


def test_log_without_anything_fails() -> None:
    assert nccl.parse("").status is nccl.Status.FAILED
    assert nccl.parse("hello\nworld\n").tables == ()


def test_avg_of_nan_is_absent_not_zero() -> None:
    text = TABLE_06.replace("# Avg bus bandwidth    : 480.11", "# Avg bus bandwidth    : nan")
    assert nccl.parse(text).tables[0].avg_busbw_gbps is None


# --- bus bandwidth factors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("collective", "ranks", "factor"),
    [
        ("all_reduce", 8, 1.75),
        ("all_reduce", 2, 1.0),
        ("all_reduce", 1, 0.0),
        ("reduce_scatter", 8, 0.875),
        ("all_gather", 4, 0.75),
        ("alltoall", 4, 0.75),
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
    ],
)
def test_busbw_factor(collective: str, ranks: int, factor: float) -> None:
    assert nccl.busbw_factor(collective, ranks) == pytest.approx(factor)


def test_busbw_factor_refuses_unknown_collectives_and_no_ranks() -> None:
    with pytest.raises(ValueError, match="unknown collective"):
        nccl.busbw_factor("all_reduce_v", 8)
    with pytest.raises(ValueError, match="at least 1"):
        nccl.busbw_factor("all_reduce", 0)


@pytest.mark.parametrize(
    ("file", "collective", "ranks"),
    [
        ("01-allreduce-h100-2node-gcp-a3mega.log", "all_reduce", 16),
        ("02-allreduce-gb200-nvl72-1rack.log", "all_reduce", 72),
        ("05-alltoall-gb300-1node-oci.log", "alltoall", 4),
    ],
)
def test_factors_agree_with_what_nccl_tests_printed(file: str, collective: str, ranks: int) -> None:
    for row in nccl.parse(sample(file)).tables[0].rows:
        measured = row.out_of_place
        assert measured.algbw_gbps is not None and measured.busbw_gbps is not None
        expected = measured.algbw_gbps * nccl.busbw_factor(collective, ranks)
        assert measured.busbw_gbps == pytest.approx(expected, abs=0.02)


# --- writing ------------------------------------------------------------------------------------


def test_format_table_reproduces_the_a3mega_table_byte_for_byte() -> None:
    text = sample("01-allreduce-h100-2node-gcp-a3mega.log")
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if "out-of-place" in line) - 1
    end = next(i for i, line in enumerate(lines) if line.startswith("# Avg bus bandwidth"))
    expected = lines[start : end + 1]
    table = nccl.parse(text).tables[0]
    written = nccl_writer.format_table(table.rows, avg_busbw_gbps=70.742).split("\n")
    assert written[: len(expected)] == expected


def test_format_row_reproduces_not_checked_in_place_rows() -> None:
    text = sample("05-alltoall-gb300-1node-oci.log")
    printed = [line for line in text.split("\n") if line.lstrip()[:1].isdigit()]
    assert [nccl_writer.format_row(r) for r in nccl.parse(text).tables[0].rows] == printed


def test_format_run_reads_back_to_the_same_rows() -> None:
    rows = [
        nccl_writer.measure_row(
            "all_reduce",
            size_bytes=size,
            count=size // 4,
            type_name="float",
            redop="sum",
            root=-1,
            ranks=8,
            out_of_place_us=50.0 + size / 1e4,
            in_place_us=48.0 + size / 1e4,
        )
        for size in (1024, 1 << 20, 64 << 20)
    ]
    devices = [
        nccl.RankDevice(rank, f"node-{rank // 4}", 1000 + rank, rank % 4, "cpu", "gloo CPU") for rank in range(8)
    ]
    text = nccl_writer.format_run("all_reduce", rows, devices=devices)
    table = nccl.parse(text).tables[0]
    assert table.collective == "all_reduce" and table.collective_inferred is False
    assert table.hosts == ("node-0", "node-1")
    assert [r.size_bytes for r in table.rows] == [1024, 1 << 20, 64 << 20]
    for written, read in zip(rows, table.rows, strict=True):
        assert written.out_of_place.busbw_gbps is not None
        assert read.out_of_place.busbw_gbps == pytest.approx(written.out_of_place.busbw_gbps, abs=0.005)
        assert read.out_of_place.busbw_gbps == pytest.approx(read.out_of_place.algbw_gbps * 1.75, abs=0.02)
    values = [p.busbw_gbps for r in rows for p in (r.out_of_place, r.in_place) if p and p.busbw_gbps is not None]
    assert table.avg_busbw_gbps == pytest.approx(sum(values) / len(values), rel=1e-5)
    assert table.status is nccl.Status.PASSED and table.out_of_bounds == 0


def test_format_run_with_wrong_results_reads_back_failed() -> None:
    row = nccl_writer.measure_row(
        "broadcast",
        size_bytes=4096,
        count=1024,
        type_name="float",
        redop="none",
        root=0,
        ranks=4,
        out_of_place_us=20.0,
        in_place_us=20.0,
        out_of_place_wrong=5,
    )
    table = nccl.parse(nccl_writer.format_run("broadcast", [row])).tables[0]
    assert table.out_of_bounds == 1 and table.status is nccl.Status.FAILED
    assert table.rows[0].out_of_place.busbw_gbps == table.rows[0].out_of_place.algbw_gbps


def test_format_run_refuses_unknown_collective() -> None:
    with pytest.raises(ValueError, match="unknown collective"):
        nccl_writer.format_run("allreduce", [])


def test_streamed_pieces_compose_to_format_run() -> None:
    rows = [
        nccl_writer.measure_row(
            "alltoall",
            size_bytes=size,
            count=size // 4,
            type_name="float",
            redop="none",
            root=-1,
            ranks=4,
            out_of_place_us=30.0,
            in_place_us=31.0,
            in_place_wrong=None,
        )
        for size in (4096, 8192)
    ]
    streamed = (
        nccl_writer.format_preamble("alltoall", min_bytes=4096, max_bytes=8192)
        + nccl_writer.format_table_head()
        + "".join(nccl_writer.format_row(r) + "\n" for r in rows)
        + nccl_writer.format_footer(rows)
        + nccl_writer.format_conclusion("alltoall")
    )
    assert streamed == nccl_writer.format_run("alltoall", rows)
    assert all(r.in_place is not None and r.in_place.wrong is None for r in nccl.parse(streamed).tables[0].rows)


# --- collective inference against counts, and headers with leading columns -------------------------


def unnamed(text: str) -> str:
    """The log without the lines that name the binary: the collective must be read off the rows."""
    return "\n".join(line for line in text.split("\n") if "_perf" not in line)


def test_counts_that_rule_all_reduce_out_leave_the_collective_unknown() -> None:
    """Sample 07's all_gather rows (size = 8 x count x 4 bytes: eight ranks' buffers) under a modern
    header with `redop sum` and `root -1`: busbw = algbw looks like all_reduce, the counts rule it out."""
    text = unnamed(sample("07-allgather-v100-outofbounds-FAILED.log"))
    text = text.replace("count    type     time", "count    type   redop    root     time")
    text = text.replace("134217728   float    29122", "134217728   float     sum      -1    29122")
    (table,) = nccl.parse(text).tables
    assert len(table.rows) == 1 and table.rows[0].redop == "sum"
    assert nccl.elements_per_count(table.rows[0]) == 8.0
    assert (table.collective, table.collective_inferred) == (None, False)


def test_reduce_scatter_is_inferred_only_where_counts_and_busbw_agree() -> None:
    header = "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong"
    agree = "  268435456  8388608  float  sum  -1  2000.0  134.22  117.44  0  2000.0  134.22  117.44  0"
    clash = "  268435456  8388608  float  sum  -1  2000.0  134.22   67.11  0  2000.0  134.22   67.11  0"
    (table,) = nccl.parse(f"{header}\n{agree}\n").tables  # ratio 8, busbw/algbw = 7/8
    assert (table.collective, table.collective_inferred) == ("reduce_scatter", True)
    (table,) = nccl.parse(f"{header}\n{clash}\n").tables  # ratio 8 but busbw/algbw = 1/2
    assert table.collective is None


def test_an_all_reduce_with_matching_counts_is_still_inferred() -> None:
    (table,) = nccl.parse(unnamed(sample("01-allreduce-h100-2node-gcp-a3mega.log"))).tables
    assert (table.collective, table.collective_inferred) == ("all_reduce", True)
    assert {nccl.elements_per_count(r) for r in table.rows} == {1.0}


def test_a_header_with_a_leading_column_reads_every_row_by_its_names() -> None:
    """Sample 01 with a `host` column before `size` (as a wrapper that labels rows prints it): the
    header names the columns, so the same rows and values come out."""
    original = sample("01-allreduce-h100-2node-gcp-a3mega.log")
    (expected,) = nccl.parse(original).tables
    out = []
    for line in original.split("\n"):
        if line.startswith("#       size"):
            line = "#  host      size" + line[len("#       size") :]
        elif line.strip()[:1].isdigit() and len(line.split()) == 13:
            line = "  a3mega-1  " + line
        out.append(line)
    (table,) = nccl.parse("\n".join(out)).tables
    assert [(r.size_bytes, r.out_of_place.busbw_gbps, r.in_place) for r in table.rows] == [
        (r.size_bytes, r.out_of_place.busbw_gbps, r.in_place) for r in expected.rows
    ]
    assert table.max_busbw_gbps == expected.max_busbw_gbps == 338.82
