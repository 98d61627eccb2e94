"""Area of concern: the HTML report's charts show what each category is judged on.

Each test parses the generated page (SVG inside HTML) and fails when a chart has no data, no
threshold, ticks that are not round 1-2-5 steps, missing message sizes or a legend without the
groups, or when the training view hides the slow node. `make screenshots` renders the same
report in headless Chromium into docs/images/certification-report.png for the eye.
"""

from __future__ import annotations

import importlib
import itertools
import math
import re
from dataclasses import replace
from html.parser import HTMLParser
from typing import Any

import pytest

from dsx.certify import engine, reports
from dsx.certify.reports import judged
from dsx.model import certification as model
from dsx.testing.fake_executor import FakeExecutor

html_report = importlib.import_module("dsx.certify.reports.html")  # `reports.html` is the render function

SPEC = model.Certification(
    name="certification",
    categories=(
        model.CategoryRequest("nccl-all-reduce"),
        model.CategoryRequest("nccl-loopback"),
        model.CategoryRequest("training"),
    ),
)
SLOW = "node-5"


def _document() -> dict[str, Any]:
    nodes = [model.CandidateNode(f"node-{i}") for i in range(8)]
    result = engine.certify(SPEC, FakeExecutor(nodes, faults={SLOW: model.FaultKind.SLOW}))
    return reports.document(
        replace(result, duration_seconds=135.0),
        started_at="2026-12-01T10:46:04Z",
        cluster="local: 8 simulated nodes on unit",
        version="0.1.0+gabc",
    )


class _Svg(HTMLParser):
    """Every <svg> with its elements (tag, attributes) and text runs, and the text of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: list[dict[str, Any]] = []
        self.text: list[str] = []
        self._open: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self._open = {"attrs": attributes, "elements": [], "texts": []}
            self.charts.append(self._open)
        elif self._open is not None:
            self._open["elements"].append((tag, attributes))

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._open = None

    def handle_data(self, data: str) -> None:
        if self._open is not None and data.strip():
            self._open["texts"].append(data.strip())
        self.text.append(data)


def _parse(page: str) -> _Svg:
    parser = _Svg()
    parser.feed(page)
    return parser


def _charts(parser: _Svg, label: str) -> list[dict[str, Any]]:
    return [c for c in parser.charts if c["attrs"].get("aria-label", "").endswith(label)]


def _elements(chart: dict[str, Any], cls: str) -> list[dict[str, str]]:
    return [a for _, a in chart["elements"] if a.get("class") == cls]


def _is_125(ticks: list[float]) -> bool:
    step = ticks[1] - ticks[0]
    mantissa = step / 10 ** math.floor(math.log10(step))
    evenly = all(math.isclose(b - a, step, rel_tol=1e-6) for a, b in itertools.pairwise(ticks))
    return ticks[0] == 0 and evenly and any(math.isclose(mantissa, m) for m in (1, 2, 5))


def test_each_category_charts_the_metric_it_is_judged_on_with_data_and_a_threshold() -> None:
    document = _document()
    parser = _parse(reports.html(document))
    per_node = _charts(parser, "per node")
    by_size = _charts(parser, "by message size")
    judged_on = {c["name"]: judged.metrics(c)[0].value for c in document["categories"]}
    assert judged_on == {
        "nccl-all-reduce": "busBandwidthGBps",
        "nccl-loopback": "algBandwidthGBps",  # one rank has no bus bandwidth: 0 by definition
        "training": "avgStepTimeSeconds",
    }
    assert [c["attrs"]["data-metric"] for c in per_node] == list(judged_on.values())
    assert [c["attrs"]["data-metric"] for c in by_size] == ["busBandwidthGBps", "algBandwidthGBps"]
    for chart in per_node + by_size:
        values = [float(a["data-value"]) for a in _elements(chart, "bar")]
        series = _elements(chart, "series")
        assert values or series, f"{chart['attrs']['aria-label']}: no data"
        assert all(v > 0 for v in values), f"{chart['attrs']['aria-label']}: a bar at 0"
        thresholds = [float(a["data-value"]) for a in _elements(chart, "threshold")]
        assert thresholds and all(t > 0 for t in thresholds), f"{chart['attrs']['aria-label']}: no threshold"


def test_the_size_chart_plots_every_measured_size_on_round_ticks_with_a_legend_of_groups() -> None:
    document = _document()
    parser = _parse(reports.html(document))
    for category, chart in zip(document["categories"][:2], _charts(parser, "by message size"), strict=True):
        sizes = sorted({p["sizeBytes"] for g in category["groups"] for p in g["sizes"]})
        assert len(sizes) >= 3
        for series in _elements(chart, "series"):
            assert int(series["data-points"]) == len(sizes)
        labels = chart["texts"]
        assert [html_report._size(s) for s in sizes] == [t for t in labels if re.fullmatch(r"\d+[KMG]?B?", t)][
            -len(sizes) :
        ]
        ticks = [float(t) for t in labels if re.fullmatch(r"\d+(\.\d+)?", t)]
        assert len(ticks) >= 3 and _is_125(ticks), ticks
        for group in category["groups"]:
            assert any(t.startswith(group["name"]) for t in labels), f"legend lacks {group['name']}"
        assert "threshold" in labels


def test_the_training_view_shows_the_slow_node_beyond_its_bound() -> None:
    document = _document()
    (chart,) = [c for c in _charts(_parse(reports.html(document)), "per node") if "step" in c["attrs"]["aria-label"]]
    bars = {a["data-node"]: (float(a["data-value"]), a["fill"]) for a in _elements(chart, "bar")}
    assert sorted(bars) == sorted(f"node-{i}" for i in range(8))
    thresholds = [float(a["data-value"]) for a in _elements(chart, "threshold")]
    slow, colour = bars.pop(SLOW)
    assert colour == html_report._FAIL and slow > max(thresholds)
    assert all(value < slow / 2 and fill == html_report._PASS for value, fill in bars.values())


def test_the_header_says_when_how_long_which_dsx_and_which_cluster() -> None:
    page = reports.html(_document())
    parser = _parse(page)
    text = " ".join(parser.text)
    assert "<title>dsx certification report</title>" in page  # not "certification: certification"
    for expected in ("2026-12-01 10:46 UTC", "took 2 min 15 s", "dsx 0.1.0+gabc", "local: 8 simulated nodes on unit"):
        assert expected in text
    assert "Gbps" not in page and "GB/s" in " ".join(t for c in parser.charts for t in c["texts"])  # one spelling
    assert ".name,.num{white-space:nowrap}" in page and '<td class="name">node-0</td>' in page


@pytest.mark.parametrize(
    ("top", "expected"),
    [(0.0387, [0, 0.01, 0.02, 0.03, 0.04]), (245.0, [0, 50, 100, 150, 200, 250]), (1.0, [0, 0.2, 0.4, 0.6, 0.8, 1.0])],
)
def test_ticks_are_round_steps_of_1_2_or_5(top: float, expected: list[float]) -> None:
    ticks = html_report.nice_ticks(top)
    assert ticks == pytest.approx(expected) and _is_125(ticks)
    assert html_report.tick_label(ticks[1], ticks) in {"0.01", "50", "0.2"}
