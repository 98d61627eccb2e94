"""What a caller may choose about a bundle besides the recipe: deployer, Git location, time, overrides.

The timestamp is passed in (the CLI reads SOURCE_DATE_EPOCH), never read from the clock, so
the same recipe and options always give the same bytes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime

from dsx import __version__
from dsx.bundles.overrides import Overrides

PLACEHOLDER_REPO_URL = "https://git.example.com/REPLACE-ME/gpu-stack.git"
"""Written where a Git URL is needed but `--repo` was not given; the README says to replace it."""

DEFAULT_REVISION = "HEAD"
GITOPS_NAMESPACE_ARGOCD = "argocd"
GITOPS_NAMESPACE_FLUX = "flux-system"
HELM_TIMEOUT = "10m"


class Deployer(enum.StrEnum):
    HELM = "helm"
    ARGOCD = "argocd"
    ARGOCD_HELM = "argocd-helm"
    FLUX = "flux"
    HELMFILE = "helmfile"


@dataclass(frozen=True)
class BundleOptions:
    repo_url: str = ""
    """Git repository the bundle is committed to (Argo CD app-of-apps, Flux GitRepository)."""

    revision: str = DEFAULT_REVISION
    """Branch, tag or commit of `repo_url`."""

    repo_path: str = "."
    """Folder of the bundle inside `repo_url`."""

    created_at: datetime | None = None
    """Only set from SOURCE_DATE_EPOCH; absent means no timestamp anywhere in the bundle."""

    generator: str = f"dsx/{__version__}"

    overrides: Overrides = field(default_factory=Overrides)
    """`--set` values and node placement applied to component values; recorded in bundle.json."""

    recipe_digest: str = ""
    """Digest of the recipe as resolved, before overrides; `render.render` sets it for the README."""

    @property
    def git_url(self) -> str:
        return self.repo_url or PLACEHOLDER_REPO_URL

    def repo_subpath(self, *parts: str) -> str:
        """A path inside the Git repository, relative to its root (`./a/b` or `a/b`)."""
        base = self.repo_path.strip("/") or "."
        joined = "/".join(p for p in (base, *parts) if p and p != ".")
        return joined or "."
