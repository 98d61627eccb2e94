"""Area of concern: the argocd-helm chart renders with the real `helm template` and `helm lint`,
and produces exactly the Applications of the plain argocd deployer."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from dsx import file_tree as tree
from dsx.bundles import render
from dsx.bundles.options import BundleOptions, Deployer
from dsx.files import documents

SMALL_RECIPE = Path(__file__).resolve().parents[2] / "data" / "bundles" / "recipe-small.yaml"


@pytest.mark.integration
def test_chart_renders_the_same_applications_as_the_argocd_deployer(helm_binary: Path, tmp_path: Path) -> None:
    recipe = documents.recipe(str(SMALL_RECIPE))
    options = BundleOptions(repo_url="https://git.example.org/ops/gpu.git", revision="main")
    chart_dir = tmp_path / "chart"
    tree.write_tree(render.render(recipe, Deployer.ARGOCD_HELM, options), chart_dir)
    subprocess.run([str(helm_binary), "lint", "--strict", str(chart_dir)], check=True, capture_output=True)
    rendered = subprocess.run(
        [str(helm_binary), "template", "apps", str(chart_dir)], check=True, capture_output=True, text=True
    ).stdout
    from_chart = {d["metadata"]["name"]: d for d in yaml.safe_load_all(rendered) if d}
    plain = render.render(recipe, Deployer.ARGOCD, options)
    expected = {ref.name: yaml.safe_load(plain.files[f"{ref.name}/application.yaml"]) for ref in recipe.component_refs}
    assert from_chart == expected
