"""Documents decoded by schema: msgspec Structs in, dsx errors out.

Why one module: every document kind (catalog overlays and components, the SentinelPolicy, API
request bodies) is a tree of msgspec Structs, and its errors must read like the rest of dsx —
file, field path, what was expected, the allowed values of an enum or of a mapping's fields —
not `Expected int, got str - at $.spec.x`. `decode` converts YAML- or JSON-loaded data with
msgspec and translates its one error into a `BadInputError` (or the class the caller names);
checks a schema cannot say (one field against another, CEL that compiles) stay with the caller.

`renamed` reads documents written before the camelCase convention: a snake_case key whose
camelCase form is a field is renamed and reported once, so the caller can warn. `document` is
the one door for a file of a kind (SentinelPolicy, AnalyzerRules, NodePolicies, LogProfile,
XidCatalog): top-level checks, old spellings renamed with one warning per key, then `decode`.
"""

from __future__ import annotations

import enum
import functools
import math
import re
import typing
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from dsx.errors import BadInputError, allowed_values_message

if TYPE_CHECKING:
    import logging  # the caller's logger is passed in: `dsx recipe` imports no logging

    from msgspec import inspect as mi  # imported where used: only errors and old spellings need it

T = TypeVar("T")

_MESSAGE = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_KEY_MESSAGE = re.compile(r"^Expected `(?P<wanted>[^`]*)`, got `(?P<got>[^`]*)` - at `key` in `\$(?P<path>[^`]*)`$")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[([^\]]*)\]")
_NAMES = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "array": "a list",
    "object": "a mapping",
    "null": "null",
}


class Section(msgspec.Struct, rename="camel", forbid_unknown_fields=True, frozen=True, kw_only=True):
    """A document or a section of one: camelCase keys, unknown keys refused."""


def document(
    data: object,
    kind: type[T],
    *,
    api_version: str,
    kind_name: str,
    source: str,
    log: logging.Logger,
    separator: str = ".",
    error: type[BadInputError] = BadInputError,
) -> T:
    """A whole file of one kind: a mapping with this apiVersion and kind, old keys warned about, decoded."""
    if not isinstance(data, Mapping):
        raise error(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    if data.get("apiVersion") != api_version or data.get("kind") != kind_name:
        raise error(f"{source}: expected apiVersion {api_version} and kind {kind_name}")
    current, old_keys = renamed(data, kind)
    warn_renamed(log, source, old_keys)
    return decode(current, kind, source=source, separator=separator, error=error)


def warn_renamed(log: logging.Logger, source: str, old_keys: Iterable[tuple[str, str]]) -> None:
    """One warning per old snake_case key read under its camelCase name."""
    for old, new in old_keys:
        log.warning("%s: %s: old snake_case key, read as %s; rename it (keys are camelCase)", source, old, new)


def camel(name: str) -> str:
    """`max_quarantined_percent` → `maxQuarantinedPercent` (msgspec's rename='camel')."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_keys(value: object, *, data_keys: frozenset[str] = frozenset()) -> Any:
    """A JSON-ready value with every mapping key in camelCase: the output form of a record kept snake_case.

    The mapping under a key in `data_keys` (a node's `labels`) is data: its keys are kept as given.
    Values are not touched.
    """
    if isinstance(value, Mapping):
        return {
            (camel(key) if isinstance(key, str) else key): (
                dict(item) if key in data_keys and isinstance(item, Mapping) else camel_keys(item, data_keys=data_keys)
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [camel_keys(item, data_keys=data_keys) for item in value]
    return value


def decode(
    data: object,
    kind: type[T],
    *,
    source: str,
    separator: str = ".",
    error: type[BadInputError] = BadInputError,
    strict: bool = True,
) -> T:
    """`data` as `kind`; any mismatch raises `error` naming `source`, the field path and what is allowed.

    Paths read `source.spec.componentRefs[0].name` (or `source: spec…` with separator ": ").
    Floats must be finite: NaN and infinity are refused by name. `strict=False` reads numbers and
    booleans from strings (URL query parameters).
    """
    try:
        value = msgspec.convert(data, kind, strict=strict)
    except msgspec.ValidationError as exc:
        raise error(_translate(str(exc), data, kind, source, separator)) from None
    if not _may_hold_floats(kind):  # type: ignore[arg-type]  # a kind is a type: hashable
        return value  # nothing to walk: the walk would cost more than the decoding (HealthEvent ingestion)
    for path, number in _floats(value, ""):
        if not math.isfinite(number):
            raise error(f"{_where(source, separator, path)}: expected a finite number, got {number!r}")
    return value


def renamed(data: object, kind: type[Any]) -> tuple[object, list[tuple[str, str]]]:
    """`data` with old snake_case keys of `kind`'s Structs renamed; the (old path, new key) pairs.

    Only keys at Struct positions are renamed (a label map keeps its keys). A key given in both
    spellings keeps both, so `decode` refuses the old one as an unknown field. A null where a
    Struct with defaults is expected becomes absent, as an empty YAML section means "defaults".
    """
    from msgspec import inspect as mi

    found: list[tuple[str, str]] = []
    return _rename(data, mi.type_info(kind), "", found), found


def _rename(data: object, info: mi.Type, path: str, found: list[tuple[str, str]]) -> object:
    from msgspec import inspect as mi

    info = _unwrap(info, data)
    if isinstance(info, mi.StructType) and isinstance(data, Mapping):
        fields = {f.encode_name: f for f in info.fields}
        out: dict[Any, Any] = {}
        for key, value in data.items():
            name = key
            if isinstance(key, str) and key not in fields and camel(key) in fields and camel(key) not in data:
                name = camel(key)
                found.append((f"{path}.{key}".lstrip("."), name))
            field = fields.get(name) if isinstance(name, str) else None
            if field is None:
                out[name] = value
                continue
            if value is None and not field.required and not _allows_null(field.type):
                continue
            out[name] = _rename(value, field.type, f"{path}.{key}", found)
        return out
    if isinstance(info, mi.ListType | mi.VarTupleType) and isinstance(data, list):
        return [_rename(item, info.item_type, f"{path}[{i}]", found) for i, item in enumerate(data)]
    if isinstance(info, mi.DictType) and isinstance(data, Mapping):
        return {k: _rename(v, info.value_type, f"{path}.{k}", found) for k, v in data.items()}
    return data


def _unwrap(info: mi.Type, data: object) -> mi.Type:
    """The member of a union that fits `data` best (a Struct for a mapping, a list for a list)."""
    from msgspec import inspect as mi

    if isinstance(info, mi.Metadata):
        return _unwrap(info.type, data)
    if isinstance(info, mi.UnionType):
        for member in info.types:
            member = _unwrap(member, data)
            if isinstance(data, Mapping) and isinstance(member, mi.StructType | mi.DictType):
                return member
            if isinstance(data, list) and isinstance(member, mi.ListType | mi.VarTupleType):
                return member
            if isinstance(data, str) and isinstance(member, mi.EnumType | mi.LiteralType):
                return member
    return info


def _allows_null(info: mi.Type) -> bool:
    from msgspec import inspect as mi

    if isinstance(info, mi.Metadata):
        return _allows_null(info.type)
    if isinstance(info, mi.UnionType):
        return any(_allows_null(t) for t in info.types)
    return isinstance(info, mi.NoneType | mi.AnyType)


def _where(source: str, separator: str, path: str) -> str:
    return f"{source}{separator}{path.lstrip('.')}" if path else source


def _steps(path: str) -> Iterator[str | int]:
    for match in _STEP.finditer(path):
        key, index, other = match.groups()
        yield key if key is not None else int(index) if index is not None else other


def _locate(data: object, info: mi.Type, path: str) -> tuple[object, mi.Type]:
    """The value and the schema type at `path` ($ stripped) of `data`; missing values are msgspec.UNSET."""
    from msgspec import inspect as mi

    value: object = data
    for step in _steps(path):
        info = _unwrap(info, value)
        if isinstance(info, mi.StructType):
            info = next((f.type for f in info.fields if f.encode_name == step), mi.AnyType())
        elif isinstance(info, mi.ListType | mi.VarTupleType):
            info = info.item_type
        elif isinstance(info, mi.DictType):
            info = info.value_type
        else:
            info = mi.AnyType()
        if isinstance(value, Mapping):
            value = value.get(step, msgspec.UNSET)
        elif isinstance(value, list) and isinstance(step, int) and step < len(value):
            value = value[step]
        else:
            value = msgspec.UNSET
    return value, _unwrap(info, value)


def _translate(message: str, data: object, kind: type[Any], source: str, separator: str) -> str:
    from msgspec import inspect as mi

    if key := _KEY_MESSAGE.match(message):  # a mapping's key of the wrong type
        where = _where(source, separator, key.group("path"))
        wanted = _NAMES.get(key.group("wanted"), key.group("wanted"))
        return f"{where}: every key must be {wanted}, one is {_NAMES.get(key.group('got'), key.group('got'))}"
    match = _MESSAGE.match(message)
    what, path = (match.group("what"), match.group("path") or "") if match else (message, "")
    if "[...]" in path and (got := re.match(r"Expected `[^`]*`, got `([^`]*)`", what)):
        path = _named_keys(data, path, got.group(1))
    value, info = _locate(data, mi.type_info(kind), path)
    where = _where(source, separator, path)
    if unknown := re.match(r"Object contains unknown field `(.*)`", what):
        allowed = [f.encode_name for f in info.fields] if isinstance(info, mi.StructType) else []
        return allowed_values_message(where, "field", unknown.group(1), allowed)
    if missing := re.match(r"Object missing required field `(.*)`", what):
        return f"{_where(source, separator, f'{path}.{missing.group(1)}')}: required"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where}: expected a finite number, got {value!r}"
    if isinstance(info, mi.EnumType | mi.LiteralType) and what.startswith(("Invalid enum value", "Expected `str`")):
        choices: list[object] = [m.value for m in info.cls] if isinstance(info, mi.EnumType) else [*info.values]
        head, dot, field = path.rpartition(".")
        if not dot or field.endswith("]"):
            return allowed_values_message(where, "value", value, choices)
        return allowed_values_message(_where(source, separator, head), field, value, choices)
    if expected := re.match(r"Expected `([^`]*)`, got `([^`]*)`", what):
        kinds = [t.strip() for t in expected.group(1).split("|")]
        kinds = [t for t in kinds if t != "null"] or kinds  # an optional field: absent is the other choice
        wanted = " or ".join(_NAMES.get(t, t) for t in kinds)
        return f"{where}: expected {wanted}, got {_shown(value)}"
    if what == "Expected `str` of length >= 1":
        return f"{where}: must not be empty"
    if bound := re.match(r"Expected `([^`]*)` (.*)$", what):
        noun = _NAMES.get(bound.group(1), bound.group(1))
        return f"{where}: {_shown(value)} is out of range; allowed: {noun} {_bound_words(bound.group(2))}"
    return f"{where}: {what[:1].lower()}{what[1:]}"


def _named_keys(data: object, path: str, got: str) -> str:
    """`path` with each `[...]` (msgspec's "some value of this mapping") replaced by the key of the
    first value whose JSON type is `got`, so the message names the entry (`metadata.a`)."""
    head, marker, rest = path.partition("[...]")
    container = _value_at(data, head)
    if marker and isinstance(container, Mapping):
        for key, item in container.items():
            inner = _named_keys(item, rest, got)
            if _json_type(_value_at(item, inner)) == got:
                step = f".{key}" if re.fullmatch(r"[^.\[\]]+", str(key)) else f"[{key}]"
                return f"{head}{step}{inner}"
    return path


def _value_at(data: object, path: str) -> object:
    """The value at a msgspec path ($ stripped) of `data`; None where there is none."""
    for step in _steps(path):
        if isinstance(data, Mapping):
            data = data.get(step)
        elif isinstance(data, list) and isinstance(step, int) and step < len(data):
            data = data[step]
        else:
            return None
    return data


def _json_type(value: object) -> str:
    """msgspec's name for the JSON type of a Python value (`got `int``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    for kind, name in ((int, "int"), (float, "float"), (str, "str"), (Mapping, "object"), (list | tuple, "array")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _shown(value: object, limit: int = 60) -> str:
    """The offending value for a one-line message: its repr, cut short (a request body may be large)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def _bound_words(text: str) -> str:
    """`>= 1` → `at least 1`, `of length <= 8` → `of length at most 8`."""
    words = {">=": "at least", ">": "above", "<=": "at most", "<": "below"}
    text = re.sub(r"(>=|<=|>|<) ?", lambda m: words[m.group(1)] + " ", text)
    return re.sub(r"(\d)\.0\b", r"\1", text)


@functools.cache
def _may_hold_floats(kind: object) -> bool:
    """Whether a value decoded as `kind` can contain a float: a float, an untyped field, or a type
    this walk does not know somewhere in it. Cached per kind; the walk of a decoded value is not free.

    Read from the annotations (`msgspec.structs.fields`), not `msgspec.inspect`, which would cost
    every command that decodes one document its import (decimal, socket, textwrap).
    """
    seen: set[type] = set()

    def walk(annotation: object) -> bool:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            return walk(typing.get_args(annotation)[0])
        if origin is typing.Literal:
            return any(isinstance(choice, float) for choice in typing.get_args(annotation))
        if origin is not None:  # a union, a list, a tuple, a dict …: any of its arguments
            return any(walk(part) for part in typing.get_args(annotation) if part is not Ellipsis)
        if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
            if annotation in seen:  # a recursive Struct: its fields are being walked already
                return False
            seen.add(annotation)
            return any(walk(f.type) for f in msgspec.structs.fields(annotation))
        float_free = (str, int, enum.Enum, type(None))  # bool is an int; IntEnum and StrEnum are enums
        return not (isinstance(annotation, type) and issubclass(annotation, float_free) and annotation is not float)

    return walk(kind)


def _floats(value: object, path: str) -> Iterator[tuple[str, float]]:
    """Every float inside a decoded value, with its path (for the finite-number rule)."""
    if isinstance(value, float):
        yield path, value
    elif isinstance(value, msgspec.Struct):
        for name, encoded in zip(value.__struct_fields__, value.__struct_encode_fields__, strict=True):
            yield from _floats(getattr(value, name), f"{path}.{encoded}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _floats(item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _floats(item, f"{path}.{key}")
