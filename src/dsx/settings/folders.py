"""Where this process keeps caches and state, as read by its entry point.

`from_env(environ)` builds `PathSettings` by the rule of `dsx.settings` from the mapping it is
given. The process's entry point (`dsx.cli.main.main`, through which `dsx serve` and
`dsx sentinel run` start the API server and the controllers too) reads it once with
`entry_point(os.environ)`; while it runs, `paths()` answers with that reading, so every adapter
a command builds sees the same folders even if something changes the environment later.
Library callers without an entry point (tests, scripts) get `from_env(os.environ)` at the
moment of the call: they are their own entry point.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from dsx import settings


@dataclass(frozen=True)
class PathSettings:
    """Where dsx keeps caches (rebuildable) and state (clusters, stores)."""

    cache_dir: Path
    """Control-plane binaries, chart cache, compiled recipe catalog. Safe to delete; rebuilt on demand."""

    state_dir: Path
    """Simulated clusters, sentinel cursors. Deleting it forgets running sims."""

    @property
    def control_plane_cache(self) -> Path:
        return self.cache_dir / "control-plane"

    @property
    def chart_cache(self) -> Path:
        return self.cache_dir / "charts"

    @property
    def parsed_chart_cache(self) -> Path:
        """Chart data as lint reads it, kept per chart directory (`dsx.charts.sources.DirectorySource`)."""
        return self.cache_dir / "parsed-charts"

    @property
    def sim_dir(self) -> Path:
        return self.state_dir / "sim"


def from_env(environ: Mapping[str, str]) -> PathSettings:
    """The folders `environ` names, by the rule of `dsx.settings` (`cache_root`, `state_root`)."""
    return PathSettings(cache_dir=Path(settings.cache_root(environ)), state_dir=Path(settings.state_root(environ)))


_entry: list[PathSettings] = []
"""What the running entry points read, innermost last (a test may call `main` inside `main`)."""
_entry_lock = threading.Lock()


@contextlib.contextmanager
def entry_point(environ: Mapping[str, str]) -> Iterator[PathSettings]:
    """Read the environment once for an entry point; `paths()` answers with it until the block ends."""
    found = from_env(environ)
    with _entry_lock:
        _entry.append(found)
    try:
        yield found
    finally:
        with _entry_lock:
            _entry.remove(found)


def paths() -> PathSettings:
    """Where this process keeps caches and state: what the entry point read, else `from_env(os.environ)`."""
    with _entry_lock:
        if _entry:
            return _entry[-1]
    return from_env(os.environ)
