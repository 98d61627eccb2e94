"""Root command, lazy subcommand loading and the one place errors become exit codes.

`main` is the console script (pyproject.toml) and `python -m dsx`: every command goes through
click, and every error leaves through `report`.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import NoReturn

import click

from dsx import extras
from dsx.errors import DsxError, InternalError
from dsx.settings import folders

# command name → "module:attribute"; a module is imported only when its command runs.
COMMANDS: dict[str, tuple[str, str]] = {
    "recipe": ("dsx.cli.recipe_cmd:recipe", "Resolve criteria into a version-pinned recipe."),
    "query": ("dsx.cli.recipe_cmd:query", "Read one value of the hydrated recipe."),
    "lint": ("dsx.cli.lint_cmd:lint", "Check recipe values against the charts they target."),
    "bundle": ("dsx.cli.bundle_cmd:bundle", "Render deployment artifacts from a recipe."),
    "keygen": ("dsx.cli.signing_cmd:keygen", "Create a signing key pair."),
    "sign": ("dsx.cli.signing_cmd:sign", "Sign a recipe file or a bundle directory."),
    "verify": ("dsx.cli.signing_cmd:verify", "Verify a signed recipe, bundle or attestation offline."),
    "sim": ("dsx.cli.sim_cmd:sim", "A local control plane with simulated GPU nodes."),
    "snapshot": ("dsx.cli.snapshot_cmd:snapshot", "Capture cluster and node facts."),
    "validate": ("dsx.cli.validate_cmd:validate", "Hold a cluster against a recipe."),
    "diff": ("dsx.cli.validate_cmd:diff", "Compare recipe, snapshot or live cluster."),
    "certify": ("dsx.cli.certify_cmd:certify", "Run certification workloads and isolate bad nodes."),
    "sentinel": ("dsx.cli.sentinel_cmd:sentinel", "Monitor health, quarantine, drain, remediate."),
    "serve": ("dsx.cli.serve_cmd:serve", "Serve the REST API."),
    "demo": ("dsx.cli.demo_cmd:demo", "Run the whole lifecycle on a simulated cluster."),
    "completion": ("dsx.cli.completion_cmd:completion", "Print a shell completion script (bash, zsh, fish)."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        # every command is listed, installed extras or not: running one without its extra says which to install
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, attr = entry[0].split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            error = extras.missing(exc, needed_by=f"dsx {cmd_name}")
            if error is None:
                raise
            raise error from exc
        command = getattr(module, attr)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda ctx, _param, value: _print_version(ctx) if value else None,
    help="Show the version (and the commit, from a git checkout) and exit.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """dsx: configure, certify and operate GPU Kubernetes clusters."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _print_version(ctx: click.Context) -> None:
    from dsx.cli import version

    click.echo(f"dsx, version {version.describe()}")
    ctx.exit(0)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and turn every error into one line and an exit code."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    logs = loaded_logs()
    if logs is not None:
        logs.reset()
    try:
        # the one reading of the environment for this command (dsx.settings.folders.entry_point)
        with folders.entry_point(os.environ):
            # with standalone_mode=False click returns (not raises) the code of a raised Exit
            code = cli.main(args=args, prog_name="dsx", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("dsx: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        # usage errors (unknown flag, bad choice) are bad input: exit 2
        exc.show()
        sys.exit(2)
    except DsxError as exc:
        if debug:
            raise
        report(exc)
    except KeyboardInterrupt:
        click.echo("dsx: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:
        if debug:
            raise
        # an optional extra imported where the command runs, not where it is loaded: not a bug
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
        click.echo(f"dsx: error: {error}", err=True)
    sys.exit(error.exit_code)


def loaded_logs() -> ModuleType | None:
    """`dsx.logs` when some command has loaded it; until then nothing can have configured logging."""
    return sys.modules.get("dsx.logs")


def run_result(exit_code: int) -> None:
    """Commands that end with a verdict call this instead of returning."""
    raise click.exceptions.Exit(exit_code)
