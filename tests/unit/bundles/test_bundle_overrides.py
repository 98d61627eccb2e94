"""Area of concern: bundle-time overrides — `--set` values typed as Helm reads them, node placement
written at the paths the PLACEMENT table names, both linted through the CLI, recorded in
bundle.json and the README, and never changing the recipe copy."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from dsx.bundles import overrides, render
from dsx.bundles.options import BundleOptions, Deployer
from dsx.cli.main import main
from dsx.errors import BadInputError
from dsx.model.recipe import Recipe

CATALOG = Path(__file__).resolve().parents[3] / "src" / "dsx" / "catalog"
CRITERIA = ["--service", "eks", "--accelerator", "h100", "--os", "ubuntu", "--intent", "training"]


def dsx(*argv: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    return int(exit_info.value.code or 0)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("false", False),
        ("null", None),
        ("3", 3),
        ("-12", -12),
        ("1.5", 1.5),
        ("1.30", "1.30"),
        ("580.105.08", "580.105.08"),
        ("0755", "0755"),
        ("yes", "yes"),
        ("on", "on"),
        ("", ""),
        ("a=b", "a=b"),
    ],
)
def test_set_values_are_typed_like_helm_and_versions_stay_strings(text: str, value: Any) -> None:
    parsed = overrides.parse_set(f"gpu-operator.driver.version={text}")
    assert parsed.value == value and type(parsed.value) is type(value)
    assert parsed.path == ("driver", "version")


def test_escaped_dots_keep_a_key_whole() -> None:
    parsed = overrides.parse_set(r"gpu-operator.daemonsets.labels.nvidia\.com/team=ml")
    assert parsed.path == ("daemonsets", "labels", "nvidia.com/team")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu-operator", "expected COMPONENT.KEY=VALUE"),
        ("gpu-operator=1", "expected COMPONENT.KEY=VALUE"),
        ("gpu-operator.a..b=1", "empty key"),
        ("gpu-operator.list[0]=1", "list indexes are not supported"),
    ],
)
def test_malformed_set_is_refused_naming_the_flag(text: str, message: str) -> None:
    with pytest.raises(BadInputError, match=message) as info:
        overrides.parse_set(text)
    assert repr(text) in str(info.value)


def test_tolerations_and_selectors_parse_every_form() -> None:
    assert overrides.parse_toleration("nvidia.com/gpu=present:NoSchedule", "f").to_dict() == {
        "key": "nvidia.com/gpu",
        "operator": "Equal",
        "value": "present",
        "effect": "NoSchedule",
    }
    assert overrides.parse_toleration("dedicated:NoExecute", "f").to_dict() == {
        "key": "dedicated",
        "operator": "Exists",
        "effect": "NoExecute",
    }
    assert overrides.parse_toleration("dedicated", "f").to_dict() == {"key": "dedicated", "operator": "Exists"}
    with pytest.raises(BadInputError, match="allowed values: NoSchedule, PreferNoSchedule, NoExecute"):
        overrides.parse_toleration("a=b:Sometimes", "--system-node-toleration")
    assert overrides.parse_selector("node-role.kubernetes.io/system=true", "f") == (
        "node-role.kubernetes.io/system",
        "true",
    )
    with pytest.raises(BadInputError, match="--accelerated-node-selector 'no value'"):
        overrides.parse_selector("no value", "--accelerated-node-selector")


def _small_overrides() -> overrides.Overrides:
    return overrides.Overrides(
        set_values=(overrides.parse_set("gpu-operator.driver.version=580.105.08"),),
        system_selector=(("node-role.kubernetes.io/system", "true"),),
        accelerated_tolerations=(overrides.parse_toleration("nvidia.com/gpu=present:NoSchedule", "f"),),
    )


def test_overrides_reach_the_values_and_are_recorded_but_the_recipe_copy_is_untouched(small_recipe: Recipe) -> None:
    plain = render.render(small_recipe, Deployer.HELM)
    made = render.render(small_recipe, Deployer.HELM, BundleOptions(overrides=_small_overrides()))
    values = yaml.safe_load(made.files["gpu-operator/values.yaml"])
    assert values["driver"]["version"] == "580.105.08"
    toleration = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    assert values["daemonsets"]["tolerations"] == [toleration]
    assert values["operator"]["nodeSelector"] == {"node-role.kubernetes.io/system": "true"}
    assert yaml.safe_load(made.files["cert-manager/values.yaml"])["nodeSelector"] == {
        "node-role.kubernetes.io/system": "true"
    }
    assert made.files["recipe.yaml"] == plain.files["recipe.yaml"]
    doc = json.loads(made.files["bundle.json"])
    assert doc["recipe"] == json.loads(plain.files["bundle.json"])["recipe"]
    assert doc["overrides"] == {
        "set": ["gpu-operator.driver.version=580.105.08"],
        "systemNodeSelector": {"node-role.kubernetes.io/system": "true"},
        "acceleratedNodeTolerations": [toleration],
    }
    assert "overrides" not in json.loads(plain.files["bundle.json"])
    readme = made.files["README.md"].decode()
    assert "--accelerated-node-toleration nvidia.com/gpu=present:NoSchedule" in readme
    assert small_recipe.content_digest() in readme
    again = render.render(small_recipe, Deployer.HELM, BundleOptions(overrides=_small_overrides()))
    assert again == made


def test_tolerations_append_to_what_the_recipe_sets(small_recipe: Recipe) -> None:
    raw = small_recipe.to_dict()
    gpu = next(r for r in raw["componentRefs"] if r["name"] == "gpu-operator")
    existing = {"key": "dedicated", "operator": "Exists"}
    gpu["values"]["daemonsets"] = {"tolerations": [existing]}
    tolerating = overrides.Overrides(
        accelerated_tolerations=(overrides.parse_toleration("dedicated", "f"), overrides.parse_toleration("x", "f"))
    )
    changed = overrides.apply(Recipe.from_dict(raw), tolerating)
    assert changed.component("gpu-operator").values["daemonsets"]["tolerations"] == [
        existing,
        {"key": "x", "operator": "Exists"},
    ]


def test_set_for_an_unknown_or_manifest_component_names_the_helm_components(small_recipe: Recipe) -> None:
    for target in ("gpu-operater", "skyhook-customizations"):
        with pytest.raises(BadInputError, match="allowed values: cert-manager, gpu-operator, kai-scheduler"):
            overrides.apply(small_recipe, overrides.Overrides(set_values=(overrides.parse_set(f"{target}.a=1"),)))


def test_set_through_a_scalar_is_refused(small_recipe: Recipe) -> None:
    bad = overrides.Overrides(set_values=(overrides.parse_set("gpu-operator.driver.version.major=1"),))
    with pytest.raises(BadInputError, match=re.escape("'driver.version' is str, not a mapping")):
        overrides.apply(small_recipe, bad)


def test_every_placement_path_is_read_by_the_chart_where_the_catalog_has_its_data() -> None:
    checked = 0
    for component, paths in overrides.PLACEMENT.items():
        assert (CATALOG / "components" / f"{component}.yaml").is_file(), component
        refs_files = list((CATALOG / "charts" / component).glob("*/values-refs.txt"))
        if not refs_files:
            continue
        read = set(refs_files[0].read_text().split())
        for path in (*paths.system_selectors, *paths.system_tolerations, *paths.accelerated_selectors,
                     *paths.accelerated_tolerations):  # fmt: skip
            if not path.startswith("node-feature-discovery."):  # a subchart: not in the parent's refs
                assert path in read, f"{component}: {path}"
                checked += 1
    assert checked >= 10


def test_cli_set_and_toleration_show_up_in_the_rendered_values(tmp_path: Path) -> None:
    out = tmp_path / "b"
    code = dsx(
        "bundle", *CRITERIA, "--output", str(out),
        "--set", "gpu-operator.driver.version=580.105.08",
        "--accelerated-node-toleration", "nvidia.com/gpu=present:NoSchedule",
    )  # fmt: skip
    assert code == 0
    values = yaml.safe_load((out / "gpu-operator" / "values.yaml").read_text())
    assert values["driver"]["version"] == "580.105.08"
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in values[
        "daemonsets"
    ]["tolerations"]
    assert json.loads((out / "bundle.json").read_text())["overrides"]["set"] == [
        "gpu-operator.driver.version=580.105.08"
    ]


def test_cli_misspelt_set_is_refused_by_lint_with_a_suggestion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "b"
    assert dsx("bundle", *CRITERIA, "--output", str(out), "--set", "gpu-operator.driver.verison=x") == 1
    err = capsys.readouterr().err
    assert "driver.verison" in err and "did you mean driver.version" in err
    assert not out.exists()
    assert dsx("bundle", *CRITERIA, "--output", str(out), "--set", "gpu-operator.driver.verison=x", "--no-lint") == 0


def test_cli_bad_override_flag_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = dsx("bundle", *CRITERIA, "--output", str(tmp_path / "b"), "--system-node-toleration", "k=v:Never")
    assert code == 2
    assert "--system-node-toleration 'k=v:Never'" in capsys.readouterr().err
