"""Area of concern: properties that hold for any recipe, not just the fixture — every deployer
renders checksums that match, YAML that reads back to the recipe's values exactly (strings stay
strings), a bundle.json listing every file, and waves that respect every dependency."""

from __future__ import annotations

import json
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsx.bundles import render
from dsx.bundles.options import Deployer
from dsx.model import bundle_layout as layout
from dsx.model import checksums
from dsx.model.recipe import Recipe

LABEL = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)
TRAPS = st.sampled_from(["on", "off", "yes", "no", "NO", "y", "1.10", "0755", "1e3", "~", "null", "12:30", "", " x"])
# any text a YAML or JSON file can hold (UTF-8: no lone surrogates), line separators included
CHARS = st.characters(codec="utf-8")
SCALAR = st.one_of(
    TRAPS,
    st.text(CHARS, max_size=12),
    st.integers(-(2**53 - 1), 2**53 - 1),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)
VALUES = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.one_of(LABEL, TRAPS), inner, max_size=3)),
    max_leaves=12,
)


@st.composite
def recipes(draw: st.DrawFn) -> Recipe:
    names = draw(st.lists(LABEL, min_size=1, max_size=6, unique=True))
    refs: list[dict[str, Any]] = []
    for n, name in enumerate(names):
        kind = draw(st.sampled_from(["Helm", "Helm", "Manifest", "Kustomize"]))
        ref: dict[str, Any] = {
            "name": name,
            "type": kind,
            "namespace": draw(LABEL),
            "version": draw(st.text(CHARS, min_size=1, max_size=10).filter(lambda v: v.strip() != "")),
            "dependencyRefs": draw(st.lists(st.sampled_from(names[:n]), unique=True, max_size=2)) if n else [],
        }
        if kind == "Helm":
            ref["chart"] = draw(LABEL)
            ref["source"] = draw(
                st.sampled_from(["https://charts.example.com/a", "oci://ghcr.io/x", "https://h.example.org"])
            )
            ref["values"] = draw(st.dictionaries(st.one_of(LABEL, TRAPS), VALUES, max_size=4))
        elif kind == "Manifest":
            ref["manifests"] = {f"{draw(LABEL)}.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"}
        else:
            ref["source"] = "https://github.com/example/repo.git"
            ref["path"] = draw(st.from_regex(r"[a-z]{1,5}(/[a-z]{1,5}){0,2}", fullmatch=True))
        refs.append(ref)
    document = {
        "apiVersion": "dsx.run/v1alpha1",
        "kind": "Recipe",
        "metadata": {
            "name": draw(LABEL),
            "generator": "dsx/0.1.0",
            "criteria": {"service": "eks"},
            "overlays": ["base"],
        },
        "constraints": [],
        "componentRefs": refs,
        "deploymentOrder": names,
    }
    return Recipe.from_dict(document, source="generated")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recipes())
def test_any_recipe_renders_a_consistent_bundle_for_every_deployer(recipe: Recipe) -> None:
    for deployer in Deployer:
        bundle = render.render(recipe, deployer)
        listed = checksums.parse_checksums(bundle.files[layout.CHECKSUMS], source="t")
        assert set(listed) == set(bundle.files) - {layout.CHECKSUMS}
        assert all(checksums.sha256_hex(bundle.files[p]) == digest for p, digest in listed.items())
        assert json.loads(bundle.files[layout.MANIFEST])["files"] == sorted(set(listed) - {layout.MANIFEST})
        assert render.render(recipe, deployer) == bundle
        for path, data in bundle.files.items():
            if path.endswith(".yaml") and not path.startswith("templates/"):
                list(yaml.safe_load_all(data))


@settings(max_examples=25, deadline=None)
@given(recipes())
def test_values_read_back_exactly_and_waves_respect_dependencies(recipe: Recipe) -> None:
    helm = render.render(recipe, Deployer.HELM)
    argocd = render.render(recipe, Deployer.ARGOCD)
    waves = {}
    for ref in recipe.component_refs:
        if ref.type.value == "Helm":
            assert yaml.safe_load(helm.files[f"{ref.name}/values.yaml"]) == ref.values
        app = yaml.safe_load(argocd.files[f"{ref.name}/application.yaml"])
        waves[ref.name] = int(app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"])
        assert app["spec"]["source"].get("targetRevision") is not None
    for ref in recipe.component_refs:
        assert all(waves[d] < waves[ref.name] for d in ref.dependency_refs)
    assert Recipe.from_dict(yaml.safe_load(helm.files[layout.RECIPE_COPY]), source="copy").content() == recipe.content()
