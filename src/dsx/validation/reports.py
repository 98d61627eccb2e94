"""A validation report as CTRF JSON, JUnit XML and a plain table.

CTRF (Common Test Report Format) is what AICR emits and what CI dashboards read; each check
is one test with `suite` = [phase], its message, and its evidence under `extra`. JUnit XML is
for CI systems that only read JUnit. Both are deterministic: the only time in them is when the
facts were read (the snapshot's capture time), so the same snapshot gives the same bytes.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from datetime import datetime
from typing import Any

from dsx import serialization
from dsx.validation import results

CTRF_SPEC_VERSION = "1.0.0"


def _epoch_ms(timestamp: str) -> int:
    if not timestamp:
        return 0
    try:
        return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


def _tool(report: results.Report) -> dict[str, str]:
    name, _, version = report.generator.partition("/")
    return {"name": name or "dsx", "version": version} if version else {"name": name or "dsx"}


def ctrf(report: results.Report) -> dict[str, Any]:
    when = _epoch_ms(report.subject.captured_at)
    tests = [
        {
            "name": r.name,
            "status": r.status.value,
            "duration": 0,
            "suite": [r.phase.value],
            "message": r.message,
            "extra": {"phase": r.phase.value, "evidence": dict(r.evidence)},
        }
        for r in report.results
    ]
    summary = {
        "tests": len(report.results),
        "passed": report.count(results.Status.PASSED),
        "failed": report.count(results.Status.FAILED),
        "pending": 0,
        "skipped": report.count(results.Status.SKIPPED),
        "other": 0,
        "start": when,
        "stop": when,
    }
    out: dict[str, Any] = {"reportFormat": "CTRF", "specVersion": CTRF_SPEC_VERSION}
    if report.subject.captured_at:
        out["timestamp"] = report.subject.captured_at
    out["generatedBy"] = report.generator
    out["results"] = {
        "tool": _tool(report),
        "summary": summary,
        "tests": tests,
        "environment": {"appName": report.subject.recipe_name},
    }
    out["extra"] = {
        "recipe": {"name": report.subject.recipe_name, "digest": report.subject.recipe_digest},
        "snapshot": {"digest": report.subject.snapshot_digest, "capturedAt": report.subject.captured_at},
        "phases": {p.value: report.phase_status(p).value for p in report.phases},
        "verdict": "failed" if report.failed else "passed",
    }
    return out


def ctrf_json(report: results.Report) -> str:
    return serialization.dump_json(ctrf(report))


def junit_xml(report: results.Report) -> str:
    root = ElementTree.Element(
        "testsuites",
        {
            "name": f"dsx validate {report.subject.recipe_name}",
            "tests": str(len(report.results)),
            "failures": str(report.count(results.Status.FAILED)),
            "errors": "0",
            "skipped": str(report.count(results.Status.SKIPPED)),
            "time": "0",
        },
    )
    for phase in report.phases:
        checks = [r for r in report.results if r.phase is phase]
        attributes = {
            "name": phase.value,
            "tests": str(len(checks)),
            "failures": str(sum(1 for r in checks if r.status is results.Status.FAILED)),
            "errors": "0",
            "skipped": str(sum(1 for r in checks if r.status is results.Status.SKIPPED)),
            "time": "0",
        }
        if report.subject.captured_at:
            attributes["timestamp"] = report.subject.captured_at
        suite = ElementTree.SubElement(root, "testsuite", attributes)
        for result in checks:
            case = ElementTree.SubElement(
                suite, "testcase", {"name": result.name, "classname": f"dsx.validate.{phase.value}", "time": "0"}
            )
            if result.status is results.Status.FAILED:
                failure = ElementTree.SubElement(case, "failure", {"message": result.message, "type": "CheckFailed"})
                failure.text = json.dumps(dict(result.evidence), sort_keys=True, indent=2)
            elif result.status is results.Status.SKIPPED:
                ElementTree.SubElement(case, "skipped", {"message": result.message})
            else:
                ElementTree.SubElement(case, "system-out").text = result.message
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"


def table(report: results.Report) -> str:
    """Phase, check, status, message — one line per check, messages in full — and the verdict."""
    rows = [(r.phase.value, r.name.split("/", 1)[-1], r.status.value.upper(), r.message) for r in report.results]
    name_width = max([len("CHECK"), *(len(r[1]) for r in rows)])
    phase_width = max([len("PHASE"), *(len(r[0]) for r in rows)])
    lines = [f"{'PHASE'.ljust(phase_width)}  {'CHECK'.ljust(name_width)}  {'STATUS':7}  MESSAGE"]
    for phase, name, status, message in rows:
        lines.append(f"{phase.ljust(phase_width)}  {name.ljust(name_width)}  {status:7}  {message}")
    verdict = "FAILED" if report.failed else "PASSED"
    counts = ", ".join(f"{report.count(s)} {s.value}" for s in results.Status)
    lines.append("")
    lines.append(f"{verdict}: {report.subject.recipe_name}: {counts}")
    return "\n".join(lines) + "\n"
