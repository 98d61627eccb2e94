"""Area of concern: nvidia-smi and dcgmi diag reports (real samples) become HealthEvents with the
NVML monitor's check names, the parser's verdicts, and keys that make a re-posted report a no-op."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from dsx.health.parsing import reports
from dsx.health.parsing.gpu_reports import FindingKind
from dsx.model.health import EntityType, HealthEvent, ProcessingStrategy, RecommendedAction
from dsx.testing.inmemory import InMemoryEventStore

AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_every_finding_kind_has_a_check_name() -> None:
    assert set(reports.CHECK_NAMES) == set(FindingKind)


def test_smi_report_with_a_pending_remap(testdata: Path) -> None:
    path = testdata / "health" / "reports" / "01-a100-xid63-dram-correctable-remap-pending.txt"
    events = reports.smi_events(path.read_text(), node_name="n3", generated_at=AT, source=path.name)
    assert [(e.check_name, e.error_codes, e.is_fatal, e.recommended_action) for e in events] == [
        ("GpuEccCorrectable", ("ECC_CORRECTABLE",), False, RecommendedAction.NONE),
        ("GpuRowRemap", ("ROW_REMAP_PENDING",), True, RecommendedAction.COMPONENT_RESET),
    ]
    assert events[0].processing_strategy is ProcessingStrategy.STORE_AND_ANALYSE
    assert events[1].processing_strategy is ProcessingStrategy.EXECUTE_REMEDIATION
    assert events[1].entity_values(EntityType.PCI) == ("0000:10:1c.0",)
    assert all(e.agent == "nvidia-smi-report" and e.node_name == "n3" for e in events)
    assert all(HealthEvent.from_dict(e.to_dict()) == e for e in events)


def test_dcgm_diag_failure_asks_for_field_diagnostics(testdata: Path) -> None:
    path = testdata / "health" / "reports" / "03-fail-r2-pcie-nvlink-down-a100-dcgm2.4.6.txt"
    events = reports.diag_events(path.read_text(), node_name="n3", generated_at=AT, source=path.name)
    failed = [e for e in events if e.error_codes == ("DIAG_FAILED",)]
    assert len(failed) == 1
    assert (failed[0].check_name, failed[0].is_fatal, failed[0].recommended_action) == (
        "DcgmDiag",
        True,
        RecommendedAction.RUN_FIELDDIAG,
    )
    assert failed[0].metadata["test"] == "PCIe"
    assert "NvLink link 0 is currently down" in failed[0].message


def test_posting_a_report_twice_stores_it_once(testdata: Path) -> None:
    path = testdata / "health" / "reports" / "01-a100-xid63-dram-correctable-remap-pending.txt"
    store = InMemoryEventStore()
    for _ in range(2):
        store.append(reports.smi_events(path.read_text(), node_name="n3", generated_at=AT, source=path.name))
    assert store.last_sequence() == 2
