"""`checksums.txt` in the exact format `sha256sum -c` reads: `<hex>␠␠<path>` per line, sorted.

Paths with a newline or backslash would need sha256sum's escape syntax; the renderer never
produces them and the parser rejects them, so the two tools always agree on every line.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from dsx.errors import BadInputError

_LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_path(path: str, *, source: str) -> str:
    """A relative, forward-slash path with no `..`, empty or hidden-escape segments."""
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or "\n" in path
        or "\r" in path
        or "\x00" in path
        or any(part in ("", ".", "..") for part in path.split("/"))
    ):
        raise BadInputError(f"{source}: unsafe path {path!r}")
    return path


def format_checksums(files: Mapping[str, bytes]) -> bytes:
    """One line per file, sorted by path (bytewise), newline-terminated."""
    lines = [f"{sha256_hex(files[p])}  {check_path(p, source='checksums')}\n" for p in sorted(files)]
    return "".join(lines).encode("utf-8")


def parse_checksums(text: bytes, *, source: str) -> dict[str, str]:
    """path → sha256 hex; a malformed or duplicated line is an error naming its number."""
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{source}: not UTF-8 text") from exc
    entries: dict[str, str] = {}
    for number, line in enumerate(decoded.splitlines(), start=1):
        match = _LINE.match(line)
        if not match:
            raise BadInputError(f"{source}: line {number}: expected '<sha256 hex>  <path>'")
        digest, path = match.groups()
        check_path(path, source=f"{source}: line {number}")
        if path in entries:
            raise BadInputError(f"{source}: line {number}: {path} listed twice")
        entries[path] = digest
    return entries
