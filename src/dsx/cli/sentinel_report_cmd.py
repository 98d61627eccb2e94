"""`dsx sentinel report smi|dcgm FILE`: what an nvidia-smi or dcgmi diag report says, as data.

The readers the report monitors use (`dsx.health.parsing.gpu_reports`, `dsx.health.parsing.dcgm_diag`), so a
support bundle's report, a pasted one or one from a node without NVML access can be checked by
hand, and, with `--node`, turned into the HealthEvents the sentinel would store
(`dsx.health.parsing.reports`; post them with any HTTP client to `/v1/events`).

`smi` reads `nvidia-smi -q` text and `-q -x` XML, whole or fragments; per GPU its counters and the
verdicts: throttled, uncorrectable ECC, row remap pending or failed, retired pages pending, and
reset required (any of the pending ones, or volatile uncorrectable errors, which a reset clears).
`dcgm` reads `dcgmi diag` tables and `-j` JSON (DCGM 2.x to 4.x): pass, fail, warn, skip per test
and GPU. Both exit 1 when a finding is fatal; a missing file exits 3, an unreadable or malformed
one 2. Keys are camelCase.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import click

from dsx.cli import output as cli_output
from dsx.cli.main import run_result

_NODE = click.option(
    "--node", "node_name", default=None, help="Also print the HealthEvents the sentinel would store for this node."
)


@click.group("report")
def report() -> None:
    """Read an nvidia-smi or dcgmi diag report (FILE or - for stdin): verdicts, findings, events."""


@report.command("smi")
@click.argument("file")
@_NODE
@cli_output.format_options
def smi(file: str, node_name: str | None, fmt: str, output: str | None) -> None:
    """Read `nvidia-smi -q` text or `-q -x` XML: per GPU counters and verdicts, then the findings."""
    from dsx.files import documents
    from dsx.health.parsing import gpu_reports, reports

    parsed = gpu_reports.parse_smi(documents.read_text(file), source=file)
    document = {
        "driver_version": parsed.driver_version,
        "cuda_version": parsed.cuda_version,
        "gpus": [_gpu(gpu) for gpu in parsed.gpus],
    }
    _emit(document, parsed.findings(), reports.SMI_AGENT, node_name, file, fmt, output)


@report.command("dcgm")
@click.argument("file")
@_NODE
@cli_output.format_options
def dcgm(file: str, node_name: str | None, fmt: str, output: str | None) -> None:
    """Read `dcgmi diag` output (table or -j JSON): per test and GPU pass, fail, warn or skip."""
    from dsx.files import documents
    from dsx.health.parsing import dcgm_diag, reports

    parsed = dcgm_diag.parse_diag(documents.read_text(file), source=file)
    _emit(parsed.to_dict(), parsed.findings(), reports.DIAG_AGENT, node_name, file, fmt, output)


def _gpu(gpu: Any) -> dict[str, Any]:
    """A GPU's counters as read, and the verdicts an operator asks for first."""
    ecc, rows, pages, reasons = gpu.ecc, gpu.remapped_rows, gpu.retired_pages, gpu.clock_event_reasons
    uncorrectable = bool(ecc and (ecc.volatile_uncorrectable or 0) > 0)
    remap_pending = bool(rows and rows.pending)
    pages_pending = bool(pages and pages.pending)
    return {
        "pci_bus_id": gpu.pci_bus_id,
        "pci_bdf": gpu.pci_bdf,
        "product_name": gpu.product_name,
        "uuid": gpu.uuid,
        "verdicts": {
            "throttled": bool(reasons and reasons.throttling),
            "throttle_reasons": list(reasons.throttling) if reasons else [],
            "ecc_uncorrectable": uncorrectable,
            "row_remap_pending": remap_pending,
            "row_remap_failed": bool(rows and rows.failure),
            "retired_pages_pending": pages_pending,
            "reset_required": uncorrectable or remap_pending or pages_pending,
        },
        "ecc": dataclasses.asdict(ecc) if ecc else None,
        "retired_pages": dataclasses.asdict(pages) if pages else None,
        "remapped_rows": dataclasses.asdict(rows) if rows else None,
        "clock_event_reasons_active": list(reasons.active) if reasons else None,
    }


def _emit(
    document: dict[str, Any],
    findings: list[Any],
    agent: str,
    node_name: str | None,
    source: str,
    fmt: str,
    output: str | None,
) -> None:
    """The report, its findings and (for a node) their events; exit 1 when a finding is fatal."""
    from dsx.health.parsing import reports
    from dsx.model import schema

    document = {**document, "findings": [f.to_dict() for f in findings]}
    if node_name:
        at = datetime.now(UTC)
        events = reports.finding_events(findings, node_name=node_name, agent=agent, generated_at=at, source=source)
        document["events"] = [e.to_dict() for e in events]
    shown = schema.camel_keys(document, data_keys=frozenset({"histogram_banks", "metadata"}))
    cli_output.emit(shown, fmt, output, table=_findings_table)
    if any(f.is_fatal for f in findings):
        run_result(1)


def _findings_table(document: dict[str, Any]) -> str:
    rows = [
        [
            f["kind"],
            "yes" if f["isFatal"] else "no",
            f["recommendedAction"],
            f["pciBdf"] or f["gpuIndex"] or "",
            f["message"][:80],
        ]
        for f in document["findings"]
    ]
    return cli_output.format_table(["finding", "fatal", "action", "gpu", "message"], rows) if rows else "no findings\n"
