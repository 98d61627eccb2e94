"""Bundle-time overrides: `--set COMPONENT.KEY=VALUE` and node placement, applied to recipe values.

A bundle is made from a recipe plus these choices, so they are parsed here once, applied to a
copy of the recipe's component values (the recipe itself stays as resolved) and recorded in
`bundle.json` and the README. `PLACEMENT` is data: per component, which value paths take the
system-node and which the accelerated-node selectors and tolerations.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, replace
from typing import Any

from dsx.errors import BadInputError, allowed_values_message
from dsx.model.recipe import ComponentRef, ComponentType, Recipe


@dataclass(frozen=True)
class PlacementPaths:
    """Value paths (dotted) that take node selectors and tolerations, per node role."""

    system_selectors: tuple[str, ...] = ()
    system_tolerations: tuple[str, ...] = ()
    accelerated_selectors: tuple[str, ...] = ()
    accelerated_tolerations: tuple[str, ...] = ()


PLACEMENT: dict[str, PlacementPaths] = {
    "gpu-operator": PlacementPaths(
        system_selectors=(
            "operator.nodeSelector",
            "node-feature-discovery.master.nodeSelector",
            "node-feature-discovery.gc.nodeSelector",
        ),
        system_tolerations=(
            "operator.tolerations",
            "node-feature-discovery.master.tolerations",
            "node-feature-discovery.gc.tolerations",
        ),
        accelerated_tolerations=("daemonsets.tolerations", "node-feature-discovery.worker.tolerations"),
    ),
    "network-operator": PlacementPaths(
        system_selectors=("operator.nodeSelector",), system_tolerations=("operator.tolerations",)
    ),
    "nvidia-dra-driver-gpu": PlacementPaths(
        system_selectors=("controller.nodeSelector", "webhook.nodeSelector"),
        system_tolerations=("controller.tolerations", "webhook.tolerations"),
        accelerated_selectors=("kubeletPlugin.nodeSelector",),
        accelerated_tolerations=("kubeletPlugin.tolerations",),
    ),
    "kai-scheduler": PlacementPaths(
        system_selectors=("global.nodeSelector",), system_tolerations=("global.tolerations",)
    ),
    "cert-manager": PlacementPaths(
        system_selectors=("nodeSelector", "webhook.nodeSelector", "cainjector.nodeSelector"),
        system_tolerations=("tolerations", "webhook.tolerations", "cainjector.tolerations"),
    ),
}
"""Which value paths take which placement. A selector replaces the mapping at its path; a
toleration is appended to the list the recipe sets there (a chart default at that path is
replaced, as Helm replaces lists)."""

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")
_INT = re.compile(r"^[-+]?(0|[1-9][0-9]*)$")
_FLOAT = re.compile(r"^[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$")
_UNESCAPED_DOT = re.compile(r"(?<!\\)\.")


@dataclass(frozen=True)
class SetValue:
    """One `--set COMPONENT.KEY=VALUE`: the key path is split at unescaped dots (`a\\.b` is one key)."""

    component: str
    path: tuple[str, ...]
    value: Any
    text: str

    @property
    def dotted(self) -> str:
        return ".".join(p.replace(".", "\\.") for p in self.path)


@dataclass(frozen=True)
class Toleration:
    key: str
    value: str
    effect: str

    def to_dict(self) -> dict[str, str]:
        out = {"key": self.key, "operator": "Equal" if self.value else "Exists"}
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        return out

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}{':' + self.effect if self.effect else ''}"


@dataclass(frozen=True)
class Overrides:
    """Everything `dsx bundle` may change in component values; empty means the recipe as is."""

    set_values: tuple[SetValue, ...] = ()
    system_selector: tuple[tuple[str, str], ...] = ()
    system_tolerations: tuple[Toleration, ...] = ()
    accelerated_selector: tuple[tuple[str, str], ...] = ()
    accelerated_tolerations: tuple[Toleration, ...] = ()

    def __bool__(self) -> bool:
        return bool(
            self.set_values
            or self.system_selector
            or self.system_tolerations
            or self.accelerated_selector
            or self.accelerated_tolerations
        )

    def to_dict(self) -> dict[str, Any]:
        """How the bundle was made, for bundle.json: only what was given, in the order given."""
        out: dict[str, Any] = {}
        if self.set_values:
            out["set"] = [s.text for s in self.set_values]
        for name, selector in (
            ("systemNodeSelector", self.system_selector),
            ("acceleratedNodeSelector", self.accelerated_selector),
        ):
            if selector:
                out[name] = dict(selector)
        for name, tolerations in (
            ("systemNodeTolerations", self.system_tolerations),
            ("acceleratedNodeTolerations", self.accelerated_tolerations),
        ):
            if tolerations:
                out[name] = [t.to_dict() for t in tolerations]
        return out

    def flags(self) -> list[str]:
        """The `dsx bundle` flags that reproduce these overrides, for the README."""
        out = [f"--set {s.text}" for s in self.set_values]
        out += [f"--system-node-selector {k}={v}" for k, v in self.system_selector]
        out += [f"--system-node-toleration {t}" for t in self.system_tolerations]
        out += [f"--accelerated-node-selector {k}={v}" for k, v in self.accelerated_selector]
        out += [f"--accelerated-node-toleration {t}" for t in self.accelerated_tolerations]
        return out


def parse_scalar(text: str) -> Any:
    """A `--set` value as Helm reads it: true/false, null, integers; a float only when it reads
    back the same (`1.5`), so versions like `1.30` or `580.105.08` stay strings."""
    if text in ("true", "false"):
        return text == "true"
    if text == "null":
        return None
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text) and repr(float(text)) == text:
        return float(text)
    return text


def parse_set(text: str) -> SetValue:
    """`COMPONENT.KEY[.KEY...]=VALUE`; the error names the flag and the expected form."""
    target, sep, raw_value = text.partition("=")
    component, dot, dotted = target.partition(".")
    where = f"--set {text!r}"
    if not sep or not dot or not component or not dotted:
        raise BadInputError(f"{where}: expected COMPONENT.KEY=VALUE, e.g. gpu-operator.driver.version=580.105.08")
    if "[" in dotted:
        raise BadInputError(f"{where}: list indexes are not supported; set the whole list in the recipe")
    path = tuple(p.replace("\\.", ".") for p in _UNESCAPED_DOT.split(dotted))
    if any(not p for p in path):
        raise BadInputError(f"{where}: empty key in {dotted!r}")
    return SetValue(component=component, path=path, value=parse_scalar(raw_value), text=text)


def parse_selector(text: str, flag: str) -> tuple[str, str]:
    """`key=value`, a Kubernetes label key and value."""
    key, sep, value = text.partition("=")
    if not sep or not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value):
        raise BadInputError(f"{flag} {text!r}: expected KEY=VALUE with a Kubernetes label key and value")
    return key, value


def parse_toleration(text: str, flag: str) -> Toleration:
    """`key=value:Effect`, `key:Effect` (any value) or `key` (any value, any effect)."""
    head, colon, effect = text.rpartition(":") if ":" in text else (text, "", "")
    if colon and effect not in EFFECTS:
        raise BadInputError(allowed_values_message(f"{flag} {text!r}", "effect", effect, EFFECTS))
    key, _, value = head.partition("=")
    if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value):
        raise BadInputError(f"{flag} {text!r}: expected KEY[=VALUE][:EFFECT] with a Kubernetes label key and value")
    return Toleration(key=key, value=value, effect=effect)


def apply(recipe: Recipe, overrides: Overrides) -> Recipe:
    """The recipe with overridden component values; refuses a `--set` for an unknown or non-Helm component."""
    if not overrides:
        return recipe
    helm_names = [r.name for r in recipe.component_refs if r.type is ComponentType.HELM]
    for s in overrides.set_values:
        if s.component not in helm_names:
            raise BadInputError(allowed_values_message(f"--set {s.text!r}", "component", s.component, helm_names))
    refs = tuple(_apply_one(ref, overrides) for ref in recipe.component_refs)
    return replace(recipe, component_refs=refs)


def placed_components(recipe: Recipe, overrides: Overrides) -> list[str]:
    """Components of the recipe whose values take the given placement (for the README)."""
    if not (
        overrides.system_selector
        or overrides.system_tolerations
        or overrides.accelerated_selector
        or overrides.accelerated_tolerations
    ):
        return []
    return [r.name for r in recipe.ordered_components() if r.type is ComponentType.HELM and r.name in PLACEMENT]


def _apply_one(ref: ComponentRef, overrides: Overrides) -> ComponentRef:
    if ref.type is not ComponentType.HELM:
        return ref
    values = copy.deepcopy(ref.values)
    paths = PLACEMENT.get(ref.name)
    if paths is not None:
        for selector, targets in (
            (overrides.system_selector, paths.system_selectors),
            (overrides.accelerated_selector, paths.accelerated_selectors),
        ):
            if selector:
                for target in targets:
                    _put(values, tuple(target.split(".")), dict(selector), ref.name)
        for tolerations, targets in (
            (overrides.system_tolerations, paths.system_tolerations),
            (overrides.accelerated_tolerations, paths.accelerated_tolerations),
        ):
            for target in targets if tolerations else ():
                _append(values, tuple(target.split(".")), [t.to_dict() for t in tolerations], ref.name)
    for s in overrides.set_values:
        if s.component == ref.name:
            _put(values, s.path, s.value, ref.name)
    return replace(ref, values=values)


def _parent(values: dict[str, Any], path: tuple[str, ...], component: str) -> dict[str, Any]:
    node = values
    for n, key in enumerate(path[:-1]):
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            at = ".".join(path[: n + 1])
            raise BadInputError(f"component {component!r}: value {at!r} is {type(child).__name__}, not a mapping")
        node = child
    return node


def _put(values: dict[str, Any], path: tuple[str, ...], value: Any, component: str) -> None:
    _parent(values, path, component)[path[-1]] = value


def _append(values: dict[str, Any], path: tuple[str, ...], items: list[dict[str, str]], component: str) -> None:
    parent = _parent(values, path, component)
    current = parent.get(path[-1]) or []
    if not isinstance(current, list):
        raise BadInputError(f"component {component!r}: value {'.'.join(path)!r} is not a list of tolerations")
    parent[path[-1]] = [*current, *(t for t in items if t not in current)]
