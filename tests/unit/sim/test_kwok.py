"""Area of concern: the kwok configuration dsx sim writes — our stages, every option kwok needs,
and the annotations the documentation promises are the ones the stages read."""

from __future__ import annotations

from pathlib import Path

from dsx import serialization
from dsx.sim import kwok

REPO = Path(__file__).resolve().parents[3]


def test_configuration_holds_options_stages_and_default_logs(tmp_path: Path) -> None:
    docs = serialization.parse_yaml_documents(kwok.configuration(empty_log=tmp_path / "e.log"), source="kwok.yaml")
    kinds = [d["kind"] for d in docs]
    assert kinds == ["KwokConfiguration", *["Stage"] * len(kwok.STAGE_FILES), "ClusterLogs"]
    options = docs[0]["options"]
    for needed in ("nodeLeaseParallelism", "nodePlayStageParallelism", "podPlayStageParallelism"):
        assert options[needed] > 0
    assert options["enableDebuggingHandlers"] is True
    assert docs[-1]["spec"]["logs"] == [{"logsFile": str(tmp_path / "e.log")}]


def test_stages_have_unique_names_and_target_nodes_or_pods() -> None:
    stages = kwok.stages()
    names = [s["metadata"]["name"] for s in stages]
    assert len(set(names)) == len(names)
    assert all(n.startswith("dsx-") for n in names)
    assert {s["spec"]["resourceRef"]["kind"] for s in stages} == {"Node", "Pod"}
    for stage in stages:
        assert stage["spec"]["selector"]["matchExpressions"], stage["metadata"]["name"]
        assert stage["spec"]["next"], stage["metadata"]["name"]


def test_documented_annotations_are_the_ones_the_stages_read() -> None:
    text = "".join(Path(kwok.__file__).parent.joinpath("stages", name).read_text() for name in kwok.STAGE_FILES)
    docs = (REPO / "docs" / "sim.md").read_text()
    for annotation in (
        "sim.dsx.run/exit-code",
        "sim.dsx.run/run-duration",
        "sim.dsx.run/termination-message",
        "sim.dsx.run/waiting-reason",
        "sim.dsx.run/waiting-message",
        "sim.dsx.run/restart-count",
        "sim.dsx.run/not-ready",
        "sim.dsx.run/not-ready-reason",
        "sim.dsx.run/not-ready-message",
    ):
        assert annotation in text
        assert annotation in docs


def test_logs_crd_is_the_kwok_group() -> None:
    assert kwok.LOGS_CRD["metadata"]["name"] == f"logs.{kwok.KWOK_GROUP}"
    assert kwok.LOGS_CRD["spec"]["names"]["kind"] == "Logs"


def test_a_large_fleet_gets_long_leases_and_a_grace_period_beyond_them(tmp_path: Path) -> None:
    small, large = kwok.fleet_tuning(kwok.LARGE_FLEET_NODES), kwok.fleet_tuning(kwok.LARGE_FLEET_NODES + 1)
    assert small == kwok.FleetTuning(kwok.NODE_LEASE_SECONDS, None)
    assert large.node_monitor_grace_seconds is not None
    assert large.node_monitor_grace_seconds > large.lease_seconds > small.lease_seconds
    assert large.watch_cache and not small.watch_cache  # small fleets keep real 410 Gone
    docs = serialization.parse_yaml_documents(
        kwok.configuration(empty_log=tmp_path / "e.log", tuning=large), source="kwok.yaml"
    )
    assert docs[0]["options"]["nodeLeaseDurationSeconds"] == large.lease_seconds
