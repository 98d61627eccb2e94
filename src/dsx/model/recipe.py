"""The resolved recipe: the one document every other part of dsx reads.

A recipe pins, for one environment (its criteria), the exact software a GPU cluster runs:
component charts and versions with fully merged values, the constraints the cluster must meet,
the order to deploy in, health asserts per component and, optionally, the certification
categories it must pass. This module is the contract: `Recipe.from_dict(...)` reads what
`dsx recipe` writes and `to_dict()` writes it back byte-for-byte (through dsx.serialization).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dsx import serialization
from dsx.errors import BadInputError, NotFoundError, allowed_values_message
from dsx.model import constraints as constraint_model
from dsx.model import health_asserts

API_VERSION = "dsx.run/v1alpha1"
KIND = "Recipe"


class ComponentType(enum.StrEnum):
    HELM = "Helm"
    MANIFEST = "Manifest"
    KUSTOMIZE = "Kustomize"


_COMPONENT_FIELDS = (
    "name",
    "type",
    "chart",
    "source",
    "path",
    "namespace",
    "version",
    "values",
    "dependencyRefs",
    "healthCheckAsserts",
    "manifests",
)


@dataclass(frozen=True)
class ComponentRef:
    """One deployable unit with everything needed to install it.

    Helm: `chart` from `source` (https repository or `oci://` registry) at `version`, with
    `values`. Kustomize: `path` inside the `source` git repository at `version` (a tag).
    Manifest: `manifests` (file name → YAML text) applied as-is; `version` names the upstream
    release the manifests were taken from.
    """

    name: str
    type: ComponentType
    namespace: str
    version: str
    chart: str = ""
    source: str = ""
    path: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    dependency_refs: tuple[str, ...] = ()
    health_check_asserts: tuple[health_asserts.HealthCheckAssert, ...] = ()
    manifests: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type.value}
        if self.chart:
            out["chart"] = self.chart
        if self.source:
            out["source"] = self.source
        if self.path:
            out["path"] = self.path
        out["namespace"] = self.namespace
        out["version"] = self.version
        out["values"] = self.values
        out["dependencyRefs"] = list(self.dependency_refs)
        out["healthCheckAsserts"] = [a.to_dict() for a in self.health_check_asserts]
        out["manifests"] = dict(self.manifests)
        return out

    @classmethod
    def from_dict(cls, raw: object, *, source: str) -> ComponentRef:
        if not isinstance(raw, Mapping):
            raise BadInputError(f"{source}: a componentRef must be a mapping")
        for key in raw:
            if key not in _COMPONENT_FIELDS:
                raise BadInputError(allowed_values_message(source, "componentRef field", key, _COMPONENT_FIELDS))
        name = _required_text(raw, "name", source)
        where = f"{source}: {name}"
        try:
            kind = ComponentType(str(raw.get("type")))
        except ValueError as exc:
            raise BadInputError(
                allowed_values_message(where, "type", raw.get("type"), [t.value for t in ComponentType])
            ) from exc
        values = raw.get("values") or {}
        if not isinstance(values, Mapping):
            raise BadInputError(f"{where}: values must be a mapping")
        manifests = raw.get("manifests") or {}
        if not isinstance(manifests, Mapping) or not all(isinstance(v, str) for v in manifests.values()):
            raise BadInputError(f"{where}: manifests must map file names to YAML text")
        deps = raw.get("dependencyRefs") or []
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise BadInputError(f"{where}: dependencyRefs must be a list of component names")
        return cls(
            name=name,
            type=kind,
            namespace=_required_text(raw, "namespace", where),
            version=_required_text(raw, "version", where),
            chart=str(raw.get("chart") or ""),
            source=str(raw.get("source") or ""),
            path=str(raw.get("path") or ""),
            values=dict(values),
            dependency_refs=tuple(deps),
            health_check_asserts=health_asserts.parse_asserts(
                raw.get("healthCheckAsserts"), source=f"{where}: healthCheckAsserts"
            ),
            manifests=dict(manifests),
        )


@dataclass(frozen=True)
class RecipeMetadata:
    name: str
    generator: str
    criteria: dict[str, Any]
    overlays: tuple[str, ...]
    unvalidated_criteria: tuple[str, ...] = ()
    digest: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "generator": self.generator,
            "criteria": dict(self.criteria),
            "overlays": list(self.overlays),
            "unvalidatedCriteria": list(self.unvalidated_criteria),
        }
        if self.digest:
            out["digest"] = self.digest
        return out


@dataclass(frozen=True)
class Recipe:
    """A resolved, version-pinned recipe (see the module docstring and docs/recipes.md)."""

    metadata: RecipeMetadata
    constraints: tuple[constraint_model.Constraint, ...]
    component_refs: tuple[ComponentRef, ...]
    deployment_order: tuple[str, ...]
    certification: dict[str, Any] | None = None
    source: str = field(default="", compare=False)

    def component(self, name: str) -> ComponentRef:
        for ref in self.component_refs:
            if ref.name == name:
                return ref
        names = ", ".join(r.name for r in self.component_refs)
        raise NotFoundError(f"{self.source or 'recipe'}: no component {name!r}; components: {names}")

    def ordered_components(self) -> list[ComponentRef]:
        """Components in deployment order."""
        by_name = {r.name: r for r in self.component_refs}
        return [by_name[n] for n in self.deployment_order]

    def content(self) -> dict[str, Any]:
        """The document without `metadata.digest`: what the digest covers."""
        out: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": replace(self.metadata, digest="").to_dict(),
            "constraints": [c.to_dict() for c in self.constraints],
            "componentRefs": [r.to_dict() for r in self.component_refs],
        }
        if self.certification is not None:
            out["certification"] = self.certification
        out["deploymentOrder"] = list(self.deployment_order)
        return out

    def content_digest(self) -> str:
        return serialization.digest(self.content())

    def with_digest(self) -> Recipe:
        return replace(self, metadata=replace(self.metadata, digest=self.content_digest()))

    def to_dict(self) -> dict[str, Any]:
        out = self.content()
        if self.metadata.digest:
            out["metadata"]["digest"] = self.metadata.digest
        # keep the documented key order: digest last in metadata
        return out

    def verify_digest(self) -> bool:
        """Whether `metadata.digest` matches the content (False when absent)."""
        return bool(self.metadata.digest) and self.metadata.digest == self.content_digest()

    @classmethod
    def from_dict(cls, raw: object, *, source: str = "recipe") -> Recipe:
        """Read a recipe document; every malformation is a BadInputError naming `source` and the field."""
        if not isinstance(raw, Mapping):
            raise BadInputError(f"{source}: a recipe must be a mapping")
        if raw.get("apiVersion") != API_VERSION or raw.get("kind") != KIND:
            raise BadInputError(
                f"{source}: not a dsx recipe (apiVersion {raw.get('apiVersion')!r}, kind {raw.get('kind')!r}); "
                f"expected apiVersion {API_VERSION}, kind {KIND}"
            )
        meta = raw.get("metadata")
        if not isinstance(meta, Mapping):
            raise BadInputError(f"{source}: metadata must be a mapping")
        criteria = meta.get("criteria") or {}
        if not isinstance(criteria, Mapping):
            raise BadInputError(f"{source}: metadata.criteria must be a mapping")
        metadata = RecipeMetadata(
            name=_required_text(meta, "name", f"{source}: metadata"),
            generator=str(meta.get("generator") or ""),
            criteria=dict(criteria),
            overlays=tuple(_string_list(meta.get("overlays"), f"{source}: metadata.overlays")),
            unvalidated_criteria=tuple(
                _string_list(meta.get("unvalidatedCriteria"), f"{source}: metadata.unvalidatedCriteria")
            ),
            digest=str(meta.get("digest") or ""),
        )
        parsed_constraints = constraint_model.parse_constraints(raw.get("constraints"), source=f"{source}: constraints")
        raw_refs = raw.get("componentRefs") or []
        if not isinstance(raw_refs, list):
            raise BadInputError(f"{source}: componentRefs must be a list")
        refs = tuple(ComponentRef.from_dict(r, source=f"{source}: componentRefs[{i}]") for i, r in enumerate(raw_refs))
        names = [r.name for r in refs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise BadInputError(f"{source}: componentRefs: duplicate component {duplicates[0]!r}")
        order = _string_list(raw.get("deploymentOrder"), f"{source}: deploymentOrder")
        if sorted(order) != sorted(names):
            missing = sorted(set(names) - set(order)) or sorted(set(order) - set(names))
            raise BadInputError(
                f"{source}: deploymentOrder must list every component exactly once; mismatch at {missing[:3]}"
            )
        for ref in refs:
            for dep in ref.dependency_refs:
                if dep not in names:
                    raise BadInputError(f"{source}: {ref.name}: dependencyRefs names unknown component {dep!r}")
                if order.index(dep) > order.index(ref.name):
                    raise BadInputError(f"{source}: deploymentOrder puts {ref.name} before its dependency {dep}")
        certification = raw.get("certification")
        if certification is not None and not isinstance(certification, Mapping):
            raise BadInputError(f"{source}: certification must be a mapping")
        return cls(
            metadata=metadata,
            constraints=parsed_constraints,
            component_refs=refs,
            deployment_order=tuple(order),
            certification=dict(certification) if certification is not None else None,
            source=source,
        )


def load(path: str) -> Recipe:
    """Read a recipe file (YAML or JSON; `-` is stdin)."""
    return Recipe.from_dict(serialization.load_mapping_file(path), source=str(path))


def _required_text(raw: Mapping[str, Any], key: str, source: str) -> str:
    value = raw.get(key)
    if value is None or value == "":
        raise BadInputError(f"{source}: {key} is required")
    if not isinstance(value, str):
        raise BadInputError(f"{source}: {key} must be a string, got {type(value).__name__}")
    return value


def _string_list(raw: object, source: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise BadInputError(f"{source} must be a list of strings")
    return list(raw)
