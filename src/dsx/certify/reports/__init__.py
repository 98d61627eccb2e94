"""Certification reports: one JSON document, rendered to JUnit XML, HTML and a terminal summary.

`document(result)` is the single source: every other format renders it, so they cannot
disagree. Rendering is pure and deterministic (sorted, no clock): the same result gives the
same bytes. Field names follow NVCRE's results file where one exists (`result`,
`failedNodes`, `nodeResults`, `infrastructureFaults`).
"""

from __future__ import annotations

import math
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from dsx import __version__, serialization
from dsx.certify import engine, isolation, measure
from dsx.certify.reports import html as html_report
from dsx.certify.reports import judged
from dsx.model import certification as model

KIND = "CertificationReport"


def document(
    result: engine.CertificationResult,
    *,
    started_at: str | None = None,
    cluster: str | None = None,
    version: str = __version__,
) -> dict[str, Any]:
    """The report; `started_at` (ISO 8601 UTC) and `cluster` come from the caller, so rendering stays pure."""
    failed = result.failed_nodes
    return {
        "apiVersion": model.API_VERSION,
        "kind": KIND,
        "name": result.spec.name,
        "dsxVersion": version,
        "startedAt": started_at,
        "cluster": cluster,
        "executor": result.executor,
        "architecture": result.architecture or None,
        "ranksPerNode": result.spec.ranks_per_node,
        "result": result.result.value,
        "failedNodes": failed,
        "totals": {
            "nodes": len(result.nodes),
            "excluded": len(result.excluded),
            "workloadRuns": result.runs,
            "calibrationRuns": sum(c.calibration_runs for c in result.categories),
            "controlRuns": sum(c.control_runs for c in result.categories),
            "durationSeconds": round(result.duration_seconds, 1),
        },
        "injections": [str(i) for i in result.injections],
        "excludedNodes": [
            {"name": n, "reason": model.Reason.EXCLUDED.value, "exclusion": c.value} for n, c in result.excluded.items()
        ],
        "categories": [_category(c) for c in result.categories],
        "nodeResults": [v.to_dict() for v in result.node_verdicts.values()],
    }


def _category(category: engine.CategoryResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": category.name,
        "description": category.description,
        "workload": category.workload.value,
        "program": category.program.value,
        "ran": category.workload_id,
        "fabric": category.fabric,
        "interconnect": category.interconnect,
        "status": category.status.value,
        "scale": category.scale.value,
        "thresholds": [
            {
                "metric": a.metric.value,
                "expression": a.expression,
                "source": a.source,
                **({"measuredOn": a.measured_on} if a.measured_on else {}),
            }
            for a in category.applied.values()
        ],
        "references": {
            str(size): {m.value: round(v, 6) for m, v in sorted(values.items())}
            for size, values in category.references.items()
        },
        "runs": category.runs,
        "calibrationRuns": category.calibration_runs,
        "controlRuns": category.control_runs,
        "groups": [_group(g) for g in category.groups],
        "failedNodes": sorted(n for n, v in category.node_verdicts.items() if v.status is model.Status.FAILED),
    }
    if category.lacking:
        out["lacking"] = category.lacking
    if category.common_cause is not None:
        out["commonCause"] = category.common_cause.to_dict()
    if category.isolation is not None:
        out["isolation"] = _isolation(category.isolation, category.groups)
    return out


def _group(result: engine.GroupResult) -> dict[str, Any]:
    judgement = result.judgement
    out: dict[str, Any] = {
        "name": result.group.name,
        "nodes": list(result.group.nodes),
        "status": (model.Status.PASSED if judgement.passed else model.Status.FAILED).value,
        "run": judgement.run,
        "durationSeconds": round(judgement.duration_seconds, 2),
        **judgement.measurement.to_dict(),
    }
    if judgement.bounds:
        out["bounds"] = {m.value: round(v, 6) for m, v in sorted(judgement.bounds.items())}
    if result.group.domain:
        out["domain"] = result.group.domain
    if result.group.borrowed:
        out["borrowed"] = list(result.group.borrowed)
    if judgement.failure is not None:
        out["failure"] = judgement.failure.to_dict()
    return out


def _isolation(outcome: isolation.Outcome, groups: tuple[engine.GroupResult, ...]) -> dict[str, Any]:
    faulty = len(outcome.faulty)
    searched = sum(len(g.group.nodes) for g in groups if not g.judgement.passed)
    tree = []
    for probe in outcome.probes:
        entry: dict[str, Any] = {
            "index": probe.index,
            "round": probe.round,
            "stage": probe.stage.value,
            "nodes": list(probe.nodes),
            "passed": probe.passed,
            "parent": probe.parent,
        }
        if probe.inferred:
            entry["inferred"] = True
        if isinstance(probe.detail, measure.Judgement):
            entry["run"] = probe.detail.run
            metrics = probe.detail.measurement.metrics
            if model.Metric.BUS_BANDWIDTH_GBPS in metrics:
                entry["busBandwidthGBps"] = round(metrics[model.Metric.BUS_BANDWIDTH_GBPS], 6)
            entry["metrics"] = probe.detail.measurement.to_dict()["metrics"]
            if probe.detail.bounds:
                entry["bounds"] = {m.value: round(v, 6) for m, v in sorted(probe.detail.bounds.items())}
            if probe.detail.failure is not None:
                entry["reason"] = probe.detail.failure.reason.value
        tree.append(entry)
    return {
        "runs": outcome.runs
        - sum(1 for p in outcome.probes if p.stage is isolation.Stage.SCREENING and not p.inferred),
        "rounds": outcome.rounds,
        "bound": engine.isolation_bound(searched, faulty) if faulty else None,
        "confirmedFaulty": sorted(outcome.faulty),
        "unresolved": sorted(outcome.unresolved),
        "infrastructureFaults": [
            {"groupA": list(f.group_a), "groupB": list(f.group_b), "wholeBoundary": f.whole_boundary}
            for f in outcome.infrastructure_faults
        ],
        "tree": tree,
    }


def to_json(doc: dict[str, Any]) -> str:
    return serialization.dump_json(_finite(doc))


def html(doc: dict[str, Any]) -> str:
    return html_report.render(doc)


def junit(doc: dict[str, Any]) -> str:
    """One testsuite per certification, one testcase per category and per node."""
    cases: list[str] = []
    failures = 0
    for category in doc["categories"]:
        body = ""
        if category["status"] != model.Status.PASSED.value:
            failures += 1
            message = f"{category['name']} failed on {', '.join(category['failedNodes']) or 'a group or link'}"
            body = (
                f"<failure message={quoteattr(message)}>{escape(serialization.dump_json(category['groups']))}</failure>"
            )
        cases.append(f'    <testcase classname="dsx.certify" name={quoteattr(category["name"])}>{body}</testcase>')
    for node in doc["nodeResults"]:
        body = ""
        if node["status"] == model.Status.FAILED.value:
            failures += 1
            evidence = escape("\n".join(node.get("evidence", [])))
            kind = quoteattr(node.get("reason", ""))
            body = f"<failure message={quoteattr(node.get('message', ''))} type={kind}>{evidence}</failure>"
        elif node["status"] == model.Status.EXCLUDED.value:
            body = f"<skipped message={quoteattr('excluded: ' + node.get('exclusion', ''))}/>"
        cases.append(f'    <testcase classname="dsx.certify.nodes" name={quoteattr(node["name"])}>{body}</testcase>')
    header = (
        f'<testsuite name={quoteattr(doc["name"])} tests="{len(cases)}" failures="{failures}" errors="0" '
        f'skipped="{len(doc["excludedNodes"])}">'
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n  '
        + header
        + "\n"
        + "\n".join(cases)
        + "\n  </testsuite>\n</testsuites>\n"
    )


def summary(doc: dict[str, Any]) -> str:
    """The final table printed after a run."""
    lines = []
    rows = []
    for category in doc["categories"]:
        metric = judged.metrics(category)[0]
        worst = judged.worst(category, metric)
        bounds = sorted({b for g in category["groups"] if (b := judged.bound(category, metric, g)) is not None})
        iso = category.get("isolation")
        rows.append(
            [
                category["name"],
                category["status"],
                len(category["groups"]),
                category["runs"],
                metric.label,
                metric.with_unit(worst) if worst is not None else "-",
                _bounds(judged.comparison(category, metric), metric, bounds),
                ", ".join(category["failedNodes"]) or "-",
                iso["runs"] if iso else "-",
            ]
        )
    widths = [max(len(str(r[i])) for r in [_HEAD, *rows]) for i in range(len(_HEAD))]
    for row in [_HEAD, *rows]:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    for node in doc["nodeResults"]:
        if node["status"] != model.Status.PASSED.value:
            why = node.get("message") or node.get("exclusion", "")
            lines.append(f"{node['name']}: {node['status']} {node.get('reason', '')}: {why}")
    for category in doc["categories"]:
        for fault in (category.get("isolation") or {}).get("infrastructureFaults", []):
            lines.append(f"link fault between {','.join(fault['groupA'])} and {','.join(fault['groupB'])}")
    totals = doc["totals"]
    lines.append(
        f"result: {doc['result']}  nodes: {totals['nodes']}  excluded: {totals['excluded']}  "
        f"workload runs: {totals['workloadRuns']} (+{totals['calibrationRuns']} calibration, "
        f"{totals.get('controlRuns', 0)} control)  "
        f"failed nodes: {', '.join(doc['failedNodes']) or 'none'}"
    )
    return "\n".join(lines) + "\n"


def _bounds(comparison: str, metric: model.Metric, bounds: list[float]) -> str:
    """One bound, two, or the range the groups were held to (peers differ per round)."""
    if not bounds:
        return "-"
    if len(bounds) <= 2:
        return " / ".join(f"{comparison} {metric.with_unit(b)}" for b in bounds)
    return f"{comparison} {metric.with_unit(bounds[0])} … {metric.with_unit(bounds[-1])}"


_HEAD = [
    "category",
    "status",
    "groups",
    "runs",
    "judged on",
    "worst group",
    "threshold",
    "failed nodes",
    "isolation runs",
]


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
