"""Process-wide defaults, each named once with its unit and reason.

Settings are plain frozen dataclasses passed explicitly; nothing here reads the
environment except `from_env`, which the entry points call.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def _cache_root() -> Path:
    explicit = os.environ.get("DSX_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dsx"


def _state_root() -> Path:
    explicit = os.environ.get("DSX_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "dsx"


@dataclass(frozen=True)
class PathSettings:
    """Where dsx keeps caches (rebuildable) and state (clusters, stores)."""

    cache_dir: Path = field(default_factory=_cache_root)
    """Control-plane binaries, chart cache. Safe to delete; rebuilt on demand."""

    state_dir: Path = field(default_factory=_state_root)
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


KUBERNETES_VERSION = "1.36.3"
"""The control-plane version dsx sim builds and tests against (≥ 1.34 required)."""

ETCD_VERSION = "3.6.16"
"""etcd 3.6.x is what kubeadm pins for Kubernetes 1.34+."""

KWOK_VERSION = "0.8.0"
"""KWOK controller driving fake nodes and pods."""


def paths() -> PathSettings:
    return PathSettings()


SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts a pod's service-account token, CA and namespace."""

SERVICE_ACCOUNT_DIR_ENV = "DSX_SERVICE_ACCOUNT_DIR"
"""Overrides SERVICE_ACCOUNT_DIR (tests point it at a folder they wrote)."""


def service_account_dir() -> Path:
    """The in-cluster credentials folder: $DSX_SERVICE_ACCOUNT_DIR, else the kubelet's mount."""
    explicit = os.environ.get(SERVICE_ACCOUNT_DIR_ENV)
    return Path(explicit) if explicit else SERVICE_ACCOUNT_DIR
