"""Facts every deployer needs about a component: is its name safe, where its chart lives, its wave.

Component names become file names, Helm release names and Kubernetes object names, so they
are checked once here (DNS-1123 labels); a recipe that breaks the rule is rejected before any
file is rendered, naming the component.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from dsx.errors import BadInputError
from dsx.model import bundle_layout as layout
from dsx.model.recipe import ComponentRef, ComponentType, Recipe

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
_NOT_NAME_CHARS = re.compile(r"[^a-z0-9]+")
OCI_SCHEME = "oci://"


def check_recipe(recipe: Recipe) -> None:
    """Reject what no deployer can render safely; messages name the component and field."""
    source = recipe.source or "recipe"
    if not recipe.component_refs:
        raise BadInputError(f"{source}: componentRefs is empty; nothing to bundle")
    for ref in recipe.component_refs:
        where = f"{source}: component {ref.name!r}"
        if not _DNS_LABEL.match(ref.name):
            raise BadInputError(f"{where}: name must be a DNS-1123 label (a-z, 0-9, '-', at most 63)")
        if ref.name in layout.RESERVED_COMPONENT_NAMES:
            raise BadInputError(layout.reserved_name_message(where))
        if not _DNS_LABEL.match(ref.namespace):
            raise BadInputError(f"{where}: namespace {ref.namespace!r} must be a DNS-1123 label")
        if ref.type is ComponentType.HELM:
            if not ref.chart or not ref.source:
                raise BadInputError(f"{where}: a Helm component needs chart and source")
            if not ref.source.startswith(("https://", "http://", OCI_SCHEME)):
                raise BadInputError(f"{where}: source {ref.source!r} must be an https:// or oci:// URL")
        if ref.type is ComponentType.KUSTOMIZE and (not ref.source or not ref.path):
            raise BadInputError(f"{where}: a Kustomize component needs source and path")
        if ref.type is ComponentType.MANIFEST and not ref.manifests:
            raise BadInputError(f"{where}: a Manifest component needs at least one manifest")
        for file_name in ref.manifests:
            if not _FILE_NAME.match(file_name) or file_name in (".", ".."):
                raise BadInputError(f"{where}: manifest file name {file_name!r} must be a plain file name")


def is_oci(ref: ComponentRef) -> bool:
    return ref.source.startswith(OCI_SCHEME)


def oci_chart_url(ref: ComponentRef) -> str:
    """`oci://registry/path/chart`: the reference Helm and Flux pull an OCI chart by."""
    return f"{ref.source.rstrip('/')}/{ref.chart}"


def oci_registry_path(ref: ComponentRef) -> str:
    """The OCI source without its scheme, as Argo CD and Helmfile spell OCI repositories."""
    return ref.source.removeprefix(OCI_SCHEME).rstrip("/")


def waves(recipe: Recipe) -> dict[str, int]:
    """Position of each component in deploymentOrder (0-based): dependencies get lower waves."""
    return {name: n for n, name in enumerate(recipe.deployment_order)}


def object_name(text: str, *, limit: int = 63) -> str:
    """A DNS-1123 label derived from any text; long or lossy names get a stable hash suffix."""
    plain = _NOT_NAME_CHARS.sub("-", text.lower()).strip("-") or "x"
    if len(plain) <= limit and plain == text:
        return plain
    suffix = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
    return f"{plain[: limit - 9].rstrip('-')}-{suffix}"


def repository_names(sources: Iterable[str]) -> dict[str, str]:
    """A distinct, readable object name for each distinct repository URL."""
    names: dict[str, str] = {}
    for url in sorted(set(sources)):
        readable = _NOT_NAME_CHARS.sub("-", url.split("://", 1)[-1].lower()).strip("-")[:54].rstrip("-")
        name = readable or "repo"
        if name in names.values():
            name = f"{name}-{hashlib.sha256(url.encode('utf-8')).hexdigest()[:8]}"
        names[url] = name
    return names
