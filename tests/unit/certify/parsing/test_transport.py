"""Area of concern: the transport NCCL used is read from its real INFO lines (network plugin and
channel connections, every wording NCCL 2.15–2.29 prints), and a run on another transport than
its platform's fails with `TransportFallback`, naming what was used and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx.certify import measure, platforms
from dsx.certify.executor import RunOutcome, WorkloadRun
from dsx.certify.parsing import transport
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog

DATA = Path(__file__).resolve().parents[3] / "data"
LINES = [
    line.split("\t")
    for line in (DATA / "nccl-transport" / "lines.tsv").read_text(encoding="utf-8").splitlines()
    if line.strip()
]
TABLE = (DATA / "certify" / "01-allreduce-h100-2node-gcp-a3mega.log").read_text().split("\n", 1)[1]
EFA_NODES = [
    model.CandidateNode(f"n{i}", allocatable_gpus=8, network_devices={"vpc.amazonaws.com/efa": 32}) for i in range(2)
]


@pytest.mark.parametrize(("expected", "line", "source"), LINES, ids=[f"{e}:{s[-24:]}" for e, _, s in LINES])
def test_a_real_info_line_names_its_transport(expected: str, line: str, source: str) -> None:
    found = transport.read(line)
    if expected == "-":
        assert not found.reported, source
    else:
        assert found.used == {model.Transport(expected)}, source
        assert found.evidence == (line.strip(),)


def test_lines_without_info_level_report_nothing() -> None:
    assert not transport.read(TABLE).reported


def _outcome(log: str, nodes: list[model.CandidateNode], category: str = "nccl-all-reduce") -> RunOutcome:
    chosen = catalog.get(category)
    fabric = platforms.fabric(nodes, accelerator="h100", scale=chosen.scale)
    run = WorkloadRun(
        f"{category}/g", chosen, tuple(n.name for n in nodes), 8, model.Timeouts(60, 60),
        program=chosen.program, fabric=fabric, accelerator="h100",
    )  # fmt: skip
    return RunOutcome(run, log, {n.name: log for n in nodes}, {n.name: 0 for n in nodes})


def _lines(kind: str) -> str:
    return "\n".join(line for expected, line, _ in LINES if expected == kind)


def test_sockets_on_an_efa_platform_fail_as_a_transport_fallback() -> None:
    """Issue 27: a run that fell back to TCP is not a slow pass; the reason says what and where."""
    judgement = measure.judge(_outcome(_lines("NET/Socket") + "\n" + TABLE, EFA_NODES), {})
    failure = judgement.failure
    assert failure is not None and failure.reason is model.Reason.TRANSPORT_FALLBACK
    assert "NET/Socket" in failure.message and "NET/OFI" in failure.message and "efa" in failure.message
    assert any("NET/Socket : Using" in line for line in failure.evidence)  # the line that shows it


def test_libfabric_on_efa_passes_and_sockets_on_plain_tcp_nodes_pass() -> None:
    efa = measure.judge(_outcome(_lines("NET/OFI") + "\n" + TABLE, EFA_NODES), {})
    assert efa.failure is None and efa.measurement.transports.network == {model.Transport.NET_OFI}
    plain = [model.CandidateNode(f"p{i}", allocatable_gpus=8) for i in range(2)]
    tcp = measure.judge(_outcome(_lines("NET/Socket") + "\n" + TABLE, plain), {})
    assert tcp.failure is None  # the TCP platform expects no RDMA plugin


def test_a_loopback_through_host_memory_on_nvlink_gpus_is_a_fallback() -> None:
    one = EFA_NODES[:1]
    shm = measure.judge(_outcome(_lines("SHM") + "\n" + TABLE, one, "nccl-loopback"), {})
    assert shm.failure is not None and shm.failure.reason is model.Reason.TRANSPORT_FALLBACK
    p2p = measure.judge(_outcome(_lines("P2P") + "\n" + _lines("NET/OFI") + "\n" + TABLE, one, "nccl-loopback"), {})
    assert p2p.failure is None  # a loaded NET plugin does not matter on one node; the GPUs talked over P2P
