"""Area of concern: the kernel-log monitor reads every line exactly once — across rename
rotation, copytruncate, a replaced file, a partial last line and restarts from the persisted
position — and turns Xid/SXid lines into deterministic HealthEvents; journald is read through
a journalctl argument list with cursors."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path

import pytest

from dsx.errors import BadInputError, UnavailableError
from dsx.health.parsing import xid
from dsx.host import kernel_log
from dsx.host.kernel_log import FileFollower, JournalReader, KernelLogMonitor
from dsx.model.health import ComponentClass, EntityType, RecommendedAction
from dsx.pipeline import source
from dsx.testing.inmemory import InMemoryEventStore

READ_AT = 1_796_000_000.0


@pytest.fixture
def data(testdata: Path) -> Path:
    return testdata / "health" / "kernel_log"


def write(path: Path, *lines: str, mode: str = "a") -> None:
    with path.open(mode, encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))


def texts(lines: list[kernel_log.LogLine]) -> list[str]:
    return [line.text for line in lines]


# -- FileFollower --------------------------------------------------------------------------------


def test_reads_complete_lines_and_waits_for_a_partial_one(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    write(log, "one", "two")
    log.open("a").write("thr")
    follower = FileFollower(log)
    assert texts(follower.read(100)) == ["one", "two"]
    assert follower.read(100) == []
    write(log, "ee", "four")
    assert texts(follower.read(1)) == ["three"]
    assert texts(follower.read(100)) == ["four"]
    follower.close()


def test_rename_rotation_finishes_the_old_file_first(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    write(log, "a1", "a2")
    follower = FileFollower(log)
    assert texts(follower.read(100)) == ["a1", "a2"]
    write(log, "a3")
    log.rename(tmp_path / "kern.log.1")
    write(log, "b1")
    assert texts(follower.read(100)) == ["a3"]
    assert texts(follower.read(100)) == ["b1"]
    write(log, "b2")
    assert texts(follower.read(100)) == ["b2"]
    follower.close()


def test_copytruncate_reads_the_rest_from_the_copy(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    write(log, "a1", "a2")
    follower = FileFollower(log)
    assert texts(follower.read(100)) == ["a1", "a2"]
    write(log, "a3")
    shutil.copyfile(log, tmp_path / "kern.log.1")
    write(log, "b1", mode="w")  # truncated in place, then written again (shorter than before)
    assert texts(follower.read(100)) == ["a3"]
    assert texts(follower.read(100)) == ["b1"]
    follower.close()


def test_a_restart_resumes_after_the_last_line(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    write(log, "a1", "a2", "a3")
    first = FileFollower(log)
    position = first.read(2)[-1].position
    first.close()
    second = FileFollower(log)
    second.seek(position)
    assert texts(second.read(100)) == ["a3"]
    second.close()


def test_a_restart_after_rotation_finds_the_rotated_file(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    write(log, "a1", "a2", "a3")
    first = FileFollower(log)
    position = first.read(1)[-1].position
    first.close()
    log.rename(tmp_path / "kern.log.1")  # rotated while the monitor was down
    write(log, "b1")
    (tmp_path / "kern.log.2.gz").write_bytes(b"\x1f\x8b not read")
    second = FileFollower(log)
    second.seek(position)
    assert texts(second.read(100)) == ["a2", "a3"]
    assert texts(second.read(100)) == ["b1"]
    second.close()


def test_a_replaced_file_is_read_from_the_start(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    write(log, "old line one", "old line two")
    first = FileFollower(log)
    position = first.read(1)[-1].position
    first.close()
    write(log, "new line one", "new line two", mode="w")  # same inode, same size, other text
    second = FileFollower(log)
    second.seek(position)
    assert texts(second.read(100)) == ["new line one", "new line two"]
    second.close()


def test_from_end_skips_history_but_not_a_file_created_later(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    write(log, "history")
    follower = FileFollower(log, from_end=True)
    follower.seek(None)
    assert follower.read(100) == []
    write(log, "new")
    assert texts(follower.read(100)) == ["new"]
    follower.close()
    missing = FileFollower(tmp_path / "later.log", from_end=True)
    missing.seek(None)
    assert missing.read(100) == []
    write(tmp_path / "later.log", "first")
    assert texts(missing.read(100)) == ["first"]
    missing.close()


# -- KernelLogMonitor over a file ------------------------------------------------------------------


def monitor_for(log: Path, state: Path) -> KernelLogMonitor:
    return KernelLogMonitor("n3", FileFollower(log), state, clock=lambda: READ_AT)


def test_xid_and_sxid_lines_become_events(tmp_path: Path, data: Path) -> None:
    log = tmp_path / "kern.log"
    shutil.copyfile(data / "kern.log", log)
    monitor = monitor_for(log, tmp_path / "state.json")
    events = monitor.poll()
    monitor.close()
    assert [(e.check_name, e.error_codes, e.entity_values(EntityType.PCI)) for e in events] == [
        ("KernelLogXid", ("79",), ("0000:10:00.0",)),
        ("KernelLogXid", ("79",), ("0000:91:00.0",)),
        ("KernelLogSXid", ("20034",), ("0000:07:00.0",)),
        ("KernelLogXid", ("45",), ("0000:01:00.0",)),
        ("KernelLogXid", ("31",), ("0000:01:00.0",)),
    ]
    fallen = events[0]
    assert (fallen.is_fatal, fallen.recommended_action, fallen.component_class) == (
        True,
        RecommendedAction.RESTART_BM,
        ComponentClass.GPU,
    )
    assert (
        fallen.message
        == "Sep 09 15:53:19 saturn kernel: NVRM: Xid (PCI:0000:10:00): 79, pid=0, GPU has fallen off the bus."
    )
    assert fallen.generated_at.timestamp() == READ_AT
    assert fallen.metadata["source"] == f"file:{log}"
    assert events[2].component_class is ComponentClass.NVSWITCH
    assert events[2].entity_values(EntityType.NVSWITCH) == ("nvidia-nvswitch2",)
    assert not events[3].is_fatal and events[3].recommended_action is RecommendedAction.NONE


def test_a_burst_of_one_code_on_one_gpu_is_one_event(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    write(log, *[f"[{100 + i}.000000] NVRM: Xid (PCI:0000:3b:00): 95, pid=7, Uncontained ECC error" for i in range(50)])
    write(log, "[151.000000] NVRM: Xid (PCI:0000:3c:00): 95, pid=7, Uncontained ECC error")
    monitor = monitor_for(log, tmp_path / "state.json")
    events = monitor.poll()
    monitor.close()
    assert [e.entity_values(EntityType.PCI) for e in events] == [("0000:3b:00.0",), ("0000:3c:00.0",)]


def test_lost_gpu_messages_become_events_and_the_split_one_is_joined(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    write(
        log,
        "[ 4.1] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build",
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0) installed in this system has",
        "[ 1843.308146] NVRM: fallen off the bus and is not responding to commands.",
        "[ 1843.400000] NVRM: Xid (PCI:0000:b3:00): 79, pid=0, GPU has fallen off the bus.",
        "[ 1900.000000] NVRM: GPU 0000:81:00.0: RmInitAdapter failed! (0x25:0x40:1470)",
        "[ 1901.000000] NVRM: Xid (PCI:0000:1b:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 03 (0x00000004 0x00000040)",
        "[ 1902.000000] NVRM: Xid (PCI:0000:1b:00): 11, pid=5, name=python3, Graphics Exception",
    )
    monitor = monitor_for(log, tmp_path / "state.json")
    events = monitor.poll()
    monitor.close()
    assert [(e.check_name, e.error_codes, e.entity_values(EntityType.PCI), e.is_fatal) for e in events] == [
        ("KernelLogXid", ("79",), ("0000:b3:00.0",), True),  # the Xid 79 after it is the same burst
        ("KernelLogGpuLost", ("RM_INIT_ADAPTER_FAILED",), ("0000:81:00.0",), True),
        ("KernelLogXid", ("145",), ("0000:1b:00.0",), True),
        ("KernelLogXid", ("11",), ("0000:1b:00.0",), False),  # RESTART_APP: recorded, never quarantines
    ]
    fallen, _, remap, app = events
    assert fallen.recommended_action is RecommendedAction.RESTART_BM
    assert fallen.message.count("\n") == 1 and fallen.metadata["lost_gpu"] == "GPU_FALLEN_OFF_THE_BUS"
    assert (remap.recommended_action, remap.metadata["immediate_action"]) == (
        RecommendedAction.COMPONENT_RESET,
        "RESET_GPU",
    )
    assert (remap.metadata["driver_version"], remap.metadata["driver_version_source"]) == ("575.57.08", "kernel-log")
    assert json.loads(remap.metadata["nvlink5_decode"])["layout"] == "V2"
    assert remap.entity_values(EntityType.NVLINK) == ("3",)
    assert app.metadata["immediate_action"] == "RESTART_APP" and app.recommended_action is RecommendedAction.NONE


def test_the_configured_driver_picks_the_layout_and_an_unmatched_decode_says_so(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    write(log, "NVRM: Xid (PCI:0000:1b:00): 145, RLW_REMAP Fatal XC0 i0 Link 03 (0x00000004 0x00000040)")
    configured = xid.parse_driver_version("570.124.06", "configuration")
    monitor = KernelLogMonitor("n3", FileFollower(log), tmp_path / "state.json", driver=configured)
    (event,) = monitor.poll()
    monitor.close()
    assert event.metadata["driver_version_source"] == "configuration"
    assert "no rule of the Xid 145 decode sheet" in event.metadata["nvlink5_note"]
    assert event.is_fatal and event.recommended_action is RecommendedAction.CONTACT_SUPPORT


def test_a_journal_message_holding_the_whole_multi_line_printk_is_one_event(tmp_path: Path) -> None:
    class OneEntry:
        source = "journald"

        def __init__(self) -> None:
            self.lines = [
                kernel_log.LogLine(
                    "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this system has\n"
                    "NVRM: fallen off the bus and is not responding to commands.",
                    {"cursor": "c1"},
                )
            ]

        def seek(self, position: object) -> None: ...

        def read(self, max_lines: int, max_bytes: int = kernel_log.BATCH_BYTES) -> list[kernel_log.LogLine]:
            lines, self.lines = self.lines, []
            return lines

        def close(self) -> None: ...

    monitor = KernelLogMonitor("n3", OneEntry(), tmp_path / "state.json", clock=lambda: READ_AT)
    (event,) = monitor.poll()
    assert (event.error_codes, event.entity_values(EntityType.PCI), event.recommended_action) == (
        ("79",),
        ("0000:b3:00.0",),
        RecommendedAction.RESTART_BM,
    )


def test_a_crash_before_commit_replays_the_same_events(tmp_path: Path, data: Path) -> None:
    log, state = tmp_path / "kern.log", tmp_path / "state.json"
    shutil.copyfile(data / "kern.log", log)
    store = InMemoryEventStore()
    first = monitor_for(log, state)
    seen = first.poll()
    store.append(seen)
    first.close()  # killed before commit
    write(log, "[200.0] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE (double bit error) ECC error")

    clock_after_restart = READ_AT + 3600
    second = KernelLogMonitor("n3", FileFollower(log), state, clock=lambda: clock_after_restart)
    replayed = second.poll()
    assert replayed == seen
    assert [a.created for a in store.append(replayed)] == [False] * len(seen)
    second.commit()
    (newer,) = second.poll()
    assert newer.error_codes == ("48",)
    assert newer.generated_at.timestamp() == clock_after_restart
    second.commit()
    second.close()

    third = monitor_for(log, state)
    assert third.poll() == []
    third.close()
    assert json.loads(state.read_text())["pending"] is None


def test_pump_stores_then_commits(tmp_path: Path, data: Path) -> None:
    log, state = tmp_path / "kern.log", tmp_path / "state.json"
    shutil.copyfile(data / "kern.log", log)
    store = InMemoryEventStore()
    monitor = monitor_for(log, state)
    assert source.pump(monitor, store) == 5
    assert source.pump(monitor, store) == 0
    write(log, "[300.0] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE (double bit error) ECC error")
    assert source.pump(monitor, store) == 1
    monitor.close()
    assert [s.event.error_codes for s in store.events()][-1] == ("48",)


def test_a_damaged_state_file_is_a_clear_error(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text("{not json")
    with pytest.raises(BadInputError, match="unreadable kernel-log monitor state"):
        monitor_for(tmp_path / "kern.log", state)
    state.write_text('{"version": 7}')
    with pytest.raises(BadInputError, match="version: expected 1"):
        monitor_for(tmp_path / "kern.log", state)


# -- journald ------------------------------------------------------------------------------------


def journal_reader(data: Path, journal: Path) -> JournalReader:
    return JournalReader(command=(sys.executable, str(data / "fake_journalctl.py"), str(journal)))


def test_journalctl_arguments() -> None:
    reader = JournalReader()
    assert reader.arguments() == ["journalctl", "-k", "-o", "json", "--no-pager", "-b"]
    reader.seek({"cursor": "s=1;i=a"})
    assert reader.arguments() == ["journalctl", "-k", "-o", "json", "--no-pager", "--after-cursor", "s=1;i=a"]


def test_journal_entries_become_events_and_resume_after_the_cursor(tmp_path: Path, data: Path) -> None:
    journal, state = tmp_path / "journal.jsonl", tmp_path / "state.json"
    shutil.copyfile(data / "journal.jsonl", journal)
    monitor = KernelLogMonitor("n3", journal_reader(data, journal), state, clock=lambda: READ_AT)
    events = monitor.poll()
    monitor.commit()
    monitor.close()
    assert [(e.error_codes, e.recommended_action) for e in events] == [
        (("79",), RecommendedAction.RESTART_BM),
        (("79",), RecommendedAction.RESTART_BM),
        (("154",), RecommendedAction.COMPONENT_RESET),
        (("154",), RecommendedAction.COMPONENT_RESET),
    ]
    assert events[0].generated_at.timestamp() == 1_796_000_001.0
    assert json.loads(events[0].metadata["position"]) == {"cursor": "s=boot1;i=1"}
    assert json.loads(state.read_text())["position"] == {"cursor": "s=boot1;i=5"}

    with journal.open("a") as handle:
        entry = {"__CURSOR": "s=boot1;i=6", "__REALTIME_TIMESTAMP": "1796000006000000", "MESSAGE": [78, 86, 82, 77]}
        handle.write(json.dumps(entry) + "\n")
        entry = {
            "__CURSOR": "s=boot1;i=7",
            "__REALTIME_TIMESTAMP": "1796000007000000",
            "MESSAGE": "NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE (double bit error) ECC error",
        }
        handle.write(json.dumps(entry) + "\n")
    restarted = KernelLogMonitor("n3", journal_reader(data, journal), state, clock=lambda: READ_AT)
    (newer,) = restarted.poll()
    restarted.commit()
    restarted.close()
    assert newer.error_codes == ("48",)
    assert json.loads(state.read_text())["position"] == {"cursor": "s=boot1;i=7"}


def _append_journal(journal: Path, index: int, message: str) -> None:
    entry = {"__CURSOR": f"s=boot1;i={index}", "__REALTIME_TIMESTAMP": f"17960000{index:02d}000000", "MESSAGE": message}
    with journal.open("a") as handle:
        handle.write(json.dumps(entry) + "\n")


def test_start_at_end_skips_the_boot_so_far_and_reads_what_comes_after(tmp_path: Path, data: Path) -> None:
    journal, state = tmp_path / "journal.jsonl", tmp_path / "state.json"
    shutil.copyfile(data / "journal.jsonl", journal)
    command = (sys.executable, str(data / "fake_journalctl.py"), str(journal))
    monitor = KernelLogMonitor("n3", JournalReader(command=command, from_end=True), state, clock=lambda: READ_AT)
    assert monitor.poll() == []  # four Xids already in this boot: not new
    monitor.commit()
    _append_journal(journal, 6, "NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE (double bit error) ECC error")
    (newer,) = monitor.poll()
    monitor.commit()
    monitor.close()
    assert newer.error_codes == ("48",)
    assert json.loads(state.read_text())["position"] == {"cursor": "s=boot1;i=6"}

    # a restart resumes at its cursor: start_at_end applies to a first start only
    _append_journal(journal, 7, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.")
    restarted = KernelLogMonitor("n3", JournalReader(command=command, from_end=True), state, clock=lambda: READ_AT)
    assert [e.error_codes for e in restarted.poll()] == [("79",)]


def test_start_at_end_on_an_empty_boot_reads_everything_that_arrives(tmp_path: Path, data: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    journal.write_text("")
    reader = JournalReader(command=(sys.executable, str(data / "fake_journalctl.py"), str(journal)), from_end=True)
    reader.seek(None)
    assert reader.read(10) == []
    _append_journal(journal, 1, "first kernel line")
    assert [line.text for line in reader.read(10)] == ["first kernel line"]


def test_a_catch_up_is_read_one_bounded_batch_at_a_time(tmp_path: Path, data: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    journal.write_text(
        "".join(
            json.dumps({"__CURSOR": f"s=b;i={i}", "__REALTIME_TIMESTAMP": "1796000000000000", "MESSAGE": f"line {i}"})
            + "\n"
            for i in range(1, 2001)
        )
    )
    reader = journal_reader(data, journal)
    reader.seek(None)
    first = reader.read(3)  # journalctl is stopped after three entries, not read to the end
    assert [line.text for line in first] == ["line 1", "line 2", "line 3"]
    assert [line.text for line in reader.read(2)] == ["line 4", "line 5"]
    rest = reader.read(5000)
    assert len(rest) == 1995 and rest[-1].position == {"cursor": "s=b;i=2000"}
    assert reader.read(5000) == []


def test_a_failing_journalctl_is_unavailable(tmp_path: Path, data: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    shutil.copyfile(data / "journal.jsonl", journal)
    reader = journal_reader(data, journal)
    reader.seek({"cursor": "s=gone;i=1"})
    with pytest.raises(UnavailableError, match="journalctl exited with 1: Failed to seek to cursor"):
        reader.read(10)
    missing = JournalReader(command=(str(tmp_path / "no-such-journalctl"),))
    with pytest.raises(UnavailableError, match="journalctl: "):
        missing.read(10)


def test_a_malformed_journal_line_is_skipped_and_the_cursor_moves_past_it(
    tmp_path: Path, data: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = tmp_path / "journal.jsonl"
    shutil.copyfile(data / "journal.jsonl", journal)
    reader = journal_reader(data, journal)
    reader.seek({"cursor": "s=boot1;i=5"})
    with journal.open("a") as handle:
        handle.write('{"MESSAGE": "no cursor here"}\n')
        handle.write('{"__CURSOR": "s=boot1;i=7", "__REALTIME_TIMESTAMP": "1796000007000000", "MESSAGE": "x"}\n')
    with caplog.at_level(logging.WARNING, logger="dsx.sentinel.monitor"):
        lines = reader.read(10)
    assert [dict(line.position) for line in lines] == [{"cursor": "s=boot1;i=7"}]
    assert "not a journal JSON entry" in caplog.text and "skipped" in caplog.text
    assert reader.read(10) == []  # the bad line is behind the cursor now


def test_a_policys_kernel_log_source_takes_a_driver_version() -> None:
    from dsx.health.decisions import policy

    def read(source: dict[str, object]) -> policy.SentinelPolicy:
        data = {"apiVersion": policy.API_VERSION, "kind": policy.KIND, "monitors": {"kernelLogs": [source]}}
        return policy.from_dict(data, source="sentinel.yaml")

    loaded = read({"node": "n3", "journal": True, "driverVersion": "575.57.08"})
    assert loaded.monitors.kernel_logs[0].driver_version == "575.57.08"
    with pytest.raises(BadInputError, match=r"sentinel.yaml.monitors.kernelLogs\[0\].driverVersion: driver version"):
        read({"node": "n3", "journal": True, "driverVersion": "latest"})


def test_a_message_split_across_a_restart_is_joined_and_the_banner_remembered(tmp_path: Path) -> None:
    log, state = tmp_path / "kern.log", tmp_path / "state.json"
    write(
        log,
        "[ 4.1] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build",
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0) installed in this system has",
    )
    first = monitor_for(log, state)
    assert first.poll() == []
    first.commit()
    first.close()
    write(
        log,
        "[ 1843.308146] NVRM: fallen off the bus and is not responding to commands.",
        "[ 1901.000000] NVRM: Xid (PCI:0000:1b:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 03 (0x00000004 0x00000040)",
    )
    second = monitor_for(log, state)
    fallen, remap = second.poll()
    second.close()
    assert (fallen.entity_values(EntityType.PCI), fallen.recommended_action) == (
        ("0000:b3:00.0",),
        RecommendedAction.RESTART_BM,
    )
    assert (remap.metadata["driver_version"], remap.metadata["driver_version_source"]) == ("575.57.08", "kernel-log")
    assert remap.recommended_action is RecommendedAction.COMPONENT_RESET


def test_a_replayed_batch_starts_from_the_committed_reader_state(tmp_path: Path) -> None:
    log, state = tmp_path / "kern.log", tmp_path / "state.json"
    write(log, "[ 1.0] NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0) installed in this system has")
    first = monitor_for(log, state)
    first.poll()
    first.commit()
    write(log, "[ 1.1] NVRM: fallen off the bus and is not responding to commands.")
    (before_crash,) = first.poll()  # stored, then the process dies before commit
    first.close()
    replay = monitor_for(log, state)
    (after_crash,) = replay.poll()
    replay.close()
    assert after_crash.idempotency_key == before_crash.idempotency_key


# -- bursts and recurrence (issue 29) -------------------------------------------------------------


def xid79_at(second: int) -> str:
    stamp = f"2026-12-02T10:{second // 60:02d}:{second % 60:02d}.000000+00:00"
    return f"{stamp} n3 kernel: NVRM: Xid (PCI:0000:83:00): 79, GPU has fallen off the bus."


def test_a_fatal_storm_is_a_few_events_and_every_line_is_counted(tmp_path: Path) -> None:
    """60 lines of Xid 79 on one GPU in 60 s: one event per 10 s window (the rest counted), so the
    store holds six events of one incident instead of one event hiding a fault for 300 s."""
    log = tmp_path / "kern.log"
    write(log, *(xid79_at(s) for s in range(60)))
    monitor = monitor_for(log, tmp_path / "state.json")
    events = monitor.poll()
    monitor.close()
    assert [e.generated_at.second for e in events] == [0, 10, 20, 30, 40, 50]
    assert len(events) + monitor.repeats_suppressed == 60


def test_the_same_fatal_fault_after_the_repair_is_a_new_event(tmp_path: Path) -> None:
    """Released ~20 s after the first line (as on the sim), the node faults again 60 s later: the
    line is stored, so quarantine acts on it; a non-fatal code keeps its 300 s window."""
    log = tmp_path / "kern.log"
    ecc = (
        "2026-12-02T10:00:{:02d}.000000+00:00 n3 kernel: NVRM: Xid (PCI:0000:83:00): 92, High single-bit ECC error rate"
    )
    write(log, xid79_at(0), ecc.format(1), xid79_at(80), ecc.format(59))
    monitor = monitor_for(log, tmp_path / "state.json")
    events = monitor.poll()
    monitor.close()
    assert [(e.error_codes, e.generated_at.minute, e.generated_at.second) for e in events] == [
        (("79",), 0, 0),
        (("92",), 0, 1),
        (("79",), 1, 20),
    ]
    assert monitor.repeats_suppressed == 1


def test_the_fatal_window_is_never_longer_than_the_window() -> None:
    dedup = xid.BurstDeduplicator(window_seconds=5, fatal_window_seconds=10)
    assert dedup.fatal_window_seconds == 5
    with pytest.raises(ValueError, match="positive"):
        xid.BurstDeduplicator(fatal_window_seconds=0)
