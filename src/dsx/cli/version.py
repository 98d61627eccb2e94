"""What `dsx --version` and reports name: the release, and the commit when there is one to name.

From a git checkout (`pip install -e`, `PYTHONPATH=src`) the version names the commit it runs,
`0.1.0+g1a2b3c4d5e6f`, with `.dirty` when tracked files differ from it, so a report or a bug
report says exactly what produced it. An installed wheel has no checkout: it carries the
release in the package (`dsx.__version__`) and, when the build recorded it, the commit in the
`BUILD_COMMIT` file beside this package's `__init__.py`.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from dsx import __version__

PACKAGE = Path(__file__).resolve().parents[1]
BUILD_COMMIT = PACKAGE / "BUILD_COMMIT"


@functools.cache
def describe() -> str:
    commit, dirty = _checkout_commit(PACKAGE.parents[1])
    if commit is None and BUILD_COMMIT.is_file():
        commit = BUILD_COMMIT.read_text(encoding="utf-8").strip()[:12] or None
    if commit is None:
        return __version__
    return f"{__version__}+g{commit}" + (".dirty" if dirty else "")


def _checkout_commit(root: Path) -> tuple[str | None, bool]:
    """HEAD of the checkout holding this source tree, and whether tracked files differ; (None, False) elsewhere."""
    if not (root / ".git").exists() or not (root / "pyproject.toml").is_file():
        return None, False
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None, False
    return (head or None), bool(changed)
