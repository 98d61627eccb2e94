"""The images dsx ships, named in one place: the registry and the tag, which is `dsx.__version__`.

`make image` builds them (deploy/images/*/Containerfile; see docs/container-images.md). Code that needs a
default image reads it from here; the chart, the rendered manifests and the catalog name the same
references in YAML, and tests/unit/test_images.py fails when any of them drifts from these.
"""

from __future__ import annotations

from dsx import __version__

REGISTRY = "ghcr.io/dsx-run"
"""Where the released images live; `IMAGE_REGISTRY=… make image` tags them for another."""
DSX_REPOSITORY = f"{REGISTRY}/dsx"
"""dsx[all], no torch: the sentinel, its node monitor and the snapshot agent."""
WORKLOAD_REPOSITORY = f"{REGISTRY}/dsx-workload"
"""dsx[all,collectives]: the dsx image plus torch with CUDA, the certify worker on every node."""
DSX_IMAGE = f"{DSX_REPOSITORY}:{__version__}"
WORKLOAD_IMAGE = f"{WORKLOAD_REPOSITORY}:{__version__}"
