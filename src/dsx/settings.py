"""Process-wide defaults, each named once with its unit and reason.

Settings are plain frozen dataclasses passed explicitly. The environment is read in one
function, `from_env`, which takes the mapping to read (tests pass a dict). The process's entry
point (`dsx.cli.main.main`, through which `dsx serve` and `dsx sentinel run` start the API server
and the controllers too) reads it once with `entry_point(os.environ)`; while it runs, `paths()`
and `service_account_dir()` answer with that reading, so every part of a command sees the same
folders even if something changes the environment later. Library callers without an entry point
(tests, scripts) get `from_env(os.environ)` at the moment of the call.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts a pod's service-account token, CA and namespace."""

SERVICE_ACCOUNT_DIR_ENV = "DSX_SERVICE_ACCOUNT_DIR"
"""Overrides SERVICE_ACCOUNT_DIR (tests point it at a folder they wrote)."""


@dataclass(frozen=True)
class PathSettings:
    """Where dsx keeps caches (rebuildable) and state (clusters, stores)."""

    cache_dir: Path
    """Control-plane binaries, chart cache. Safe to delete; rebuilt on demand."""

    state_dir: Path
    """Simulated clusters, sentinel cursors. Deleting it forgets running sims."""

    @property
    def control_plane_cache(self) -> Path:
        return self.cache_dir / "control-plane"

    @property
    def chart_cache(self) -> Path:
        return self.cache_dir / "charts"

    @property
    def sim_dir(self) -> Path:
        return self.state_dir / "sim"

    service_account_dir: Path = SERVICE_ACCOUNT_DIR
    """Where a pod's service-account token, CA and namespace are (the kubelet's mount by default)."""


def from_env(environ: Mapping[str, str]) -> PathSettings:
    """The one reader of the environment: $DSX_CACHE_DIR (else $XDG_CACHE_HOME/dsx, else
    ~/.cache/dsx), $DSX_STATE_DIR (else $XDG_STATE_HOME/dsx, else ~/.local/state/dsx) and
    $DSX_SERVICE_ACCOUNT_DIR (else the kubelet's mount; tests point it at a folder they wrote)."""
    home = Path.home()
    return PathSettings(
        cache_dir=_root(environ, "DSX_CACHE_DIR", "XDG_CACHE_HOME", home / ".cache"),
        state_dir=_root(environ, "DSX_STATE_DIR", "XDG_STATE_HOME", home / ".local" / "state"),
        service_account_dir=Path(environ.get(SERVICE_ACCOUNT_DIR_ENV) or SERVICE_ACCOUNT_DIR),
    )


def _root(environ: Mapping[str, str], explicit: str, xdg: str, fallback: Path) -> Path:
    """$explicit as given, else $xdg/dsx, else fallback/dsx (an empty variable counts as unset)."""
    given = environ.get(explicit)
    return Path(given) if given else Path(environ.get(xdg) or fallback) / "dsx"


API_PORT = 8080
"""`dsx serve`'s port."""

SENTINEL_PORT = 9464
"""The sentinel's probes, metrics and ingestion (the Prometheus exporter range)."""

SENTINEL_WORKERS = 16
"""Worker threads per sentinel stage: nodes handled in parallel."""

LEADER_LEASE_DURATION_SECONDS = 15.0
LEADER_RENEW_DEADLINE_SECONDS = 10.0
LEADER_RETRY_PERIOD_SECONDS = 2.0
"""Leader election timings, client-go's defaults (docs/adr/0008)."""

API_MAX_BODY_BYTES = 1 << 20
"""1 MiB: recipes and criteria are a few kB; anything larger is a mistake or an attack (`dsx serve`, the sentinel)."""

API_RATE_PER_SECOND = 20.0
"""Sustained requests per second per client of `dsx serve`; bursts up to `API_BURST`."""

API_BURST = 40
"""Requests a client may send at once: two seconds' worth at the default rate."""

KUBERNETES_VERSION = "1.36.3"
"""The control-plane version dsx sim builds and tests against (≥ 1.34 required)."""

ETCD_VERSION = "3.6.16"
"""etcd 3.6.x is what kubeadm pins for Kubernetes 1.34+."""

KWOK_VERSION = "0.8.0"
"""KWOK controller driving fake nodes and pods."""


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


def service_account_dir() -> Path:
    """The in-cluster credentials folder: $DSX_SERVICE_ACCOUNT_DIR, else the kubelet's mount."""
    return paths().service_account_dir
