"""Area of concern: a validation run orders phases, skips performance after a failure or without
an engine, and its CTRF, JUnit and table renderings say the same thing byte-for-byte every time."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from dsx.errors import UnavailableError
from dsx.model import recipe, snapshot
from dsx.testing.cluster_reader import FakeClusterReader
from dsx.validation import cluster_snapshot, reports, results, run

ALL = tuple(results.PHASE_ORDER)


def validate(
    target: recipe.Recipe,
    reader: FakeClusterReader,
    phases: Sequence[results.Phase] = ALL,
    **kwargs: Any,
) -> results.Report:
    snap = cluster_snapshot.collect(reader, generator="dsx/test", captured_at="2026-02-02T15:00:00Z")
    return run.validate(target, snap, phases=phases, reader=reader, generator="dsx/0.1.0", **kwargs)


def test_phases_run_in_order_and_only_those_asked(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader
) -> None:
    report = validate(cluster_recipe, healthy_cluster, phases=[results.Phase.CONFORMANCE, results.Phase.READINESS])
    assert report.phases == (results.Phase.READINESS, results.Phase.CONFORMANCE)
    seen = [r.phase for r in report.results]
    assert seen == sorted(seen, key=list(results.PHASE_ORDER).index)
    assert set(seen) == {results.Phase.READINESS, results.Phase.CONFORMANCE}


def test_performance_without_engine_is_skipped_with_the_reason(
    recipe_factory: Callable[..., recipe.Recipe], healthy_cluster: FakeClusterReader
) -> None:
    target = recipe_factory(certification={"categories": ["nccl-all-reduce"]})
    report = validate(target, healthy_cluster, phases=[results.Phase.PERFORMANCE])
    assert [(r.name, r.status.value, r.message) for r in report.results] == [
        ("performance/certification", "skipped", "certification engine not available")
    ]
    plain = validate(recipe_factory(), healthy_cluster, phases=[results.Phase.PERFORMANCE])
    assert plain.results[0].message == "the recipe declares no certification"


def test_performance_runs_through_the_runner(
    recipe_factory: Callable[..., recipe.Recipe], healthy_cluster: FakeClusterReader
) -> None:
    seen: list[Mapping[str, Any]] = []

    def runner(certification: Mapping[str, Any], snap: snapshot.Snapshot) -> list[results.CheckResult]:
        seen.append(certification)
        return [results.passed("performance/nccl-all-reduce", results.Phase.PERFORMANCE, "busbw 480 GB/s")]

    target = recipe_factory(certification={"categories": ["nccl-all-reduce"]})
    report = validate(target, healthy_cluster, phases=[results.Phase.PERFORMANCE], certification=runner)
    assert [r.name for r in report.results] == ["performance/nccl-all-reduce"]
    assert seen == [{"categories": ["nccl-all-reduce"]}]

    def broken(certification: Mapping[str, Any], snap: snapshot.Snapshot) -> list[results.CheckResult]:
        raise UnavailableError("no GPU nodes schedulable")

    failed = validate(target, healthy_cluster, phases=[results.Phase.PERFORMANCE], certification=broken)
    assert failed.results[0].status is results.Status.FAILED
    assert "no GPU nodes schedulable" in failed.results[0].message


def test_performance_is_skipped_after_a_failed_phase(
    recipe_factory: Callable[..., recipe.Recipe], healthy_cluster: FakeClusterReader
) -> None:
    target = recipe_factory(constraints=["K8s.server.version >= 1.99"], certification={"categories": ["x"]})

    def runner(certification: Mapping[str, Any], snap: snapshot.Snapshot) -> list[results.CheckResult]:
        raise AssertionError("must not run")

    report = validate(
        target, healthy_cluster, phases=[results.Phase.READINESS, results.Phase.PERFORMANCE], certification=runner
    )
    assert report.failed
    assert report.results[-1].message == "skipped: an earlier phase failed"


def test_report_subject(cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader) -> None:
    report = validate(cluster_recipe, healthy_cluster)
    assert report.subject.recipe_digest == cluster_recipe.metadata.digest
    assert report.subject.snapshot_digest.startswith("sha256:")
    assert report.subject.captured_at == "2026-02-02T15:00:00Z"


@pytest.fixture
def failing_report(cluster_recipe: recipe.Recipe) -> results.Report:
    return validate(cluster_recipe, FakeClusterReader(), phases=[results.Phase.DEPLOYMENT])


def test_ctrf_lists_every_check_with_phase_status_message_evidence(failing_report: results.Report) -> None:
    doc = json.loads(reports.ctrf_json(failing_report))
    assert doc["reportFormat"] == "CTRF"
    assert doc["specVersion"].count(".") == 2
    assert doc["results"]["tool"] == {"name": "dsx", "version": "0.1.0"}
    summary = doc["results"]["summary"]
    assert summary["tests"] == len(failing_report.results) == len(doc["results"]["tests"])
    assert summary["failed"] == failing_report.count(results.Status.FAILED) > 0
    assert summary["passed"] + summary["failed"] + summary["skipped"] == summary["tests"]
    assert summary["start"] == summary["stop"] == 1770044400000
    tests = {t["name"]: t for t in doc["results"]["tests"]}
    missing = tests["deployment/gpu-operator/installed"]
    assert missing["status"] == "failed"
    assert missing["suite"] == ["deployment"]
    assert missing["extra"]["phase"] == "deployment"
    assert "not installed" in missing["message"]
    assert "images_in_namespace" in missing["extra"]["evidence"]
    assert doc["extra"]["verdict"] == "failed"
    assert doc["extra"]["phases"] == {"deployment": "failed"}
    assert all(t["status"] in ("passed", "failed", "skipped") for t in doc["results"]["tests"])


def test_reports_are_deterministic(cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader) -> None:
    first = validate(cluster_recipe, healthy_cluster)
    healthy_cluster.objects.reverse()
    second = validate(cluster_recipe, healthy_cluster)
    assert reports.ctrf_json(first) == reports.ctrf_json(second)
    assert reports.junit_xml(first) == reports.junit_xml(second)
    assert reports.table(first) == reports.table(second)


def test_junit_counts_match(failing_report: results.Report) -> None:
    root = ElementTree.fromstring(reports.junit_xml(failing_report))
    assert root.tag == "testsuites"
    assert int(root.get("failures", "")) == failing_report.count(results.Status.FAILED)
    assert int(root.get("skipped", "")) == failing_report.count(results.Status.SKIPPED)
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "deployment"
    failures = root.findall(".//testcase/failure")
    assert len(failures) == failing_report.count(results.Status.FAILED)
    case = next(c for c in root.iter("testcase") if c.get("name") == "deployment/gpu-operator/installed")
    failure = case.find("failure")
    assert failure is not None and "not installed" in failure.get("message", "")
    assert json.loads(failure.text or "{}")["images_in_namespace"] == []


def test_table_has_one_line_per_check_and_a_verdict(failing_report: results.Report) -> None:
    lines = reports.table(failing_report).splitlines()
    assert lines[0].split() == ["PHASE", "CHECK", "STATUS", "MESSAGE"]
    assert len(lines) == len(failing_report.results) + 3
    assert any("gpu-operator/installed" in line and "FAILED" in line for line in lines)
    assert lines[-1].startswith("FAILED: test: ")


def test_long_messages_are_shown_whole(healthy_cluster: FakeClusterReader) -> None:
    subject = results.Subject("r", "sha256:a", "sha256:b")
    long = results.failed("deployment/x", results.Phase.DEPLOYMENT, "pod a: CrashLoopBackOff; " * 20)
    report = results.Report(subject, (results.Phase.DEPLOYMENT,), (long,), "dsx/0.1.0")
    assert ("pod a: CrashLoopBackOff; " * 20).strip() in reports.table(report)
