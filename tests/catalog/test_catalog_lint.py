"""Invariants: the recipe of every overlay in the shipped catalog (each single criterion and every
supported combination) lints clean against the chart data dsx ships, every component with shipped
chart data is actually linted, and the shipped data is intact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsx.charts import sources
from dsx.cli import main as cli_main
from dsx.lint import check
from dsx.lint import report as lint_report
from dsx.model import criteria as criteria_model
from dsx.model.recipe import ComponentRef, ComponentType
from dsx.recipes import catalog, resolve

SHIPPED = catalog.load()
COMBINATIONS = SHIPPED.supported_combinations()
OVERLAYS = sorted(o.name for o in SHIPPED.overlays)
PACKAGED = sources.DirectorySource(sources.packaged_charts(), "dsx catalog", show_root=False)
SHIPPED_CHARTS = sorted(
    (chart.name, version.name)
    for chart in sources.packaged_charts().iterdir()
    if chart.is_dir()
    for version in chart.iterdir()
)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "lint.md"


def test_there_are_combinations_to_lint() -> None:
    assert len(COMBINATIONS) >= 10


def _lint(overlay_name: str) -> lint_report.LintReport:
    overlay = SHIPPED.by_name[overlay_name]
    return check.lint_recipe(resolve.resolve(criteria_model.Criteria(**overlay.criteria), SHIPPED), PACKAGED)


@pytest.mark.parametrize("name", OVERLAYS)
def test_every_overlay_recipe_lints_clean(name: str) -> None:
    report = _lint(name)

    assert [f.message for f in report.findings] == []
    shipped = {chart for chart, _ in SHIPPED_CHARTS}
    unchecked = [n for n in report.not_linted if n.subchart is None and (n.component in shipped)]
    assert unchecked == [], "a component with shipped chart data was not linted"


def test_every_shipped_chart_is_linted_by_some_supported_combination() -> None:
    linted = {entry.component for name in COMBINATIONS for entry in _lint(name).linted}

    assert {chart for chart, _ in SHIPPED_CHARTS} <= linted


@pytest.mark.parametrize("service", ["eks", "aks", "gke"])
def test_dsx_lint_h100_ubuntu_training_reports_no_finding(service: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["lint", "--service", service, "--accelerator", "h100", "--os", "ubuntu", "--intent", "training"]

    with pytest.raises(SystemExit) as exit_info:
        cli_main.main([*args, "--offline", "--format", "json"])
    report = json.loads(capsys.readouterr().out)

    assert exit_info.value.code == 0
    assert report["findings"] == []
    linted = {entry["component"] for entry in report["linted"]}
    assert "gpu-operator" in linted


@pytest.mark.parametrize(("chart", "version"), SHIPPED_CHARTS)
def test_shipped_chart_data_loads_with_template_refs(chart: str, version: str) -> None:
    data = sources.packaged_charts() / chart / version
    component = ComponentRef(name=chart, type=ComponentType.HELM, namespace=chart, version=version, chart=chart)

    loaded = PACKAGED.chart_for(component)

    assert loaded.defaults, f"{data}/values.yaml is empty"
    assert len(loaded.values_refs) >= 10, f"{data}/values-refs.txt lists too few template refs"
    assert (data / "Chart.yaml").is_file()


@pytest.mark.parametrize(("chart", "version"), SHIPPED_CHARTS)
def test_docs_list_every_shipped_chart_as_linted(chart: str, version: str) -> None:
    assert f"| {chart} | {version} |" in DOCS.read_text(encoding="utf-8")
