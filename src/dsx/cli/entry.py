"""The `dsx` console script: plain `dsx recipe`, `dsx query` and `dsx bundle` without click,
everything else through it.

Why: importing click costs a fresh process ~40 ms, as much as resolving a recipe. The verbs
people run in loops, scripts and CI take plain flags, so `parse` reads them here — the criteria
table (`dsx.model.dimensions`) and the formats of `dsx.cli.output` for recipe and query,
`--recipe FILE --output DIR` and the Git flags for bundle — and `run_fast` runs the same engine
calls the click commands make (bundle: `dsx.cli.bundle_run`, shared with its click command).
Anything else — help, an unknown or repeated flag, a missing or odd value, `--config`,
`--snapshot`, `--recipe` for query, `--format table`, criteria or signing or override flags for
bundle, a root option, shell completion — goes to click (`dsx.cli.main`), which gives the usage
errors, help and exit codes it always gave. tests/unit/test_cli_fast_path.py holds both paths
to the same output, files, messages and exit codes.

Errors leave the same way on both paths: one line `dsx: error: …` (or a JSON record when a
command logs JSON) and the exit code of the error tree (`report`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from dsx import extras
from dsx.errors import DsxError, InternalError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy reads the name)
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any, NoReturn

FAST_COMMANDS = ("recipe", "query", "bundle")
"""The verbs `parse` may take; every other verb goes to click."""

COMPLETE_VAR = "_DSX_COMPLETE"
"""Set by the shell completion scripts: click answers those calls."""


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script: the fast path when it applies, else the click CLI."""
    args = sys.argv[1:] if argv is None else list(argv)
    run_fast(args)
    from dsx.cli.main import main as click_main

    click_main(args)


def run_fast(args: list[str]) -> None:
    """Run `args` without click and exit, when `parse` takes them; return otherwise."""
    command = parse(args)
    if command is None:
        return
    try:
        command()
    except DsxError as exc:
        report(exc)
    except (KeyboardInterrupt, EOFError):
        sys.stderr.write("\ndsx: aborted\n")  # as click's Abort reads
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:
        report(internal(exc))
    sys.exit(0)


def internal(exc: Exception) -> DsxError:
    """An unexpected exception as the error a user sees: a missing optional extra, or a bug."""
    missing = extras.missing(exc, needed_by="this command") if isinstance(exc, ModuleNotFoundError) else None
    return missing or InternalError(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug)")


def report(error: DsxError) -> NoReturn:
    """One line and the exit code: a JSON record when the command logs JSON (--log-format json)."""
    logs = loaded_logs()
    if logs is not None and logs.json_active():
        logs.fatal(error, error.exit_code)
    else:
        message = f"dsx: error: {error}"
        click = sys.modules.get("click")
        if click is not None:
            click.echo(message, err=True)
        else:
            sys.stderr.write(message + "\n")
            sys.stderr.flush()
    sys.exit(error.exit_code)


def loaded_logs() -> ModuleType | None:
    """`dsx.logs` when some command has loaded it; until then nothing can have configured logging.

    Importing it only for that check would cost `dsx recipe` the `logging` package at start-up.
    """
    return sys.modules.get("dsx.logs")


# ---------------------------------------------------------------------------------------------
# Parsing


def _criteria_flags() -> dict[str, str]:
    """`--service` → `service`, … and aliases (`--gpu` → `accelerator`), as `recipe_cmd.criteria_options` has them."""
    from dsx.model import dimensions

    flags = {f"--{key}": key for key in dimensions.KEYS}
    flags.update({f"--{alias}": key for alias, key in dimensions.DIMENSION_ALIASES.items()})
    return flags


_OUTPUT_FLAGS = {"--format": "fmt", "-o": "output", "--output": "output"}
_COMMAND_FLAGS = {"recipe": {"--strict": "strict"}, "query": {"--selector": "selector"}}
_BUNDLE_FLAGS = {
    "--recipe": "recipe",
    "--output": "output",
    "--deployer": "deployer",
    "--repo": "repo_url",
    "--revision": "revision",
    "--repo-path": "repo_path",
    "--no-lint": "no_lint",
}
"""The `dsx bundle` flags the fast path reads (criteria, --sign, --set and the node flags go to click)."""
_SWITCHES = frozenset({"strict", "no_lint"})


def _flags(verb: str) -> dict[str, str]:
    if verb == "bundle":
        return _BUNDLE_FLAGS
    return {**_criteria_flags(), **_OUTPUT_FLAGS, **_COMMAND_FLAGS[verb]}


def parse(args: list[str]) -> Callable[[], None] | None:
    """The command `args` ask for when the fast path can run it exactly as click would; None otherwise."""
    if not args or args[0] not in FAST_COMMANDS or COMPLETE_VAR in os.environ:
        return None
    verb = args[0]
    known = _flags(verb)
    given: dict[str, Any] = {}
    rest = args[1:]
    position = 0
    while position < len(rest):
        token = rest[position]
        position += 1
        flag, equals, attached = token.partition("=") if token.startswith("--") else (token, "", "")
        name = known.get(flag)
        if name is None or name in given:
            return None  # unknown (help, a typo, a root option) or repeated: click decides
        if name in _SWITCHES:
            if equals:
                return None
            given[name] = True
            continue
        if equals:
            value = attached
        elif position < len(rest):
            value = rest[position]
            position += 1
        else:
            return None
        if value.startswith("-"):
            return None
        given[name] = value
    return _bundle_command(given) if verb == "bundle" else _command(verb, given)


def _command(verb: str, given: dict[str, Any]) -> Callable[[], None] | None:
    from dsx.cli import output as cli_output

    fmt = given.pop("fmt", cli_output.FORMATS[0]).casefold()
    if fmt not in ("yaml", "json"):  # `table` renders through the click command's code
        return None
    target = given.pop("output", None)
    if target is not None and not _plain_path(target):
        return None
    strict = bool(given.pop("strict", False))
    selector = given.pop("selector", None)
    if verb == "query" and selector is None:
        return None  # required: click says so
    flags = {key: given.get(key) for key in _criteria_flags().values()}
    from dsx import settings  # the rule as text: no dataclasses or pathlib on this path

    cache_dir = settings.cache_root(os.environ)  # this entry point's one reading of the environment

    def recipe() -> None:
        from dsx.model import dimensions
        from dsx.recipes import resolve

        document = resolve.document(dimensions.normalize_flags(flags), cache_dir=cache_dir)
        if strict:
            meta = document["metadata"]
            resolve.check_validated(meta["name"], meta["criteria"], meta["unvalidatedCriteria"], cache_dir=cache_dir)
        cli_output.emit(document, fmt, target)

    def query() -> None:
        from dsx.model import dimensions
        from dsx.recipes import resolve
        from dsx.recipes import selector as selector_module

        document = resolve.document(dimensions.normalize_flags(flags), cache_dir=cache_dir)
        value = selector_module.select(selector_module.hydrated(document), selector)
        cli_output.emit_selected(value, fmt, target)

    return recipe if verb == "recipe" else query


def _bundle_command(given: dict[str, Any]) -> Callable[[], None] | None:
    from dsx.cli import bundle_run

    recipe_path = given.pop("recipe", "")
    output = given.pop("output", "")
    if not recipe_path or not output or not _plain_path(output, folder=True):
        return None  # both are required, `-` is stdin and a file is no --output: click says so
    if given.get("deployer", bundle_run.DEPLOYERS[0]) not in bundle_run.DEPLOYERS:
        return None  # click lists the choices
    lint = not given.pop("no_lint", False)

    def bundle() -> None:
        from dsx.model import recipe as recipe_model
        from dsx.settings import folders

        paths = folders.from_env(os.environ)  # this entry point's one reading of the environment
        created_at = bundle_run.source_date(os.environ)
        request = bundle_run.BundleRequest(output=output, paths=paths, created_at=created_at, lint=lint, **given)
        bundle_run.make_bundle(recipe_model.load(recipe_path), request)

    return bundle


def _plain_path(target: str, *, folder: bool = False) -> bool:
    """Whether click's `Path(dir_okay=False)` (or, for a `folder`, `Path(file_okay=False)`) takes
    `target` as it is: absent, or a readable file (folder: anything but a regular file)."""
    if not target:
        return False
    try:
        status = os.stat(target)
    except OSError:
        return True
    import stat

    refused = stat.S_ISREG(status.st_mode) if folder else stat.S_ISDIR(status.st_mode)
    return not refused and os.access(target, os.R_OK)
