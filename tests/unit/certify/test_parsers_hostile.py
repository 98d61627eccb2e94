"""Area of concern: a workload's own output cannot stall or crash certification (issue 29). The
nccl-tests and training readers grow linearly with a line's length on lines crafted against
their patterns, and numbers no workload prints (5,000 digits, `1e2147483648`, counts past 64
bits) make a line unread, never an exception: `dsx certify parse` exits 0 or 1, never 8."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dsx.certify.parsing import lines, nccl, training
from dsx.cli.main import cli
from fixtures.bench import bench_module

READERS = {"training": training.parse, "nccl": nccl.parse}


crafted = bench_module("bench_parsers").crafted_workload_lines  # the benchmark's crafted lines, one list for both


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(crafted(1)))
def test_reading_grows_linearly_with_the_line(name: str) -> None:
    """Nothing is timed here (bench/bench_parsers.py measures): a 5 MB crafted line must be read
    inside the test's timeout. Linear reading takes well under a second at that length; the
    quadratic patterns these lines were built against took 14 s at 16 KB, years at 5 MB."""
    kind, short = crafted(80)[name]
    _, long = crafted(5000)[name]
    assert type(READERS[kind](long)) is type(READERS[kind](short))


NEMO2 = "Training epoch 0, iteration 1/10 | global_step: {step} | train_step_timing in s: {timing}"
MEGATRON = " [2026-01-01 00:00:00] iteration {step}/ 10 | elapsed time per iteration (ms): {timing} |"


@pytest.mark.parametrize(
    "line",
    [
        NEMO2.format(step="1e2147483648", timing="1.0"),
        NEMO2.format(step="9" * 5000, timing="1.0"),
        NEMO2.format(step="1", timing="9" * 5000),
        NEMO2.format(step="1", timing="1e999"),
        MEGATRON.format(step="9" * 5000, timing="100"),
        MEGATRON.format(step="1", timing="1e2147483648"),
    ],
    ids=["exponent", "step digits", "timing digits", "timing overflow", "megatron step", "megatron timing"],
)
def test_numbers_no_workload_prints_leave_the_line_unread(tmp_path: Path, line: str) -> None:
    log = tmp_path / "train.log"
    log.write_text("\n".join([NEMO2.format(step="0", timing="1.5"), line, NEMO2.format(step="2", timing="1.5")]))
    result = CliRunner().invoke(cli, ["certify", "parse", "training", str(log)])
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)


@pytest.mark.parametrize(
    "line",
    [
        "#  Rank " + "9" * 5000 + " Pid 1 on h device 0 [0x1b] NVIDIA H100",
        "# Out of bounds values : " + "9" * 5000 + " OK",
        "# Avg bus bandwidth    : " + "9" * 5000,
        "     8    2   float   sum   -1   " + "9" * 5000 + "   0.00   0.00   0   9.0   0.00   0.00   0",
        "  " + "9" * 5000 + "    2   float   sum   -1   9.0   0.00   0.00   0   9.0   0.00   0.00   0",
    ],
    ids=["rank", "out of bounds", "average", "time", "size"],
)
def test_nccl_numbers_no_run_prints_are_not_read(tmp_path: Path, line: str) -> None:
    log = tmp_path / "nccl.log"
    log.write_text("# nThread 1 nGpus 1\n" + line + "\n")
    result = CliRunner().invoke(cli, ["certify", "parse", "nccl", str(log)])
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)


def test_the_one_number_reader_is_bounded() -> None:
    assert lines.parse_number("5,856.25") == 5856.25
    assert lines.parse_count("-1") == -1 and lines.parse_count("123") == 123
    for text in ("9" * 65, "1e2147483648", "nan", "inf"):
        with pytest.raises(ValueError):
            lines.parse_number(text)
    for text in ("9" * 19, "1.5", "", "١٢"):
        with pytest.raises(ValueError):
            lines.parse_count(text)


def test_a_mean_of_finite_values_whose_sum_overflows_is_finite() -> None:
    """Found by `make fuzz`: two step times of 1e308 s made fmean raise (exit 8)."""
    statistic = training.Statistic.of([1e308, 1.5e308])
    assert statistic is not None and statistic.mean == 1.25e308 and statistic.count == 2
