"""`dsx bundle`: render a recipe into deployment artifacts, optionally signed while building.

Criteria flags are the ones `dsx recipe` takes (`recipe_cmd.criteria_options`), so a bundle can
be made straight from criteria without an intermediate file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dsx import settings
from dsx.cli import recipe_cmd, signing_cmd
from dsx.errors import BadInputError, CheckFailedError

if TYPE_CHECKING:
    from dsx.bundles.overrides import Overrides
    from dsx.model.recipe import Recipe
    from dsx.settings.folders import PathSettings

DEPLOYERS = ("helm", "argocd", "argocd-helm", "flux", "helmfile")
"""`--deployer`'s values: `dsx.bundles.options.Deployer`'s (a test holds them equal), spelt here so
that `dsx bundle --help` does not import the renderers."""


def parse_overrides(
    set_values: tuple[str, ...],
    system_selectors: tuple[str, ...],
    system_tolerations: tuple[str, ...],
    accelerated_selectors: tuple[str, ...],
    accelerated_tolerations: tuple[str, ...],
) -> Overrides:
    """The override flags as one value; each bad flag is refused naming it and the expected form."""
    from dsx.bundles import overrides as ov

    return ov.Overrides(
        set_values=tuple(ov.parse_set(t) for t in set_values),
        system_selector=tuple(ov.parse_selector(t, "--system-node-selector") for t in system_selectors),
        system_tolerations=tuple(ov.parse_toleration(t, "--system-node-toleration") for t in system_tolerations),
        accelerated_selector=tuple(ov.parse_selector(t, "--accelerated-node-selector") for t in accelerated_selectors),
        accelerated_tolerations=tuple(
            ov.parse_toleration(t, "--accelerated-node-toleration") for t in accelerated_tolerations
        ),
    )


@click.command()
@click.option("--recipe", "recipe_path", metavar="FILE", help="Resolved recipe file, or - for stdin.")
@recipe_cmd.criteria_options
@click.option("--deployer", type=click.Choice(DEPLOYERS), default="helm", show_default=True, help="Target tool.")
@click.option(
    "--output",
    "output",
    required=True,
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Bundle directory: new, empty, or an earlier bundle (replaced).",
)
@click.option(
    "--repo", "repo_url", default="", metavar="URL", help="Git URL the bundle is committed to (argocd, flux)."
)
@click.option("--revision", default="HEAD", show_default=True, metavar="REV", help="Branch, tag or commit of --repo.")
@click.option("--repo-path", default=".", show_default=True, metavar="PATH", help="Folder of the bundle inside --repo.")
@click.option("--sign", is_flag=True, help="Write attestation/ with --key while building.")
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help="Private key for --sign.")
@click.option(
    "--sign-revision",
    type=click.IntRange(min=0),
    metavar="N",
    help="With --sign: the publisher's revision in the signed statement (dsx verify --min-revision).",
)
@signing_cmd.passphrase_env_option("Environment variable holding the passphrase of an encrypted --key.")
@click.option(
    "--set",
    "set_values",
    multiple=True,
    metavar="COMPONENT.KEY=VALUE",
    help="Override one value of a Helm component (repeatable; VALUE read as Helm --set reads it).",
)
@click.option(
    "--system-node-selector", "system_selectors", multiple=True, metavar="KEY=VALUE", help="Selector for system pods."
)
@click.option(
    "--system-node-toleration",
    "system_tolerations",
    multiple=True,
    metavar="KEY[=VALUE][:EFFECT]",
    help="Toleration for system pods (repeatable).",
)
@click.option(
    "--accelerated-node-selector",
    "accelerated_selectors",
    multiple=True,
    metavar="KEY=VALUE",
    help="Selector for pods on GPU nodes.",
)
@click.option(
    "--accelerated-node-toleration",
    "accelerated_tolerations",
    multiple=True,
    metavar="KEY[=VALUE][:EFFECT]",
    help="Toleration for pods on GPU nodes (repeatable).",
)
@click.option("--no-lint", is_flag=True, help="Skip checking values (with overrides) against the charts.")
def bundle(
    recipe_path: str | None,
    deployer: str,
    output: str,
    repo_url: str,
    revision: str,
    repo_path: str,
    sign: bool,
    key_path: str | None,
    sign_revision: int | None,
    passphrase_env: str,
    set_values: tuple[str, ...],
    system_selectors: tuple[str, ...],
    system_tolerations: tuple[str, ...],
    accelerated_selectors: tuple[str, ...],
    accelerated_tolerations: tuple[str, ...],
    no_lint: bool,
    **criteria: Any,
) -> None:
    """Render deployment artifacts (Helm, Argo CD, Flux, Helmfile) from a recipe.

    Example: dsx bundle --recipe recipe.yaml --deployer argocd --repo https://git.example.org/ops/gpu.git
    --output bundle --sign --key ops.key

    Overrides: --set gpu-operator.driver.version=580.105.08
    --accelerated-node-toleration nvidia.com/gpu=present:NoSchedule (see docs/bundles.md)
    """
    from dsx import file_tree as tree
    from dsx.bundles import overrides, render
    from dsx.bundles.options import PLACEHOLDER_REPO_URL, BundleOptions, Deployer
    from dsx.settings import folders

    if sign != bool(key_path):
        raise BadInputError("--sign and --key go together: --sign --key KEYFILE")
    if sign_revision is not None and not sign:
        raise BadInputError("--sign-revision: only with --sign --key KEYFILE")
    chosen = parse_overrides(
        set_values, system_selectors, system_tolerations, accelerated_selectors, accelerated_tolerations
    )
    created_at = settings.source_date(os.environ)
    recipe = recipe_cmd.recipe_or_criteria(recipe_path, criteria, required=True)
    digest = recipe.content_digest()
    if recipe.metadata.digest and recipe.metadata.digest != digest:  # recipe.verify_digest(), reusing `digest`
        click.echo(
            f"dsx: warning: {recipe.source}: metadata.digest does not match the content (edited by hand?); "
            "the bundle records the digest of the content",
            err=True,
        )
    if not no_lint:
        lint_gate(overrides.apply(recipe, chosen), folders.paths())  # what the bundle deploys
    # after lint: a refused recipe never asks for the key
    signer = signing_cmd.load_signer(key_path, passphrase_env) if key_path else None
    if not repo_url and deployer in (Deployer.ARGOCD, Deployer.ARGOCD_HELM):
        click.echo(
            f"dsx: warning: no --repo given; the app-of-apps points at {PLACEHOLDER_REPO_URL}: "
            "replace it before applying",
            err=True,
        )
    options = BundleOptions(
        repo_url=repo_url, revision=revision, repo_path=repo_path, created_at=created_at, overrides=chosen
    )
    files = render.render(recipe, Deployer(deployer), options)
    if signer is not None:
        # only when signing: an unsigned bundle needs none of dsx.signing
        from dsx.signing import attest, provenance

        files = attest.attest_bundle(files, signer, provenance.Freshness(sign_revision, created_at))
    tree.write_tree(files, Path(output))
    click.echo(f"wrote {deployer} bundle {output}: {len(files.files)} files, recipe {digest}")
    if signer is not None:
        click.echo(f"signed by key {signer.key_id}")


def lint_gate(recipe: Recipe, paths: PathSettings) -> None:
    """Refuse to bundle values the target charts would silently ignore (offline: cache and catalog)."""
    import dsx.lint as lint
    from dsx.charts import sources

    report = lint.lint_recipe(recipe, sources.default_source(offline=True, paths=paths))
    if not report.ok:
        click.echo(report.text(), err=True, nl=False)
        raise CheckFailedError(f"lint failed with {len(report.findings)} finding(s); fix the recipe or pass --no-lint")
