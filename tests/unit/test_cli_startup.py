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
    "dsx.recipes.catalog",  # loading and checking the catalog's YAML: the package carries it compiled
    "dsx.model.snapshot",  # --snapshot only
    "dsx.model.aicr",  # --snapshot / --config only
}

_CHILD = """
import sys
from dsx.cli.main import main
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


def _run(args: list[str], tmp_path: Path) -> tuple[set[str], str]:
    """The modules a fresh `dsx ARGS` process has loaded when it finishes (it must succeed), and its stdout."""
    env = dict(os.environ, PYTHONPATH=str(SRC), DSX_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *args], env=env, cwd=tmp_path, capture_output=True, text=True, check=False
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
    modules = _modules_after(args, tmp_path)
    assert "dsx.recipes.resolve" in modules  # it did resolve
    assert _offending(modules, HEAVY | OTHER_VERBS | NOT_ON_THE_RESOLVE_PATH) == []


def test_unsigned_bundle_loads_neither_signing_nor_cluster_code(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.yaml"
    _modules_after(["recipe", *CRITERIA, "-o", str(recipe)], tmp_path)
    modules = _modules_after(["bundle", "--recipe", str(recipe), "--output", str(tmp_path / "bundle")], tmp_path)
    assert {"dsx.bundles.render", "dsx.lint.check"} <= modules  # it rendered and linted
    banned = (HEAVY - {"jsonschema"}) | {"dsx.signing", "dsx.kube", "dsx.store", "dsx.api", "dsx.logs"}
    # jsonschema loads only for a chart that ships values.schema.json
    assert _offending(modules, banned) == []


def test_help_lists_every_command_without_loading_any(tmp_path: Path) -> None:
    from dsx.cli.main import COMMANDS

    modules, text = _run(["--help"], tmp_path)
    assert sorted(m for m in modules if m.startswith("dsx.cli.") and m.endswith("_cmd")) == []
    assert "dsx.recipes" not in modules
    listed = text.split("Commands:")[1].split()
    assert all(name in listed for name in COMMANDS)
