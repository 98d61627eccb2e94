"""Area of concern: which recipe values keys the lint flags, with which suggestion, and what it cannot check."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsx import serialization
from dsx.charts import sources
from dsx.lint import check
from dsx.lint.report import FindingKind
from dsx.model.recipe import ComponentRef, ComponentType, Recipe


def test_the_six_stale_aicr_keys_are_exactly_the_findings(
    load_recipe: Callable[[str], Recipe], upstream_charts: sources.DirectorySource
) -> None:
    report = check.lint_recipe(load_recipe("stale-keys.yaml"), upstream_charts)

    found = {(f.component, f.path): f for f in report.findings}
    assert sorted(found) == [
        ("gpu-operator", "driver.maxParallelUpgrades"),
        ("gpu-operator", "driver.useOpenKernelModules"),
        ("network-operator", "deployCR"),
        ("network-operator", "nicClusterPolicy"),
        ("network-operator", "nvIpam"),
        ("network-operator", "secondaryNetwork"),
    ]
    assert all(f.kind is FindingKind.UNKNOWN_KEY for f in report.findings)
    assert {path: f.suggestion for (_, path), f in found.items()} == {
        "driver.maxParallelUpgrades": "driver.upgradePolicy.maxParallelUpgrades",
        "driver.useOpenKernelModules": "driver.kernelModuleType",
        "deployCR": None,
        "nicClusterPolicy": None,
        "nvIpam": None,
        "secondaryNetwork": None,
    }
    stale = found[("gpu-operator", "driver.useOpenKernelModules")]
    assert stale.deprecation is not None and "deprecated and made no-op" in stale.deprecation
    assert stale.version == "v25.10.1"
    assert (
        "did you mean driver.upgradePolicy.maxParallelUpgrades?"
        in found[("gpu-operator", "driver.maxParallelUpgrades")].message
    )
    assert not report.ok
    assert [entry.component for entry in report.linted] == ["gpu-operator", "network-operator"]


def test_a_misspelt_key_suggests_the_real_one(
    upstream_charts: sources.DirectorySource, helm_component: Callable[..., ComponentRef]
) -> None:
    component = helm_component("gpu-operator", "v25.10.1", {"driver": {"verison": "580.105.08"}})

    findings, _, _ = check.lint_component(component, upstream_charts.chart_for(component))

    assert [(f.path, f.suggestion) for f in findings] == [("driver.verison", "driver.version")]


def test_clean_values_have_no_findings_including_the_open_map_rules(
    load_recipe: Callable[[str], Recipe], upstream_charts: sources.DirectorySource
) -> None:
    report = check.lint_recipe(load_recipe("clean.yaml"), upstream_charts)

    assert report.findings == ()
    assert report.not_linted == ()
    assert report.ok
    assert all(entry.keys_checked > 0 for entry in report.linted)


def test_a_map_empty_in_the_defaults_takes_any_key_only_when_the_templates_read_it(
    make_chart: Callable[..., Path], chart_root: Path, helm_component: Callable[..., ComponentRef]
) -> None:
    make_chart(
        "demo",
        "1.0.0",
        values="featureGates: {}\nextraLabels: {}\nservice:\n  port: 80\n",
        refs=("featureGates", "service.port"),
    )
    component = helm_component(
        "demo", "1.0.0", {"featureGates": {"AnyGate": True}, "extraLabels": {"team": "ml"}, "service": {"port": 81}}
    )

    chart = sources.DirectorySource(chart_root, "test").chart_for(component)
    findings, _, checked = check.lint_component(component, chart)

    assert [(f.path, f.kind) for f in findings] == [("extraLabels.team", FindingKind.UNKNOWN_KEY)]
    assert checked == 2


def test_a_map_read_whole_with_defaults_is_checked_against_them_unless_it_is_a_kubernetes_field(
    upstream_charts: sources.DirectorySource, helm_component: Callable[..., ComponentRef]
) -> None:
    component = helm_component(
        "gpu-operator",
        "v25.10.1",
        {
            "dcgmExporter": {"serviceMonitor": {"intervall": "30s", "additionalLabels": {"release": "prom"}}},
            "operator": {"resources": {"claims": [{"name": "gpu"}]}},
        },
    )

    findings, _, _ = check.lint_component(component, upstream_charts.chart_for(component))

    assert [(f.path, f.suggestion) for f in findings] == [
        ("dcgmExporter.serviceMonitor.intervall", "dcgmExporter.serviceMonitor.interval")
    ]


def test_name_overrides_and_global_are_always_allowed(
    make_chart: Callable[..., Path], chart_root: Path, helm_component: Callable[..., ComponentRef]
) -> None:
    make_chart("bare", "0.1.0", values="replicas: 1\n", refs=("replicas",))
    values: dict[str, Any] = {"nameOverride": "a", "fullnameOverride": "b", "global": {"imageRegistry": "r"}}
    component = helm_component("bare", "0.1.0", values)

    findings, _, _ = check.lint_component(component, sources.DirectorySource(chart_root, "t").chart_for(component))

    assert findings == []


def test_subchart_keys_are_checked_against_the_subchart(
    make_chart: Callable[..., Path], chart_root: Path, helm_component: Callable[..., ComponentRef]
) -> None:
    make_chart(
        "parent",
        "2.0.0",
        values="sub:\n  enabled: true\n",
        refs=("sub.enabled",),
        subcharts={"sub": ("worker:\n  tolerations: []\n  replicas: 1\n", ("worker.tolerations", "worker.replicas"))},
        subchart_names=("vendored-only",),
    )
    component = helm_component(
        "parent",
        "2.0.0",
        {
            "sub": {"enabled": True, "global": {"x": 1}, "worker": {"replicas": 2, "replica": 3}},
            "vendored-only": {"anything": 1},
        },
    )

    findings, missing, _ = check.lint_component(
        component, sources.DirectorySource(chart_root, "t").chart_for(component)
    )

    assert [(f.path, f.suggestion, f.detail) for f in findings] == [
        ("sub.worker.replica", "sub.worker.replicas", "not read by subchart sub: Helm ignores it")
    ]
    assert [(m.subchart, m.component) for m in missing] == [("vendored-only", "parent")]
    assert "no chart data for subchart vendored-only" in missing[0].reason


def test_real_subchart_without_data_is_reported_not_linted(
    upstream_charts: sources.DirectorySource, helm_component: Callable[..., ComponentRef]
) -> None:
    component = helm_component(
        "gpu-operator", "v25.10.1", {"node-feature-discovery": {"worker": {"config": {}}}, "nfd": {"enabled": True}}
    )

    findings, missing, _ = check.lint_component(component, upstream_charts.chart_for(component))

    assert findings == []
    assert [m.subchart for m in missing] == ["node-feature-discovery"]


def test_schema_violations_are_findings_without_repeating_unknown_keys(
    make_chart: Callable[..., Path], chart_root: Path, helm_component: Callable[..., ComponentRef]
) -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "replicas": {"type": "integer", "minimum": 1},
            "mode": {"enum": ["a", "b"]},
            "logLevel": {"type": "string"},
        },
    }
    make_chart("strict", "1.0.0", values="replicas: 1\nmode: a\n", refs=("replicas", "mode"), schema=json.dumps(schema))
    component = helm_component("strict", "1.0.0", {"replicas": 0, "mode": "c", "logLevel": "debug", "colour": "red"})

    findings, _, _ = check.lint_component(component, sources.DirectorySource(chart_root, "t").chart_for(component))

    assert [(f.path, f.kind) for f in findings] == [
        ("colour", FindingKind.UNKNOWN_KEY),
        ("mode", FindingKind.SCHEMA_VIOLATION),
        ("replicas", FindingKind.SCHEMA_VIOLATION),
    ]
    assert "0 is less than the minimum of 1" in findings[2].detail


def test_an_invalid_schema_is_a_finding(
    make_chart: Callable[..., Path], chart_root: Path, helm_component: Callable[..., ComponentRef]
) -> None:
    make_chart("broken", "1.0.0", values="a: 1\n", refs=("a",), schema='{"type": 12}')
    component = helm_component("broken", "1.0.0", {"a": 2})

    findings, _, _ = check.lint_component(component, sources.DirectorySource(chart_root, "t").chart_for(component))

    assert [f.kind for f in findings] == [FindingKind.SCHEMA_VIOLATION]
    assert "not a valid JSON schema" in findings[0].detail


def test_a_key_the_chart_still_has_but_calls_deprecated_is_a_finding(
    make_chart: Callable[..., Path], chart_root: Path, helm_component: Callable[..., ComponentRef]
) -> None:
    make_chart(
        "old",
        "1.0.0",
        values="image:\n  tag: v1\n  legacyTag: v1  # deprecated: use tag instead\n",
        refs=("image.tag", "image.legacyTag"),
    )
    component = helm_component("old", "1.0.0", {"image": {"legacyTag": "v2", "tag": "v2"}})

    findings, _, _ = check.lint_component(component, sources.DirectorySource(chart_root, "t").chart_for(component))

    assert [(f.path, f.kind, f.suggestion) for f in findings] == [
        ("image.legacyTag", FindingKind.DEPRECATED_KEY, "image.tag")
    ]


def test_components_without_chart_data_are_not_linted_and_do_not_fail(
    upstream_charts: sources.DirectorySource,
    helm_component: Callable[..., ComponentRef],
    recipe_of: Callable[..., Recipe],
) -> None:
    recipe = recipe_of(
        helm_component("cert-manager", "v1.17.2", {"crds": {"enabled": True}}),
        ComponentRef(name="tuning", type=ComponentType.MANIFEST, namespace="skyhook", version="0.2.1"),
        helm_component("empty", "1.0.0", {}),
        helm_component("kai-scheduler", "v0.13.0", {"scheduler": {"placementStrategy": "spread"}}),
    )

    report = check.lint_recipe(recipe, upstream_charts)

    assert report.ok
    assert [(n.component, n.reason.split(" (")[0]) for n in report.not_linted] == [
        ("cert-manager", "no chart data for cert-manager v1.17.2: not in test data"),
        ("tuning", "Manifest component: no Helm values to check"),
    ]
    assert [(c.component, c.origin) for c in report.linted] == [
        ("empty", "no values set"),
        ("kai-scheduler", "test data kai-scheduler/v0.13.0"),
    ]
    assert "2 not linted (not checked, not failures)" in report.summary()
    assert report.summary().startswith("lint clean")


def test_the_report_is_byte_identical_across_runs(
    load_recipe: Callable[[str], Recipe], upstream_charts: sources.DirectorySource
) -> None:
    first = serialization.dump_yaml(check.lint_recipe(load_recipe("stale-keys.yaml"), upstream_charts).to_dict())
    second = serialization.dump_yaml(check.lint_recipe(load_recipe("stale-keys.yaml"), upstream_charts).to_dict())

    assert first == second
    assert "suggestion: driver.upgradePolicy.maxParallelUpgrades" in first


def test_helm_coalesce_merges_maps_replaces_lists_and_deletes_on_null() -> None:
    merged = check.coalesce({"a": {"b": 1, "c": 2}, "l": [1], "gone": 1}, {"a": {"b": 3}, "l": [2], "gone": None})

    assert merged == {"a": {"b": 3, "c": 2}, "l": [2]}
