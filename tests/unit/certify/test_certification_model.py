"""Area of concern: the certification request reads the recipe's `certification:` block, rejects
bad input naming the field, and round-trips; verdicts roll up as NVCRE's results do."""

from __future__ import annotations

import pytest

from dsx.errors import BadInputError
from dsx.model import certification as model


def test_recipe_block_round_trips() -> None:
    raw = {
        "name": "cluster-a",
        "categories": ["nccl-all-reduce", {"name": "training", "thresholds": {"goodputRatio": "value >= 0.8"}}],
        "thresholds": {"busBandwidthGBps": "value >= 400.0"},
        "scale": "full-scale",
        "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
        "runTimeoutSeconds": 900,
        "stallTimeoutSeconds": 300,
        "ranksPerNode": 8,
        "accelerator": "H100",
        "interconnect": "efa",
        "isolate": True,
    }
    spec = model.Certification.from_dict(raw)
    assert spec.thresholds_for("training") == {
        model.Metric.BUS_BANDWIDTH_GBPS: "value >= 400.0",
        model.Metric.GOODPUT_RATIO: "value >= 0.8",
    }
    assert spec.accelerator == "h100"
    assert model.Certification.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"scale": "per-rack"}, "intra-node"),
        ({"thresholds": {"busbw": "value > 1.0"}}, "busBandwidthGBps"),
        ({"categories": [{"scale": "full-scale"}]}, r"categories\[0\]"),
        ({"runTimeoutSeconds": 0}, "runTimeoutSeconds"),
        ({"colour": "blue"}, "colour"),
        (
            {"target": {"nodeCount": 0}},
            r"^certification: target\.nodeCount: 0 is out of range; allowed: an integer at least 1$",
        ),
        ({"ranksPerNode": True}, r"^certification: ranksPerNode: expected an integer, got True$"),
        ({"isolate": "no"}, r"^certification: isolate: expected true or false, got 'no'$"),
        ({"target": {"nodeSelector": {"zone": 1}}}, r"^certification: target\.nodeSelector\.zone: expected a string"),
    ],
)
def test_bad_input_names_the_field(raw: dict[str, object], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        model.Certification.from_dict(raw)


def test_fault_injection_parsing() -> None:
    assert model.FaultInjection.parse("node-5:slow") == model.FaultInjection("node-5", model.FaultKind.SLOW)
    with pytest.raises(BadInputError, match="slow, hang, crash, corrupt"):
        model.FaultInjection.parse("node-5:melt")
    with pytest.raises(BadInputError, match="NODE:KIND"):
        model.FaultInjection.parse("node-5")


def test_overall_result() -> None:
    p, f, e = model.Status.PASSED, model.Status.FAILED, model.Status.EXCLUDED
    assert model.overall_result([p, p]) is model.Result.PASSED
    assert model.overall_result([p, e]) is model.Result.INCOMPLETE
    assert model.overall_result([p, f, e]) is model.Result.FAILED
    assert model.overall_result([p], running=True) is model.Result.RUNNING


def test_sizes_read_like_nccl_tests() -> None:
    assert model.parse_bytes("16G", "x") == 16 * 1024**3
    assert model.parse_bytes("4K", "x") == 4096
    with pytest.raises(BadInputError):
        model.parse_bytes("lots", "x")


def test_bandwidth_keys_are_spelled_GBps_and_the_old_Gbps_spelling_still_reads() -> None:
    # the values are gigabytes per second (nccl-tests' GB/s); NVCRE's keys say so, earlier dsx said Gbps
    raw = {"thresholds": {"busBandwidthGbps": "value >= 400.0", "algBandwidthGbps": "value >= 300.0"}}
    spec = model.Certification.from_dict(raw)
    assert spec.to_dict()["thresholds"] == {"busBandwidthGBps": "value >= 400.0", "algBandwidthGBps": "value >= 300.0"}
    assert model.Metric("busBandwidthGbps") is model.Metric.BUS_BANDWIDTH_GBPS
    assert model.Metric.BUS_BANDWIDTH_GBPS.unit == "GB/s"
    with pytest.raises(ValueError):
        model.Metric("busBandwidthGbit")
