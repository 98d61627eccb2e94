"""Recipe constraints: `{Type}.{Subtype}.{Key} <op> value`, compared version-aware.

A constraint states what the cluster must already be (Kubernetes ≥ 1.30, Ubuntu 24.04, driver
≥ 580) before a recipe is worth deploying. Versions compare numerically and precision-aware:
`>= 6.8` holds for `6.8.0-1028-aws`, `== 24.04` holds for `24.04`, `>= 580` holds for
`580.105.08`. `==`/`!=` on values that are not versions compare case-insensitive text.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from dsx.errors import BadInputError, allowed_values_message
from dsx.model import schema


class Operator(enum.StrEnum):
    GE = ">="
    LE = "<="
    GT = ">"
    LT = "<"
    EQ = "=="
    NE = "!="


ORDERING = frozenset({Operator.GE, Operator.LE, Operator.GT, Operator.LT})
# measurement types a constraint name may start with (what `dsx snapshot` collects)
MEASUREMENT_TYPES = ("K8s", "GPU", "OS", "SystemD", "NodeTopology")

_EXPRESSION = re.compile(r"^\s*(?P<name>\S+)\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>\S.*?)\s*$")
_VERSION = re.compile(r"^[vV]?(?P<numbers>\d+(?:\.\d+){0,3})(?P<extra>[-+._~].*)?$")


@dataclass(frozen=True, order=True)
class Version:
    """Numeric release parts and the text after them (`-eks-3025e55`, `-1028-aws`)."""

    parts: tuple[int, ...]
    extra: str = ""

    def truncated(self, precision: int) -> tuple[int, ...]:
        """The first `precision` parts, zero-padded: the basis of precision-aware comparison."""
        padded = self.parts + (0,) * max(0, precision - len(self.parts))
        return padded[:precision]


def parse_version(text: str) -> Version | None:
    """A `Version` when `text` starts like one (`v1.33.5-eks-x`, `24.04`, `580`), else None."""
    match = _VERSION.match(str(text).strip())
    if match is None:
        return None
    parts = tuple(int(p) for p in match.group("numbers").split("."))
    return Version(parts, match.group("extra") or "")


def _looks_like_version(text: str) -> bool:
    """Whether `==`/`!=` should compare as versions: digits with a dot, or a bare number."""
    version = parse_version(text)
    return version is not None and not version.extra


@dataclass(frozen=True)
class Constraint:
    """One requirement on a measured value of the cluster."""

    name: str
    operator: Operator
    value: str

    @property
    def measurement_type(self) -> str:
        return self.name.split(".", 1)[0]

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "operator": self.operator.value, "value": self.value}

    def expression(self) -> str:
        return f"{self.name} {self.operator.value} {self.value}"

    def holds(self, actual: object) -> bool:
        """Whether the measured `actual` satisfies this constraint."""
        return compare(str(actual), self.operator, self.value, source=self.expression())


def _check_name(name: str, source: str) -> str:
    parts = name.split(".", 2)
    if len(parts) != 3 or not all(parts):
        raise BadInputError(f"{source}: constraint name {name!r} is not {{Type}}.{{Subtype}}.{{Key}}")
    if parts[0] not in MEASUREMENT_TYPES:
        raise BadInputError(allowed_values_message(source, "constraint type", parts[0], MEASUREMENT_TYPES))
    return name


def _check_value(operator: Operator, value: str, source: str) -> str:
    if value == "":
        raise BadInputError(f"{source}: constraint value is empty")
    if operator in ORDERING and parse_version(value) is None:
        raise BadInputError(f"{source}: {operator.value} needs a version value, got {value!r}")
    return value


def parse_operator(text: str, *, source: str) -> Operator:
    try:
        return Operator(text.strip())
    except ValueError as exc:
        raise BadInputError(allowed_values_message(source, "operator", text, [o.value for o in Operator])) from exc


class _ConstraintDoc(schema.Section, frozen=True):
    """The mapping form; the string form is one expression (`_EXPRESSION`)."""

    name: str = ""
    operator: str = ""
    value: str | int | float | None = None


def parse_constraint(raw: object, *, source: str) -> Constraint:
    """A constraint from `"K8s.server.version >= 1.30"` or `{name, operator, value}`."""
    doc = schema.decode(raw, str | _ConstraintDoc, source=source, separator=": ")  # type: ignore[arg-type]
    return _constraint(doc, source)


def parse_constraints(raw: object, *, source: str) -> tuple[Constraint, ...]:
    """A list of constraints (`source[i]` names each one in errors); None is the empty list."""
    if raw is None:
        return ()
    docs = schema.decode(raw, list[str | _ConstraintDoc], source=source, separator="")
    return tuple(_constraint(doc, f"{source}[{i}]") for i, doc in enumerate(docs))


def _constraint(doc: str | _ConstraintDoc, source: str) -> Constraint:
    if isinstance(doc, str):
        match = _EXPRESSION.match(doc)
        if match is None:
            raise BadInputError(f"{source}: constraint {doc!r} is not '<Type>.<Subtype>.<Key> <op> <value>'")
        name, op, value = match.group("name", "op", "value")
    else:
        name, op, value = doc.name, doc.operator, "" if doc.value is None else str(doc.value)
        if not op:
            raise BadInputError(f"{source}: constraint {name!r} has no operator")
    operator = parse_operator(op, source=source)
    return Constraint(_check_name(name, source), operator, _check_value(operator, value.strip(), source))


def compare(actual: str, operator: Operator, expected: str, *, source: str = "constraint") -> bool:
    """`actual <operator> expected`, version-aware and precision-aware (see module docstring)."""
    want = parse_version(expected)
    if operator in ORDERING or (want is not None and _looks_like_version(expected)):
        have = parse_version(actual)
        if want is None or have is None:
            if operator in ORDERING:
                raise BadInputError(f"{source}: cannot compare {actual!r} with {expected!r} as versions")
            return _compare_text(actual, operator, expected)
        precision = len(want.parts)
        left, right = have.truncated(precision), want.parts
        return _apply(left, operator, right)
    return _compare_text(actual, operator, expected)


def _compare_text(actual: str, operator: Operator, expected: str) -> bool:
    if operator in ORDERING:
        raise BadInputError(f"cannot order {actual!r} and {expected!r}")
    equal = actual.strip().lower() == expected.strip().lower()
    return equal if operator is Operator.EQ else not equal


def _apply(left: Any, operator: Operator, right: Any) -> bool:
    if operator is Operator.GE:
        return bool(left >= right)
    if operator is Operator.LE:
        return bool(left <= right)
    if operator is Operator.GT:
        return bool(left > right)
    if operator is Operator.LT:
        return bool(left < right)
    if operator is Operator.EQ:
        return bool(left == right)
    return bool(left != right)
