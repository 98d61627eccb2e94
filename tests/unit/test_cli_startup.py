"""What the fast commands import: the structure behind CLI start-up time (issue 17, item 5).

Speed itself is measured in bench/bench_cli.py, never asserted here. These tests run a command
in a fresh interpreter and check `sys.modules` afterwards, so a module-level import that drags a
heavy package (or another verb's code) onto the `dsx recipe` path fails with its name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
CRITERIA = ["--service", "eks", "--accelerator", "h100", "--os", "ubuntu", "--intent", "training"]

HEAVY = {"cryptography", "jsonschema", "lightkube", "httpx", "fastapi", "pydantic", "psycopg", "torch", "pynvml"}
"""Third-party packages only other verbs need (signing, lint schemas, clusters, the API, stores, GPUs)."""

OTHER_VERBS = {
    "dsx.signing",
    "dsx.lint",
    "dsx.bundles.render",
    "dsx.kube",
    "dsx.store",
    "dsx.api",
    "dsx.controllers",
    "dsx.certify",
    "dsx.health",
    "dsx.sim",
}
"""dsx packages of other commands."""

NOT_ON_THE_RESOLVE_PATH = {
    "logging",  # dsx.logs: long-running commands only
    "dsx.logs",
    "dsx.atomic",  # writing -o FILE or the catalog cache, not stdout
    "dsx.model.snapshot",  # --snapshot only
    "dsx.model.aicr",  # --snapshot / --config only
}

FAST_PATH_BANNED = {
    "click",  # the fast path parses plain `recipe`/`query` flags itself (dsx.cli.entry)
    "yaml",  # dsx.emit writes recipe YAML; PyYAML only for what it declines
    "rfc8785",  # dsx.emit writes canonical JSON for the digest
    "msgspec",  # the compiled catalog is plain data: no schema decoding on a cache hit
    "typing",  # with `re` and `functools`: ~10 ms; modules on the path import it for type checking only
    "re",  # no pattern compiled on the path (selector tokens and number checks on demand)
    "dataclasses",  # imports `inspect`
    "inspect",
    "enum",
    "pathlib",
    "logging",
    "dsx.model.recipe",  # the recipe document is written as resolved, without model objects
    "dsx.model.criteria",
    "dsx.recipes.catalog",  # loading and checking YAML: only on a compiled-cache miss
    "dsx.serialization",
    "dsx.settings.folders",  # the folder rule is read as text (dsx.settings.cache_root); no PathSettings
}
"""What the console script must not load for a plain `dsx recipe` or `dsx query` (docs/cli-startup.md)."""

_CHILD = """
import sys
from dsx.cli.ENTRY import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
else:
    code = 0
modules = sorted(sys.modules)
import json
print(json.dumps({"code": code, "modules": modules}), file=sys.stderr)
"""


def _run(args: list[str], tmp_path: Path, entry: str = "main") -> tuple[set[str], str]:
    """The modules a fresh `dsx ARGS` process has loaded when it finishes (it must succeed), and its stdout.

    `entry` "main" starts at `dsx.cli.main` (click loaded first), "entry" as the console script does.
    """
    env = dict(os.environ, PYTHONPATH=str(SRC), DSX_CACHE_DIR=str(tmp_path / "cache"))
    child = _CHILD.replace("ENTRY", entry)
    done = subprocess.run(
        [sys.executable, "-c", child, *args], env=env, cwd=tmp_path, capture_output=True, text=True, check=False
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    return set(report["modules"]), done.stdout


def _modules_after(args: list[str], tmp_path: Path) -> set[str]:
    return _run(args, tmp_path)[0]


def _offending(modules: set[str], banned: set[str]) -> list[str]:
    return sorted(m for m in modules if m in banned or m.split(".")[0] in banned or m.rpartition(".")[0] in banned)


@pytest.mark.parametrize(
    "args",
    [
        ["recipe", *CRITERIA],
        ["query", *CRITERIA, "--selector", "components.gpu-operator.values.driver.version"],
        ["recipe", *CRITERIA, "--format", "json"],
    ],
    ids=["recipe", "query", "recipe-json"],
)
def test_resolving_commands_load_no_other_verbs_code(args: list[str], tmp_path: Path) -> None:
    # twice: the first run fills the catalog cache (and may import what writing it needs)
    _modules_after(args, tmp_path)
    modules = _modules_after(args, tmp_path)
    assert "dsx.recipes.resolve" in modules  # it did resolve
    assert _offending(modules, HEAVY | OTHER_VERBS | NOT_ON_THE_RESOLVE_PATH) == []


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (["recipe", *CRITERIA], set()),
        (["recipe", *CRITERIA, "--platform", "kubeflow", "--strict"], set()),
        (["query", *CRITERIA, "--selector", "components.gpu-operator.values.driver.version"], set()),
        (["query", *CRITERIA, "--selector", "components.gpu-operator.values.driver"], set()),
        (["recipe", *CRITERIA, "--format", "json"], {"re", "enum"}),  # the json module compiles its patterns
    ],
    ids=["recipe", "recipe-strict", "query", "query-map", "recipe-json"],
)
def test_the_console_script_runs_plain_recipe_and_query_on_the_fast_path(
    args: list[str], allowed: set[str], tmp_path: Path
) -> None:
    first, output = _run(args, tmp_path, entry="entry")  # fills the compiled-catalog cache
    assert "dsx.recipes.catalog" in first  # a miss loads and checks the catalog
    modules, again = _run(args, tmp_path, entry="entry")
    assert again == output and output
    assert {"dsx.cli.entry", "dsx.recipes.resolve", "dsx.recipes.compiled"} <= modules
    assert _offending(modules, FAST_PATH_BANNED - allowed) == []


def test_an_unusual_flag_still_gets_click(tmp_path: Path) -> None:
    modules, output = _run(["recipe", *CRITERIA, "--format", "table"], tmp_path, entry="entry")
    assert "click" in modules and "dsx.cli.recipe_cmd" in modules
    assert "gpu-operator" in output


def test_unsigned_bundle_loads_neither_signing_nor_cluster_code(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.yaml"
    _modules_after(["recipe", *CRITERIA, "-o", str(recipe)], tmp_path)
    modules = _modules_after(["bundle", "--recipe", str(recipe), "--output", str(tmp_path / "bundle")], tmp_path)
    assert {"dsx.bundles.render", "dsx.lint.check"} <= modules  # it rendered and linted
    banned = (HEAVY - {"jsonschema"}) | {"dsx.signing", "dsx.kube", "dsx.store", "dsx.api", "dsx.logs"}
    # jsonschema loads only for a chart that ships values.schema.json
    assert _offending(modules, banned) == []


def test_the_console_script_bundles_without_click(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.yaml"
    _run(["recipe", *CRITERIA, "-o", str(recipe)], tmp_path, entry="entry")
    modules, output = _run(["bundle", "--recipe", str(recipe), "--output", str(tmp_path / "bundle")], tmp_path, "entry")
    assert output.startswith("wrote helm bundle")
    assert {"dsx.cli.bundle_run", "dsx.bundles.render", "dsx.lint.check"} <= modules  # it rendered and linted
    assert _offending(modules, {"click", "dsx.cli.main", "dsx.cli.bundle_cmd", "dsx.cli.recipe_cmd"}) == []


def test_help_lists_every_command_without_loading_any(tmp_path: Path) -> None:
    from dsx.cli.main import COMMANDS

    modules, text = _run(["--help"], tmp_path)
    assert sorted(m for m in modules if m.startswith("dsx.cli.") and m.endswith("_cmd")) == []
    assert "dsx.recipes" not in modules
    listed = text.split("Commands:")[1].split()
    assert all(name in listed for name in COMMANDS)
