"""Area of concern: the `dsx snapshot`, `dsx validate` and `dsx diff` commands on files — exit
codes (0 ok, 1 failed check or drift, 2 bad input, 3 not found), reports written, attestations
that `dsx verify` accepts until a byte changes, and byte-identical output for the same input."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path

import pytest

from dsx import serialization
from dsx.cli.main import main
from dsx.files import documents
from dsx.model import recipe, snapshot
from dsx.testing.cluster_reader import FakeClusterReader
from dsx.validation import cluster_snapshot


def dsx(*argv: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    return int(exit_info.value.code or 0)


@pytest.fixture
def files(
    tmp_path: Path,
    cluster_recipe: recipe.Recipe,
    healthy_cluster: FakeClusterReader,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, Path]:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1770044400")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    paths = {"recipe": tmp_path / "r.yaml", "healthy": tmp_path / "healthy.yaml", "empty": tmp_path / "empty.yaml"}
    paths["recipe"].write_text(serialization.dump_yaml(cluster_recipe.to_dict()))
    healthy = cluster_snapshot.collect(healthy_cluster, generator="dsx/test", captured_at="2026-02-02T15:00:00Z")
    paths["healthy"].write_text(serialization.dump_yaml(healthy.to_dict()))
    empty = cluster_snapshot.collect(FakeClusterReader(), generator="dsx/test")
    paths["empty"].write_text(serialization.dump_yaml(empty.to_dict()))
    return paths


def test_snapshot_node_on_a_fixture_tree_is_reproducible(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1770044400")
    args = ["snapshot", "node", "--root", str(data_dir / "hosts" / "h100-ubuntu")]
    args += ["--nvidia-smi-xml", str(data_dir / "hosts" / "h100-ubuntu.nvidia-smi.xml")]
    assert dsx(*args, "-o", str(tmp_path / "a.yaml")) == 0
    assert dsx(*args, "-o", str(tmp_path / "b.yaml")) == 0
    assert (tmp_path / "a.yaml").read_bytes() == (tmp_path / "b.yaml").read_bytes()
    node = documents.snapshot_file(str(tmp_path / "a.yaml"))
    assert node.captured_at == "2026-02-02T15:00:00Z"
    assert node.nodes[0].name == "ip-10-0-12-34.ec2.internal"
    assert node.nodes[0].gpu_product == "NVIDIA-H100-80GB-HBM3"


def test_snapshot_node_table_and_node_name(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(data_dir / "hosts" / "b200-rhel")
    assert dsx("snapshot", "node", "--root", root, "--node-name", "n7", "--format", "table") == 0
    out = capsys.readouterr().out
    assert "n7" in out and "NVIDIA-B200" in out and "Red Hat Enterprise Linux 9.4 (Plow)" in out


def test_snapshot_node_bad_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert dsx("snapshot", "node", "--root", str(tmp_path / "nope")) == 2
    assert "--root" in capsys.readouterr().err


def test_merge_cluster_and_node_snapshots(data_dir: Path, tmp_path: Path, recorded_snapshot: snapshot.Snapshot) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(serialization.dump_yaml(recorded_snapshot.to_dict()))
    node = tmp_path / "node.yaml"
    root = str(data_dir / "hosts" / "h100-ubuntu")
    assert dsx("snapshot", "node", "--root", root, "-o", str(node)) == 0
    assert dsx("snapshot", "merge", str(cluster), str(node), "-o", str(tmp_path / "m.yaml")) == 0
    merged = documents.snapshot_file(str(tmp_path / "m.yaml"))
    gpu = merged.node("ip-10-0-12-34.ec2.internal")
    assert gpu is not None and gpu.host is not None and gpu.labels
    assert merged.cluster is not None
    assert dsx("snapshot", "merge", str(cluster), str(cluster)) == 2


def test_cluster_snapshot_without_kubeconfig_is_not_found(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert dsx("snapshot") == 3
    assert "kubeconfig not found" in capsys.readouterr().err


def test_validate_healthy_snapshot_passes(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, junit = tmp_path / "report.json", tmp_path / "report.xml"
    code = dsx(
        "validate",
        "--recipe",
        str(files["recipe"]),
        "--snapshot",
        str(files["healthy"]),
        "--fail-on-error",
        "--output",
        str(report),
        "--junit",
        str(junit),
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "PASSED: test:" in out
    doc = json.loads(report.read_text())
    assert doc["results"]["summary"]["failed"] == 0
    assert {t["extra"]["phase"] for t in doc["results"]["tests"]} == {
        "readiness",
        "deployment",
        "conformance",
        "performance",
    }
    assert ElementTree.parse(junit).getroot().get("failures") == "0"


def test_validate_absent_components_fails_and_lists_each(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    args = ["validate", "--recipe", str(files["recipe"]), "--snapshot", str(files["empty"]), "--phase", "deployment"]
    assert dsx(*args, "--output", str(report)) == 1  # a failed check exits 1 by default (the README's table)
    assert dsx(*args, "--fail-on-error", "--output", str(report)) == 1
    assert dsx(*args, "--no-fail-on-error", "--output", str(report)) == 0  # told only to report
    failed = {t["name"] for t in json.loads(report.read_text())["results"]["tests"] if t["status"] == "failed"}
    assert {"deployment/cert-manager/installed", "deployment/gpu-operator/installed"} <= failed
    assert "FAILED: test:" in capsys.readouterr().out


def test_validate_reports_are_byte_identical(files: dict[str, Path], tmp_path: Path) -> None:
    for name in ("a", "b"):
        dsx(
            "validate",
            "--recipe",
            str(files["recipe"]),
            "--snapshot",
            str(files["healthy"]),
            "-o",
            str(tmp_path / f"{name}.json"),
        )
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--phase", "speed"], "--phase: 'speed' is not allowed; allowed values: readiness, deployment"),
        (["--attest"], "--attest needs --output, --key, --validator"),
        (["--attest", "--output", "-", "--key", "k", "--validator", "v"], "--attest needs --output to name a file"),
    ],
)
def test_validate_bad_input(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert dsx("validate", "--recipe", str(files["recipe"]), "--snapshot", str(files["healthy"]), *extra) == 2
    assert message in capsys.readouterr().err


def test_validate_missing_recipe(files: dict[str, Path], tmp_path: Path) -> None:
    assert dsx("validate", "--recipe", str(tmp_path / "nope.yaml"), "--snapshot", str(files["healthy"])) == 3


def test_missing_signing_key_fails_before_validating(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    args = ["validate", "--recipe", str(files["recipe"]), "--snapshot", str(files["healthy"]), "--output", str(report)]
    assert dsx(*args, "--attest", "--key", str(tmp_path / "no.key"), "--validator", "v") == 3
    assert "no.key" in capsys.readouterr().err
    assert not report.exists()


def test_attested_report_verifies_until_edited(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert dsx("keygen", "--out", str(tmp_path / "validator"), "--algorithm", "ed25519") == 0
    out = tmp_path / "evidence"
    out.mkdir()
    report = out / "report.json"
    code = dsx(
        "validate",
        "--recipe",
        str(files["recipe"]),
        "--snapshot",
        str(files["healthy"]),
        "--output",
        str(report),
        "--attest",
        "--key",
        str(tmp_path / "validator.key"),
        "--validator",
        "ci@example.com",
    )
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "report.json",
        "report.json.intoto.jsonl",
        "report.json.sigstore.json",
        "report.recipe.yaml",
        "report.snapshot.yaml",
    ]
    public = str(tmp_path / "validator.pub")
    assert dsx("verify", str(report), "--key", public) == 0
    report.write_text(report.read_text().replace('"failed": 0', '"failed": 1', 1))
    capsys.readouterr()
    assert dsx("verify", str(report), "--key", public) == 1
    assert "report.json" in capsys.readouterr().out


def test_diff_recipe_against_snapshot(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert dsx("diff", "--recipe", str(files["recipe"]), "--snapshot", str(files["healthy"]), "--fail-on-drift") == 0
    doc = documents.load_mapping_file(files["healthy"])
    doc["nodes"][1]["labels"]["nvidia.com/cuda.driver.major"] = "570"
    drifted = tmp_path / "drifted.yaml"
    drifted.write_text(serialization.dump_yaml(doc))
    capsys.readouterr()
    args = ["diff", "--recipe", str(files["recipe"]), "--snapshot", str(drifted)]
    assert dsx(*args, "--fail-on-drift", "--format", "table") == 1
    out = capsys.readouterr().out
    assert "pool-label" in out and "nvidia.com/cuda.driver.major" in out and "DRIFT: 1 change(s)" in out
    assert dsx(*args) == 0  # drift reported, gate not asked for


def test_diff_two_snapshots_as_json(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert dsx("diff", str(files["healthy"]), str(files["empty"]), "--format", "json", "--fail-on-drift") == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "DriftReport" and doc["drift"] is True
    assert doc["summary"]["node-removed"] == 2


@pytest.mark.parametrize(
    "argv",
    [["diff"], ["diff", "a.yaml"], ["diff", "a.yaml", "b.yaml", "--recipe", "r.yaml"]],
)
def test_diff_bad_arguments(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert dsx(*argv) == 2
    assert "diff:" in capsys.readouterr().err


def test_recipe_from_snapshot_derives_h100(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert dsx("recipe", "--snapshot", str(files["healthy"]), "--intent", "training") == 0
    derived = serialization.parse_yaml(capsys.readouterr().out, source="stdout")
    assert derived["metadata"]["criteria"]["accelerator"] == "h100"
    assert derived["metadata"]["criteria"]["service"] == "eks"


def test_unreachable_cluster_is_unavailable(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "closed-port.kubeconfig"
    kubeconfig.write_text(
        serialization.dump_yaml(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    assert dsx("validate", "--recipe", str(files["recipe"]), "--kubeconfig", str(kubeconfig)) == 6
    assert "cannot reach the Kubernetes API" in capsys.readouterr().err


def test_performance_skip_says_why(
    files: dict[str, Path], tmp_path: Path, recipe_factory: Callable[..., recipe.Recipe]
) -> None:
    target = tmp_path / "certified.yaml"
    target.write_text(
        serialization.dump_yaml(recipe_factory(certification={"categories": ["nccl-all-reduce"]}).to_dict())
    )
    report = tmp_path / "report.json"
    args = ["validate", "--recipe", str(target), "--snapshot", str(files["healthy"]), "--phase", "performance"]
    assert dsx(*args, "--fail-on-error", "--output", str(report)) == 0
    (test,) = json.loads(report.read_text())["results"]["tests"]
    assert test["status"] == "skipped"
    assert test["message"].startswith("needs a live cluster (--kubeconfig)")
    assert "--executor local" in test["message"]


def test_kubernetes_only_flags_are_refused_with_the_local_executor(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["validate", "--recipe", str(files["recipe"]), "--snapshot", str(files["healthy"]), "--executor", "local"]
    assert dsx(*args, "--image", "example.invalid/workload:1") == 2
    assert capsys.readouterr().err.strip() == "dsx: error: --image: applies to --executor kubernetes only"
    assert dsx(*args[:-1], "remote") == 2
    assert "'remote' is not one of 'kubernetes', 'local'" in capsys.readouterr().err
