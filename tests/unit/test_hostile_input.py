"""Area of concern: hostile documents and flag values end as exit 2 naming the file, the field
and the limit — fast, never an internal error (exit 8) — and no write can be redirected.

The CLI cases run the real command line (`python -m dsx`) in a child process, as a user would."""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dsx import atomic, serialization
from dsx import catalog as catalog_data
from dsx.bundles import render
from dsx.bundles.options import Deployer
from dsx.certify import calibration
from dsx.cli import output
from dsx.errors import BadInputError, CatalogError, DsxError
from dsx.files import certify_files, documents
from dsx.health.decisions import analyzer, policy
from dsx.health.parsing import kube_objects
from dsx.model import certify_catalog as certify_catalog
from dsx.model.recipe import Recipe
from dsx.model.snapshot import Snapshot
from dsx.recipes import catalog

REPO = Path(__file__).resolve().parents[2]
SMALL_RECIPE = REPO / "tests" / "data" / "bundles" / "recipe-small.yaml"
SMALL_CATALOG = REPO / "tests" / "data" / "recipes" / "catalog"


def _dsx(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """dsx in a child; 60 s is the bound for a document that would expand without end (no timing asserts)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HOME": str(cwd), "XDG_CACHE_HOME": str(cwd / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "dsx", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def billion_laughs(levels: int = 9) -> str:
    """`a: &a ["lol", …]`, `b: &b [*a, …]`, …: nine aliases per level, nine levels (9^9 strings)."""
    names = "abcdefghijklmnopqrstuvwxyz"[:levels]
    lines = [f"{names[0]}: &{names[0]} [{', '.join(['lol'] * 9)}]"]
    lines += [f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]" for prev, name in itertools.pairwise(names)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("document", "args"),
    [
        ("recipe", ["bundle", "--recipe", "{file}", "--output", "out"]),
        ("snapshot", ["recipe", "--snapshot", "{file}"]),
        ("policy", ["sentinel", "replay", "--policy", "{file}", "--store", "memory:"]),
    ],
)
def test_an_alias_bomb_is_refused_before_it_expands(document: str, args: list[str], tmp_path: Path) -> None:
    bomb = tmp_path / f"{document}.yaml"
    bomb.write_text(billion_laughs())

    result = _dsx(*(a.format(file=bomb) for a in args), cwd=tmp_path)

    assert result.returncode == 2, result.stderr
    assert f"{bomb}: " in result.stderr and "(limit 10000000)" in result.stderr


def test_diff_as_json_keeps_yaml_dates_as_written(tmp_path: Path) -> None:
    raw = yaml.safe_load(SMALL_RECIPE.read_text())
    raw["componentRefs"][0].setdefault("values", {})["released"] = "DATE"
    text = yaml.safe_dump(raw)
    (tmp_path / "a.yaml").write_text(text.replace("DATE", "2024-01-01"))
    (tmp_path / "b.yaml").write_text(text.replace("DATE", "2024-02-01 10:00:00"))

    result = _dsx("diff", "a.yaml", "b.yaml", "--format", "json", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "2024-02-01 10:00:00" in json.dumps(json.loads(result.stdout))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sentinel", "events", "--store", "memory:", "--since", "999999d"], "--since: '999999d' reaches back"),
        (["sentinel", "events", "--store", "memory:", "--after", str(2**63)], "--after"),
        (["serve", "--rate", "nan", "--print-openapi"], "'nan' is not a finite number"),
        (["serve", "--rate", "inf", "--print-openapi"], "--rate"),
    ],
)
def test_out_of_range_flag_values_are_bad_input(args: list[str], message: str, tmp_path: Path) -> None:
    result = _dsx(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


def test_a_nan_in_a_policy_file_is_refused_naming_the_field(tmp_path: Path) -> None:
    shipped = policy.DEFAULT_PATH.read_text()
    assert "maxQuarantinedPercent:" in shipped
    hostile = tmp_path / "policy.yaml"
    lines = [
        line.split(":")[0] + ": .nan" if line.strip().startswith("maxQuarantinedPercent:") else line
        for line in shipped.splitlines()
    ]
    hostile.write_text("\n".join(lines) + "\n")

    result = _dsx("sentinel", "replay", "--policy", str(hostile), "--store", "memory:", cwd=tmp_path)

    assert result.returncode == 2, result.stderr
    assert "breaker.maxQuarantinedPercent: '.nan' is not a finite number" in result.stderr


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_non_finite_breaker_limit_is_refused_when_built_from_data(value: float) -> None:
    data = documents.load_mapping_file(policy.DEFAULT_PATH)
    data["breaker"]["maxQuarantinedPercent"] = value
    with pytest.raises(BadInputError, match=r"breaker\.maxQuarantinedPercent: expected a finite number"):
        policy.from_dict(data, source="policy.json")


@pytest.mark.parametrize("value", [-math.inf, math.inf, math.nan, -1.0, "12", True])
def test_a_calibration_reference_must_be_a_finite_number_of_at_least_zero(value: object) -> None:
    raw = {
        "kind": calibration.KIND,
        "host": "this-host",
        "references": {"nccl/8": {"busBandwidthGbps": value}},
    }
    with pytest.raises(BadInputError, match=r"references\.nccl/8\.busBandwidthGbps: expected a finite number"):
        calibration.Calibration.from_dict(raw, source="calibration.json", this_host="this-host")


@pytest.mark.parametrize("name", ["attestation", "templates"])
def test_a_component_named_like_a_bundle_folder_is_refused_at_catalog_load(name: str, tmp_path: Path) -> None:
    root = tmp_path / "catalog"
    shutil.copytree(SMALL_CATALOG, root)
    alpha = (root / "components" / "alpha.yaml").read_text()
    (root / "components" / f"{name}.yaml").write_text(alpha.replace("name: alpha", f"name: {name}"))

    with pytest.raises(CatalogError, match=f"'{name}': name is reserved for the bundle's own folders") as caught:
        catalog.load(root)
    assert caught.value.exit_code == 2


def test_a_recipe_component_named_attestation_is_bad_input_not_internal() -> None:
    raw = yaml.safe_load(SMALL_RECIPE.read_text())
    old = raw["componentRefs"][0]["name"]
    text = yaml.safe_dump(raw).replace(f" {old}\n", " attestation\n")
    recipe = Recipe.from_dict(yaml.safe_load(text), source="r.yaml")
    assert "attestation" in recipe.deployment_order

    with pytest.raises(BadInputError, match="'attestation': name is reserved") as caught:
        render.render(recipe, Deployer.HELM)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("planted", [".out.yaml.tmp", "out.yaml"])
def test_output_never_writes_through_a_planted_link(planted: str, tmp_path: Path) -> None:
    """The old temporary name was predictable; a link there (or at the target) sent the bytes elsewhere."""
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    (tmp_path / planted).symlink_to(victim)

    output.write("new: text\n", str(tmp_path / "out.yaml"))

    assert victim.read_text() == "untouched\n"
    assert not (tmp_path / "out.yaml").is_symlink()
    assert (tmp_path / "out.yaml").read_text() == "new: text\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()) == []


def test_atomic_writes_honour_the_mode_and_leave_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "key.pem"
    atomic.write_file(target, b"secret", mode=0o600)
    atomic.write_file(target, "again", mode=0o600)
    assert target.read_text() == "again"
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["key.pem"]


def test_a_failed_atomic_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("old")
    with pytest.raises(TypeError):
        atomic.write_file(target, 42)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_json_output_never_spells_nan_or_infinity(value: float) -> None:
    with pytest.raises(BadInputError, match=r"cannot write JSON: nodes\[1\]\.temp: not a finite number"):
        output.render({"nodes": [{"temp": 1.0}, {"temp": value}]}, "json")


# --- every document kind checks its fields before use -------------------------------------------

WRONG_TYPES: list[object] = ["text", 7, 2.5, True, None, [], {}, ["x"], {"x": 1}, -1, 10**30]


def _field_paths(document: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    found = [path]
    if isinstance(document, dict):
        found += [p for key, value in document.items() for p in _field_paths(value, (*path, key))]
    elif isinstance(document, list):
        found += [p for n, value in enumerate(document) for p in _field_paths(value, (*path, n))]
    return found


def _with(document: object, path: tuple[object, ...], value: object) -> object:
    if not path:
        return value
    changed = copy.deepcopy(document)
    parent: Any = changed
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return changed


def _certify_category(tmp_path: Path) -> Callable[[object], object]:
    def load(document: object) -> object:
        path = tmp_path / "nccl-all-reduce.yaml"
        path.write_text(serialization.dump_yaml(document))
        return certify_files.certify_category(path)

    return load


DOCUMENT_KINDS: dict[str, tuple[Callable[[], object], Callable[[Path], Callable[[object], object]]]] = {
    "recipe": (
        lambda: documents.load_mapping_file(SMALL_RECIPE),
        lambda _: lambda d: Recipe.from_dict(d, source="r"),
    ),
    "snapshot": (
        lambda: documents.load_mapping_file(REPO / "tests/data/recipes/snapshots/eks-h100-ubuntu.yaml"),
        lambda _: lambda d: Snapshot.from_dict(d, source="s"),
    ),
    "policy": (
        lambda: documents.load_mapping_file(policy.DEFAULT_PATH),
        lambda _: lambda d: policy.from_dict(d, source="p"),
    ),
    "analyzer rules": (
        lambda: documents.load_mapping_file(analyzer.RULES_PATH),
        lambda _: lambda d: analyzer.rules_from_dict(d, source="a"),
    ),
    "node policies": (
        lambda: documents.load_mapping_file(kube_objects.POLICIES_PATH),
        lambda _: lambda d: kube_objects.policies_from_dict(d, source="k"),
    ),
    "certification category": (
        lambda: documents.load_mapping_file(catalog_data.path("certification") / "nccl-all-reduce.yaml"),
        _certify_category,
    ),
    "calibration": (
        lambda: {
            "kind": calibration.KIND,
            "host": "this-host",
            "references": {"nccl/8": {"busBandwidthGbps": 3.0}},
        },
        lambda _: lambda d: calibration.Calibration.from_dict(d, source="c", this_host="this-host"),
    ),
}


@pytest.mark.parametrize("kind", sorted(DOCUMENT_KINDS))
def test_a_mistyped_field_is_bad_input_never_internal(kind: str, tmp_path: Path) -> None:
    """Every field of a real document, in turn, set to each wrong type: the loader answers with a
    value or a DsxError (exit 2 naming the field), never a TypeError or AttributeError (exit 8)."""
    read, make_loader = DOCUMENT_KINDS[kind]
    document, load = read(), make_loader(tmp_path)
    internal: list[str] = []
    for path in _field_paths(document):
        for value in WRONG_TYPES:
            try:
                load(_with(document, path, value))
            except DsxError:
                pass
            except Exception as exc:
                internal.append(f"{'.'.join(map(str, path))} = {value!r}: {type(exc).__name__}: {exc}")
    assert internal == []


def test_output_to_a_pipe_streams_into_it_rather_than_replacing_it(tmp_path: Path) -> None:
    """`-o /dev/stdout` names a link to a pipe or terminal; as root, replacing it would break the host."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        output.write("x: 1\n", str(fifo))
        assert os.read(reader, 100) == b"x: 1\n"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_output_to_a_directory_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match=r"cannot write"):
        output.write("x: 1\n", str(tmp_path))
