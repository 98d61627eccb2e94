"""Validity attestation: who validated which cluster against which recipe, and what they found.

The predicate of a DSSE envelope over an in-toto Statement whose subjects are the recipe, the
snapshot and the CTRF report — each by the sha256 of its file — and whose predicate binds the
validator's identity (signing key id and a name), the phases run with their outcome, and a
hardware summary (node count, GPU product, driver). It sits beside the report as
`<report>.intoto.jsonl` (and `<report>.sigstore.json`), so `dsx verify <report>` checks it
offline and any edit to the report, recipe or snapshot shows as tampering. This module builds
the claims (`predicate`); `dsx.files.signing.attest_beside` signs the files, so validation and
signing stay independent of each other and the entry points join them.
"""

from __future__ import annotations

from typing import Any

from dsx.model import snapshot
from dsx.validation import results

PREDICATE_TYPE = "https://dsx.run/attestation/validation/v1"


def hardware_summary(snap: snapshot.Snapshot) -> dict[str, Any]:
    """Node count, GPU nodes, GPU product(s), driver version(s) and total GPUs of the snapshot."""
    gpu_nodes = snap.gpu_nodes
    products = sorted({p for p in (n.gpu_product for n in gpu_nodes) if p})
    drivers = sorted({d for d in (n.gpu_driver_version for n in gpu_nodes) if d})
    gpus = 0
    for node in gpu_nodes:
        labels = node.gpu
        if labels is not None and labels.count is not None:
            gpus += labels.count
        elif node.host is not None:
            gpus += len(node.host.gpus) or len(node.host.pci_gpus)
    return {
        "nodeCount": len(snap.nodes),
        "gpuNodeCount": len(gpu_nodes),
        "gpuCount": gpus,
        "gpuProduct": products[0] if len(products) == 1 else ("mixed" if products else ""),
        "gpuProducts": products,
        "driverVersion": drivers[0] if len(drivers) == 1 else ("mixed" if drivers else ""),
        "driverVersions": drivers,
        "provider": snap.cluster.provider if snap.cluster else "",
        "kubernetesVersion": snap.cluster.server_version if snap.cluster else "",
    }


def performance_executors(report: results.Report) -> list[str]:
    """Where the performance checks ran: `kubernetes` on the cluster, `local` on the validator's machine."""
    return sorted(
        {
            str(r.evidence["executor"])
            for r in report.results
            if r.phase is results.Phase.PERFORMANCE and r.evidence.get("executor")
        }
    )


def predicate(report: results.Report, snap: snapshot.Snapshot, *, validator: str, key_id: str) -> dict[str, Any]:
    claims = {
        "validator": {"name": validator, "keyId": key_id},
        "generator": report.generator,
        "recipe": {"name": report.subject.recipe_name, "digest": report.subject.recipe_digest},
        "snapshot": {"digest": report.subject.snapshot_digest, "capturedAt": report.subject.captured_at},
        "phases": {p.value: report.phase_status(p).value for p in report.phases},
        "summary": {s.value: report.count(s) for s in results.Status},
        "verdict": "failed" if report.failed else "passed",
        "hardware": hardware_summary(snap),
    }
    if results.Phase.PERFORMANCE in report.phases:
        claims["performanceExecutors"] = performance_executors(report)
    return claims
