"""NVIDIA driver versions: from the NVRM banner, GPU Feature Discovery labels or the configuration.

The version picks the NVLink5 decode layout (V1 before 575, V2 from it), so it is read in one place.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

from dsx.errors import BadInputError


class Family(enum.Enum):
    XID = "XID"
    SXID = "SXID"
    NVRM = "NVRM"
    """A driver message without a code (RmInitAdapter failed, probe failed); `kind` names it."""


class Layout(enum.Enum):
    """The IntrInfo bit layout of NVLink5 Xids: V1 before driver R575, V2 from R575."""

    V1 = "V1"
    V2 = "V2"


V2_FROM_MAJOR = 575
GENERATIONS = ("a100", "h100", "b100", "gb200")


@dataclass(frozen=True)
class DriverVersion:
    """The NVIDIA driver a line was logged by, and where dsx learnt it."""

    major: int
    minor: int
    patch: int | None
    source: str
    """kernel-log (the NVRM banner before the line), configuration, or node-label."""

    @property
    def text(self) -> str:
        return f"{self.major}.{self.minor:02d}" + (f".{self.patch:02d}" if self.patch is not None else "")

    @property
    def layout(self) -> Layout:
        return Layout.V2 if self.major >= V2_FROM_MAJOR else Layout.V1


_VERSION = re.compile(r"(\d{1,4})(?:\.(\d{1,4}))?(?:\.(\d{1,4}))?")


def parse_driver_version(text: str, source: str, where: str | None = None) -> DriverVersion:
    """`575.57.08`, `570.124`, `575` → a DriverVersion; anything else is a BadInputError naming `where`."""
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        raise BadInputError(f"{where or source}: driver version: {text!r} is not a version like 575.57.08")
    return DriverVersion(int(match.group(1)), int(match.group(2) or 0), _int(match.group(3)), source)


_DRIVER_LABELS = (
    (
        "nvidia.com/cuda.driver-version.major",
        "nvidia.com/cuda.driver-version.minor",
        "nvidia.com/cuda.driver-version.revision",
    ),
    ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"),
)


def driver_version_from_labels(labels: Mapping[str, str]) -> DriverVersion | None:
    """The driver GPU Feature Discovery reports in the node's labels, or None."""
    for major_key, minor_key, patch_key in _DRIVER_LABELS:
        major, minor = labels.get(major_key, ""), labels.get(minor_key, "0")
        if major.isdigit() and minor.isdigit() and len(major) <= 4 and len(minor) <= 4:
            patch = labels.get(patch_key, "")
            return DriverVersion(
                int(major), int(minor), int(patch) if patch.isdigit() and len(patch) <= 4 else None, "node-label"
            )
    return None


def resolve_driver_version(
    configured: str | None, labels: Mapping[str, str] | None = None, where: str = "configuration"
) -> DriverVersion | None:
    """The monitor's configured version, else the node label's. A banner in the log beats both (KernelLogReader)."""
    if configured:
        return parse_driver_version(configured, "configuration", where)
    return driver_version_from_labels(labels or {})


def _int(text: str | None) -> int | None:
    return int(text) if text else None
