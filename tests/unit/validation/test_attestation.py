"""Area of concern: a validity attestation binds recipe, snapshot and report digests to the
validator's key and a hardware summary; dsx.signing verifies it offline and catches any edit."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from dsx import serialization
from dsx.errors import BadInputError
from dsx.files import signing as signing_files
from dsx.model import recipe, snapshot
from dsx.signing import dsse, keys, signer, statement
from dsx.signing.verdict import TrustLevel
from dsx.testing.cluster_reader import FakeClusterReader
from dsx.validation import attestation, cluster_snapshot, reports, results, run


@pytest.fixture
def evidence(tmp_path: Path, cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader) -> dict[str, Path]:
    snap = cluster_snapshot.collect(healthy_cluster, generator="dsx/test", captured_at="2026-02-02T15:00:00Z")
    report = run.validate(
        cluster_recipe, snap, phases=results.PHASE_ORDER[:3], reader=healthy_cluster, generator="dsx/0.1.0"
    )
    paths = {
        "recipe": tmp_path / "recipe.yaml",
        "snapshot": tmp_path / "snapshot.yaml",
        "report": tmp_path / "report.json",
    }
    paths["recipe"].write_text(serialization.dump_yaml(cluster_recipe.to_dict()))
    paths["snapshot"].write_text(serialization.dump_yaml(snap.to_dict()))
    paths["report"].write_text(reports.ctrf_json(report))
    key = keys.KeySigner(keys.generate(signer.Algorithm.ED25519))
    claims = attestation.predicate(report, snap, validator="ci-bot", key_id=key.key_id)
    for path, text in signing_files.attest_beside(
        paths["report"], paths, attestation.PREDICATE_TYPE, claims, key
    ).items():
        path.write_text(text)
    (tmp_path / "validator.pub").write_bytes(key.public_key_pem)
    return paths


def trusted(paths: dict[str, Path]) -> list[keys.TrustedKey]:
    return [signing_files.load_public_key(paths["report"].parent / "validator.pub")]


def test_attested_report_verifies(evidence: dict[str, Path]) -> None:
    verdict = signing_files.verify_path(evidence["report"], trusted(evidence))
    assert verdict.level is TrustLevel.VERIFIED, verdict.findings
    assert verdict.exit_code == 0


@pytest.mark.parametrize("role", ["report", "recipe", "snapshot"])
def test_editing_any_subject_is_tampering(evidence: dict[str, Path], role: str) -> None:
    path = evidence[role]
    path.write_text(path.read_text().replace("passed", "failed", 1).replace("v25.10.1", "v25.10.2", 1))
    verdict = signing_files.verify_path(evidence["report"], trusted(evidence))
    assert verdict.level is TrustLevel.TAMPERED
    assert any(f.subject == path.name for f in verdict.findings)


def test_statement_binds_digests_validator_and_hardware(evidence: dict[str, Path]) -> None:
    line = (evidence["report"].parent / "report.json.intoto.jsonl").read_bytes()
    envelope = dsse.Envelope.from_dict(json.loads(line), source="a")
    stated = statement.verify_envelope(envelope, trusted(evidence), source="a").statement
    assert stated.predicate_type == attestation.PREDICATE_TYPE
    assert {s.name for s in stated.subjects} == {"recipe.yaml", "snapshot.yaml", "report.json"}
    predicate = stated.predicate
    assert predicate["validator"]["name"] == "ci-bot"
    assert predicate["validator"]["keyId"] == trusted(evidence)[0].key_id
    assert predicate["phases"] == {"readiness": "passed", "deployment": "passed", "conformance": "passed"}
    assert predicate["verdict"] == "passed"
    assert predicate["hardware"] == {
        "nodeCount": 2,
        "gpuNodeCount": 2,
        "gpuCount": 16,
        "gpuProduct": "NVIDIA-H100-80GB-HBM3",
        "gpuProducts": ["NVIDIA-H100-80GB-HBM3"],
        "driverVersion": "580.95.05",
        "driverVersions": ["580.95.05"],
        "provider": "eks",
        "kubernetesVersion": "v1.34.1",
    }


def test_subjects_must_sit_beside_the_report(tmp_path: Path, evidence: dict[str, Path]) -> None:
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    moved = elsewhere / "recipe.yaml"
    moved.write_text(evidence["recipe"].read_text())
    key = keys.KeySigner(keys.generate(signer.Algorithm.ED25519))
    subject = results.Subject("r", "sha256:a", "sha256:b")
    report = results.Report(subject, (), (), "dsx/0.1.0")
    with pytest.raises(BadInputError, match=r"must sit beside report\.json"):
        claims = attestation.predicate(report, snapshot.Snapshot(), validator="x", key_id=key.key_id)
        signing_files.attest_beside(evidence["report"], {"recipe": moved}, attestation.PREDICATE_TYPE, claims, key)


def test_mixed_hardware_is_reported_as_mixed(recorded_snapshot: snapshot.Snapshot) -> None:
    gpu = recorded_snapshot.gpu_nodes[0]
    other = replace(gpu, name="a100", labels={**gpu.labels, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    summary = attestation.hardware_summary(replace(recorded_snapshot, nodes=(*recorded_snapshot.nodes, other)))
    assert summary["gpuProduct"] == "mixed"
    assert summary["gpuProducts"] == ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"]
    assert summary["driverVersion"] == "580.95.05"
