"""Area of concern: component processes are tracked by PID and start time and stopped as whole
process groups, so a reused PID is never signalled and nothing survives a stop."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import time
from pathlib import Path

from dsx.sim import processes


def _sleeper(tmp_path: Path, marker: str) -> processes.ProcessRecord:
    # a shell that starts a child: stopping must take the whole group
    argv = [shutil.which("sh") or "/bin/sh", "-c", f"sleep 60 & sleep 61; : {marker}"]
    return processes.start("sleeper", argv, tmp_path / "logs" / "sleeper.log", die_with_parent=True)


def test_stop_ends_the_process_group(tmp_path: Path) -> None:
    marker = str(tmp_path / "marker-a")
    record = _sleeper(tmp_path, marker)
    assert processes.alive(record)
    assert record.pid in processes.strays(marker)
    assert processes.stop([record], grace_seconds=5) == []
    assert not processes.alive(record)
    assert processes.strays(marker) == []


def test_a_record_with_another_start_time_is_not_that_process(tmp_path: Path) -> None:
    record = _sleeper(tmp_path, str(tmp_path / "marker-b"))
    try:
        impostor = dataclasses.replace(record, start_ticks=record.start_ticks + 1)
        assert not processes.alive(impostor)
        assert processes.stop([impostor]) == []
        assert processes.alive(record)
    finally:
        processes.stop([record])


def test_records_round_trip_and_logs_are_tailed(tmp_path: Path) -> None:
    record = processes.ProcessRecord("etcd", 42, 7, str(tmp_path / "etcd.log"))
    assert processes.ProcessRecord.from_dict(record.to_dict()) == record
    (tmp_path / "etcd.log").write_text("one\ntwo\nthree\n")
    assert processes.log_tail(tmp_path / "etcd.log", lines=2) == "two | three"
    assert processes.log_tail(tmp_path / "absent.log") == ""


def test_how_a_finished_component_ended_is_told(tmp_path: Path) -> None:
    failing = processes.start("etcd", ["/bin/sh", "-c", "echo boom; exit 3"], tmp_path / "etcd.log")
    killed = _sleeper(tmp_path, str(tmp_path / "marker-c"))
    os.killpg(killed.pid, signal.SIGTERM)
    for _ in range(200):
        if not processes.alive(failing) and not processes.alive(killed):
            break
        time.sleep(0.05)
    assert not processes.alive(failing) and not processes.alive(killed)
    assert processes.exit_description(failing) == "exited with status 3"
    assert processes.exit_description(killed) == "was killed by SIGTERM"
    stranger = processes.ProcessRecord("kwok", 1 << 22, 0, str(tmp_path / "kwok.log"))  # not our child
    assert processes.exit_description(stranger) == "exited"


def test_the_tail_of_a_large_log_is_read_from_its_end(tmp_path: Path) -> None:
    log = tmp_path / "kube-apiserver.log"
    log.write_text("x" * (processes.LOG_TAIL_BYTES * 4) + "\n\nlast words\n")
    assert processes.log_tail(log, lines=1) == "last words"
