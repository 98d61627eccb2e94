"""`dsx lint`: check every values key of a recipe against the chart it targets.

Exit 1 on any finding, 0 when clean; components without chart data are listed as `not linted`
and do not fail the run. The lint engine is imported inside the command to keep start-up fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from dsx.cli import output as cli_output
from dsx.cli import recipe_cmd


@click.command("lint")
@click.option(
    "--recipe",
    "recipe_path",
    default=None,
    metavar="FILE",
    help="Lint a saved recipe (`-` reads stdin) instead of resolving criteria.",
)
@recipe_cmd.criteria_options
@click.option(
    "--charts",
    "charts_dir",
    default=None,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Chart data looked up first, as DIR/<chart>/<version>/.",
)
@click.option("--offline", is_flag=True, help="Never fetch charts from their repositories.")
@cli_output.format_options
def lint(
    recipe_path: str | None, charts_dir: Path | None, offline: bool, fmt: str, output: str | None, **params: Any
) -> None:
    """Check recipe values against the charts they target.

    Example: dsx lint --service eks --accelerator h100 --os ubuntu --intent training
    """
    import dsx.lint
    from dsx.cli import main as cli_main

    recipe = recipe_cmd.recipe_or_criteria(recipe_path, params)
    from dsx.charts import sources

    source = sources.default_source(charts_dir, offline=offline)
    report = dsx.lint.lint_recipe(recipe, source)
    cli_output.emit(report.to_dict(), fmt, output, table=lambda _: report.text())
    reason = sources.offline_reason(source)
    if reason is not None:
        click.echo(
            f"dsx lint: offline ({reason}): charts not in the cache were not fetched; "
            "--offline skips trying, --charts DIR supplies chart data",
            err=True,
        )
    if fmt.lower() != "table" or output not in (None, "-"):
        click.echo(report.summary(), err=True)
    if not report.ok:
        cli_main.run_result(1)
