"""Node snapshot: what only the host knows, read from files under a root folder.

Runs on the node (a privileged DaemonSet or Job mounting the host's `/` at `/host`, see
deploy/snapshot-agent) or against a fixture tree in tests; every path is read under `root`.
Sources: `nvidia-smi -q -x` (run by the caller and handed in as text, so tests feed recorded
XML), NVIDIA PCI functions in sysfs (vendor 0x10de; the device id names the GPU through
catalog/pci/nvidia-gpus.yaml even where the driver or GPU Feature Discovery is missing),
os-release, the kernel release, selected sysctls, loaded modules, and the unit files and
cgroups of the containerd and kubelet systemd units.

A fact that cannot be read becomes an `Unreadable` entry with the reason, never a default.
"""

from __future__ import annotations

import functools
import subprocess
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path
from typing import Any

import defusedxml
import defusedxml.ElementTree as defused

from dsx import catalog
from dsx.errors import BadInputError, NotFoundError, UnavailableError
from dsx.model import snapshot

NVIDIA_VENDOR_ID = "10de"
SYSCTLS = (
    "kernel.numa_balancing",
    "kernel.pid_max",
    "vm.max_map_count",
    "vm.overcommit_memory",
    "vm.swappiness",
    "fs.inotify.max_user_instances",
    "fs.inotify.max_user_watches",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.ip_forward",
    "net.bridge.bridge-nf-call-iptables",
)
"""Sysctls that GPU and Kubernetes nodes are commonly tuned on (memory maps, NUMA, buffers, forwarding)."""

SYSTEMD_UNITS = ("containerd.service", "kubelet.service")
_UNIT_DIRS = (
    "etc/systemd/system",
    "run/systemd/system",
    "usr/local/lib/systemd/system",
    "usr/lib/systemd/system",
    "lib/systemd/system",
)
NVIDIA_SMI_TIMEOUT_SECONDS = 60
"""nvidia-smi -q -x on 8 GPUs takes a few seconds; a minute means the driver is hung."""

NvidiaSmi = Callable[[], str]
"""Returns `nvidia-smi -q -x` output; raises NotFoundError (tool absent) or UnavailableError (it failed)."""


@functools.cache
def pci_table() -> dict[str, dict[str, str]]:
    """deviceId → {pciName, product, architecture, accelerator?} from the shipped catalog."""
    doc = catalog.mapping("pci", "nvidia-gpus.yaml")
    return {str(d["deviceId"]).lower(): {k: str(v) for k, v in d.items()} for d in doc["devices"]}


def collect(
    root: Path, *, node_name: str, generator: str, nvidia_smi: NvidiaSmi, captured_at: str = ""
) -> snapshot.Snapshot:
    """A node snapshot of the host mounted at `root`, with GPU facts from `nvidia_smi`."""
    unreadable: list[snapshot.Unreadable] = []
    gpus: tuple[snapshot.HostGpu, ...] = ()
    driver = cuda = ""
    try:
        driver, cuda, gpus = parse_nvidia_smi_xml(nvidia_smi())
    except (BadInputError, NotFoundError, UnavailableError) as exc:
        unreadable.append(snapshot.Unreadable("nvidia-smi", str(exc)))
    os_release = _os_release(root, unreadable)
    kernel = _read(root, "proc/sys/kernel/osrelease", "kernel release", unreadable)
    host = snapshot.HostFacts(
        gpus=gpus,
        driver_version=driver,
        cuda_version=cuda,
        pci_devices=_pci_devices(root, unreadable),
        os_release=os_release,
        kernel_release=(kernel or "").strip(),
        sysctls=_sysctls(root, unreadable),
        kernel_modules=_modules(root, unreadable),
        systemd_units=tuple(_unit(root, name) for name in SYSTEMD_UNITS),
        unreadable=tuple(unreadable),
    )
    return snapshot.Snapshot(
        nodes=(snapshot.Node(name=node_name, host=host),),
        generator=generator,
        captured_at=captured_at,
        sources=(f"node/{node_name}",),
    )


def node_name_from_host(root: Path) -> str:
    """The host's name from `<root>/etc/hostname` (the Kubernetes node name on most installs)."""
    text = _read(root, "etc/hostname", "hostname", [])
    if not text or not text.strip():
        raise BadInputError(f"{root / 'etc/hostname'}: cannot tell the node name; pass --node-name")
    return text.strip()


def run_nvidia_smi(root: Path) -> str:
    """`nvidia-smi -q -x` on the host at `root` (through chroot when root is not `/`)."""
    command = ["nvidia-smi", "-q", "-x"]
    if root.resolve() != Path("/"):
        command = ["chroot", str(root), *command]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_SECONDS, check=False)
    except FileNotFoundError as exc:
        raise NotFoundError(f"{command[0]} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise UnavailableError(f"nvidia-smi did not answer within {NVIDIA_SMI_TIMEOUT_SECONDS} s") from exc
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise UnavailableError(f"nvidia-smi exited {done.returncode}: {detail[0] if detail else 'no output'}")
    return done.stdout


def parse_nvidia_smi_xml(text: str) -> tuple[str, str, tuple[snapshot.HostGpu, ...]]:
    """Driver version, CUDA version and the GPUs from `nvidia-smi -q -x` output."""
    try:
        log = defused.fromstring(text)  # refuses DTDs and entity declarations, which nvidia-smi never writes
    except defusedxml.DefusedXmlException as exc:
        raise BadInputError(f"nvidia-smi XML declares entities or a DTD; refusing them: {exc}") from exc
    except defused.ParseError as exc:
        raise BadInputError(f"nvidia-smi XML is malformed: {exc}") from exc
    if log.tag != "nvidia_smi_log":
        raise BadInputError(f"nvidia-smi XML root is <{log.tag}>, expected <nvidia_smi_log>")
    gpus = []
    for index, gpu in enumerate(log.findall("gpu")):
        product = _xml_text(gpu, "product_name")
        if not product:
            raise BadInputError(f"nvidia-smi XML: GPU {index} has no product_name")
        gpus.append(
            snapshot.HostGpu(
                index=index,
                product=product,
                uuid=_xml_text(gpu, "uuid"),
                pci_bus_id=_xml_text(gpu, "pci/pci_bus_id") or gpu.get("id", ""),
                memory_mib=_mib(_xml_text(gpu, "fb_memory_usage/total")),
                vbios_version=_xml_text(gpu, "vbios_version"),
                architecture=_xml_text(gpu, "product_architecture"),
            )
        )
    return _xml_text(log, "driver_version"), _xml_text(log, "cuda_version"), tuple(gpus)


def _xml_text(element: ElementTree.Element, path: str) -> str:
    found = element.find(path)
    text = (found.text or "").strip() if found is not None else ""
    return "" if text in ("N/A", "Not Supported") else text


def _mib(text: str) -> int | None:
    number = text.split()[0] if text else ""
    return int(number) if number.isdigit() else None


def _read(root: Path, relative: str, fact: str, unreadable: list[snapshot.Unreadable]) -> str | None:
    path = root / relative
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        unreadable.append(snapshot.Unreadable(fact, f"/{relative}: no such file"))
    except PermissionError:
        unreadable.append(snapshot.Unreadable(fact, f"/{relative}: permission denied"))
    except OSError as exc:
        unreadable.append(snapshot.Unreadable(fact, f"/{relative}: {exc.strerror}"))
    return None


def _os_release(root: Path, unreadable: list[snapshot.Unreadable]) -> dict[str, str]:
    for relative in ("etc/os-release", "usr/lib/os-release"):
        if (root / relative).exists():
            text = _read(root, relative, "os-release", unreadable)
            return parse_os_release(text or "")
    unreadable.append(snapshot.Unreadable("os-release", "/etc/os-release and /usr/lib/os-release: no such file"))
    return {}


def parse_os_release(text: str) -> dict[str, str]:
    """KEY=value lines, values unquoted (os-release(5): shell-style single or double quotes)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
            if line.split("=", 1)[1].strip()[0] == '"':
                value = value.replace('\\"', '"').replace("\\$", "$").replace("\\`", "`").replace("\\\\", "\\")
        out[key.strip()] = value
    return dict(sorted(out.items()))


def _pci_devices(root: Path, unreadable: list[snapshot.Unreadable]) -> tuple[snapshot.PciDevice, ...]:
    base = root / "sys/bus/pci/devices"
    if not base.is_dir():
        unreadable.append(snapshot.Unreadable("PCI devices", "/sys/bus/pci/devices: no such directory"))
        return ()
    table = pci_table()
    devices = []
    for entry in sorted(base.iterdir()):
        vendor = _hex_file(entry / "vendor")
        if vendor != NVIDIA_VENDOR_ID:
            continue
        device_id = _hex_file(entry / "device") or ""
        known: dict[str, Any] = table.get(device_id, {})
        devices.append(
            snapshot.PciDevice(
                address=entry.name,
                device_id=device_id,
                class_code=_hex_file(entry / "class") or "",
                model=known.get("product", ""),
                accelerator=known.get("accelerator", ""),
            )
        )
    return tuple(devices)


def _hex_file(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="ascii").strip().lower()
    except (OSError, UnicodeDecodeError):
        return None
    return text.removeprefix("0x")


def _sysctls(root: Path, unreadable: list[snapshot.Unreadable]) -> dict[str, str]:
    out = {}
    for name in SYSCTLS:
        text = _read(root, "proc/sys/" + name.replace(".", "/"), f"sysctl {name}", unreadable)
        if text is not None:
            out[name] = " ".join(text.split())
    return out


def _modules(root: Path, unreadable: list[snapshot.Unreadable]) -> tuple[str, ...]:
    text = _read(root, "proc/modules", "kernel modules", unreadable)
    if text is None:
        return ()
    return tuple(sorted({line.split()[0] for line in text.splitlines() if line.strip()}))


def _unit(root: Path, name: str) -> snapshot.SystemdUnit:
    unit_file = next((f"/{d}/{name}" for d in _UNIT_DIRS if (root / d / name).is_file()), "")
    drop_ins = sorted(
        f"/{d}/{name}.d/{conf.name}"
        for d in _UNIT_DIRS
        if (root / d / f"{name}.d").is_dir()
        for conf in (root / d / f"{name}.d").glob("*.conf")
    )
    wants = root / "etc/systemd/system"
    enabled = None
    if wants.is_dir():
        # the links point at absolute host paths, so test the link itself, not its target
        enabled = any((d / name).is_symlink() or (d / name).exists() for d in wants.glob("*.wants"))
    return snapshot.SystemdUnit(
        name=name, unit_file=unit_file, drop_ins=tuple(drop_ins), enabled=enabled, active=_active(root, name)
    )


def _active(root: Path, name: str) -> bool | None:
    """A unit with live processes has a non-empty cgroup.procs (cgroup v2, or v1's systemd hierarchy)."""
    for slice_dir in ("sys/fs/cgroup/system.slice", "sys/fs/cgroup/systemd/system.slice"):
        base = root / slice_dir
        if base.is_dir():
            procs = base / name / "cgroup.procs"
            try:
                return bool(procs.read_text(encoding="ascii").strip())
            except OSError:
                return False
    return None
