"""Common Expression Language: compile once, evaluate many.

Thresholds (`value >= 380.0`), quarantine rules and analyzer conditions are CEL, the
language Kubernetes uses for CRD validation and admission policy, so operators write
one dialect everywhere. The engine is cel-expr-python (cel-cpp), the only Python
engine with a type checker and spec-conformant semantics (see docs/adr); this module
is the only one that imports it, and it maps its errors into the dsx tree.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsx.errors import BadInputError, CheckFailedError


class CelEvaluationError(CheckFailedError):
    """A well-formed expression failed at run time (missing field, type mismatch)."""


@functools.lru_cache(maxsize=64)
def _env(variables: tuple[str, ...]) -> Any:
    from cel_expr_python import cel

    return cel.NewEnv(variables={name: cel.Type.DYN for name in variables})


@dataclass(frozen=True)
class Program:
    """A compiled expression over named dynamic variables."""

    source: str
    variables: tuple[str, ...]
    _compiled: Any = field(repr=False, compare=False)

    def evaluate(self, bindings: Mapping[str, Any]) -> Any:
        """Evaluate with `bindings` (plain Python data); raises CelEvaluationError."""
        from cel_expr_python import cel

        missing = [v for v in self.variables if v not in bindings]
        if missing:
            raise CelEvaluationError(f"CEL {self.source!r}: no value bound for {', '.join(missing)}")
        try:
            result = self._compiled.eval(data={k: bindings[k] for k in self.variables})
        except RuntimeError as exc:
            raise CelEvaluationError(f"CEL {self.source!r}: {_first_line(exc)}") from exc
        if result.type() == cel.Type.ERROR:
            raise CelEvaluationError(f"CEL {self.source!r}: {result.value()}")
        return result.plain_value()

    def test(self, bindings: Mapping[str, Any]) -> bool:
        """Evaluate a condition; a non-boolean result is an error, not a truthy value."""
        value = self.evaluate(bindings)
        if not isinstance(value, bool):
            raise CelEvaluationError(f"CEL {self.source!r}: expected a boolean, got {type(value).__name__}")
        return value


def compile_expression(source: str, variables: Iterable[str], *, origin: str = "expression") -> Program:
    """Compile `source`; a syntax or check error is bad input naming `origin`."""
    names = tuple(sorted(set(variables)))
    try:
        compiled = _env(names).compile(source)
    except RuntimeError as exc:
        raise BadInputError(f"{origin}: invalid CEL {source!r}: {_first_line(exc)}") from exc
    return Program(source=source, variables=names, _compiled=compiled)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    head = lines[0] if lines else type(exc).__name__
    return head.replace("INVALID_ARGUMENT: ", "").replace("ERROR: <input>:", "at ")
