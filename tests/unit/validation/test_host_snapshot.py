"""Area of concern: a node snapshot reads the host under a root folder — nvidia-smi XML, NVIDIA PCI
devices named by the catalog table, os-release, kernel, sysctls, modules, systemd units — and
states every fact it could not read instead of inventing one."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx import serialization
from dsx.errors import BadInputError, NotFoundError, UnavailableError
from dsx.host import snapshot as host_snapshot
from dsx.model import snapshot


def smi_from(path: Path) -> host_snapshot.NvidiaSmi:
    return lambda: path.read_text()


def absent() -> str:
    raise NotFoundError("nvidia-smi not found")


def h100(data_dir: Path) -> snapshot.Snapshot:
    return host_snapshot.collect(
        data_dir / "hosts" / "h100-ubuntu",
        node_name="ip-10-0-12-34.ec2.internal",
        generator="dsx/test",
        nvidia_smi=smi_from(data_dir / "hosts" / "h100-ubuntu.nvidia-smi.xml"),
    )


def host_of(snap: snapshot.Snapshot) -> snapshot.HostFacts:
    assert len(snap.nodes) == 1 and snap.nodes[0].host is not None
    return snap.nodes[0].host


def test_gpus_from_nvidia_smi(data_dir: Path) -> None:
    host = host_of(h100(data_dir))
    assert (host.driver_version, host.cuda_version) == ("580.95.05", "13.0")
    assert len(host.gpus) == 8
    first = host.gpus[0]
    assert first == snapshot.HostGpu(
        index=0,
        product="NVIDIA H100 80GB HBM3",
        uuid="GPU-5d1a3b2c-7e4f-4a21-9c0d-1f2e3a4b5c60",
        pci_bus_id="00000000:18:00.0",
        memory_mib=81559,
        vbios_version="96.00.99.00.01",
        architecture="Hopper",
    )
    assert [g.index for g in host.gpus] == list(range(8))


def test_pci_devices_name_gpus_and_leave_out_other_vendors(data_dir: Path) -> None:
    host = host_of(h100(data_dir))
    assert len(host.pci_devices) == 12
    assert {d.device_id for d in host.pci_gpus} == {"2330"}
    assert {(d.model, d.accelerator) for d in host.pci_gpus} == {("NVIDIA H100 80GB HBM3", "h100")}
    switches = [d for d in host.pci_devices if not d.is_gpu]
    assert [d.device_id for d in switches] == ["22a3"] * 4
    assert all(d.model == "" for d in switches)


def test_os_kernel_sysctls_modules(data_dir: Path) -> None:
    host = host_of(h100(data_dir))
    assert host.os_release["ID"] == "ubuntu"
    assert host.os_release["VERSION_ID"] == "24.04"
    assert host.os_release["PRETTY_NAME"] == "Ubuntu 24.04.3 LTS"
    assert host.kernel_release == "6.8.0-1028-aws"
    assert host.sysctls["vm.max_map_count"] == "1048576"
    assert "net.bridge.bridge-nf-call-iptables" not in host.sysctls
    assert "nvidia" in host.kernel_modules and "nvidia_peermem" in host.kernel_modules
    assert list(host.kernel_modules) == sorted(host.kernel_modules)


def test_missing_sysctl_is_unreadable_with_reason(data_dir: Path) -> None:
    host = host_of(h100(data_dir))
    assert host.unreadable == (
        snapshot.Unreadable(
            "sysctl net.bridge.bridge-nf-call-iptables", "/proc/sys/net/bridge/bridge-nf-call-iptables: no such file"
        ),
    )


def test_systemd_units(data_dir: Path) -> None:
    units = {u.name: u for u in host_of(h100(data_dir)).systemd_units}
    assert units["containerd.service"] == snapshot.SystemdUnit(
        "containerd.service", "/lib/systemd/system/containerd.service", (), True, True
    )
    assert units["kubelet.service"] == snapshot.SystemdUnit(
        "kubelet.service",
        "/etc/systemd/system/kubelet.service",
        ("/etc/systemd/system/kubelet.service.d/10-kubelet-args.conf",),
        True,
        True,
    )


def test_host_without_driver_is_named_from_pci_and_says_what_is_missing(data_dir: Path) -> None:
    snap = host_snapshot.collect(
        data_dir / "hosts" / "b200-rhel", node_name="gpu-b200-7", generator="dsx/test", nvidia_smi=absent
    )
    node = snap.nodes[0]
    host = host_of(snap)
    assert host.gpus == ()
    assert node.is_gpu_node
    assert node.gpu_product == "NVIDIA-B200"
    assert [(d.device_id, d.model, d.accelerator) for d in host.pci_gpus] == [
        ("2901", "NVIDIA B200", "b200"),
        ("2901", "NVIDIA B200", "b200"),
        ("ffff", "", ""),
    ]
    assert host.os_release["ID"] == "rhel"
    facts = {u.fact: u.reason for u in host.unreadable}
    assert facts["nvidia-smi"] == "nvidia-smi not found"
    assert facts["kernel modules"] == "/proc/modules: no such file"
    assert "sysctl vm.max_map_count" in facts
    assert all(u.active is None and u.enabled is None and u.unit_file == "" for u in host.systemd_units)


def test_failing_nvidia_smi_is_recorded(data_dir: Path) -> None:
    def failing() -> str:
        raise UnavailableError("nvidia-smi exited 9: NVIDIA-SMI has failed because it couldn't communicate")

    host = host_of(
        host_snapshot.collect(data_dir / "hosts" / "h100-ubuntu", node_name="n", generator="g", nvidia_smi=failing)
    )
    assert host.gpus == ()
    assert host.pci_gpus  # sysfs still names the GPUs
    assert any(u.fact == "nvidia-smi" and "exited 9" in u.reason for u in host.unreadable)


def test_empty_root_reads_nothing_and_says_so(tmp_path: Path) -> None:
    host = host_of(host_snapshot.collect(tmp_path, node_name="n", generator="g", nvidia_smi=absent))
    facts = {u.fact for u in host.unreadable}
    assert {"nvidia-smi", "os-release", "kernel release", "PCI devices", "kernel modules"} <= facts
    assert host.pci_devices == () and host.os_release == {}


def test_node_snapshot_is_deterministic(data_dir: Path) -> None:
    assert serialization.dump_yaml(h100(data_dir).to_dict()) == serialization.dump_yaml(h100(data_dir).to_dict())


def test_node_snapshot_round_trips(data_dir: Path) -> None:
    doc = h100(data_dir).to_dict()
    assert snapshot.Snapshot.from_dict(doc, source="n").to_dict() == doc


def test_node_name_from_hostname(data_dir: Path, tmp_path: Path) -> None:
    assert host_snapshot.node_name_from_host(data_dir / "hosts" / "h100-ubuntu") == "ip-10-0-12-34.ec2.internal"
    with pytest.raises(BadInputError, match="pass --node-name"):
        host_snapshot.node_name_from_host(tmp_path)


@pytest.mark.parametrize(
    ("xml", "message"),
    [
        ("<nvidia_smi_log><gpu>", "malformed"),
        ("<other/>", "expected <nvidia_smi_log>"),
        ("<nvidia_smi_log><gpu><uuid>x</uuid></gpu></nvidia_smi_log>", "GPU 0 has no product_name"),
        ('<!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log>&a;</nvidia_smi_log>', "declares entities"),
    ],
)
def test_bad_nvidia_smi_xml(xml: str, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        host_snapshot.parse_nvidia_smi_xml(xml)


def test_not_available_values_are_empty() -> None:
    xml = (
        "<nvidia_smi_log><driver_version>580.95.05</driver_version><cuda_version>N/A</cuda_version>"
        "<gpu id='00000000:01:00.0'><product_name>NVIDIA L40S</product_name><fb_memory_usage><total>N/A</total>"
        "</fb_memory_usage></gpu></nvidia_smi_log>"
    )
    driver, cuda, gpus = host_snapshot.parse_nvidia_smi_xml(xml)
    assert (driver, cuda) == ("580.95.05", "")
    assert gpus[0].memory_mib is None and gpus[0].pci_bus_id == "00000000:01:00.0"


def test_os_release_quoting() -> None:
    text = 'NAME="Fancy \\"OS\\""\nID=fancy\n# comment\nVERSION_ID=\'1.2\'\nBROKEN\n'
    assert host_snapshot.parse_os_release(text) == {"ID": "fancy", "NAME": 'Fancy "OS"', "VERSION_ID": "1.2"}
