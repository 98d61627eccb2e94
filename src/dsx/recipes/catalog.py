"""The overlay catalog and the component registry, from their YAML text.

The catalog is data (src/dsx/catalog/overlays, src/dsx/catalog/components), read by
`dsx.catalog.tree`; this module turns its text into typed objects once per process and checks
what can be checked per file: schema, criteria values, constraint syntax, health asserts, base
chains. Everything a resolution could trip over later (unknown base, a base whose criteria are
not a subset, two overlays for one combination, a component an overlay names but the registry
lacks) fails here with a CatalogError naming the file and field, so a broken catalog never
resolves half-way.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec

from dsx import catalog as catalog_data
from dsx import serialization
from dsx.errors import BadInputError, CatalogError, DsxError
from dsx.model import bundle_layout as layout
from dsx.model import constraints as constraint_model
from dsx.model import criteria as criteria_model
from dsx.model import health_asserts, schema
from dsx.model.recipe import API_VERSION, ComponentRef, ComponentType
from dsx.model.recipe import KIND as RECIPE_KIND
from dsx.recipes import compiled

OVERLAY_KIND = "Overlay"
COMPONENT_KIND = "Component"
BASE = "base"
# fields of a component an overlay may set; scalars replace when non-empty
SCALAR_FIELDS = ("type", "chart", "source", "path", "namespace", "version")
T = TypeVar("T")
_DIMENSION_RANK = {d: i for i, d in enumerate(criteria_model.DIMENSIONS)}
# an exact release: 2-4 numeric parts, optional `v`, optional pre-release/build suffix
_EXACT_VERSION = re.compile(r"^v?\d+(?:\.\d+){1,3}(?:-[0-9A-Za-z][0-9A-Za-z.-]*)?(?:\+[0-9A-Za-z.-]+)?$")


def pin_problem(version: str) -> str | None:
    """Why `version` is not an exact pin (`latest`, a range, a wildcard, empty), or None."""
    if not version.strip():
        return "is empty"
    if _EXACT_VERSION.match(version) is None:
        return f"{version!r} is not an exact version (no latest, ranges or wildcards)"
    return None


@dataclass(frozen=True)
class ComponentPatch:
    """What one overlay says about one component; None means "this overlay leaves it alone"."""

    name: str
    scalars: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] | None = None
    dependency_refs: tuple[str, ...] | None = None
    health_check_asserts: tuple[health_asserts.HealthCheckAssert, ...] | None = None
    manifests: dict[str, str] | None = None
    enabled: bool | None = None
    if_included: bool = False
    """Adjust the component only when some overlay of the recipe includes it (never add it)."""


@dataclass(frozen=True)
class Overlay:
    """One layer of the catalog: criteria it applies to, its parent, and what it changes."""

    name: str
    base: str | None
    criteria: dict[str, str]
    constraints: tuple[constraint_model.Constraint, ...] = ()
    components: tuple[ComponentPatch, ...] = ()
    certification: dict[str, Any] | None = None
    source: str = ""

    @property
    def specificity(self) -> int:
        return len(self.criteria)

    @property
    def order_key(self) -> tuple[int, tuple[int, ...], str]:
        """Application order: fewer criteria first, then by dimension rank, then by name (ADR 0002)."""
        ranks = tuple(sorted(_DIMENSION_RANK[d] for d in self.criteria))
        return (self.specificity, ranks, self.name)

    def matches(self, query: criteria_model.Criteria) -> bool:
        """Every criterion this overlay names equals the query's; unset fields match anything.

        A query field `any` therefore matches only overlays that leave the field unset.
        """
        return all(query.value(d) == v for d, v in self.criteria.items())


@dataclass(frozen=True)
class Catalog:
    """The loaded catalog: overlays in application order and the component registry."""

    overlays: tuple[Overlay, ...]
    components: dict[str, ComponentRef]
    root: Path

    @functools.cached_property
    def by_name(self) -> dict[str, Overlay]:
        return {o.name: o for o in self.overlays}

    def chain(self, name: str) -> list[Overlay]:
        """The base chain of `name`, root first, ending with the overlay itself."""
        chain: list[Overlay] = []
        current: str | None = name
        while current is not None:
            overlay = self.by_name[current]
            chain.append(overlay)
            current = overlay.base
        return chain[::-1]

    def supported_combinations(self) -> list[str]:
        """Names of the overlays that validate two or more criteria together, sorted."""
        return sorted(o.name for o in self.overlays if len(o.criteria) >= 2)

    @functools.cached_property
    def compiled(self) -> dict[str, Any]:
        """This catalog as the plain data `dsx.recipes.resolve` works on (see `dsx.recipes.compiled`)."""
        return compile_catalog(self)


def compile_catalog(catalog: Catalog) -> dict[str, Any]:
    """The checked catalog as plain data (dicts, lists, text, numbers), in the shapes a recipe writes.

    Overlays stay in application order; constraints, asserts and components are already in their
    recipe form, so resolving needs no model class. An assert placed in the component's namespace
    at resolution holds `compiled.NAMESPACE` there (`HealthCheckAssert.in_namespace` decides which).
    """
    return {
        "format": compiled.FORMAT,
        "recipeApiVersion": API_VERSION,
        "recipeKind": RECIPE_KIND,
        "certificationFields": list(CERTIFICATION_FIELDS),
        "supported": catalog.supported_combinations(),
        "overlays": [
            {
                "name": overlay.name,
                "source": overlay.source,
                "criteria": dict(overlay.criteria),
                "constraints": [c.to_dict() for c in overlay.constraints],
                "components": [_compiled_patch(patch) for patch in overlay.components],
                "certification": overlay.certification,
                "chain": [member.name for member in catalog.chain(overlay.name)],
            }
            for overlay in catalog.overlays
        ],
        "components": {
            name: {
                "scalars": {
                    "type": ref.type.value,
                    "chart": ref.chart,
                    "source": ref.source,
                    "path": ref.path,
                    "namespace": ref.namespace,
                    "version": ref.version,
                },
                "values": ref.values,
                "dependencyRefs": list(ref.dependency_refs),
                "healthCheckAsserts": _compiled_asserts(ref.health_check_asserts),
                "manifests": dict(ref.manifests),
            }
            for name, ref in catalog.components.items()
        },
    }


def _compiled_patch(patch: ComponentPatch) -> dict[str, Any]:
    return {
        "name": patch.name,
        "scalars": dict(patch.scalars),
        "values": patch.values,
        "dependencyRefs": None if patch.dependency_refs is None else list(patch.dependency_refs),
        "healthCheckAsserts": None
        if patch.health_check_asserts is None
        else _compiled_asserts(patch.health_check_asserts),
        "manifests": patch.manifests,
        "enabled": patch.enabled,
        "ifIncluded": patch.if_included,
    }


def _compiled_asserts(asserts: tuple[health_asserts.HealthCheckAssert, ...]) -> list[dict[str, Any]]:
    return [a.in_namespace(compiled.NAMESPACE).to_dict() for a in asserts]


# ---------------------------------------------------------------------------------------------
# Loading


def default_root() -> Path:
    return catalog_data.path()


@functools.lru_cache(maxsize=4)
def load(root: Path | None = None) -> Catalog:
    """The catalog under `root` (the shipped one by default), checked once per root in this process.

    `dsx.catalog.tree` reads the files; `build` decides on their text.
    """
    where = Path(root) if root is not None else default_root()
    return build(catalog_data.tree(where), where)


def build(files: Mapping[str, str], root: Path) -> Catalog:
    """Check and assemble a catalog from its files' text, keyed by their path under `root`."""
    try:
        overlays = [_parse_overlay(doc, source) for source, doc in _parse_files(files, _is_overlay)]
        components: dict[str, ComponentRef] = {}
        for source, doc in _parse_files(files, _is_component):
            ref = _parse_component(doc, source, files)
            if ref.name in components:
                raise CatalogError(f"{source}: component {ref.name!r} is defined twice")
            components[ref.name] = ref
    except CatalogError:
        raise
    except BadInputError as exc:  # a model check failed on catalog data: the catalog is at fault
        raise CatalogError(str(exc)) from exc
    return _assemble(overlays, components, root)


def _is_overlay(name: str) -> bool:
    return name.startswith("overlays/") and name.endswith(".yaml")


def _is_component(name: str) -> bool:
    return name.startswith("components/") and name.endswith(".yaml") and name.count("/") == 1


def _parse_files(files: Mapping[str, str], wanted: Callable[[str], bool]) -> list[tuple[str, Mapping[str, Any]]]:
    """Each wanted YAML file parsed, in path order, named relative to the catalog root (`overlays/eks.yaml`)."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    for source in sorted(n for n in files if wanted(n)):
        try:
            doc = serialization.parse_yaml(files[source], source=source)
        except DsxError as exc:
            raise CatalogError(str(exc)) from exc
        if not isinstance(doc, Mapping):
            raise CatalogError(f"{source}: expected a mapping at the top level")
        found.append((source, doc))
    return found


# ---------------------------------------------------------------------------------------------
# The documents: msgspec schemas (camelCase keys, as the files are written). `dsx.model.schema`
# decodes them and names the file, the field path and the allowed values on a mismatch; what a
# schema cannot say (names against file names, base chains, version pins, criteria values,
# constraint and assert syntax) is checked after decoding.

_NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class _Spec(msgspec.Struct, rename="camel", forbid_unknown_fields=True, frozen=True, kw_only=True):
    """A spec section: camelCase keys, unknown keys refused with the allowed ones listed."""


class _Metadata(msgspec.Struct, frozen=True, kw_only=True):
    name: str | None = None


class _PatchDoc(_Spec, frozen=True, kw_only=True):
    name: _NonEmpty
    type: ComponentType | msgspec.UnsetType = msgspec.UNSET
    chart: _NonEmpty | msgspec.UnsetType = msgspec.UNSET
    source: _NonEmpty | msgspec.UnsetType = msgspec.UNSET
    path: _NonEmpty | msgspec.UnsetType = msgspec.UNSET
    namespace: _NonEmpty | msgspec.UnsetType = msgspec.UNSET
    version: _NonEmpty | msgspec.UnsetType = msgspec.UNSET
    values: dict[str, Any] | None = None
    dependency_refs: list[str] | None = None
    health_check_asserts: Any = msgspec.UNSET
    """Parsed by dsx.model.health_asserts; present and null clears the component's asserts."""
    manifests: dict[str, str] | None = None
    enabled: bool | None = None
    if_included: bool = False


class _CategoryDoc(_Spec, frozen=True, kw_only=True):
    name: _NonEmpty
    thresholds: dict[str, str] | msgspec.UnsetType = msgspec.UNSET
    scale: Any = msgspec.UNSET


class _CertificationDoc(_Spec, frozen=True, kw_only=True):
    """The shape `dsx.model.certification.Certification.from_dict` reads, kept as data in the recipe.

    `categories`: names, or `{name, thresholds: {metric: CEL}, scale}`; `thresholds`: global
    `{metric: CEL}`; `accelerator` and `interconnect` pick the certify catalog's default floors.
    """

    categories: list[_NonEmpty | _CategoryDoc] | None = None
    thresholds: dict[str, str] | msgspec.UnsetType = msgspec.UNSET
    accelerator: _NonEmpty | msgspec.UnsetType = msgspec.UNSET
    interconnect: _NonEmpty | msgspec.UnsetType = msgspec.UNSET


CERTIFICATION_FIELDS = tuple(f.encode_name for f in msgspec.structs.fields(_CertificationDoc))
"""The certification keys an overlay may set, in the order a recipe writes them."""


class _OverlaySpec(_Spec, frozen=True, kw_only=True):
    base: str | None = None
    criteria: dict[str, Any] | None = None
    constraints: Any = None
    """Parsed by dsx.model.constraints (the constraint syntax)."""
    component_refs: list[_PatchDoc] | None = None
    certification: _CertificationDoc | None = None


class _ComponentSpec(_Spec, frozen=True, kw_only=True):
    type: ComponentType
    chart: str | None = None
    source: str | None = None
    path: str | None = None
    namespace: _NonEmpty
    version: _NonEmpty
    values: dict[str, Any] | None = None
    dependency_refs: list[str] | None = None
    health_check_asserts: Any = None
    manifest_files: list[str] | None = None


class _OverlayDoc(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    metadata: _Metadata = _Metadata()
    spec: _OverlaySpec | None = None


class _ComponentDoc(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    metadata: _Metadata = _Metadata()
    spec: _ComponentSpec


def _decode(doc: Mapping[str, Any], source: str, kind: str, schema_type: type[T]) -> tuple[str, T]:
    """The document as `schema_type`, after its apiVersion and kind; its metadata.name checked against the file."""
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != kind:
        raise CatalogError(f"{source}: expected apiVersion {API_VERSION} and kind {kind}")
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise CatalogError(f"{source}: metadata.name is required")
    stem = Path(source).name.removesuffix(".yaml")
    if stem != name:
        raise CatalogError(f"{source}: metadata.name {name!r} must equal the file name {stem!r}")
    return name, schema.decode(doc, schema_type, source=source, separator=": ", error=CatalogError)


def _parse_overlay(doc: Mapping[str, Any], source: str) -> Overlay:
    name, decoded = _decode(doc, source, OVERLAY_KIND, _OverlayDoc)
    spec = decoded.spec or _OverlaySpec()
    normalized = criteria_model.normalize_mapping(spec.criteria or {}, source=f"{source}: spec.criteria")
    if criteria_model.NODES in normalized:
        raise CatalogError(f"{source}: spec.criteria: overlays cannot match on nodes")
    # `any` and absent mean the same on the overlay side: keep only the fields that constrain
    criteria = {d: normalized[d] for d in criteria_model.DIMENSIONS if normalized.get(d, criteria_model.ANY) != "any"}
    base = spec.base
    if name == BASE:
        if base is not None or criteria:
            raise CatalogError(f"{source}: the base overlay has no base and no criteria")
    else:
        if not base:
            raise CatalogError(f"{source}: spec.base is required (use 'base' for a top-level overlay)")
        if not criteria:
            raise CatalogError(f"{source}: spec.criteria must name at least one dimension")
        expected = criteria_model.Criteria(**criteria).name()
        if name != expected:
            raise CatalogError(f"{source}: an overlay for these criteria must be named {expected!r}")
    constraints = constraint_model.parse_constraints(spec.constraints, source=f"{source}: spec.constraints")
    refs = spec.component_refs or []
    patches = tuple(_patch(r, f"{source}: spec.componentRefs[{i}]") for i, r in enumerate(refs))
    names = [p.name for p in patches]
    if len(set(names)) != len(names):
        raise CatalogError(f"{source}: spec.componentRefs names a component twice")
    certification = None
    if spec.certification is not None:
        certification = _certification(spec.certification, f"{source}: spec.certification")
    return Overlay(
        name=name,
        base=base if name != BASE else None,
        criteria=criteria,
        constraints=constraints,
        components=patches,
        certification=certification,
        source=source,
    )


def _patch(doc: _PatchDoc, source: str) -> ComponentPatch:
    where = f"{source} ({doc.name})"
    scalars = {key: str(getattr(doc, key)) for key in SCALAR_FIELDS if getattr(doc, key) is not msgspec.UNSET}
    if "version" in scalars and (problem := pin_problem(scalars["version"])):
        raise CatalogError(f"{where}: version {problem}")
    asserts = None
    if not isinstance(doc.health_check_asserts, msgspec.UnsetType):
        asserts = health_asserts.parse_asserts(doc.health_check_asserts, source=f"{where}: healthCheckAsserts")
    return ComponentPatch(
        name=doc.name,
        scalars=scalars,
        values=dict(doc.values) if doc.values is not None else None,
        dependency_refs=tuple(doc.dependency_refs) if doc.dependency_refs is not None else None,
        health_check_asserts=asserts,
        manifests=dict(doc.manifests) if doc.manifests is not None else None,
        enabled=doc.enabled,
        if_included=doc.if_included,
    )


def _certification(doc: _CertificationDoc, source: str) -> dict[str, Any]:
    """The certification section as plain data, in the order the recipe writes it."""
    out: dict[str, Any] = {}
    if doc.categories is not None:
        out["categories"] = [_category(c, f"{source}: categories[{i}]") for i, c in enumerate(doc.categories)]
    if not isinstance(doc.thresholds, msgspec.UnsetType):
        out["thresholds"] = _thresholds(doc.thresholds, f"{source}: thresholds")
    for key in ("accelerator", "interconnect"):
        value = getattr(doc, key)
        if not isinstance(value, msgspec.UnsetType):
            out[key] = value
    return out


def _category(doc: str | _CategoryDoc, source: str) -> str | dict[str, Any]:
    if isinstance(doc, str):
        return doc
    entry: dict[str, Any] = {"name": doc.name}
    if not isinstance(doc.thresholds, msgspec.UnsetType):
        entry["thresholds"] = _thresholds(doc.thresholds, f"{source}: thresholds")
    if not isinstance(doc.scale, msgspec.UnsetType):
        entry["scale"] = doc.scale
    return entry


def _thresholds(raw: dict[str, str], source: str) -> dict[str, str]:
    if not all(e.strip() for e in raw.values()):
        raise CatalogError(f"{source}: must map metric names to CEL expressions over `value`")
    return dict(raw)


def _parse_component(doc: Mapping[str, Any], source: str, files: Mapping[str, str]) -> ComponentRef:
    name, decoded = _decode(doc, source, COMPONENT_KIND, _ComponentDoc)
    if name in layout.RESERVED_COMPONENT_NAMES:
        raise CatalogError(layout.reserved_name_message(f"{source}: metadata.name {name!r}"))
    spec = decoded.spec
    manifests: dict[str, str] = {}
    for file_name in spec.manifest_files or []:
        if "/" in file_name or file_name.startswith("."):
            raise CatalogError(f"{source}: spec.manifestFiles: {file_name!r} must be a plain file name")
        text = files.get(f"components/{name}/{file_name}")
        if text is None:
            raise CatalogError(
                f"{source}: spec.manifestFiles: cannot read {file_name}: no such file in components/{name}/"
            )
        manifests[file_name] = text
    problem = pin_problem(spec.version)
    if problem:
        raise CatalogError(f"{source}: spec.version {problem}")
    return ComponentRef(
        name=name,
        type=spec.type,
        namespace=spec.namespace,
        version=spec.version,
        chart=spec.chart or "",
        source=spec.source or "",
        path=spec.path or "",
        values=dict(spec.values or {}),
        dependency_refs=tuple(spec.dependency_refs or ()),
        health_check_asserts=health_asserts.parse_asserts(
            spec.health_check_asserts, source=f"{source}: {name}: healthCheckAsserts"
        ),
        manifests=manifests,
    )


def _assemble(overlays: list[Overlay], components: dict[str, ComponentRef], root: Path) -> Catalog:
    by_name: dict[str, Overlay] = {}
    for overlay in overlays:
        if overlay.name in by_name:
            raise CatalogError(
                f"{overlay.source}: overlay {overlay.name!r} also defined in {by_name[overlay.name].source}"
            )
        by_name[overlay.name] = overlay
    if BASE not in by_name:
        raise CatalogError(f"{root / 'overlays'}: no base overlay (base.yaml)")
    for overlay in overlays:
        _check_chain(overlay, by_name)
        for patch in overlay.components:
            if patch.name not in components:
                raise CatalogError(
                    f"{overlay.source}: component {patch.name!r} is not in the registry; "
                    f"known: {', '.join(sorted(components))}"
                )
    ordered = tuple(sorted(overlays, key=lambda o: o.order_key))
    return Catalog(overlays=ordered, components=dict(sorted(components.items())), root=root)


def _check_chain(overlay: Overlay, by_name: Mapping[str, Overlay]) -> None:
    """The base exists, chains end at `base` without cycles, and each base is strictly more generic."""
    seen = [overlay.name]
    child = overlay
    while child.base is not None:
        parent = by_name.get(child.base)
        if parent is None:
            raise CatalogError(f"{child.source}: spec.base {child.base!r} is not an overlay")
        if parent.name in seen:
            cycle = " -> ".join([*seen, parent.name])
            raise CatalogError(f"{overlay.source}: base chain has a cycle: {cycle}")
        extra = {d: v for d, v in parent.criteria.items() if child.criteria.get(d) != v}
        if extra or len(parent.criteria) >= len(child.criteria):
            raise CatalogError(
                f"{child.source}: base {parent.name!r} must match a strict subset of {child.name!r}'s criteria"
            )
        seen.append(parent.name)
        child = parent
