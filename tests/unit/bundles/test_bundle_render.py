"""Area of concern: what every bundle guarantees whatever the deployer — deterministic bytes,
closed-world checksums that the real `sha256sum -c` accepts, a bundle.json that lists the
files, parseable YAML, and no timestamp unless SOURCE_DATE_EPOCH asks for one."""

from __future__ import annotations

import filecmp
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from dsx import file_tree as tree
from dsx.bundles import render
from dsx.bundles.options import BundleOptions, Deployer
from dsx.errors import BadInputError
from dsx.file_tree import FileTree
from dsx.model import bundle_layout as layout
from dsx.model import checksums
from dsx.model.recipe import Recipe

ALL = list(Deployer)


def _dirs_identical(a: Path, b: Path) -> bool:
    comparison = filecmp.dircmp(a, b)
    stack = [comparison]
    while stack:
        current = stack.pop()
        if current.left_only or current.right_only or current.diff_files or current.funny_files:
            return False
        _, mismatch, errors = filecmp.cmpfiles(current.left, current.right, current.common_files, shallow=False)
        if mismatch or errors:
            return False
        stack.extend(current.subdirs.values())
    return True


@pytest.mark.parametrize("deployer", ALL)
def test_rendering_twice_gives_identical_trees_on_disk(
    deployer: Deployer, small_recipe: Recipe, tmp_path: Path
) -> None:
    first = render.render(small_recipe, deployer)
    second = render.render(Recipe.from_dict(small_recipe.to_dict(), source="again"), deployer)
    assert first == second
    tree.write_tree(first, tmp_path / "a")
    tree.write_tree(second, tmp_path / "b")
    assert _dirs_identical(tmp_path / "a", tmp_path / "b")


@pytest.mark.parametrize("deployer", ALL)
def test_real_sha256sum_accepts_checksums(
    deployer: Deployer, render_bundle: Callable[..., FileTree], tmp_path: Path
) -> None:
    tree.write_tree(render_bundle(deployer), tmp_path / "b")
    result = subprocess.run(
        ["sha256sum", "--check", "--strict", layout.CHECKSUMS], cwd=tmp_path / "b", capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(": OK") == len(
        checksums.parse_checksums((tmp_path / "b" / layout.CHECKSUMS).read_bytes(), source="t")
    )


@pytest.mark.parametrize("deployer", ALL)
def test_checksums_cover_everything_but_themselves(deployer: Deployer, render_bundle: Callable[..., FileTree]) -> None:
    bundle = render_bundle(deployer)
    listed = checksums.parse_checksums(bundle.files[layout.CHECKSUMS], source="t")
    assert set(listed) == set(bundle.files) - {layout.CHECKSUMS}
    assert layout.RECIPE_COPY in listed and layout.MANIFEST in listed
    manifest = json.loads(bundle.files[layout.MANIFEST])
    assert manifest["files"] == sorted(set(listed) - {layout.MANIFEST})
    assert manifest["deployer"] == deployer.value


@pytest.mark.parametrize("deployer", ALL)
def test_every_yaml_file_parses(deployer: Deployer, render_bundle: Callable[..., FileTree]) -> None:
    bundle = render_bundle(deployer)
    yaml_files = [p for p in bundle.files if p.endswith((".yaml", ".yml")) and not p.startswith("templates/")]
    assert yaml_files
    for path in yaml_files:
        documents = [d for d in yaml.safe_load_all(bundle.files[path]) if d is not None]
        assert documents, path


def test_recipe_copy_round_trips_with_the_digest_of_its_content(
    small_recipe: Recipe, render_bundle: Callable[..., FileTree]
) -> None:
    bundle = render_bundle(Deployer.HELM)
    copy = Recipe.from_dict(yaml.safe_load(bundle.files[layout.RECIPE_COPY]), source="copy")
    assert copy.verify_digest()
    assert copy.content() == small_recipe.content()
    assert json.loads(bundle.files[layout.MANIFEST])["recipe"]["digest"] == small_recipe.content_digest()


def test_no_timestamp_unless_source_date_epoch(render_bundle: Callable[..., FileTree]) -> None:
    plain = render_bundle(Deployer.ARGOCD)
    assert "createdAt" not in json.loads(plain.files[layout.MANIFEST])
    dated = render_bundle(Deployer.ARGOCD, created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert json.loads(dated.files[layout.MANIFEST])["createdAt"] == "2026-01-02T03:04:05Z"


def test_scripts_are_executable_on_disk(render_bundle: Callable[..., FileTree], tmp_path: Path) -> None:
    tree.write_tree(render_bundle(Deployer.HELM), tmp_path / "b")
    assert (tmp_path / "b" / "deploy.sh").stat().st_mode & 0o111
    assert not (tmp_path / "b" / "README.md").stat().st_mode & 0o111


def test_rewriting_a_bundle_replaces_the_files_of_the_previous_one(
    render_bundle: Callable[..., FileTree], tmp_path: Path
) -> None:
    out = tmp_path / "b"
    tree.write_tree(render_bundle(Deployer.HELM), out)
    assert (out / "deploy.sh").is_file()
    flux = render_bundle(Deployer.FLUX)
    tree.write_tree(flux, out)
    assert tree.read_tree(out).tree.files == flux.files


@pytest.mark.parametrize(
    ("foreign", "named"),
    [
        (".git/objects/ab/cdef", ".git/"),
        ("NOTES.md", "NOTES.md"),
        ("gpu-operator/local-patch.yaml", "gpu-operator/local-patch.yaml"),
        ("gpu-operator/patches/a.yaml", "gpu-operator/patches/"),
    ],
)
def test_rewriting_refuses_to_lose_files_the_previous_bundle_does_not_list(
    render_bundle: Callable[..., FileTree], tmp_path: Path, foreign: str, named: str
) -> None:
    out = tmp_path / "b"
    tree.write_tree(render_bundle(Deployer.HELM), out)
    (out / foreign).parent.mkdir(parents=True, exist_ok=True)
    (out / foreign).write_text("keep me")
    before = tree.read_tree(out).tree

    with pytest.raises(BadInputError, match=f"holds {re.escape(named)}, not part of the bundle there"):
        tree.write_tree(render_bundle(Deployer.FLUX), out)

    assert tree.read_tree(out).tree == before


@pytest.mark.parametrize("claimed", [".git/config", "../outside.txt", "NOTES.md"])
def test_a_forged_file_list_cannot_make_rewriting_delete_a_file(
    render_bundle: Callable[..., FileTree], tmp_path: Path, claimed: str
) -> None:
    """bundle.json and checksums.txt are claims: listing a file (with its true digest) at a
    hidden or escaping path, or one that is not there as listed, never makes it replaceable."""
    out = tmp_path / "b"
    tree.write_tree(render_bundle(Deployer.HELM), out)
    victim = (out / claimed).resolve() if ".." in claimed else out / claimed
    victim.parent.mkdir(parents=True, exist_ok=True)
    victim.write_text("[core]\n")
    manifest = json.loads((out / layout.MANIFEST).read_text())
    manifest["files"].append(claimed)
    (out / layout.MANIFEST).write_text(json.dumps(manifest))
    sums = (out / layout.CHECKSUMS).read_bytes() + f"{checksums.sha256_hex(victim.read_bytes())}  {claimed}\n".encode()
    if claimed == "NOTES.md":  # a plain path, listed by both, whose bytes no longer match
        victim.write_text("my notes\n")
    (out / layout.CHECKSUMS).write_bytes(sums)

    with pytest.raises(BadInputError, match="choose an empty or new directory"):
        tree.write_tree(render_bundle(Deployer.FLUX), out)

    assert victim.read_text() in ("[core]\n", "my notes\n")
    assert (out / "deploy.sh").is_file()


def test_rewriting_refuses_to_lose_an_edited_file(render_bundle: Callable[..., FileTree], tmp_path: Path) -> None:
    out = tmp_path / "b"
    tree.write_tree(render_bundle(Deployer.HELM), out)
    values = next(p for p in sorted(out.glob("*/values.yaml")))
    values.write_text("edited: true\n")

    with pytest.raises(BadInputError, match=r"values\.yaml, changed since the bundle was written"):
        tree.write_tree(render_bundle(Deployer.HELM), out)
    assert values.read_text() == "edited: true\n"


def test_refuses_to_overwrite_a_directory_that_is_not_a_bundle(
    render_bundle: Callable[..., FileTree], tmp_path: Path
) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(BadInputError, match="not a dsx bundle"):
        tree.write_tree(render_bundle(Deployer.HELM), tmp_path)
    assert (tmp_path / "precious.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("name", "GPU_Operator", "DNS-1123 label"),
        ("namespace", "../etc", "namespace"),
        ("source", "ftp://example.com/charts", "https:// or oci://"),
    ],
)
def test_unsafe_component_fields_are_rejected_by_name(
    small_recipe: Recipe, field: str, value: str, message: str
) -> None:
    raw = small_recipe.to_dict()
    old_name = raw["componentRefs"][0]["name"]
    raw["componentRefs"][0][field] = value
    if field == "name":
        raw["deploymentOrder"] = [value if n == old_name else n for n in raw["deploymentOrder"]]
        for ref in raw["componentRefs"]:
            ref["dependencyRefs"] = [value if d == old_name else d for d in ref["dependencyRefs"]]
    with pytest.raises(BadInputError, match=message):
        render.render(Recipe.from_dict(raw, source="r.yaml"), Deployer.HELM)


def test_manifest_file_names_cannot_escape_the_component_folder(small_recipe: Recipe) -> None:
    raw = small_recipe.to_dict()
    manifest_ref = next(r for r in raw["componentRefs"] if r["type"] == "Manifest")
    manifest_ref["manifests"] = {"../../evil.yaml": "kind: x\n"}
    with pytest.raises(BadInputError, match="plain file name"):
        render.render(Recipe.from_dict(raw, source="r.yaml"), Deployer.ARGOCD)


def test_bundle_written_to_a_directory_with_spaces(render_bundle: Callable[..., FileTree], tmp_path: Path) -> None:
    out = tmp_path / "my bundle"
    tree.write_tree(render_bundle(Deployer.HELMFILE), out)
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    assert tree.read_tree(copy).tree.files == render_bundle(Deployer.HELMFILE).files


def test_repository_options_reach_bundle_json(small_recipe: Recipe) -> None:
    options = BundleOptions(repo_url="https://git.example.org/ops/gpu.git", revision="v3", repo_path="clusters/a")
    manifest = json.loads(render.render(small_recipe, Deployer.FLUX, options).files[layout.MANIFEST])
    assert manifest["repository"] == {
        "url": "https://git.example.org/ops/gpu.git",
        "revision": "v3",
        "path": "clusters/a",
    }
