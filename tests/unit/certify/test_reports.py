"""Area of concern: the certification report — one JSON document rendered to JSON, HTML and
JUnit — is byte-identical for the same input, well-formed, self-contained (nothing fetched
from a network), and says which nodes failed and why."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import replace
from html.parser import HTMLParser

from dsx.certify import engine, reports
from dsx.model import certification as model
from dsx.testing.fake_executor import FakeExecutor

SPEC = model.Certification(
    name="unit",
    categories=(model.CategoryRequest("nccl-all-reduce"), model.CategoryRequest("training")),
)
FAULTS = {"node-2": model.FaultKind.CORRUPT, "node-5": model.FaultKind.SLOW}


def _result() -> engine.CertificationResult:
    nodes = [model.CandidateNode(f"node-{i}", unschedulable=(i == 8)) for i in range(9)]
    result = engine.certify(SPEC, FakeExecutor(nodes, faults=FAULTS))
    return replace(result, duration_seconds=12.0)  # wall time is the one input a rerun cannot repeat


def _untimed(document: dict) -> dict:
    text = reports.to_json(document)
    return {"text": re.sub(r'"durationSeconds": [0-9.]+', '"durationSeconds": 0', text)}


def test_the_same_result_renders_to_the_same_bytes_in_every_format() -> None:
    first, second = reports.document(_result()), reports.document(_result())
    assert reports.to_json(first) == reports.to_json(second)
    assert reports.html(first) == reports.html(second)
    assert reports.junit(first) == reports.junit(second)
    assert reports.summary(first) == reports.summary(second)


def test_two_certifications_of_the_same_cluster_differ_only_in_time() -> None:
    nodes = [model.CandidateNode(f"node-{i}") for i in range(8)]
    one = reports.document(engine.certify(SPEC, FakeExecutor(nodes, faults=FAULTS)))
    two = reports.document(engine.certify(SPEC, FakeExecutor(nodes, faults=FAULTS)))
    assert _untimed(one) == _untimed(two)


def test_the_document_names_failed_nodes_reasons_and_exclusions() -> None:
    document = reports.document(_result())
    assert document["result"] == "FAILED"
    assert document["failedNodes"] == ["node-2", "node-5"]
    by_name = {n["name"]: n for n in document["nodeResults"]}
    assert by_name["node-2"]["reason"] == "WrongResults"
    assert by_name["node-5"]["reason"] == "ThresholdViolation"
    assert by_name["node-5"]["measured"] < by_name["node-5"]["expected"]
    assert by_name["node-8"] == {"name": "node-8", "status": "EXCLUDED", "reason": "Excluded", "exclusion": "Cordoned"}
    assert document["excludedNodes"] == [{"name": "node-8", "reason": "Excluded", "exclusion": "Cordoned"}]
    collective = document["categories"][0]
    assert collective["isolation"]["confirmedFaulty"] == ["node-2", "node-5"]
    assert collective["isolation"]["runs"] <= collective["isolation"]["bound"]


def test_junit_is_well_formed_with_one_case_per_category_and_node() -> None:
    document = reports.document(_result())
    root = ElementTree.fromstring(reports.junit(document))
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == 2 + 9 == int(suite.get("tests", "0"))
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert failed == {"nccl-all-reduce", "training", "node-2", "node-5"}
    assert int(suite.get("failures", "0")) == len(failed)
    skipped = [c.get("name") for c in cases if c.find("skipped") is not None]
    assert skipped == ["node-8"] and suite.get("skipped") == "1"
    slow = next(c for c in cases if c.get("name") == "node-5").find("failure")
    assert slow is not None and slow.get("type") == "ThresholdViolation"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.urls += [v or "" for k, v in attrs if k in ("src", "href", "action", "data", "xlink:href")]


def test_html_is_self_contained_and_escapes_what_it_shows() -> None:
    document = reports.document(_result())
    document["name"] = "<script>alert(1)</script>"
    page = reports.html(document)
    links = _Links()
    links.feed(page)
    assert not [u for u in links.urls if re.match(r"\s*(https?:)?//", u)]
    assert not {"script", "link", "iframe", "img", "object"} & set(links.tags)
    assert "url(" not in page and "@import" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<svg") >= 3  # bandwidth by size, step time per node, isolation tree
    assert "node-5" in page and "ThresholdViolation" in page


def test_summary_table_lists_categories_and_failed_nodes() -> None:
    text = reports.summary(reports.document(_result()))
    assert text.splitlines()[0].split()[:3] == ["category", "status", "groups"]
    assert "node-5: FAILED ThresholdViolation" in text
    assert "node-8: EXCLUDED" in text
    assert text.rstrip().splitlines()[-1].startswith("result: FAILED")
