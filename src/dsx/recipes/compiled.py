"""The shipped catalog, compiled when dsx is built.

Loading a catalog (`dsx.recipes.catalog`) checks every file against its schema and builds a
model object per overlay, patch, constraint and assert; `catalog.compile_catalog` turns the
checked catalog into the plain data `dsx.recipes.resolve` works on. The shipped catalog cannot
change within a release, so the build does that once (`hatch_build.py` writes `text()`, for the
wheel and the editable install alike) and the package carries the result beside the catalog
(`dsx.catalog.COMPILED`). `load` reads it; a catalog root of the caller's own, or a source tree
nobody built, is compiled in the process instead. tests/catalog/test_compiled_catalog.py holds
the packaged file equal to compiling the catalog as it is now.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from dsx import catalog as catalog_data

FORMAT = 2
"""Bumped whenever the compiled shape changes (`load` recompiles a packaged file of another shape)."""

NAMESPACE = "{namespace}"
"""Stands for the component's namespace in a compiled assert (no Kubernetes namespace has braces)."""


@functools.cache
def load(root: Path | None = None) -> dict[str, Any]:
    """The compiled catalog under `root` (the shipped one by default), once per process."""
    if root is None:
        packaged = catalog_data.compiled()
        if packaged is not None and packaged.get("format") == FORMAT:
            return packaged
    from dsx.recipes import catalog

    return catalog.load(root).compiled


def text(root: Path | None = None) -> str:
    """The compiled catalog as the package carries it: JSON, keys in the order resolving needs."""
    from dsx.recipes import catalog

    return json.dumps(catalog.load(root).compiled, ensure_ascii=False, separators=(",", ":")) + "\n"
