"""GPU node shapes and platform facts the simulator draws from (data in dsx/sim/data/*.yaml).

Kept as data so a new accelerator or cloud is a YAML edit; the invariant tests in
tests/unit/sim hold the data to the shapes the code relies on.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from dsx import errors, serialization

ACCELERATORS = ("h100", "h200", "b200", "gb200", "a100", "l40s")
SERVICES = ("eks", "gke", "aks", "oke", "kind")
OPERATING_SYSTEMS = ("ubuntu", "al2023", "cos", "rhel")


@dataclass(frozen=True)
class InstanceType:
    name: str
    cpu: int
    memory_gib: int
    extra: dict[str, str] = field(default_factory=dict)
    """Further extended resources a node of this type advertises (e.g. EFA devices)."""


@dataclass(frozen=True)
class Accelerator:
    key: str
    product: str
    family: str
    memory_mib: int
    compute_capability: str
    gpus_per_node: int
    architecture: str
    nodes_per_rack: int
    gpu_pci: tuple[str, ...]
    nvswitch_pci: tuple[str, ...]
    gke_accelerator: str
    instance_types: dict[str, InstanceType]
    nvlink_domain_max_nodes: int | None = None
    """Set for rack-scale NVLink systems (GB200 NVL72): nodes sharing one NVLink clique."""

    def instance_type(self, service: str, gpus_per_node: int) -> InstanceType:
        """The cloud instance for this board; a synthetic one where the service has none."""
        known = self.instance_types.get(service)
        if known is not None and gpus_per_node == self.gpus_per_node:
            return known
        cpu = 24 * gpus_per_node
        return InstanceType(f"dsx-sim.{self.key}x{gpus_per_node}", cpu, 256 * gpus_per_node)


@dataclass(frozen=True)
class ServicePlatform:
    region: str
    zone: str
    kernel_flavor: str


@dataclass(frozen=True)
class OsImage:
    image: str
    kernel: str

    def kernel_version(self, flavor: str, architecture: str) -> str:
        arch = {"amd64": "x86_64", "arm64": "aarch64"}[architecture]
        return self.kernel.format(flavor=flavor, arch=arch)


@dataclass(frozen=True)
class Platform:
    driver_version: str
    cuda_runtime: str
    container_runtime: str
    services: dict[str, ServicePlatform]
    operating_systems: dict[str, OsImage]


def _data(name: str) -> dict[str, Any]:
    source = f"dsx/sim/data/{name}"
    text = resources.files("dsx.sim").joinpath("data", name).read_text(encoding="utf-8")
    loaded = serialization.parse_yaml(text, source=source)
    if not isinstance(loaded, dict):
        raise errors.CatalogError(f"{source}: expected a mapping at the top level")
    return loaded


@functools.cache
def accelerators() -> dict[str, Accelerator]:
    out: dict[str, Accelerator] = {}
    for key, raw in _data("accelerators.yaml").items():
        try:
            out[key] = Accelerator(
                key=key,
                product=raw["product"],
                family=raw["family"],
                memory_mib=int(raw["memory_mib"]),
                compute_capability=str(raw["compute_capability"]),
                gpus_per_node=int(raw["gpus_per_node"]),
                architecture=raw["architecture"],
                nodes_per_rack=int(raw["nodes_per_rack"]),
                gpu_pci=tuple(raw["gpu_pci"]),
                nvswitch_pci=tuple(raw["nvswitch_pci"]),
                gke_accelerator=raw["gke_accelerator"],
                instance_types={
                    service: InstanceType(
                        it["name"],
                        int(it["cpu"]),
                        int(it["memory_gib"]),
                        {k: str(v) for k, v in (it.get("extra") or {}).items()},
                    )
                    for service, it in (raw.get("instance_types") or {}).items()
                },
                nvlink_domain_max_nodes=raw.get("nvlink_domain_max_nodes"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise errors.CatalogError(f"dsx/sim/data/accelerators.yaml: {key}: malformed entry ({exc})") from exc
    return out


@functools.cache
def platform() -> Platform:
    raw = _data("platform.yaml")
    try:
        return Platform(
            driver_version=str(raw["driver"]["version"]),
            cuda_runtime=str(raw["driver"]["cuda_runtime"]),
            container_runtime=str(raw["container_runtime"]),
            services={k: ServicePlatform(**v) for k, v in raw["services"].items()},
            operating_systems={k: OsImage(**v) for k, v in raw["os"].items()},
        )
    except (KeyError, TypeError) as exc:
        raise errors.CatalogError(f"dsx/sim/data/platform.yaml: malformed ({exc})") from exc


def accelerator(key: str) -> Accelerator:
    table = accelerators()
    if key not in table:
        raise errors.BadInputError(errors.allowed_values_message("dsx sim", "accelerator", key, sorted(table)))
    return table[key]


@functools.cache
def kernel_messages() -> dict[str, Any]:
    return _data("kernel-messages.yaml")
