"""Area of concern: the NVIDIA PCI device table is well-formed data — unique lower-case 4-hex ids,
a product for each, accelerators only from the criteria vocabulary."""

from __future__ import annotations

import re

from dsx import catalog
from dsx.files import documents
from dsx.host import snapshot as host_snapshot
from dsx.model import criteria


def test_device_ids_are_unique_lowercase_hex() -> None:
    doc = documents.load_mapping_file(catalog.path("pci", "nvidia-gpus.yaml"))
    assert doc["kind"] == "PciDeviceTable" and doc["vendorId"] == "10de"
    ids = [d["deviceId"] for d in doc["devices"]]
    assert all(re.fullmatch(r"[0-9a-f]{4}", i) for i in ids), ids
    assert len(ids) == len(set(ids))
    assert ids == sorted(ids)


def test_every_device_names_a_product_and_architecture() -> None:
    for device_id, entry in host_snapshot.pci_table().items():
        assert entry["product"].strip(), device_id
        assert entry["pciName"].strip(), device_id
        assert entry["architecture"] in {"volta", "turing", "ampere", "ada-lovelace", "hopper", "blackwell"}, device_id
        assert set(entry) <= {"deviceId", "pciName", "product", "architecture", "accelerator"}, device_id


def test_accelerators_are_criteria_values() -> None:
    allowed = set(criteria.DIMENSIONS["accelerator"]) - {criteria.ANY}
    used = {e["accelerator"] for e in host_snapshot.pci_table().values() if "accelerator" in e}
    assert used <= allowed
    assert used == allowed, f"no PCI id for {sorted(allowed - used)}"
