"""YAML and canonical JSON out, for the documents dsx writes, without PyYAML or rfc8785.

Why a module of its own: importing PyYAML compiles a dozen regular expressions and rfc8785 is
pure Python, which together cost `dsx recipe` a third of its start-up (docs/cli-startup.md).
This module imports nothing beyond what the interpreter has loaded anyway.

`block_yaml` writes a document byte for byte as `dsx.serialization`'s PyYAML dumper would, for
the shapes recipes and bundles are made of: mappings with short text keys, lists, printable
text (plain, single-quoted or literal blocks), integers, floats, booleans and null. For anything
else (a top-level scalar, control characters, text PyYAML would double-quote or that might read
as a number or date) it answers None and `dsx.serialization.dump_yaml` hands the document to
PyYAML; tests/unit/test_serialization.py holds both to the same bytes on generated documents.

`canonical_json` is RFC 8785 for the same shapes (integers within +/-(2^53 - 1), no floats),
None otherwise, when `dsx.serialization.canonical_json` asks rfc8785.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

_QUOTED_WORDS = frozenset(
    {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false", "False"}
    | {"FALSE", "on", "On", "ON", "off", "Off", "OFF", "~", "null", "Null", "NULL", "<<", "="}
)
"""Plain words a YAML 1.1 reader takes for a boolean, null, merge or value: written single-quoted."""

_NUMBER_CHARACTERS = frozenset("0123456789_.:+-eExXoObBaAcCdDfFiInNtTzZ ")
"""Every character an integer, float or timestamp of YAML 1.1 (or dsx's stricter list) may hold."""

_NOT_PLAIN_FIRST = frozenset("#,[]{}&*!|>'\"%@`")
"""Indicators that keep a scalar from starting plain."""

_SHORT_KEY = 100
"""Keys shorter than this are simple keys for PyYAML (its limit is 128 characters with the tag)."""


def plain_text(text: str) -> bool:
    """Text both of PyYAML's emitters write unescaped: printable (no control or format characters,
    NEL, LS, PS, BOM or surrogates; line feeds aside) and within the BMP.

    String methods, not a regular expression: compiling a character class this wide costs a
    fresh process milliseconds.
    """
    if text.isascii():
        return text.replace("\n", "").isprintable()
    return text.replace("\n", "").isprintable() and max(text) <= "\uffff"


def block_yaml(data: Any) -> str | None:
    """`data` as `dsx.serialization.dump_yaml` writes it, or None when this writer cannot vouch for the bytes."""
    out: list[str] = []
    if type(data) is dict:
        if not data:
            return "{}\n"
        ok = _mapping(data, 0, out, inline=False)
    elif type(data) is list:
        if not data:
            return "[]\n"
        ok = _sequence(data, 0, out, inline=False)
    else:
        return None
    return "".join(out) if ok else None


def _mapping(data: dict[Any, Any], indent: int, out: list[str], *, inline: bool) -> bool:
    """A non-empty block mapping at `indent`; its first key follows what is written when `inline` (after `- `)."""
    pad = " " * indent
    for key, value in data.items():
        if type(key) is not str or not key or len(key) >= _SHORT_KEY or "\n" in key or not plain_text(key):
            return False
        text = _single_line(key)
        if text is None:
            return False
        if inline:
            inline = False
        else:
            out.append(pad)
        out.append(text)
        out.append(":")
        if not _node(value, indent, out, after_key=True):
            return False
    return True


def _sequence(data: list[Any], indent: int, out: list[str], *, inline: bool) -> bool:
    """A non-empty block sequence whose dashes sit at `indent`."""
    pad = " " * indent
    for item in data:
        if inline:
            inline = False
        else:
            out.append(pad)
        out.append("- ")
        if not _node(item, indent, out, after_key=False):
            return False
    return True


def _node(value: Any, indent: int, out: list[str], *, after_key: bool) -> bool:
    """A value after `key:` (a mapping at `indent`) or after `- ` (a sequence at `indent`)."""
    space = " " if after_key else ""
    kind = type(value)
    if kind is dict:
        if not value:
            out.append(space + "{}\n")
            return True
        if after_key:
            out.append("\n")
        return _mapping(value, indent + 2, out, inline=not after_key)
    if kind is list:
        if not value:
            out.append(space + "[]\n")
            return True
        if after_key:  # a list under a key is not indented (PyYAML's indentless sequence)
            out.append("\n")
            return _sequence(value, indent, out, inline=False)
        return _sequence(value, indent + 2, out, inline=True)
    if kind is str:
        if not plain_text(value):
            return False
        if "\n" in value:
            block = _literal(value, indent + 2)
            if block is None:
                return False
            out.append(space + block)
            return True
        text = _single_line(value)
    else:
        text = _scalar(value)
    if text is None:
        return False
    out.append(space + text + "\n")
    return True


def _scalar(value: Any) -> str | None:
    kind = type(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if kind is float:
        if value != value:
            return ".nan"
        if value in (float("inf"), float("-inf")):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value).lower()
        return text.replace("e", ".0e", 1) if "." not in text and "e" in text else text
    return None


def _single_line(text: str) -> str | None:
    """A printable one-line string: plain when YAML reads it back as the same string, else single-quoted.

    None when telling needs YAML 1.1's full number and date patterns: PyYAML then decides.
    """
    if not text or text in _QUOTED_WORDS or _indicated(text):
        return _single_quoted(text)
    if text[0] in "-+.0123456789":
        number = _reads_as_number(text)
        if number is None:
            return None
        if number:
            return _single_quoted(text)
    return text


def _single_quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _indicated(text: str) -> bool:
    """Whether YAML syntax (indicators, comments, document markers, edge spaces) rules out a plain scalar."""
    first = text[0]
    if first in _NOT_PLAIN_FIRST or first == " " or text[-1] == " ":
        return True
    if first in "?:-" and (len(text) == 1 or text[1] == " "):
        return True
    return text.startswith(("---", "...")) or ": " in text or " #" in text or text.endswith(":")


def _reads_as_number(text: str) -> bool | None:
    """Whether a YAML 1.1 reader (or dsx's stricter list) takes `text` for a number or a date; None when unsure.

    Sure for the shapes recipes hold: integers without leading zeros and decimals (numbers),
    versions with two or more dots, quantities such as `15d` or `10Gi`, and text with a
    character no number or date has (strings).
    """
    body = text[1:] if text[0] in "-+" else text
    if not body or body[0] not in ".0123456789":
        return False  # a sign not before a digit or a dot
    if not _NUMBER_CHARACTERS.issuperset(body):
        return False
    if body.isdigit():
        return True if body == "0" or body[0] != "0" else None
    digits = body.replace(".", "")
    if digits.isdigit():
        return body.count(".") == 1
    if body[0] != "." and not body.startswith("0x") and body[-1].isalpha() and body[-1] != "Z":
        return False  # a quantity: no number ends with a letter but a hex digit, nor a date but Z
    return None


def _double_quoted(text: str) -> str:
    """Printable text in double quotes: only the backslash, the quote and line feeds are escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _literal(text: str, indent: int) -> str | None:
    """A `|` block with its content at `indent`; double quotes where a space ends a line (as PyYAML
    writes them); None for a kept final line break (`|+`, which PyYAML follows with `...`)."""
    if text.endswith("\n\n") or text == "\n":
        return None
    if text.endswith(" ") or " \n" in text:
        return _double_quoted(text) + "\n"
    hints = "2" if text[0] in " \n" else ""
    if text.endswith("\n"):
        lines = text[:-1].split("\n")
    else:
        lines = text.split("\n")
        hints += "-"
    pad = " " * indent
    return "|" + hints + "\n" + "".join(pad + line + "\n" if line else "\n" for line in lines)


# ---------------------------------------------------------------------------------------------
# RFC 8785 canonical JSON

_CONTROL_ESCAPES = {i: f"\\u{i:04x}" for i in range(0x20)} | {
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
}
"""RFC 8785's escapes of control characters (quotes and backslashes are escaped before these)."""
_MAX_SAFE_INTEGER = 2**53 - 1


def canonical_json(data: Any) -> bytes | None:
    """RFC 8785 bytes of `data`, or None for what this writer leaves to rfc8785 (floats, big integers, other types)."""
    out: list[str] = []
    try:
        if not _canonical(data, out):
            return None
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: rfc8785 says what is wrong
        return None


def _canonical(value: Any, out: list[str]) -> bool:
    kind = type(value)
    if kind is str:
        out.append('"' + _json_text(value) + '"')
    elif kind is dict:
        try:
            ascii_keys = "".join(value).isascii()
        except TypeError:  # a key that is not text
            return False
        out.append("{")
        first = True
        for key in sorted(value) if ascii_keys else sorted(value, key=_utf16):
            out.append('"' if first else ',"')
            first = False
            out.append(_json_text(key) + '":')
            if not _canonical(value[key], out):
                return False
        out.append("}")
    elif kind is list:
        out.append("[")
        first = True
        for item in value:
            if not first:
                out.append(",")
            first = False
            if not _canonical(item, out):
                return False
        out.append("]")
    elif value is None:
        out.append("null")
    elif kind is bool:
        out.append("true" if value else "false")
    elif kind is int and -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
        out.append(str(value))
    else:
        return False
    return True


def _json_text(text: str) -> str:
    """A JSON string's content: only quotes, backslashes and control characters escaped."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return text  # the common case: nothing to escape
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    if text and min(text) < " ":  # other control characters: rare, and `translate` is slow on long text
        text = text.translate(_CONTROL_ESCAPES)
    return text


def _utf16(key: str) -> bytes:
    """RFC 8785 sorts keys by UTF-16 code units, which differs from code points beyond the BMP."""
    return key.encode("utf-16-be")


# ---------------------------------------------------------------------------------------------
# Entry points with PyYAML and rfc8785 behind them, and pretty JSON


def dump_json(data: Any) -> str:
    """Pretty JSON with stable indentation and a trailing newline.

    JSON has no NaN or Infinity (strict parsers reject Python's spelling of them), so a
    non-finite number is refused naming where it is rather than written.
    """
    import json

    try:
        return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError:
        from dsx.errors import BadInputError

        where = _non_finite_field(data)
        raise BadInputError(f"cannot write JSON: {where}: not a finite number; JSON has no NaN or Infinity") from None


def _non_finite_field(data: Any) -> str:
    import math

    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return field_label(path)
        if isinstance(value, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((v, f"{path}[{n}]") for n, v in enumerate(value))
    return "(unknown field)"


def field_label(path: str) -> str:
    """A field path as error messages show it: cut at 120 characters, `(top level)` when empty."""
    if len(path) > 120:
        return path[:117] + "..."
    return path or "(top level)"


def dump_yaml(data: Any) -> str:
    """`dsx.serialization.dump_yaml` without importing it when `block_yaml` writes the document."""
    text = block_yaml(data)
    if text is None:
        from dsx import serialization

        text = serialization.dump_yaml(data)
    return text


def digest(data: Any) -> str:
    """`sha256:<hex>` of the RFC 8785 canonical JSON of `data` (rfc8785 decides floats and big integers)."""
    import hashlib

    canonical = canonical_json(data)
    if canonical is None:
        from dsx import serialization

        canonical = serialization.canonical_json(data)
    return "sha256:" + hashlib.sha256(canonical).hexdigest()
