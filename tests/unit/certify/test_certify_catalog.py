"""Area of concern: the shipped categories load, every threshold compiles, is sourced and is
selected by accelerator, interconnect and scale as documented; overrides win."""

from __future__ import annotations

import pytest

from dsx.certify import thresholds
from dsx.errors import BadInputError, CatalogError, NotFoundError
from dsx.executors.local import executor as local_executor
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog

EXPECTED = {
    "nccl-all-reduce",
    "nccl-all-gather",
    "nccl-alltoall",
    "nccl-reduce-scatter",
    "nccl-broadcast",
    "nccl-loopback",
    "training",
}


def test_every_category_ships_and_loads() -> None:
    assert set(catalog.names()) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_category_invariants(name: str) -> None:
    category = catalog.get(name)
    assert category.local_thresholds, "local CPU runs need their own thresholds"
    for rule in category.thresholds + category.local_thresholds:
        assert rule.source.strip()
    if category.workload is model.WorkloadKind.COLLECTIVE:
        assert category.collective is not None and category.sweep and category.local_sweep
        assert category.local_sweep.max_bytes <= 4 * 1024 * 1024, "local sweeps stay small (2-core CI)"
        assert category.sweep.sizes()[0] == category.sweep.min_bytes
    else:
        assert category.training and category.local_training
    assert (category.scale is model.Scale.INTRA_NODE) == (name == "nccl-loopback")


def test_published_thresholds_are_selected_by_accelerator_and_interconnect() -> None:
    category = catalog.get("nccl-all-reduce")
    efa = thresholds.select(category, thresholds.Context("h100", "efa", model.Scale.FULL_SCALE), {})
    assert efa[model.Metric.BUS_BANDWIDTH_GBPS].expression == "value >= 439.0"
    tcpxo = thresholds.select(category, thresholds.Context("h100", "tcpxo", model.Scale.FULL_SCALE), {})
    assert tcpxo[model.Metric.BUS_BANDWIDTH_GBPS].expression == "value >= 303.0"
    unknown = thresholds.select(category, thresholds.Context("l40s", "", model.Scale.FULL_SCALE), {})
    assert unknown == {}
    clique = thresholds.select(category, thresholds.Context("gb200", "mnnvl", model.Scale.INTRA_GROUP), {})
    assert clique[model.Metric.BUS_BANDWIDTH_GBPS].expression == "value >= 900.0"


def test_override_wins_and_local_rules_apply_to_local_runs() -> None:
    category = catalog.get("nccl-all-reduce")
    local = thresholds.Context(scale=model.Scale.FULL_SCALE, local=True)
    assert (
        thresholds.select(category, local, {})[model.Metric.BUS_BANDWIDTH_GBPS].expression
        == "value >= 0.25 * reference"
    )
    chosen = thresholds.select(category, local, {model.Metric.BUS_BANDWIDTH_GBPS: "value >= 1.0"})
    assert chosen[model.Metric.BUS_BANDWIDTH_GBPS].source == "override"


def test_judge_reports_measured_and_expected() -> None:
    rule = thresholds.Applied(model.Metric.BUS_BANDWIDTH_GBPS, "value >= 0.5 * reference", "test")
    failure = thresholds.judge(rule, 0.1, 0.4)
    assert failure is not None
    assert failure.reason is model.Reason.THRESHOLD_VIOLATION
    assert (failure.measured, failure.expected) == (0.1, 0.2)
    assert thresholds.judge(rule, 0.3, 0.4) is None


def test_a_bad_override_is_a_clear_error() -> None:
    category = catalog.get("nccl-all-reduce")
    with pytest.raises(BadInputError, match="busBandwidthGBps"):
        thresholds.select(category, thresholds.Context(), {model.Metric.BUS_BANDWIDTH_GBPS: "value >="})


def test_unknown_category_names_the_allowed_ones() -> None:
    with pytest.raises(NotFoundError, match="nccl-all-reduce"):
        catalog.get("nccl-allreduce")


def test_a_category_file_must_cite_its_sources(tmp_path) -> None:  # type: ignore[no-untyped-def]
    text = (catalog.catalog.path("certification", "nccl-broadcast.yaml")).read_text()
    broken = tmp_path / "nccl-broadcast.yaml"
    broken.write_text(text.replace('source: local calibration; see README.md, "Local thresholds"', "source: ''"))
    with pytest.raises(CatalogError, match="source"):
        catalog.load_file(broken)


THROTTLED = {model.Metric.BUS_BANDWIDTH_GBPS, model.Metric.ALG_BANDWIDTH_GBPS, model.Metric.AVG_STEP_TIME_SECONDS}


@pytest.mark.parametrize("name", catalog.names())
def test_a_slow_node_lands_beyond_every_local_threshold_and_a_healthy_one_within(name: str) -> None:
    """The local slow fault caps bandwidth at reference / SLOW_FACTOR and floors step time at
    reference × SLOW_FACTOR; every local floor must sit between that and the reference itself."""
    category = catalog.get(name)
    assert category.local_thresholds, f"{name}: local runs need a threshold to judge slow nodes"
    for rule in category.local_thresholds:
        assert rule.metric in THROTTLED, f"{name}: the slow fault does not throttle {rule.metric.value}"
        factor = thresholds.expected_value(rule.expression, 1.0)
        assert factor is not None, f"{name}: {rule.expression} is not `value OP X * reference`"
        if rule.metric is model.Metric.AVG_STEP_TIME_SECONDS:
            assert "<=" in rule.expression and 1.0 < factor < local_executor.SLOW_FACTOR
        else:
            assert ">=" in rule.expression and 1.0 / local_executor.SLOW_FACTOR < factor < 1.0


def test_platforms_are_sourced_and_one_is_the_fallback() -> None:
    platforms = catalog.platforms()
    assert {"efa", "infiniband", "tcp"} <= set(platforms)
    assert [p.name for p in platforms.values() if not p.detect_resource] == ["tcp"]
    for platform in platforms.values():
        assert platform.source
        assert set(platform.request_all_of) <= ({platform.detect_resource} - {""})


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "scale: intra-group",
            "scale: cluster-wide",
            "nccl-all-reduce.yaml: spec: scale: 'cluster-wide' is not allowed",
        ),
        ("minNodes: 2", "minNodes: two", "nccl-all-reduce.yaml: spec.minNodes: expected an integer, got 'two'"),
        (
            "minNodes: 2",
            "minNode: 2",
            "spec: field: 'minNode' is not allowed; allowed values: workload, scale, minNodes",
        ),
        ("- metric: busBandwidthGBps", "- metric: speed", r"spec.thresholds\[0\]: metric: 'speed' is not allowed"),
    ],
)
def test_a_category_file_error_names_the_field_and_the_allowed_values(  # type: ignore[no-untyped-def]
    tmp_path, old: str, new: str, message: str
) -> None:
    text = catalog.catalog.path("certification", "nccl-all-reduce.yaml").read_text()
    assert old in text
    broken = tmp_path / "nccl-all-reduce.yaml"
    broken.write_text(text.replace(old, new, 1))
    with pytest.raises(CatalogError, match=message):
        catalog.load_file(broken)
