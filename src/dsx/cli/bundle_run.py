"""The steps of `dsx bundle` after its flags are read, shared by both ways in.

The click command (`dsx.cli.bundle_cmd`) and the console script's fast path (`dsx.cli.entry`,
which runs a plain `dsx bundle --recipe FILE --output DIR` without loading click, ~40 ms) both
end here, so the order of checks, the warnings and the summary line are one piece of code.
Nothing here imports click: warnings and the summary are written to the standard streams as
`click.echo` writes them (text, a newline, a flush).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from dsx.errors import BadInputError, CheckFailedError

if TYPE_CHECKING:
    from dsx.bundles.overrides import Overrides
    from dsx.model.recipe import Recipe
    from dsx.settings.folders import PathSettings
    from dsx.signing.keys import KeySigner

DEPLOYERS = ("helm", "argocd", "argocd-helm", "flux", "helmfile")
"""`--deployer`'s values: `dsx.bundles.options.Deployer`'s (a test holds them equal), spelt here so
that the click command's help does not import the renderers."""


def source_date(environ: Mapping[str, str]) -> datetime | None:
    """SOURCE_DATE_EPOCH as a UTC time, or None when unset (then no timestamp is written)."""
    raw = environ.get("SOURCE_DATE_EPOCH")
    if raw is None or raw == "":
        return None
    try:
        return datetime.fromtimestamp(int(raw), tz=UTC)
    except (ValueError, OverflowError, OSError) as exc:
        raise BadInputError(f"SOURCE_DATE_EPOCH: {raw!r} is not a Unix timestamp in seconds") from exc


@dataclass(frozen=True)
class BundleRequest:
    """Everything `dsx bundle` was asked for besides the recipe, read from flags and environment."""

    output: str
    """The bundle folder as the user wrote it (the summary line repeats it)."""
    paths: PathSettings
    """The entry point's folders: lint reads the chart cache (offline) and keeps parsed chart data there."""
    deployer: str = DEPLOYERS[0]
    repo_url: str = ""
    revision: str = "HEAD"
    repo_path: str = "."
    created_at: datetime | None = None
    overrides: Overrides | None = None
    lint: bool = True
    load_signer: Callable[[], KeySigner] | None = field(default=None, compare=False)
    """Called after lint passes (a refused recipe never asks for the key), None for no signature."""
    sign_revision: int | None = None
    """The publisher's revision in the signed statement (the signing time is `created_at`'s, if any:
    a bundle stays byte-identical without SOURCE_DATE_EPOCH)."""


def make_bundle(recipe: Recipe, request: BundleRequest) -> None:
    """Check, render, optionally sign and write the bundle; say what was written."""
    from dsx import file_tree as tree
    from dsx.bundles import overrides, render
    from dsx.bundles.options import PLACEHOLDER_REPO_URL, BundleOptions, Deployer

    chosen = request.overrides or overrides.Overrides()
    digest = recipe.content_digest()
    if recipe.metadata.digest and recipe.metadata.digest != digest:  # recipe.verify_digest(), reusing `digest`
        say(
            f"dsx: warning: {recipe.source}: metadata.digest does not match the content (edited by hand?); "
            "the bundle records the digest of the content",
            err=True,
        )
    overridden = overrides.apply(recipe, chosen)
    if request.lint:
        lint_gate(overridden, request.paths)
    signer = request.load_signer() if request.load_signer is not None else None
    if not request.repo_url and request.deployer in (Deployer.ARGOCD, Deployer.ARGOCD_HELM):
        say(
            f"dsx: warning: no --repo given; the app-of-apps points at {PLACEHOLDER_REPO_URL}: "
            "replace it before applying",
            err=True,
        )
    options = BundleOptions(
        repo_url=request.repo_url,
        revision=request.revision,
        repo_path=request.repo_path,
        created_at=request.created_at,
        overrides=chosen,
    )
    files = render.render(recipe, Deployer(request.deployer), options)
    if signer is not None:
        # only when signing: an unsigned bundle needs none of dsx.signing
        from dsx.signing import attest, provenance

        files = attest.attest_bundle(files, signer, provenance.Freshness(request.sign_revision, request.created_at))
    tree.write_tree(files, Path(request.output))
    say(f"wrote {request.deployer} bundle {request.output}: {len(files.files)} files, recipe {digest}")
    if signer is not None:
        say(f"signed by key {signer.key_id}")


def lint_gate(recipe: Recipe, paths: PathSettings) -> None:
    """Refuse to bundle values the target charts would silently ignore (offline: cache and catalog)."""
    import dsx.lint as lint
    from dsx.charts import sources

    report = lint.lint_recipe(recipe, sources.default_source(offline=True, paths=paths))
    if not report.ok:
        say(report.text(), err=True, newline=False)
        raise CheckFailedError(f"lint failed with {len(report.findings)} finding(s); fix the recipe or pass --no-lint")


def say(text: str, *, err: bool = False, newline: bool = True) -> None:
    """Write a line to stdout (or stderr) and flush, as `click.echo` does; a character the stream's
    encoding lacks (an ASCII locale, a folder named `bündel`) is escaped, never an error after the
    bundle is written."""
    stream = sys.stderr if err else sys.stdout
    line = text + "\n" if newline else text
    try:
        stream.write(line)
    except UnicodeEncodeError:
        encoding = stream.encoding or "utf-8"
        stream.write(line.encode(encoding, "backslashreplace").decode(encoding))
    stream.flush()
