"""`dsx.atomic`: the one way files and folders are replaced (unique temporary names, fsync, rename)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from dsx import atomic


def test_a_crash_mid_write_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "state.json"
    atomic.write_file(target, "old")

    def dies(fd: int) -> None:
        raise OSError(5, "simulated crash before the data is durable")

    monkeypatch.setattr(atomic.os, "fsync", dies)
    with pytest.raises(OSError, match="simulated crash"):
        atomic.write_file(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["state.json"]


def test_concurrent_writers_use_distinct_temporary_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "shared.txt"
    seen: list[str] = []
    real_open = os.open
    lock = threading.Lock()

    def recording_open(path: object, flags: int, mode: int = 0o777) -> int:
        with lock:
            seen.append(str(path))
        return real_open(path, flags, mode)  # type: ignore[arg-type]

    monkeypatch.setattr(atomic.os, "open", recording_open)
    writers = [threading.Thread(target=atomic.write_file, args=(target, f"writer {n}\n" * 100)) for n in range(16)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    temporaries = [name for name in seen if name.endswith(".tmp")]
    assert len(temporaries) == 16 and len(set(temporaries)) == 16
    assert target.read_text() in {f"writer {n}\n" * 100 for n in range(16)}  # one writer's whole text
    assert os.listdir(tmp_path) == ["shared.txt"]


def test_write_folder_replaces_exactly_with_exact_modes(tmp_path: Path) -> None:
    folder = tmp_path / "bundle"
    atomic.write_folder(folder, {"a.txt": b"1", "old/gone.txt": b"x"})
    atomic.write_folder(folder, {"a.txt": b"2", "bin/run.sh": b"#!/bin/sh\n"}, executables={"bin/run.sh"})
    found = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert found == ["a.txt", "bin/run.sh"]
    assert (folder / "a.txt").read_bytes() == b"2"
    assert stat.S_IMODE((folder / "bin/run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "a.txt").stat().st_mode) == 0o644
    assert os.listdir(tmp_path) == ["bundle"]  # no staging or retired folder left


def test_a_failed_folder_write_keeps_the_old_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "chart"
    atomic.write_folder(folder, {"Chart.yaml": b"name: old\n"})
    calls = [0]
    real_fsync = os.fsync

    def dies_on_second(fd: int) -> None:
        calls[0] += 1
        if calls[0] == 2:
            raise OSError(28, "simulated full disk")
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", dies_on_second)
    with pytest.raises(OSError, match="full disk"):
        atomic.write_folder(folder, {"Chart.yaml": b"name: new\n", "values.yaml": b"a: 1\n"})
    assert (folder / "Chart.yaml").read_bytes() == b"name: old\n"
    assert os.listdir(tmp_path) == ["chart"]


def test_a_folder_of_many_files_is_written_whole_by_several_writers(tmp_path: Path) -> None:
    files = {f"d{i % 7}/f{i}.txt": f"file {i}\n".encode() * (i + 1) for i in range(120)}
    executables = {name for i, name in enumerate(sorted(files)) if i % 5 == 0}
    atomic.write_folder(tmp_path / "b", files, executables=executables)
    found = {p.relative_to(tmp_path / "b").as_posix(): p for p in (tmp_path / "b").rglob("*") if p.is_file()}
    assert {name: path.read_bytes() for name, path in found.items()} == files
    assert {name for name, path in found.items() if stat.S_IMODE(path.stat().st_mode) == 0o755} == executables


def test_a_writer_failing_among_many_stops_the_others_and_keeps_the_old_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    folder = tmp_path / "b"
    atomic.write_folder(folder, {"old.txt": b"old"})
    threads_before = set(threading.enumerate())
    calls = [0]
    counting = threading.Lock()
    real_fsync = os.fsync

    def dies_on_tenth(fd: int) -> None:
        with counting:  # four writers call this at once
            calls[0] += 1
            tenth = calls[0] == 10
        if tenth:
            raise OSError(28, "simulated full disk")
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", dies_on_tenth)
    with pytest.raises(OSError, match="full disk"):
        atomic.write_folder(folder, {f"f{i}": b"x" for i in range(200)})
    assert calls[0] < 200  # the other writers stopped
    assert set(threading.enumerate()) <= threads_before  # every writer has finished
    assert os.listdir(tmp_path) == ["b"]
    assert os.listdir(folder) == ["old.txt"]
