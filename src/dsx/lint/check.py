"""Check every values key a recipe sets against the chart it targets.

Helm drops keys a chart never reads without a word, so a misspelt or outdated key leaves the
cluster on defaults nobody chose. A key passes when the chart declares it (values.yaml,
values.schema.json) or its templates read it (`.Values.…`); keys under a subchart's name are
checked against that subchart; `nameOverride`, `fullnameOverride` and `global` always pass.
A map the templates read whole takes any key when its default is empty, when the chart ships
no default for it at all, or when it is a Kubernetes object field (affinity, resources, …)
whose content the API server checks. The merged values are also validated against the chart's
values.schema.json when it has one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsx.lint import chart as chart_data
from dsx.lint import ports, report, suggest
from dsx.lint.chart import ChartData, KeyPath, dotted
from dsx.model.recipe import ComponentRef, ComponentType, Recipe

if TYPE_CHECKING:
    import jsonschema

ALWAYS_ALLOWED = frozenset({"nameOverride", "fullnameOverride", "global"})
"""Top-level keys Helm itself gives meaning to in every chart."""

KUBERNETES_OBJECT_FIELDS = frozenset(
    {
        "affinity",
        "annotations",
        "labels",
        "livenessProbe",
        "nodeSelector",
        "podAnnotations",
        "podLabels",
        "podSecurityContext",
        "readinessProbe",
        "resources",
        "rollingUpdate",
        "securityContext",
        "startupProbe",
        "strategy",
        "updateStrategy",
    }
)
"""Map names that charts copy whole into a Kubernetes object, where the API server checks them."""

_MISSING = object()


@dataclass(frozen=True)
class KnownKeys:
    """The key paths one chart accepts, and the maps under which any key is accepted."""

    paths: frozenset[KeyPath]
    open_maps: frozenset[KeyPath]

    @classmethod
    def of(cls, chart: ChartData) -> KnownKeys:
        paths = chart_data.key_paths(chart.defaults)
        for ref in chart.values_refs:
            paths |= {ref[: i + 1] for i in range(len(ref))}
        schema_paths, schema_open = _schema_keys(chart.schema or {}, ())
        paths |= schema_paths
        extended = {ref[:i] for ref in chart.values_refs for i in range(1, len(ref))}
        read_whole = set(chart.values_refs - extended)  # refs no deeper ref extends: read as a whole
        open_maps = set(schema_open)
        for path in paths:
            if _takes_any_key(path, chart, read_whole):
                open_maps.add(path)
        return cls(frozenset(paths), frozenset(open_maps))


def _takes_any_key(path: KeyPath, chart: ChartData, read_whole: set[KeyPath]) -> bool:
    read = path in chart.values_refs or any(path[:i] in read_whole for i in range(1, len(path)))
    if not read:
        return False
    default = _lookup(chart.defaults, path)
    if default is _MISSING or default is None:
        return path in read_whole
    if not isinstance(default, Mapping):
        return False
    return not default or path[-1] in KUBERNETES_OBJECT_FIELDS


def _lookup(values: Mapping[str, Any], path: KeyPath) -> Any:
    node: Any = values
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _schema_keys(schema: Mapping[str, Any], prefix: KeyPath) -> tuple[set[KeyPath], set[KeyPath]]:
    """Paths the schema declares under `properties`, and the objects it leaves open to any key."""
    paths: set[KeyPath] = set()
    open_maps: set[KeyPath] = set()
    if prefix and (isinstance(schema.get("additionalProperties"), Mapping) or schema.get("patternProperties")):
        open_maps.add(prefix)
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for key, sub in properties.items():
            path = (*prefix, str(key))
            paths.add(path)
            if isinstance(sub, Mapping):
                more, more_open = _schema_keys(sub, path)
                paths |= more
                open_maps |= more_open
    return paths, open_maps


@dataclass
class _Tally:
    findings: list[report.Finding]
    not_linted: list[report.NotLinted]
    keys_checked: int = 0


def lint_component(
    component: ComponentRef, chart: ChartData
) -> tuple[list[report.Finding], list[report.NotLinted], int]:
    """Findings for one component's values, subcharts without data, and how many keys were checked."""
    tally = _Tally([], [])
    _lint_values(component, chart, component.values, (), tally)
    return tally.findings, tally.not_linted, tally.keys_checked


def _lint_values(
    component: ComponentRef, chart: ChartData, values: Mapping[str, Any], prefix: KeyPath, tally: _Tally
) -> None:
    keys = KnownKeys.of(chart)
    for key, value in values.items():
        key = str(key)
        if key in ALWAYS_ALLOWED:
            tally.keys_checked += 1
            continue
        if key in chart.subcharts and isinstance(value, Mapping):
            parent_reads = {ref[1] for ref in chart.values_refs if len(ref) == 2 and ref[0] == key}
            tally.keys_checked += len([k for k in value if k in parent_reads])
            routed = {k: v for k, v in value.items() if k not in parent_reads}
            if not routed:
                continue
            sub = chart.subchart_data.get(key)
            if sub is None:
                reason = (
                    f"no chart data for subchart {key}; {len(routed)} key(s) under {dotted((*prefix, key))} unchecked"
                )
                tally.not_linted.append(report.NotLinted(component.name, component.version, reason, subchart=key))
            else:
                _lint_values(component, sub, routed, (*prefix, key), tally)
            continue
        _check_tree(component, chart, keys, values, key, (), prefix, tally)
    _check_schema(component, chart, values, prefix, tally)


def _check_tree(
    component: ComponentRef,
    chart: ChartData,
    keys: KnownKeys,
    values: Mapping[str, Any],
    key: str,
    parent: KeyPath,
    prefix: KeyPath,
    tally: _Tally,
) -> None:
    path = (*parent, key)
    value = values[key]
    if path in keys.open_maps:
        tally.keys_checked += 1
        return
    deprecation = chart.deprecations.get(path)
    if path not in keys.paths:
        tally.findings.append(_finding(component, chart, keys, path, prefix, report.FindingKind.UNKNOWN_KEY))
        return
    if deprecation is not None:
        tally.findings.append(_finding(component, chart, keys, path, prefix, report.FindingKind.DEPRECATED_KEY))
        return
    if isinstance(value, Mapping) and value:
        for child in value:
            _check_tree(component, chart, keys, value, str(child), path, prefix, tally)
        return
    tally.keys_checked += 1


def _finding(
    component: ComponentRef,
    chart: ChartData,
    keys: KnownKeys,
    path: KeyPath,
    prefix: KeyPath,
    kind: report.FindingKind,
) -> report.Finding:
    deprecation = chart.deprecations.get(path)
    closest = deprecation.replacement if deprecation and deprecation.replacement else None
    if closest is None and kind is report.FindingKind.UNKNOWN_KEY:
        closest = suggest.closest_key(path, keys.paths)
    where = f"subchart {chart.name}" if prefix else "the chart"
    if kind is report.FindingKind.DEPRECATED_KEY:
        detail = f"deprecated in {where}"
    elif deprecation is not None:
        detail = f"not read by {where} (deprecated there): Helm ignores it"
    else:
        detail = f"not read by {where}: Helm ignores it"
    return report.Finding(
        component=component.name,
        version=component.version,
        path=dotted((*prefix, *path)),
        kind=kind,
        detail=detail,
        suggestion=dotted((*prefix, *closest)) if closest else None,
        deprecation=deprecation.note if deprecation else None,
    )


def coalesce(defaults: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's merge of user values over defaults: maps merge, everything else replaces, null deletes."""
    merged = dict(defaults)
    for key, value in values.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = coalesce(merged[key], value)
        else:
            merged[key] = value
    return merged


def _check_schema(
    component: ComponentRef, chart: ChartData, values: Mapping[str, Any], prefix: KeyPath, tally: _Tally
) -> None:
    if chart.schema is None:
        return
    import jsonschema  # here: most charts have no values.schema.json, and `dsx bundle` lints on every run

    merged = coalesce(chart.defaults, values)
    where = f"subchart {chart.name}" if prefix else "the chart"
    validator_class = jsonschema.validators.validator_for(chart.schema, default=jsonschema.Draft7Validator)
    try:
        validator_class.check_schema(chart.schema)
    except jsonschema.SchemaError as exc:
        tally.findings.append(
            report.Finding(
                component.name,
                component.version,
                dotted(prefix) or "(values)",
                report.FindingKind.SCHEMA_VIOLATION,
                f"values.schema.json of {where} is not a valid JSON schema, Helm will refuse it: {exc.message}",
            )
        )
        return
    flagged = {f.path for f in tally.findings}
    errors = sorted(validator_class(chart.schema).iter_errors(merged), key=lambda e: [str(p) for p in e.absolute_path])
    for error in errors:
        path = (*prefix, *(str(p) for p in error.absolute_path))
        if error.validator == "additionalProperties" and _extra_keys_flagged(error, path, flagged):
            continue
        tally.findings.append(
            report.Finding(
                component.name,
                component.version,
                dotted(path) or "(values)",
                report.FindingKind.SCHEMA_VIOLATION,
                f"violates values.schema.json of {where}: {error.message}",
            )
        )


def _extra_keys_flagged(error: jsonschema.ValidationError, path: KeyPath, flagged: set[str]) -> bool:
    """Whether every key an additionalProperties error is about already has an unknown-key finding."""
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    declared = set(schema.get("properties") or {})
    patterns = [re.compile(p) for p in schema.get("patternProperties") or {}]
    instance = error.instance if isinstance(error.instance, Mapping) else {}
    extras = [k for k in instance if k not in declared and not any(p.search(k) for p in patterns)]
    return all(dotted((*path, str(k))) in flagged for k in extras)


def lint_recipe(recipe: Recipe, chart_source: ports.ChartSource) -> report.LintReport:
    """Lint every Helm component of `recipe` against its chart; missing chart data is `not linted`."""
    findings: list[report.Finding] = []
    not_linted: list[report.NotLinted] = []
    linted: list[report.Linted] = []
    for component in recipe.ordered_components():
        if component.type is not ComponentType.HELM:
            reason = f"{component.type.value} component: no Helm values to check"
            not_linted.append(report.NotLinted(component.name, component.version, reason))
            continue
        if not component.values:
            linted.append(report.Linted(component.name, component.version, "no values set", 0))
            continue
        try:
            chart = chart_source.chart_for(component)
        except ports.ChartUnavailable as exc:
            not_linted.append(report.NotLinted(component.name, component.version, str(exc)))
            continue
        found, missing, checked = lint_component(component, chart)
        findings += sorted(found, key=lambda f: f.path)
        not_linted += missing
        linted.append(report.Linted(component.name, component.version, chart.origin, checked))
    return report.LintReport(recipe.metadata.name, tuple(findings), tuple(not_linted), tuple(linted))
