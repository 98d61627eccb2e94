"""`dsx bundle`: render a recipe into deployment artifacts, optionally signed while building.

Criteria flags are the ones `dsx recipe` takes (`recipe_cmd.criteria_options`), so a bundle can
be made straight from criteria without an intermediate file.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

import click

from dsx.cli import bundle_run, recipe_cmd, signing_cmd
from dsx.cli.bundle_run import DEPLOYERS
from dsx.errors import BadInputError

if TYPE_CHECKING:
    from dsx.bundles.overrides import Overrides


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
    from dsx.settings import folders

    if sign != bool(key_path):
        raise BadInputError("--sign and --key go together: --sign --key KEYFILE")
    if sign_revision is not None and not sign:
        raise BadInputError("--sign-revision: only with --sign --key KEYFILE")
    chosen = parse_overrides(
        set_values, system_selectors, system_tolerations, accelerated_selectors, accelerated_tolerations
    )
    created_at = bundle_run.source_date(os.environ)
    recipe = recipe_cmd.recipe_or_criteria(recipe_path, criteria, required=True)
    request = bundle_run.BundleRequest(
        output=output,
        paths=folders.paths(),
        deployer=deployer,
        repo_url=repo_url,
        revision=revision,
        repo_path=repo_path,
        created_at=created_at,
        overrides=chosen,
        lint=not no_lint,
        load_signer=functools.partial(signing_cmd.load_signer, key_path, passphrase_env) if key_path else None,
        sign_revision=sign_revision,
    )
    bundle_run.make_bundle(recipe, request)
