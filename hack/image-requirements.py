"""Write the lock's pinned, hash-checked entries an image installs: the dependency closure of
dsx with the given extras, minus that of `--minus` extras (a layer over an image that has them).

    python hack/image-requirements.py all > build/image/dsx.txt
    python hack/image-requirements.py all,collectives --minus all > build/image/dsx-workload.txt

dsx's own requirements come from pyproject.toml; its dependencies' from their installed metadata
(run it with the development venv, which holds every locked distribution).
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements.lock"


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dsx_requires() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requires = list(project["dependencies"])
    for extra, names in project["optional-dependencies"].items():
        requires += [f"{name} ; extra == '{extra}'" for name in names]
    return requires


def closure(extras: set[str]) -> set[str]:
    """Distributions dsx[extras] needs, each dependency's extras followed (psycopg[binary])."""
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    todo = [("dsx", frozenset(extras))]
    while todo:
        dist, wanted = todo.pop()
        if (dist, wanted) in seen:
            continue
        seen.add((dist, wanted))
        if dist != "dsx":
            names.add(dist)
        requires = _dsx_requires() if dist == "dsx" else metadata.requires(dist) or []
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is not None and not any(
                requirement.marker.evaluate({"extra": extra}) for extra in wanted | {""}
            ):
                continue
            todo.append((_name(requirement.name), frozenset(requirement.extras)))
    return names


def lock_entries(names: set[str]) -> str:
    """The lock's blocks (pin and hashes) for `names`, in the lock's order."""
    lines = [line for line in LOCK.read_text(encoding="utf-8").splitlines() if not line.lstrip().startswith("#")]
    blocks = re.split(r"\n(?=[A-Za-z0-9])", "\n".join(lines))
    kept = [block.rstrip() for block in blocks if _name(block.split("==")[0]) in names]
    missing = names - {_name(block.split("==")[0]) for block in kept}
    if missing:
        sys.exit(f"{LOCK.name}: no pinned entry for {', '.join(sorted(missing))}; run `make lock`")
    return "\n".join(kept) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("extras", help="comma-separated extras of dsx, e.g. all or all,collectives")
    parser.add_argument("--minus", default=None, help="extras whose closure an underlying image already has")
    args = parser.parse_args()
    names = closure(set(args.extras.split(",")))
    if args.minus is not None:
        names -= closure(set(args.minus.split(",")))
    sys.stdout.write(lock_entries(names))


if __name__ == "__main__":
    main()
