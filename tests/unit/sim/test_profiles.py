"""Area of concern: the simulator's data files (accelerators, platform, kernel messages) hold the
shapes the code relies on, and the CLI's choices match them."""

from __future__ import annotations

import pytest

from dsx import errors
from dsx.cli import sim_cmd
from dsx.sim import nodes, profiles


def test_every_accelerator_is_described_and_offered_by_the_cli() -> None:
    assert tuple(profiles.accelerators()) == profiles.ACCELERATORS
    assert sim_cmd.ACCELERATORS == profiles.ACCELERATORS
    assert sim_cmd.SERVICES == profiles.SERVICES
    assert sim_cmd.OPERATING_SYSTEMS == profiles.OPERATING_SYSTEMS
    assert sim_cmd.MAX_NODES == nodes.MAX_NODES
    assert tuple(profiles.platform().services) == profiles.SERVICES
    assert tuple(profiles.platform().operating_systems) == profiles.OPERATING_SYSTEMS


@pytest.mark.parametrize("key", profiles.ACCELERATORS)
def test_accelerator_shapes_are_consistent(key: str) -> None:
    board = profiles.accelerator(key)
    assert board.product.startswith("NVIDIA-")
    assert len(board.gpu_pci) >= board.gpus_per_node
    assert len(set(board.gpu_pci)) == len(board.gpu_pci)
    assert board.architecture in ("amd64", "arm64")
    assert set(board.instance_types) <= set(profiles.SERVICES)
    assert all(it.cpu > 0 and it.memory_gib > 0 for it in board.instance_types.values())
    major, minor = board.compute_capability.split(".")
    assert major.isdigit() and minor.isdigit()
    if board.nvlink_domain_max_nodes is not None:
        assert board.nodes_per_rack <= board.nvlink_domain_max_nodes


def test_instance_type_falls_back_to_a_synthetic_one() -> None:
    h100 = profiles.accelerator("h100")
    assert h100.instance_type("eks", 8).name == "p5.48xlarge"
    assert h100.instance_type("kind", 8).name == "dsx-sim.h100x8"
    assert h100.instance_type("eks", 4).name == "dsx-sim.h100x4"


def test_unknown_accelerator_names_the_allowed_values() -> None:
    with pytest.raises(errors.BadInputError, match="allowed values: a100, b200, gb200, h100, h200, l40s"):
        profiles.accelerator("v100")


def test_kernel_messages_cover_the_fatal_xids_monitors_act_on() -> None:
    messages = profiles.kernel_messages()
    for code in (13, 31, 45, 48, 63, 64, 74, 79, 94, 95, 119, 154):
        assert code in messages["xid"]
    assert set(messages["sxid"]) == {12028, 20034}
