"""The lock's pinned, hash-checked entries for a set of distributions: how the install tests
build a fresh virtual environment without fetching anything unpinned."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

LOCK = Path(__file__).resolve().parents[3] / "requirements.lock"


def closure(roots: list[str]) -> set[str]:
    """Distribution names needed by `roots` without extras, from the installed metadata."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in roots]
    while todo:
        requirement = todo.pop()
        name = requirement.name.lower().replace("_", "-")
        if name in seen or (requirement.marker is not None and not requirement.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        todo.extend(Requirement(r) for r in metadata.requires(requirement.name) or [])
    return seen


def lock_entries(names: set[str]) -> str:
    """The lock's blocks (pin and hashes) for `names`."""
    lines = [line for line in LOCK.read_text().splitlines() if not line.startswith("#")]
    blocks = re.split(r"\n(?=[A-Za-z0-9])", "\n".join(lines))
    kept = [b for b in blocks if b.split("==")[0].lower().replace("_", "-") in names]
    assert len(kept) == len(names), f"not all of {sorted(names)} are in {LOCK.name}"
    return "\n".join(kept) + "\n"
