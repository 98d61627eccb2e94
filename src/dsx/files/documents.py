"""The files a command names: read, bounded, and handed to the domain as data.

Why here and not in the domain or `dsx.serialization`: domains and the model do no I/O
(tests/test_architecture.py scans them, and the tiers contract keeps them from importing this
module), so every file a user names (a recipe, a snapshot, a sentinel policy, a rules file, a log
profile, an Xid catalog) is read here or in `health_files`/`certify_files` (apart, so a command
imports only the domain it runs) and parsed by the domain's `from_dict`. Data shipped in the
package is read by `dsx.catalog` instead. Every error names the file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from dsx import serialization
from dsx.errors import BadInputError, NotFoundError
from dsx.model import snapshot
from dsx.model.recipe import Recipe
from dsx.serialization import DEFAULT_LIMITS, Limits


def read_text(path: str | Path, *, max_bytes: int | None = None) -> str:
    """Read a file or `-` (stdin), mapping OS errors to the dsx tree.

    With `max_bytes`, reading stops one character past it, so `/dev/zero` or a huge file is
    refused after reading no more than the limit.
    """
    size = -1 if max_bytes is None else max_bytes + 1
    source = "stdin" if str(path) == "-" else str(path)
    if str(path) == "-":
        text = sys.stdin.read(size)
    else:
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read(size)
        except FileNotFoundError as exc:
            raise NotFoundError(f"{path}: file not found") from exc
        except IsADirectoryError as exc:
            raise BadInputError(f"{path}: is a directory, expected a file") from exc
        except UnicodeDecodeError as exc:
            raise BadInputError(f"{path}: not UTF-8 text") from exc
        except OSError as exc:
            raise BadInputError(f"{path}: cannot read: {exc.strerror}") from exc
    if max_bytes is not None and len(text) > max_bytes:
        raise BadInputError(f"{source}: larger than {max_bytes} bytes (limit {max_bytes})")
    return text


def load_yaml_file(path: str | Path, *, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Read and parse one YAML (or JSON) file."""
    return serialization.parse_yaml(read_text(path, max_bytes=limits.max_bytes), source=str(path), limits=limits)


def load_mapping_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML file whose top level must be a mapping."""
    limits = DEFAULT_LIMITS
    return serialization.parse_mapping(read_text(path, max_bytes=limits.max_bytes), source=str(path))


# -- the documents ----------------------------------------------------------------------------


def recipe(path: str | Path) -> Recipe:
    return Recipe.from_dict(load_mapping_file(path), source=str(path))


def snapshot_file(path: str | Path) -> snapshot.Snapshot:
    return snapshot.Snapshot.from_dict(load_mapping_file(path), source=str(path))
