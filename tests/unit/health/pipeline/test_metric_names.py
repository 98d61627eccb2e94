"""Area of concern: every metric dsx exposes follows Prometheus naming, as `promtool check metrics`
lints it (its promlint rules, restated): help text, snake_case names and labels, `_total` on
counters and only on counters, base units (seconds, bytes, ratio) spelled out, no type in the
name, no reserved histogram names or labels. A rename must also reach the docs, runbooks and
alert rules: the last test finds every `dsx_*` name they mention among the exposed ones."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dsx.api import metrics as api_metrics
from dsx.controllers.telemetry import SentinelTelemetry

REPO = Path(__file__).resolve().parents[4]
SNAKE = re.compile(r"^[a-z_][a-z0-9_]*$")
NON_BASE_UNITS = (
    "minutes", "hours", "days", "weeks", "milliseconds", "microseconds", "nanoseconds",
    "kilobytes", "megabytes", "gigabytes", "terabytes", "kibibytes", "mebibytes", "gibibytes",
    "bits", "percent", "celsius", "fahrenheit", "kilograms", "grams",
)  # fmt: skip
ABBREVIATIONS = ("ms", "us", "ns", "sec", "secs", "min", "mins", "hr", "hrs", "kb", "mb", "gb", "pct", "perc")
TYPES = ("counter", "gauge", "histogram", "summary")


def _registries() -> dict[str, CollectorRegistry]:
    api = FastAPI()
    api_metrics.mount(api)
    return {"sentinel": SentinelTelemetry().registry, "api": api.state.metrics_registry}


def _problems(registry: CollectorRegistry) -> list[str]:
    problems = []
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        name = family.name + ("_total" if family.type == "counter" else "")
        words = name.split("_")
        if not family.documentation.strip():
            problems.append(f"{name}: no help text")
        if not SNAKE.match(name):
            problems.append(f"{name}: not snake_case")
        if family.type == "counter" and not name.endswith("_total"):
            problems.append(f"{name}: counter without _total")
        if family.type != "counter" and name.endswith("_total"):
            problems.append(f"{name}: _total on a {family.type}")
        problems += [f"{name}: non-base unit {w}" for w in words if w in NON_BASE_UNITS]
        problems += [f"{name}: abbreviated unit {w}" for w in words if w in ABBREVIATIONS]
        problems += [f"{name}: metric type {w} in the name" for w in words if w in TYPES]
        if family.type not in ("histogram", "summary") and re.search(r"_(bucket|count|sum)$", name):
            problems.append(f"{name}: reserved histogram/summary suffix")
        for sample in family.samples:
            for label in sample.labels:
                if not SNAKE.match(label):
                    problems.append(f"{name}: label {label} not snake_case")
                if family.type not in ("histogram", "summary") and label in ("le", "quantile"):
                    problems.append(f"{name}: reserved label {label}")
    return problems


def _exposed() -> set[str]:
    names = set()
    for registry in _registries().values():
        for family in text_string_to_metric_families(generate_latest(registry).decode()):
            suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}.get(family.type, ())
            names |= {family.name, *(family.name + s for s in suffixes)}
    return names


def test_every_exposed_metric_passes_promtool_naming_rules() -> None:
    for process, registry in _registries().items():
        assert _problems(registry) == [], process


def test_the_lint_catches_what_promtool_would() -> None:
    from prometheus_client import Counter, Gauge

    bad = CollectorRegistry()
    Gauge("dsx_test_gpu_hours", "capacity", registry=bad)
    Gauge("dsx_test_latency_ms", "latency", registry=bad)
    Counter("dsx_test_requests_counter", "", registry=bad)
    problems = _problems(bad)
    assert "dsx_test_gpu_hours: non-base unit hours" in problems
    assert "dsx_test_latency_ms: abbreviated unit ms" in problems
    assert "dsx_test_requests_counter_total: metric type counter in the name" in problems


def test_docs_runbooks_and_alerts_name_only_metrics_that_exist() -> None:
    exposed = _exposed()
    texts = [*REPO.glob("docs/**/*.md"), REPO / "README.md", *REPO.glob("deploy/**/*.yaml")]
    mentioned = {
        (path.relative_to(REPO), name)
        for path in texts
        for name in re.findall(r"\bdsx_(?:sentinel|api)_[a-z0-9_]+", path.read_text(encoding="utf-8"))
    }
    assert mentioned, "the docs name no metric: the scan is broken"
    # a prefix is a grep pattern (`grep dsx_sentinel_fault_to_cordon`): fine while some name starts with it
    unknown = sorted((str(p), n) for p, n in mentioned if not any(e.startswith(n) for e in exposed))
    assert unknown == [], unknown
