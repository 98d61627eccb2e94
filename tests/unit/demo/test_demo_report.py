"""Area of concern: the demo's summary and HTML page — the JSON carries what the issue asks
(isolated, remediated, artifacts), and the page is self-contained: no scripts, no external
URLs, links relative to the page, every text escaped."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from dsx.demo import journal, report


def finished_journal() -> journal.Journal:
    ticks = iter(float(i) for i in range(100))
    log = journal.Journal(
        lambda _: None, clock=lambda: next(ticks), wall_clock=lambda: datetime(2026, 1, 1, tzinfo=UTC)
    )
    log.run("recipe", "recipe", lambda: "13 components <ok>")
    log.note("gpu-node-02 → quarantined", source="sentinel", node="gpu-node-02", show=False)
    return log


def document(log: journal.Journal, out: Path) -> dict:
    return report.summary(
        log,
        isolated=[{"node": "gpu-node-05", "reason": "ThresholdViolation", "message": "busbw 0.03 < 0.2"}],
        remediated=[
            {
                "node": "gpu-node-02",
                "fault": "Xid 79",
                "states": ["quarantined", "draining", "drained", "remediating", "recertifying", "healthy"],
                "finalState": "healthy",
            }
        ],
        artifacts={"recipe": out / "recipe.yaml", "bundle": out / "bundle", "report": out / "report.html"},
        cluster={"name": "dsx-demo", "kept": False},
    )


def test_summary_carries_isolated_remediated_and_artifacts(tmp_path: Path) -> None:
    log = finished_journal()
    doc = document(log, tmp_path)
    assert doc["kind"] == "DemoSummary" and doc["result"] == "passed"
    assert doc["isolated"][0]["node"] == "gpu-node-05"
    assert doc["remediated"][0]["states"][-1] == "healthy"
    assert doc["artifacts"]["recipe"] == str(tmp_path / "recipe.yaml")
    assert [s["name"] for s in doc["steps"]] == ["recipe"]


def test_a_failed_step_fails_the_summary(tmp_path: Path) -> None:
    log = finished_journal()

    def not_running() -> str:
        raise journal.StepFailedError("not running")

    log.run("sentinel", "sentinel", not_running)
    assert document(log, tmp_path)["result"] == "failed"


def test_page_is_self_contained_and_links_relative(tmp_path: Path) -> None:
    log = finished_journal()
    doc = document(log, tmp_path)
    page = report.html_page(doc, report.timeline(log)["events"], base=tmp_path)
    assert not re.search(r"https?://", page)
    assert "<script" not in page and "<link" not in page and "@import" not in page
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert hrefs == ["recipe.yaml", "bundle", "report.html"]
    assert "13 components &lt;ok&gt;" in page
    assert '<td class="num">' in page
    assert "gpu-node-02 → quarantined" in page
    for state in ("quarantined", "draining", "drained", "remediating", "recertifying", "healthy"):
        assert f">{state}</span>" in page


def test_page_is_a_pure_function_of_the_summary(tmp_path: Path) -> None:
    log = finished_journal()
    doc = document(log, tmp_path)
    events = report.timeline(log)["events"]
    assert report.html_page(doc, events, base=tmp_path) == report.html_page(doc, events, base=tmp_path)


def test_empty_outcomes_say_so(tmp_path: Path) -> None:
    log = finished_journal()
    doc = report.summary(log, isolated=[], remediated=[], artifacts={}, cluster={"name": "x", "kept": True})
    page = report.html_page(doc, [], base=tmp_path)
    assert "No node was isolated." in page and "No node went through remediation." in page
    assert "(kept)" in page
