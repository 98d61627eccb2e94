"""Area of concern: an NVSwitch SXid report (message, Severity and Data lines) is one record judged by
its message, through the parser, `dsx sentinel parse` and the kernel-log monitor; MIG-attributed
Xids keep their GPU's address; process names read however the driver pads them. Data:
tests/data/xid/sxid-reports.txt (sources in that folder's README)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from dsx.cli.sentinel_parse_cmd import parse
from dsx.health.parsing import xid
from dsx.host.kernel_log import FileFollower, KernelLogMonitor
from dsx.pipeline import source
from dsx.testing.inmemory import InMemoryEventStore

DATA = Path(__file__).resolve().parents[3] / "data" / "xid"


def report(name: str) -> str:
    """The lines of one `# report: NAME` block."""
    blocks: dict[str, list[str]] = {}
    current = ""
    for line in (DATA / "sxid-reports.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("# report: "):
            current = line.removeprefix("# report: ")
            blocks[current] = []
        else:
            blocks[current].append(line)
    return "\n".join(blocks[name]) + "\n"


def test_a_non_fatal_report_is_one_record_and_not_fatal() -> None:
    records = xid.parse_text(report("fm-guide-nonfatal"))
    assert [(r.code, r.is_fatal, r.recommended_action.name, r.device) for r in records] == [
        (28006, False, "NONE", "nvidia-nvswitch3")
    ]
    assert records[0].message.startswith("Non-fatal, Link 46 MC TS crumbstore MCTO")
    assert records[0].nvlink == 46


def test_a_continuation_line_alone_states_only_its_own_severity() -> None:
    """Read alone, a Severity 0 line is not fatal (it was escalated to CONTACT_SUPPORT before); a Data line never is."""
    lines = report("fm-guide-nonfatal").splitlines()
    severity, data = xid.parse_line(lines[1]), xid.parse_line(lines[2])
    assert severity is not None and severity.continuation and severity.stated_severity == 0
    assert not severity.is_fatal  # its own severity, not the catalog's escalation
    assert data is not None and data.continuation and not data.is_fatal


def test_interleaved_fatal_reports_give_one_fatal_record_per_report() -> None:
    records = xid.parse_text(report("gpud-fatal-interleaved"))
    assert all(r.is_fatal for r in records)
    assert not any(r.message.startswith("Data {") for r in records)  # Data lines inside a report join it
    per_switch = {d: [r.nvlink for r in records if r.device == d] for d in {r.device for r in records}}
    # one per report: nvswitch2's Severity line for instance 60 is a report whose message is not in
    # the excerpt; its Link 37 message and the Severity line for instance 37 are one report
    assert {d: len(links) for d, links in per_switch.items()} == {
        "nvidia-nvswitch1": 1,
        "nvidia-nvswitch0": 2,
        "nvidia-nvswitch2": 2,
    }
    assert per_switch["nvidia-nvswitch0"] == [63, 62]
    assert [r.message.split(" LTSSM")[0] for r in records if r.device == "nvidia-nvswitch2"] == [
        "Severity 1 Engine instance 60 Sub-engine instance 00",
        "Fatal, Link 37",
    ]


def test_a_severity_line_before_its_message_gives_the_record_and_the_message_joins_it() -> None:
    lines = report("fm-guide-nonfatal").splitlines()
    records = xid.parse_text("\n".join([lines[2], lines[1], lines[0]]))
    # Data opens the report (a record, never fatal), Severity gives the verdict, the message joins
    assert [(r.is_fatal, r.lines, r.stated_severity) for r in records] == [(False, 1, None), (False, 2, 0)]
    fatal = [line.replace("Severity 0", "Severity 1").replace("Non-fatal", "Fatal") for line in lines]
    records = xid.parse_text("\n".join([fatal[2], fatal[0], fatal[1]]))
    assert [r.is_fatal for r in records] == [False, True]  # exactly one fatal record per fatal report


def test_the_same_error_reported_again_later_is_a_new_record() -> None:
    text = report("fm-guide-nonfatal")
    filler = "".join(f"[{i}.0] eth0: link up\n" for i in range(xid.SXID_REPORT_LINES + 1))
    assert len(xid.parse_text(text + text)) == 2  # two message lines: two reports
    assert len(xid.parse_text(text + filler + text)) == 2
    severity = text.splitlines()[1] + "\n"  # the sim's injected SXid fault is a Severity line alone
    assert len(xid.parse_text(severity + severity)) == 2


def test_sentinel_parse_gives_no_fatal_record_for_the_non_fatal_report(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(report("fm-guide-nonfatal") + report("gpud-fatal-interleaved"), encoding="utf-8")
    result = CliRunner().invoke(parse, [str(log), "--format", "json"])
    assert result.exit_code == 0, result.output
    records = json.loads(result.output)
    assert [(r["code"], r["isFatal"]) for r in records] == [(28006, False)] + [(20034, True)] * 5


def test_the_monitor_stores_no_fatal_event_for_the_non_fatal_report_and_one_per_fatal_report(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(report("fm-guide-nonfatal"), encoding="utf-8")
    store = InMemoryEventStore()
    monitor = KernelLogMonitor("n1", FileFollower(log), tmp_path / "state.json", clock=lambda: 1_700_000_000.0)
    assert source.pump(monitor, store) == 1
    with log.open("a", encoding="utf-8") as handle:
        handle.write(report("gpud-fatal-interleaved").split("\n", 1)[0] + "\n")  # nvswitch1's one report
        handle.write(
            "[6781753.400600] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, "
            "Severity 1 Engine instance 48 Sub-engine instance 00\n"
        )
    assert source.pump(monitor, store) == 1
    monitor.close()
    assert [(s.event.error_codes, s.event.is_fatal) for s in store.events()] == [
        (("28006",), False),
        (("20034",), True),
    ]


def test_a_mig_attributed_xid_keeps_its_gpu_address_and_names_the_instance() -> None:
    records = xid.parse_text(report("a100-mig-contained"))
    assert [(r.code, r.pci_bdf, r.gpu_instance, r.pid) for r in records] == [
        (94, "0000:01:00.0", 5, 7194),
        (94, "0000:01:00.0", None, 7062),
    ]
    compute = xid.parse_line("NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 13, pid=9, name=a, Graphics Exception")
    assert compute is not None
    assert (compute.pci_bdf, compute.gpu_instance, compute.compute_instance, compute.process_name) == (
        "0000:3b:00.0",
        1,
        2,
        "a",
    )


def test_process_names_in_a_real_log_as_the_driver_prints_them() -> None:
    """gpud PR 46's dmesg excerpt: `pid='<unknown>', name=<unknown>` (no process) and
    `pid=1797828, name=pt_main_thread` (kernel_rc.c prints `pid=%s, name=%s` with no width, every
    release from 515.43.04 to 595.45.04)."""
    text = (DATA / "process-names.txt").read_text(encoding="utf-8").split("\n", 1)[1]
    records = xid.parse_text(text)
    assert [(r.code, r.pid, r.process_name, r.pci_address) for r in records] == [
        (13, None, None, "0000:cb:00"),
        (13, None, None, "0000:cb:00"),
        (13, None, None, "0000:cb:00"),
        (109, 1797828, "pt_main_thread", "0000:cb:00"),
    ]
    assert records[-1].message == "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005"
    assert records[0].message == "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"


def test_process_names_read_with_padding_or_without_a_pid() -> None:
    """Tolerance beyond the driver's own format: padding a log shipper may add, and the 570+ form
    without pid and name (`"NVRM: Xid (...): %d, %s%s"`, kernel_rc.c:393 at 595.45.04)."""
    for line, pid, name in [
        ("NVRM: Xid (PCI:0000:3b:00): 13, pid=1234,   name=python3, Graphics Exception", 1234, "python3"),
        ("NVRM: Xid (PCI:0000:3b:00): 13, name=python3, Graphics Exception", None, "python3"),
        ("NVRM: Xid (PCI:0000:3b:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception", None, None),
        ("NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception", None, None),
    ]:
        record = xid.parse_line(line)
        assert record is not None
        assert (record.pid, record.process_name, record.message) == (pid, name, "Graphics Exception"), line
