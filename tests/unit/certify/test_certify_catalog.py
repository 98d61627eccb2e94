"""Area of concern: the shipped categories load, every threshold compiles, is sourced and is
selected by accelerator, interconnect and scale as documented; overrides win."""

from __future__ import annotations

import pytest

from dsx.certify import thresholds
from dsx.errors import BadInputError, CatalogError, NotFoundError
from dsx.executors.local import executor as local_executor
from dsx.files import certify_files
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
    assert category.peer_thresholds, "a cluster run no published figure fits is judged against its peers"
    for rule in category.thresholds + category.peer_thresholds + category.local_thresholds:
        assert rule.source.strip()
    for rule in category.thresholds:  # a published figure says what it was measured on
        on = rule.measured_on
        assert on.workload == category.workload_id(category.program)
        assert on.accelerator and on.interconnect
    if category.workload is model.WorkloadKind.COLLECTIVE:
        assert category.program is model.Program.NCCL_TESTS
        assert category.collective is not None and category.sweep and category.local_sweep
        assert category.local_sweep.max_bytes <= 4 * 1024 * 1024, "local sweeps stay small (2-core CI)"
        assert category.sweep.sizes()[0] == category.sweep.min_bytes
    else:
        assert category.program is model.Program.MEGATRON_LM
        assert category.megatron and category.local_training
    assert (category.scale is model.Scale.INTRA_NODE) == (name == "nccl-loopback")


def _context(category: catalog.Category, accelerator: str, interconnect: str, **kw: object) -> thresholds.Context:
    program = model.Program.BUILTIN if kw.pop("builtin", False) else category.program
    return thresholds.Context(category.workload_id(program), accelerator, interconnect, **kw)  # type: ignore[arg-type]


def test_published_thresholds_are_selected_by_workload_accelerator_and_interconnect() -> None:
    category = catalog.get("nccl-all-reduce")
    efa = thresholds.select(category, _context(category, "h100", "efa", scale=model.Scale.FULL_SCALE), {})
    assert efa[model.Metric.BUS_BANDWIDTH_GBPS].expression == "value >= 439.0"
    assert efa[model.Metric.BUS_BANDWIDTH_GBPS].measured_on == "nccl-tests/all_reduce_perf, h100, efa, 2 nodes"
    tcpxo = thresholds.select(category, _context(category, "h100", "tcpxo", scale=model.Scale.FULL_SCALE), {})
    assert tcpxo[model.Metric.BUS_BANDWIDTH_GBPS].expression == "value >= 303.0"
    clique = thresholds.select(category, _context(category, "gb200", "mnnvl", scale=model.Scale.INTRA_GROUP), {})
    assert clique[model.Metric.BUS_BANDWIDTH_GBPS].expression == "value >= 900.0"


def test_without_a_published_figure_the_peers_judge_and_the_gap_is_named() -> None:
    category = catalog.get("nccl-all-reduce")
    chosen = thresholds.choose(category, _context(category, "l40s", "infiniband", scale=model.Scale.FULL_SCALE), {})
    assert chosen.applied[model.Metric.BUS_BANDWIDTH_GBPS].expression == "value >= 0.8 * peers"
    assert "no published busBandwidthGBps figure for (nccl-tests/all_reduce_perf, l40s, infiniband)" in chosen.lacking


def _scale(rule: catalog.ThresholdRule, category: catalog.Category) -> model.Scale:
    if rule.scale is not None:
        return rule.scale
    return category.scale if category.scale is model.Scale.INTRA_NODE else model.Scale.FULL_SCALE


def test_a_megatron_or_nccl_tests_figure_never_judges_the_builtin_worker() -> None:
    """Issue 27: figures published for one program are not applied to another."""
    for name in catalog.names():
        category = catalog.get(name)
        for rule in category.thresholds:
            on = rule.measured_on
            builtin = _context(category, on.accelerator, on.interconnect, scale=_scale(rule, category), builtin=True)
            own = _context(category, on.accelerator, on.interconnect, scale=_scale(rule, category))
            assert thresholds.select(category, own, {})[rule.metric].expression == rule.expression
            chosen = thresholds.select(category, builtin, {})
            assert chosen.get(rule.metric) is None or "peers" in chosen[rule.metric].expression, name


def test_a_figure_measured_on_another_workload_is_refused_at_load(tmp_path) -> None:  # type: ignore[no-untyped-def]
    text = catalog.catalog.path("certification", "nccl-all-reduce.yaml").read_text()
    broken = tmp_path / "nccl-all-reduce.yaml"
    broken.write_text(
        text.replace(
            "{workload: nccl-tests/all_reduce_perf, accelerator: h100, interconnect: efa",
            "{workload: builtin/all_reduce, accelerator: h100, interconnect: efa",
            1,
        )
    )
    with pytest.raises(CatalogError, match=r"measuredOn\.workload: 'builtin/all_reduce' is not allowed"):
        certify_files.certify_category(broken)
    unnamed = tmp_path / "nccl-all-reduce.yaml"
    unnamed.write_text(text.replace(", accelerator: h100, interconnect: efa, nodes: 2}", "}", 1))
    with pytest.raises(CatalogError, match="measuredOn names its accelerator and interconnect"):
        certify_files.certify_category(unnamed)


def test_override_wins_and_local_rules_apply_to_local_runs() -> None:
    category = catalog.get("nccl-all-reduce")
    local = _context(category, "", "", scale=model.Scale.FULL_SCALE, local=True, builtin=True)
    assert (
        thresholds.select(category, local, {})[model.Metric.BUS_BANDWIDTH_GBPS].expression
        == "value >= 0.4 * peers && value >= 0.05 * reference"
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


def test_judge_names_the_bound_that_failed_of_two() -> None:
    rule = thresholds.Applied(model.Metric.BUS_BANDWIDTH_GBPS, "value >= 0.4 * peers && value >= 0.05 * reference", "t")
    below_floor = thresholds.judge(rule, 1.0, reference=100.0, peers=2.0)
    assert below_floor is not None and below_floor.expected == 5.0
    below_peers = thresholds.judge(rule, 1.0, reference=10.0, peers=10.0)
    assert below_peers is not None and below_peers.expected == 4.0
    assert thresholds.judge(rule, 1.0, reference=10.0, peers=2.0) is None
    assert thresholds.judge(rule, 1.0, reference=10.0, peers=None) is None  # nothing to compare with


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
    broken.write_text(
        text.replace('source: local peers and calibration; see README.md, "Local thresholds"', "source: ''")
    )
    with pytest.raises(CatalogError, match="source"):
        certify_files.certify_category(broken)


THROTTLED = {model.Metric.BUS_BANDWIDTH_GBPS, model.Metric.ALG_BANDWIDTH_GBPS, model.Metric.AVG_STEP_TIME_SECONDS}


@pytest.mark.parametrize("name", catalog.names())
def test_a_slow_node_lands_beyond_every_local_threshold_and_a_healthy_one_within(name: str) -> None:
    """The local slow fault caps bandwidth at peers / SLOW_FACTOR and floors step time at
    peers × SLOW_FACTOR (peers: the round's control run); every local bound against the peers
    must sit between that and the peers themselves, and the calibration floor below both."""
    category = catalog.get(name)
    assert category.local_thresholds, f"{name}: local runs need a threshold to judge slow nodes"
    for rule in category.local_thresholds:
        assert rule.metric in THROTTLED, f"{name}: the slow fault does not throttle {rule.metric.value}"
        factor = thresholds.expected_value(rule.expression, reference=None, peers=1.0)
        assert factor is not None, f"{name}: {rule.expression} is not `value OP X * peers && …`"
        floor = thresholds.expected_value(rule.expression.split("&&")[1], reference=1.0)
        assert floor is not None, f"{name}: the calibration stays as a floor"
        if rule.metric is model.Metric.AVG_STEP_TIME_SECONDS:
            assert "<=" in rule.expression and 1.0 < factor < local_executor.SLOW_FACTOR < floor
        else:
            assert ">=" in rule.expression and floor < 1.0 / local_executor.SLOW_FACTOR < factor < 1.0


def test_platforms_are_sourced_and_one_is_the_fallback() -> None:
    platforms = catalog.platforms()
    assert {"efa", "infiniband", "tcp"} <= set(platforms)
    assert [p.name for p in platforms.values() if not p.detect_resource] == ["tcp"]
    for platform in platforms.values():
        assert platform.source
        assert set(platform.request_all_of) <= ({platform.detect_resource} - {""})
    assert platforms["efa"].network is model.Transport.NET_OFI
    assert platforms["infiniband"].network is model.Transport.NET_IB
    assert platforms["tcp"].network is None


def test_every_workload_names_a_runtime_the_catalog_component_ships() -> None:
    from dsx.executors import kubernetes

    shipped = {r["metadata"]["name"] for r in kubernetes.shipped_runtimes()}
    for program, shipped_workload in catalog.workloads().items():
        assert shipped_workload.source and shipped_workload.image
        assert shipped_workload.runtime in shipped, program
        assert (shipped_workload.single_node_runtime or shipped_workload.runtime) in shipped
    assert catalog.BUILTIN_RUNTIME in shipped


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
            "spec: field: 'minNode' is not allowed; allowed values: workload, program, scale, minNodes",
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
        certify_files.certify_category(broken)
