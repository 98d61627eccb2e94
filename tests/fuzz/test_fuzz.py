"""Area of concern: no document or log, however mangled, ends in an internal error (exit 8), a
traceback, a hang or a write outside the output folder.

The unmarked test runs a few hundred cases per kind (seconds, part of `make test`); the `fuzz`
marked one is `make fuzz`: 20,000+ cases per kind and parser, one process per CPU, and prints
the table (kind/parser, cases, exit-code histogram, slowest case). Failing inputs are kept under
the test's temporary folder, in failures/<kind>/, with the reason beside each."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from fuzz import harness

SMALL_CASES = 200
FUZZ_CASES = int(os.environ.get("DSX_FUZZ_CASES", "20000"))
SLOW = {"snapshot", "nccl-tests", "log-profile", "criteria-config", "recipe", "sentinel-policy"}


@pytest.mark.parametrize("name", sorted(harness.TARGETS))
def test_mangled_input_ends_in_a_clear_exit_code(name: str, tmp_path: Path) -> None:
    report = harness.fuzz(name, SMALL_CASES, tmp_path)
    assert report.cases >= SMALL_CASES * 0.9, report.row()
    assert report.failures == [], f"{report.row()}\n" + "\n".join(report.failures[:10])
    assert 8 not in report.exit_codes


def test_a_write_outside_the_output_folder_is_caught(tmp_path: Path) -> None:
    """The harness's own check can fail: a reader that writes beside its input is reported."""
    stray = tmp_path / "elsewhere.txt"
    target = harness.Target("stray", lambda: [], ".txt", False, call=lambda _p, _o: stray.write_text("x"))
    harness._install_hook()
    outcome = harness.run_case(target, tmp_path / "case", "text")
    assert outcome.problem is not None and str(stray) in outcome.problem


def test_a_hang_and_an_internal_error_are_caught(tmp_path: Path) -> None:
    def spin(_path: Path, _out: Path) -> None:
        while True:
            pass

    hang = harness.run_case(harness.Target("spin", lambda: [], ".txt", False, call=spin), tmp_path, "", timeout=0.2)
    crash = harness.run_case(harness.Target("crash", lambda: [], ".txt", False, call=lambda p, _o: 1 / 0), tmp_path, "")
    assert hang.problem is not None and hang.problem.startswith("hang")
    assert crash.exit_code == 8 and crash.problem is not None and "ZeroDivisionError" in crash.problem


def _fuzz_one(name: str, workdir: str) -> harness.Report:
    return harness.fuzz(name, FUZZ_CASES, Path(workdir))


@pytest.mark.fuzz
@pytest.mark.timeout(4 * 3600)  # 20,000 cases per kind take far longer than the suite's 300 s per test
def test_fuzz_every_kind_and_parser(tmp_path: Path) -> None:
    names = sorted(harness.TARGETS, key=lambda n: (n not in SLOW, n))  # the slowest start first
    workers = int(os.environ.get("DSX_FUZZ_JOBS", str(os.cpu_count() or 1)))
    with ProcessPoolExecutor(max_workers=min(workers, len(names))) as pool:
        reports = list(pool.map(_fuzz_one, names, [str(tmp_path)] * len(names)))
    print(f"\n{harness.table(reports)}\nfailing inputs: {tmp_path / 'failures'}")
    for report in reports:
        assert report.cases >= FUZZ_CASES * 0.99, report.row()
    problems = [f"{r.name}: {failure}" for r in reports for failure in r.failures]
    assert problems == [], "\n".join(problems[:30])
