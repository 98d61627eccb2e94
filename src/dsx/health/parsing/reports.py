"""nvidia-smi and dcgmi diag reports → HealthEvents.

Why: a node without NVML access, a support bundle or an operator's pasted report should feed
the same pipeline as the live monitors. `dsx.health.parsing.gpu_reports` reads the reports into
findings with suggested verdicts; this adapter only gives each finding the event shape,
using the NVML monitor's check names where the observation is the same (a pending row remap
reads `GpuRowRemap` whichever way it was seen), so quarantine rules match both.

Events are deterministic for a given report and time, so posting the same report twice stores
it once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from dsx.health.parsing import dcgm_diag, gpu_reports
from dsx.health.parsing.gpu_reports import FindingKind
from dsx.model.health import ComponentClass, Entity, EntityType, HealthEvent, ProcessingStrategy

SMI_AGENT = "nvidia-smi-report"
DIAG_AGENT = "dcgm-diag-report"

CHECK_NAMES: dict[FindingKind, str] = {
    FindingKind.ECC_UNCORRECTABLE: "GpuEccVolatile",
    FindingKind.ECC_CORRECTABLE: "GpuEccCorrectable",
    FindingKind.SRAM_THRESHOLD_EXCEEDED: "GpuEccSramThreshold",
    FindingKind.ROW_REMAP_PENDING: "GpuRowRemap",
    FindingKind.ROW_REMAP_FAILURE: "GpuRowRemap",
    FindingKind.RETIRED_PAGES_PENDING: "GpuRetiredPages",
    FindingKind.CLOCKS_THROTTLED: "GpuClockSlowdown",
    FindingKind.DIAG_FAILED: "DcgmDiag",
    FindingKind.DIAG_FAILED_DEPLOYMENT: "DcgmDiag",
    FindingKind.DIAG_WARNING: "DcgmDiag",
    FindingKind.DIAG_SKIPPED: "DcgmDiag",
    FindingKind.DIAG_INCOMPLETE: "DcgmDiag",
}
"""Every finding kind has a check name (an invariant test keeps this table complete)."""

ANALYSE_ONLY = frozenset(
    {FindingKind.ECC_CORRECTABLE, FindingKind.CLOCKS_THROTTLED, FindingKind.DIAG_SKIPPED, FindingKind.DIAG_INCOMPLETE}
)
"""Findings that are recorded and analysed but never act on a node by themselves."""


def finding_events(
    findings: Sequence[gpu_reports.Finding],
    *,
    node_name: str,
    agent: str,
    generated_at: datetime,
    source: str,
) -> list[HealthEvent]:
    """One unhealthy event per finding."""
    events: list[HealthEvent] = []
    for finding in findings:
        entities: list[Entity] = []
        if finding.gpu_index is not None:
            entities.append(Entity(EntityType.GPU, finding.gpu_index))
        if finding.pci_bdf:
            entities.append(Entity(EntityType.PCI, finding.pci_bdf))
        metadata = {"source": source}
        if finding.test:
            metadata["test"] = finding.test
        strategy = ProcessingStrategy.STORE_AND_ANALYSE if finding.kind in ANALYSE_ONLY else None
        events.append(
            HealthEvent(
                agent=agent,
                component_class=ComponentClass.GPU,
                check_name=CHECK_NAMES[finding.kind],
                node_name=node_name,
                generated_at=generated_at,
                is_fatal=finding.is_fatal,
                is_healthy=False,
                message=finding.message,
                recommended_action=finding.recommended_action,
                error_codes=(finding.error_code,),
                entities=tuple(entities),
                metadata=metadata,
                processing_strategy=strategy or ProcessingStrategy.EXECUTE_REMEDIATION,
            )
        )
    return events


def smi_events(text: str, *, node_name: str, generated_at: datetime, source: str) -> list[HealthEvent]:
    """Events from `nvidia-smi -q` output (text or `-x` XML)."""
    report = gpu_reports.parse_smi(text, source=source)
    return finding_events(
        report.findings(), node_name=node_name, agent=SMI_AGENT, generated_at=generated_at, source=source
    )


def diag_events(text: str, *, node_name: str, generated_at: datetime, source: str) -> list[HealthEvent]:
    """Events from `dcgmi diag` output (table or `-j` JSON)."""
    report = dcgm_diag.parse_diag(text, source=source)
    return finding_events(
        report.findings(), node_name=node_name, agent=DIAG_AGENT, generated_at=generated_at, source=source
    )
