"""Process-wide defaults, each named once with its unit and reason, and the rule for where dsx
keeps its folders.

The environment is read at entry points only, and only through the functions here, which take
the mapping to read (tests pass a dict): `cache_root`, `state_root`, `service_account_root`
and `source_date`. `dsx.settings.folders` builds `PathSettings` from the same rule and holds what
the running entry point read. Domain code never reads either: it is handed what it needs by its
caller (a folder, a time).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from datetime import UTC, datetime

from dsx.errors import BadInputError

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the kubelet mounts a pod's service-account token, CA and namespace."""

SERVICE_ACCOUNT_DIR_ENV = "DSX_SERVICE_ACCOUNT_DIR"
"""Overrides SERVICE_ACCOUNT_DIR (tests point it at a folder they wrote)."""


def cache_root(environ: Mapping[str, str]) -> str:
    """Caches (rebuildable): $DSX_CACHE_DIR, else $XDG_CACHE_HOME/dsx, else ~/.cache/dsx."""
    return _root(environ, "DSX_CACHE_DIR", "XDG_CACHE_HOME", ".cache")


def state_root(environ: Mapping[str, str]) -> str:
    """State (clusters, stores): $DSX_STATE_DIR, else $XDG_STATE_HOME/dsx, else ~/.local/state/dsx."""
    return _root(environ, "DSX_STATE_DIR", "XDG_STATE_HOME", os.path.join(".local", "state"))


def service_account_root(environ: Mapping[str, str]) -> str:
    """A pod's credentials: $DSX_SERVICE_ACCOUNT_DIR, else the kubelet's mount."""
    return environ.get(SERVICE_ACCOUNT_DIR_ENV) or SERVICE_ACCOUNT_DIR


def home(environ: Mapping[str, str]) -> str:
    """$HOME as `environ` gives it, else the account's home folder: never the process's own $HOME,
    which `os.path.expanduser` would read behind the caller's back."""
    return environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir


def _root(environ: Mapping[str, str], explicit: str, xdg: str, under_home: str) -> str:
    """$explicit as given, else $xdg/dsx, else $HOME/under_home/dsx (an empty variable counts as unset)."""
    given = environ.get(explicit)
    if given:
        return given
    return os.path.join(environ.get(xdg) or os.path.join(home(environ), under_home), "dsx")


def source_date(environ: Mapping[str, str]) -> datetime | None:
    """SOURCE_DATE_EPOCH as a UTC time, or None when unset (then no timestamp is written)."""
    raw = environ.get("SOURCE_DATE_EPOCH")
    if raw is None or raw == "":
        return None
    try:
        return datetime.fromtimestamp(int(raw), tz=UTC)
    except (ValueError, OverflowError, OSError) as exc:
        raise BadInputError(f"SOURCE_DATE_EPOCH: {raw!r} is not a Unix timestamp in seconds") from exc


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

JOBSET_VERSION = "0.10.1"
"""JobSet, the primitive Kubeflow Trainer runs a TrainJob on (what the kubeflow-trainer 2.1.0 chart brings)."""

TRAINER_VERSION = "2.1.0"
"""Kubeflow Trainer's controller manager: the version the recipes' kubeflow-trainer component pins."""
