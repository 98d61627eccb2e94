"""Criteria sources and precedence: snapshot < config file < flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx.errors import BadInputError, NotFoundError
from dsx.files import documents
from dsx.model.criteria import Criteria
from dsx.recipes import inputs

SNAPSHOT = str(Path(__file__).resolve().parents[2] / "data" / "recipes" / "snapshots" / "eks-h100-ubuntu.yaml")
NO_FLAGS: dict[str, object | None] = {"service": None, "accelerator": None, "intent": None}


def _named(path: object) -> inputs.NamedDocument:
    """The document as an entry point hands it in: read by dsx.files, named by its path."""
    return inputs.NamedDocument(str(path), documents.load_mapping_file(str(path)))


def test_flags_alone() -> None:
    gathered = inputs.gather({"service": "EKS", "accelerator": "h100", "nodes": "2"})
    assert gathered.criteria == Criteria(service="eks", accelerator="h100", nodes=2)


def test_config_file_then_flags(tmp_path: Path) -> None:
    config = tmp_path / "criteria.yaml"
    config.write_text("service: gke\ngpu: h100\nintent: training\n")
    gathered = inputs.gather({"intent": "inference"}, config=_named(str(config)))
    assert gathered.criteria == Criteria(service="gke", accelerator="h100", intent="inference")


def test_snapshot_then_config_then_flags_with_a_warning_for_overrides(tmp_path: Path) -> None:
    config = tmp_path / "criteria.yaml"
    config.write_text("intent: training\n")
    gathered = inputs.gather({"accelerator": "h200"}, config=_named(str(config)), snapshot=_named(SNAPSHOT))
    assert gathered.criteria == Criteria(service="eks", accelerator="h200", os="ubuntu", intent="training", nodes=4)
    assert gathered.warnings == (f"--accelerator h200 overrides h100 detected in {SNAPSHOT}",)


def test_bad_config_value_names_the_file(tmp_path: Path) -> None:
    config = tmp_path / "criteria.yaml"
    config.write_text("os: windows\n")
    with pytest.raises(BadInputError, match=r"criteria.yaml: os: 'windows' is not allowed; allowed values: ubuntu"):
        inputs.gather(NO_FLAGS, config=_named(str(config)))


def test_config_must_be_a_mapping(tmp_path: Path) -> None:
    config = tmp_path / "criteria.yaml"
    config.write_text("- eks\n")
    with pytest.raises(BadInputError, match="expected a mapping"):
        inputs.gather(NO_FLAGS, config=_named(str(config)))


def test_missing_snapshot_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        inputs.gather(NO_FLAGS, snapshot=_named(str(tmp_path / "absent.yaml")))


def test_bad_flag_value_names_the_command_line() -> None:
    with pytest.raises(BadInputError, match="command line: intent: 'serving' is not allowed"):
        inputs.gather({"intent": "serving"})
