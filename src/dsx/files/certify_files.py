"""Certification's files a user names: a log profile, a category, a platform, a workload.

Read here and parsed by `dsx.certify` and `dsx.model.certify_catalog` (which do no I/O); the
shipped ones come from `dsx.catalog`.
"""

from __future__ import annotations

from pathlib import Path

from dsx.certify.parsing import profiles
from dsx.files.documents import load_mapping_file
from dsx.model import certify_catalog


def log_profile(name_or_path: str) -> profiles.LogProfile:
    """A shipped profile by name, or a profile file by path (anything ending in .yaml/.yml or with a /)."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        return profiles.from_dict(load_mapping_file(name_or_path), source=name_or_path)
    return profiles.load(name_or_path)


def certify_category(path: str | Path) -> certify_catalog.Category:
    return certify_catalog.category_from_dict(load_mapping_file(path), source=str(path))


def certify_platform(path: str | Path) -> certify_catalog.Platform:
    return certify_catalog.platform_from_dict(load_mapping_file(path), source=str(path))


def certify_workload(path: str | Path) -> certify_catalog.Workload:
    return certify_catalog.workload_from_dict(load_mapping_file(path), source=str(path))
