"""Build step: compile the shipped recipe catalog into the package (`dsx.recipes.compiled`).

Hatchling runs this hook for the wheel and for the editable install (`pip install -e .`); `make`
runs the file itself when the catalog or the code that compiles it changed since. It imports
dsx from this source tree, so the build needs dsx's own dependencies of that code (PyYAML,
msgspec: `[build-system] requires`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path(__file__).resolve().parent / "src"
TARGET = SOURCE / "dsx" / "catalog" / "compiled.json"


def compile_catalog() -> Path:
    """Write the compiled catalog beside the catalog (atomically) and say where."""
    sys.path.insert(0, str(SOURCE))
    try:
        from dsx import atomic
        from dsx.recipes import compiled

        atomic.write_file(TARGET, compiled.text())
    finally:
        sys.path.remove(str(SOURCE))
    return TARGET


class CompileCatalog(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        target = compile_catalog()
        build_data["artifacts"].append(str(target.relative_to(Path(self.root))))  # git ignores it


if __name__ == "__main__":
    print(f"wrote {compile_catalog()}")
