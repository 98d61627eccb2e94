"""`dsx recipe`, `dsx query` and `dsx bundle` without click (`dsx.cli.entry`) behave exactly as through click.

The fast path parses plain flags itself and hands everything else to click; each case runs both
ways in this process (click forced by making `entry.parse` decline) and compares stdout, stderr
and the exit code (and for bundle every file written), so a flag, message, file or exit code
that drifts between the two fails here.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from dsx import file_tree
from dsx.bundles.options import Deployer
from dsx.cli import bundle_cmd, bundle_run, entry, recipe_cmd
from dsx.cli import main as cli_main
from dsx.cli import output as cli_output

TRAINING = ["--service", "eks", "--accelerator", "h100", "--os", "ubuntu", "--intent", "training"]
DYNAMO = [
    "--service",
    "aks",
    "--accelerator",
    "h100",
    "--os",
    "ubuntu",
    "--intent",
    "inference",
    "--platform",
    "dynamo",
]
DRIVER = "components.gpu-operator.values.driver.version"

SAME_BOTH_WAYS = [
    ["recipe", *TRAINING, "--platform", "kubeflow"],
    ["recipe", "--service", "gke", "--accelerator", "h100", "--os", "cos", "--intent", "training"],
    ["recipe", *DYNAMO],
    ["recipe", "--service", "kind", "--accelerator", "h100", "--intent", "inference"],
    ["recipe"],
    ["recipe", "--gpu", "gb200", "--service=oke", "--nodes", "8"],
    ["recipe", "--service", "EKS", "--format", "JSON"],
    ["recipe", "--service", "eks", "--accelerator", "h100", "--intent", "training", "--strict"],
    ["recipe", *TRAINING, "--strict"],
    ["recipe", "--service", "ecs"],
    ["recipe", "--service", "eks", "--accelerator", "h999"],
    ["recipe", "--service", "eks", "--nodes", "0"],
    ["recipe", "--service", ""],
    ["query", *TRAINING, "--selector", DRIVER],
    ["query", "--service", "eks", "--selector", "deploymentOrder"],
    ["query", "--service", "eks", "--selector", "deploymentOrder[0]"],
    ["query", "--service", "eks", "--selector", ".metadata.name"],
    ["query", "--service", "eks", "--selector", "."],
    ["query", "--service", "eks", "--selector", "components.gpu-operator.values", "--format", "json"],
    ["query", "--service", "eks", "--selector", "components.gpu-operator.values.nope"],
    ["query", "--service", "eks", "--selector", "a..b"],
    ["query", "--service", "eks", "--selector", 'components["gpu-operator"].version'],
    ["query", "--service", "bad", "--selector", "metadata"],
]


TO_CLICK = [
    ["recipe", "--help"],
    ["recipe", "-h"],
    ["recipe", "--service", "eks", "--format", "table"],
    ["recipe", "--service", "eks", "--format", "xml"],
    ["recipe", "--service", "eks", "--bogus"],
    ["recipe", "--service"],
    ["recipe", "--service", "eks", "--service", "gke"],
    ["recipe", "--service", "eks", "--gpu", "h100", "--accelerator", "h200"],
    ["recipe", "extra"],
    ["recipe", "--strict=1"],
    ["recipe", "--config", "criteria.yaml"],
    ["recipe", "--snapshot", "snapshot.yaml"],
    ["query", "--service", "eks"],
    ["query", "--recipe", "recipe.yaml", "--selector", "metadata"],
    ["query", "--service", "eks", "--selector", "metadata", "--strict"],
    ["query", "--service", "-x", "--selector", "metadata"],
    ["--debug", "recipe"],
    ["lint"],
]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        cli_main.main(args)
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


@pytest.mark.parametrize("args", SAME_BOTH_WAYS, ids=" ".join)
def test_the_fast_path_writes_what_click_writes(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert entry.parse(args) is not None
    fast = _run(args, capsys)
    monkeypatch.setattr(entry, "parse", lambda _args: None)
    through_click = _run(args, capsys)
    assert fast == through_click
    assert fast[1] or fast[2]  # it wrote something


@pytest.mark.parametrize("args", TO_CLICK, ids=" ".join)
def test_help_errors_and_unusual_flags_go_to_click(args: list[str]) -> None:
    assert entry.parse(args) is None


def test_a_file_output_is_the_same_both_ways(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = tmp_path / "fast.yaml", tmp_path / "click.yaml"
    assert _run(["recipe", *TRAINING, "-o", str(fast)], capsys) == (0, "", "")
    monkeypatch.setattr(entry, "parse", lambda _args: None)
    assert _run(["recipe", *TRAINING, "--output", str(slow)], capsys) == (0, "", "")
    assert fast.read_bytes() == slow.read_bytes()


def test_an_output_path_click_would_refuse_goes_to_click(tmp_path: Path) -> None:
    assert entry.parse(["recipe", "-o", str(tmp_path)]) is None  # a directory
    assert entry.parse(["recipe", "-o", ""]) is None


def test_shell_completion_goes_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(entry.COMPLETE_VAR, "bash_complete")
    assert entry.parse(["recipe", *TRAINING]) is None


def test_the_fast_path_knows_the_flags_click_declares() -> None:
    """Its criteria flags come from the criteria table; click's from the same table: they must agree."""
    declared = {opt for param in recipe_cmd.recipe.params for opt in param.opts}
    files = ("config_path", "snapshot_path")
    criteria = {flag for name, flag in recipe_cmd.CRITERIA_FLAGS.items() if name not in files}
    fast_criteria = set(entry._criteria_flags())
    assert fast_criteria == criteria | {"--gpu"}
    assert fast_criteria | set(entry._OUTPUT_FLAGS) | {"--strict"} <= declared
    query_declared = {opt for param in recipe_cmd.query.params for opt in param.opts}
    assert fast_criteria | set(entry._OUTPUT_FLAGS) | {"--selector"} <= query_declared
    assert cli_output.FORMATS[0] == "yaml"  # the default both paths write


# --- dsx bundle ------------------------------------------------------------------------------

SMALL = Path(__file__).resolve().parents[1] / "data" / "bundles" / "recipe-small.yaml"
"""A recipe whose values lint refuses (`bigNumber` is no chart key)."""

BUNDLE_SAME_BOTH_WAYS = [
    ["--recipe", "{recipe}", "--output", "{out}"],
    ["--recipe", "{recipe}", "--output", "{out}", "--deployer", "argocd"],
    ["--output={out}", "--recipe={recipe}", "--deployer=argocd-helm", "--repo", "https://git.example.org/o/g.git"],
    ["--recipe", "{recipe}", "--output", "{out}", "--deployer", "flux", "--revision", "main", "--repo-path", "c/a"],
    ["--recipe", "{recipe}", "--output", "{out}", "--deployer", "helmfile", "--no-lint"],
    ["--recipe", "{edited}", "--output", "{out}"],
    ["--recipe", str(SMALL), "--output", "{out}"],
    ["--recipe", str(SMALL), "--output", "{out}", "--no-lint"],
    ["--recipe", "{missing}", "--output", "{out}"],
    ["--recipe", "{recipe}", "--output", "{foreign}"],
]


@pytest.fixture(scope="module")
def recipes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("recipes")
    recipe = folder / "recipe.yaml"
    with pytest.raises(SystemExit):
        cli_main.main(["recipe", *TRAINING, "-o", str(recipe)])
    edited = folder / "edited.yaml"
    text = recipe.read_text()
    assert "digest: sha256:" in text
    edited.write_text(text.replace("digest: sha256:", "digest: sha256:0", 1))
    return {"recipe": str(recipe), "edited": str(edited), "missing": str(folder / "missing.yaml")}


def _bundle_args(template: list[str], recipes: dict[str, str], out: Path, foreign: Path) -> list[str]:
    return ["bundle", *(t.format(out=out, foreign=foreign, **recipes) for t in template)]


def _files(folder: Path) -> dict[str, bytes] | None:
    return dict(file_tree.read_tree(folder).tree.files) if folder.exists() else None


@pytest.mark.parametrize("template", BUNDLE_SAME_BOTH_WAYS, ids=" ".join)
def test_a_plain_bundle_is_made_the_same_both_ways(
    template: list[str],
    recipes: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    monkeypatch.setenv("DSX_CACHE_DIR", str(tmp_path / "cache"))  # lint sees the packaged charts, not a user's cache
    monkeypatch.chdir(tmp_path)
    out, foreign = Path("bundle"), tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("not a bundle")
    args = _bundle_args(template, recipes, out, foreign)
    assert entry.parse(args) is not None
    fast = _run(args, capsys)
    fast_files = _files(out)
    if out.exists():
        shutil.rmtree(out)
    monkeypatch.setattr(entry, "parse", lambda _args: None)
    through_click = _run(args, capsys)
    assert fast == through_click
    assert fast_files == _files(out)
    assert fast[1] or fast[2]  # it said something


def test_an_earlier_bundle_is_replaced_the_same_both_ways(
    recipes: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSX_CACHE_DIR", str(tmp_path / "cache"))
    args = ["bundle", "--recipe", recipes["recipe"], "--output", str(tmp_path / "b"), "--deployer", "flux"]
    assert _run(args, capsys)[0] == 0
    fast = _run(["bundle", "--recipe", recipes["recipe"], "--output", str(tmp_path / "b")], capsys)
    fast_files = _files(tmp_path / "b")
    monkeypatch.setattr(entry, "parse", lambda _args: None)
    assert _run(args, capsys)[0] == 0
    assert _run(["bundle", "--recipe", recipes["recipe"], "--output", str(tmp_path / "b")], capsys) == fast
    assert _files(tmp_path / "b") == fast_files
    assert fast[0] == 0 and "36 files" in fast[1]


@pytest.mark.parametrize(
    "tail",
    [
        ["--help"],
        [],
        ["--recipe", "{recipe}"],
        ["--output", "{out}"],
        ["--recipe", "-", "--output", "{out}"],
        ["--recipe", "", "--output", "{out}"],
        ["--recipe", "{recipe}", "--output", ""],
        ["--recipe", "{recipe}", "--output", "{recipe}"],  # a file: click refuses it
        ["--recipe", "{recipe}", "-o", "{out}"],
        ["--recipe", "{recipe}", "--output", "{out}", "--deployer", "HELM"],
        ["--recipe", "{recipe}", "--output", "{out}", "--deployer", "kustomize"],
        ["--recipe", "{recipe}", "--output", "{out}", "--deployer"],
        ["--recipe", "{recipe}", "--output", "{out}", "--no-lint=1"],
        ["--recipe", "{recipe}", "--output", "{out}", "--no-lint", "--no-lint"],
        ["--recipe", "{recipe}", "--output", "{out}", "--sign", "--key", "k.pem"],
        ["--recipe", "{recipe}", "--output", "{out}", "--set", "gpu-operator.driver.version=1"],
        ["--recipe", "{recipe}", "--output", "{out}", "--accelerated-node-selector", "a=b"],
        ["--recipe", "{recipe}", "--output", "{out}", "--passphrase-env", "X"],
        ["--output", "{out}", *TRAINING],
        ["--recipe", "{recipe}", "--output", "{out}", "extra"],
    ],
    ids=" ".join,
)
def test_other_bundle_flags_go_to_click(tail: list[str], recipes: dict[str, str], tmp_path: Path) -> None:
    assert entry.parse(_bundle_args(tail, recipes, tmp_path / "b", tmp_path)) is None


def test_the_fast_bundle_flags_and_defaults_are_the_click_commands() -> None:
    params = {param.name: param for param in bundle_cmd.bundle.params}
    declared = {opt for param in params.values() for opt in param.opts}
    assert set(entry._BUNDLE_FLAGS) <= declared
    for flag, name in entry._BUNDLE_FLAGS.items():
        assert flag in params[{"recipe": "recipe_path", "no_lint": "no_lint"}.get(name, name)].opts
    request_defaults = {f.name: f.default for f in dataclasses.fields(bundle_run.BundleRequest)}
    for name in ("deployer", "repo_url", "revision", "repo_path"):
        assert params[name].default == request_defaults[name], name
    assert tuple(Deployer) == bundle_run.DEPLOYERS


def test_the_fast_bundle_reads_the_chart_cache_of_the_environment(
    recipes: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chart in `$DSX_CACHE_DIR/charts` wins over the packaged one: the fast path finds it too."""
    from dsx.charts import sources

    packaged = sources.packaged_charts() / "gpu-operator"
    version = next(iter(os.listdir(packaged)))
    cache = tmp_path / "cache"
    target = cache / "charts" / "gpu-operator" / version
    shutil.copytree(packaged / version, target)
    (target / "values.yaml").write_text("onlyThisKey: 1\n")  # the recipe's driver values are unknown here
    (target / "values-refs.txt").write_text("")
    monkeypatch.setenv("DSX_CACHE_DIR", str(cache))
    args = ["bundle", "--recipe", recipes["recipe"], "--output", str(tmp_path / "b")]
    fast = _run(args, capsys)
    monkeypatch.setattr(entry, "parse", lambda _args: None)
    assert _run(args, capsys) == fast
    assert fast[0] == 1 and "gpu-operator" in fast[2] and "chart cache" in fast[2]


def test_a_name_the_terminal_cannot_encode_is_escaped_after_the_bundle_is_written(
    recipes: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    monkeypatch.setenv("DSX_CACHE_DIR", str(tmp_path / "cache"))
    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", ascii_out)
    with pytest.raises(SystemExit) as info:
        cli_main.main(["bundle", "--recipe", recipes["recipe"], "--output", str(tmp_path / "bündel")])
    assert info.value.code == 0
    ascii_out.seek(0)
    assert "bundle " + str(tmp_path) + "/b\\xfcndel: 36 files" in ascii_out.read()
    assert (tmp_path / "bündel" / "checksums.txt").is_file()
