"""`dsx recipe` and `dsx query` end to end through the real CLI entry point and shipped catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsx import serialization
from dsx.cli.main import main
from dsx.files import documents
from dsx.model.recipe import Recipe

SNAPSHOT = Path(__file__).resolve().parents[2] / "data" / "recipes" / "snapshots" / "eks-h100-ubuntu.yaml"
TRAINING = ["--service", "eks", "--accelerator", "h100", "--os", "ubuntu", "--intent", "training"]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_recipe_to_file_pins_versions_and_orders_dependencies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "r.yaml"
    code, _, _ = _run(["recipe", *TRAINING, "--platform", "kubeflow", "-o", str(target)], capsys)
    assert code == 0
    recipe = Recipe.from_dict(documents.load_mapping_file(target), source=str(target))
    operator = recipe.component("gpu-operator")
    assert operator.version == "v25.10.1"
    assert operator.values["driver"]["version"] == "580.105.08"
    order = list(recipe.deployment_order)
    for ref in recipe.component_refs:
        for dep in ref.dependency_refs:
            assert order.index(dep) < order.index(ref.name)
    assert recipe.metadata.unvalidated_criteria == ()


def test_two_runs_are_byte_identical(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "1.yaml", tmp_path / "2.yaml"
    _run(["recipe", *TRAINING, "-o", str(first)], capsys)
    _run(["recipe", *TRAINING, "-o", str(second)], capsys)
    assert first.read_bytes() == second.read_bytes()


def test_json_format_parses(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["recipe", *TRAINING, "--format", "json"], capsys)
    assert code == 0
    assert json.loads(out)["kind"] == "Recipe"


def test_table_format_lists_components_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["recipe", *TRAINING, "--format", "table"], capsys)
    assert code == 0
    assert out.index("kube-prometheus-stack") < out.index("gpu-operator")


def test_unknown_accelerator_exits_2_listing_allowed_values(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["recipe", "--service", "eks", "--accelerator", "h900", "--os", "ubuntu"], capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "'h900' is not allowed" in err
    assert "h100" in err


def test_gpu_alias_and_case(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        ["query", "--service", "EKS", "--gpu", "H100", "--selector", "metadata.criteria.accelerator"], capsys
    )
    assert (code, out) == (0, "h100\n")


def test_strict_exits_2_for_an_unvalidated_combination(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["recipe", "--service", "gke", "--accelerator", "h100", "--os", "ubuntu", "--intent", "training"]
    code, _, _ = _run(args, capsys)
    assert code == 0
    code, _, err = _run([*args, "--strict"], capsys)
    assert code == 2
    assert "eks-h100-ubuntu-training-kubeflow" in err


def test_query_prints_the_bare_driver_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["query", *TRAINING, "--selector", "components.gpu-operator.values.driver.version"], capsys)
    assert (code, out) == (0, "580.105.08\n")


def test_query_maps_print_in_the_chosen_format(capsys: pytest.CaptureFixture[str]) -> None:
    selector = "components.gpu-operator.values.driver"
    code, out, _ = _run(["query", *TRAINING, "--selector", selector, "--format", "json"], capsys)
    assert code == 0
    assert json.loads(out)["kernelModuleType"] == "open"


def test_query_list_index(capsys: pytest.CaptureFixture[str]) -> None:
    selector = "components.nvidia-dra-driver-gpu.values.kubeletPlugin.tolerations[0].key"
    assert _run(["query", *TRAINING, "--selector", selector], capsys)[1] == "nvidia.com/gpu\n"


def test_query_missing_path_exits_3_naming_the_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    selector = "components.gpu-operator.values.driver.verison"
    code, _, err = _run(["query", *TRAINING, "--selector", selector], capsys)
    assert code == 3
    assert "deepest existing prefix 'components.gpu-operator.values.driver'" in err


def test_query_a_saved_recipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "r.yaml"
    _run(["recipe", *TRAINING, "-o", str(target)], capsys)
    code, out, _ = _run(["query", "--recipe", str(target), "--selector", "metadata.name"], capsys)
    assert (code, out) == (0, "eks-h100-ubuntu-training\n")
    argv = ["query", "--recipe", str(target), "--service", "gke", "--os", "cos", "--selector", "metadata.name"]
    code, _, err = _run(argv, capsys)
    assert code == 2
    assert err == "dsx: error: --recipe and criteria flags (--service, --os) are exclusive\n"


def test_snapshot_derives_criteria_and_flags_override_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        ["query", "--snapshot", str(SNAPSHOT), "--selector", "metadata.criteria", "--format", "json"], capsys
    )
    assert code == 0
    assert json.loads(out) == {
        "service": "eks",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "any",
        "platform": "any",
        "nodes": 4,
    }
    code, out, err = _run(
        ["query", "--snapshot", str(SNAPSHOT), "--os", "rhel", "--selector", "metadata.criteria.os"], capsys
    )
    assert (code, out) == (0, "rhel\n")
    assert "dsx: warning: --os rhel overrides ubuntu" in err


def test_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("service: aks\naccelerator: h100\nintent: training\n")
    code, out, _ = _run(["query", "--config", str(config), "--selector", "metadata.name"], capsys)
    assert (code, out) == (0, "aks-h100-training\n")


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_recipe_writes_the_document_every_other_command_reads(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`dsx recipe` writes `resolve.document` as it is; lint, bundle and the API read the same recipe
    through `Recipe`, and its document must be byte for byte what `dsx recipe` wrote."""
    from dsx.model.criteria import Criteria
    from dsx.recipes import resolve

    code, out, _ = _run(["recipe", *TRAINING, "--format", fmt], capsys)
    assert code == 0
    query = Criteria(service="eks", accelerator="h100", os="ubuntu", intent="training")
    through_the_model = resolve.resolve(query).to_dict()
    written = (
        serialization.dump_json(through_the_model) if fmt == "json" else serialization.dump_yaml(through_the_model)
    )
    assert out == written
    assert through_the_model["metadata"]["digest"] == Recipe.from_dict(through_the_model).content_digest()
