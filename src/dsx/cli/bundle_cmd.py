"""`dsx bundle`: render a recipe into deployment artifacts, optionally signed while building.

Criteria flags are the ones `dsx recipe` takes (`recipe_cmd.criteria_options`), so a bundle can
be made straight from criteria without an intermediate file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dsx.cli import recipe_cmd
from dsx.errors import BadInputError, CheckFailedError

if TYPE_CHECKING:
    from dsx.model.recipe import Recipe

DEPLOYERS = ("helm", "argocd", "argocd-helm", "flux", "helmfile")
CRITERIA_PARAMS = ("service", "accelerator", "os_name", "intent", "platform", "nodes", "config_path", "snapshot_path")


def source_date(environ: Mapping[str, str]) -> datetime | None:
    """SOURCE_DATE_EPOCH as a UTC time, or None when unset (then no timestamp is written)."""
    raw = environ.get("SOURCE_DATE_EPOCH")
    if raw is None or raw == "":
        return None
    try:
        return datetime.fromtimestamp(int(raw), tz=UTC)
    except (ValueError, OverflowError, OSError) as exc:
        raise BadInputError(f"SOURCE_DATE_EPOCH: {raw!r} is not a Unix timestamp in seconds") from exc


def load_recipe(recipe_path: str | None, criteria: dict[str, Any]) -> Recipe:
    """`--recipe FILE|-`, or the same criteria flags as `dsx recipe` resolved by the engine."""
    from dsx.model import recipe as recipe_model

    given = [k for k, v in criteria.items() if v is not None]
    if recipe_path and given:
        raise BadInputError("--recipe and criteria flags (--service, --accelerator, ...) are exclusive")
    if recipe_path:
        return recipe_model.load(recipe_path)
    if not given:
        raise BadInputError("give --recipe FILE (or -) or criteria flags such as --service eks --accelerator h100")
    resolved: Recipe = recipe_cmd.resolve_from_flags(criteria, strict=False)
    return resolved


def lint_gate(recipe: Recipe) -> None:
    """Refuse to bundle values the target charts would silently ignore (offline: cache and catalog)."""
    try:
        import dsx.lint as lint
    except ImportError:
        return
    report = lint.lint_recipe(recipe, lint.default_source(offline=True))
    if not report.ok:
        click.echo(report.text(), err=True, nl=False)
        raise CheckFailedError(f"lint failed with {len(report.findings)} finding(s); fix the recipe or pass --no-lint")


@click.command()
@click.option("--recipe", "recipe_path", metavar="FILE", help="Resolved recipe file, or - for stdin.")
@recipe_cmd.criteria_options
@click.option("--deployer", type=click.Choice(DEPLOYERS), default="helm", show_default=True, help="Target tool.")
@click.option("--output", "output", required=True, type=click.Path(file_okay=False), help="Bundle directory.")
@click.option("--repo", "repo_url", default="", help="Git URL the bundle is committed to (argocd, flux).")
@click.option("--revision", default="HEAD", show_default=True, help="Branch, tag or commit of --repo.")
@click.option("--repo-path", default=".", show_default=True, help="Folder of the bundle inside --repo.")
@click.option("--sign", is_flag=True, help="Write attestation/ with --key while building.")
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help="Private key for --sign.")
@click.option("--no-lint", is_flag=True, help="Skip checking values against the charts.")
def bundle(
    recipe_path: str | None,
    deployer: str,
    output: str,
    repo_url: str,
    revision: str,
    repo_path: str,
    sign: bool,
    key_path: str | None,
    no_lint: bool,
    **criteria: Any,
) -> None:
    """Render deployment artifacts (Helm, Argo CD, Flux, Helmfile) from a recipe."""
    from dsx.bundles import render, tree
    from dsx.bundles.options import BundleOptions, Deployer
    from dsx.signing import attest, keys

    if sign != bool(key_path):
        raise BadInputError("--sign and --key go together: --sign --key KEYFILE")
    recipe = load_recipe(recipe_path, {k: criteria.get(k) for k in CRITERIA_PARAMS})
    if recipe.metadata.digest and not recipe.verify_digest():
        click.echo(
            f"dsx: warning: {recipe.source}: metadata.digest does not match the content (edited by hand?); "
            "the bundle records the digest of the content",
            err=True,
        )
    if not no_lint:
        lint_gate(recipe)
    signer = keys.load_signer(Path(key_path), _passphrase()) if key_path else None
    options = BundleOptions(
        repo_url=repo_url, revision=revision, repo_path=repo_path, created_at=source_date(os.environ)
    )
    files = render.render(recipe, Deployer(deployer), options)
    if signer is not None:
        files = attest.attest_bundle(files, signer)
    tree.write_tree(files, Path(output))
    click.echo(f"wrote {deployer} bundle {output}: {len(files.files)} files, recipe {recipe.content_digest()}")
    if signer is not None:
        click.echo(f"signed by key {signer.key_id}")


def _passphrase() -> bytes | None:
    from dsx.signing import keys

    value = os.environ.get(keys.PASSPHRASE_ENV)
    return value.encode("utf-8") if value else None
