"""Which transports NCCL used, read from its `NCCL_DEBUG=INFO` lines.

A run can finish with a clean table and still be wrong: without its RDMA plugin NCCL falls back
to TCP sockets and says so only at INFO level (a generic MPI run measured ~3 GB/s over TCP where
the tuned one measured 489 GB/s over EFA on the same nodes, AICR issue 2689). Certification sets
`NCCL_DEBUG=INFO` and reads:

- the network plugin: `NCCL INFO Using network IB` (also `IBext_v6`, `IBext_v8`: HPC-X's SHARP
  plugin), `Using network Socket`, `Using network Libfabric` (`AWS Libfabric` before aws-ofi-nccl
  1.12), `Using network FasTrak` / `GPUDirectTCPX` (GCP), and the plugins' own `NET/IB : Using`,
  `NET/Socket : Using`, `NET/OFI Selected Provider is efa`;
- channel connections: `Channel 00/0 : 0[0] -> 1[1] via P2P/IPC` (also `P2P/CUMEM`, `P2P/MNNVL`,
  `P2P/direct pointer`), `via SHM/direct/direct`, `[send] via NET/IB/0/GDRDMA`,
  `via NET/Socket/0`, `via NET/AWS Libfabric/0/GDRDMA`;
- NVLink SHARP: `NVLS multicast support is available on dev 5` (not `… is not available …`),
  `NVLS comm …`.

Wording checked against NCCL 2.15–2.29 (`git show <tag>:src/…`) and real logs from public issues
(tests/data/nccl-transport/README.md). A line names a transport once; which rank printed it does
not matter, since one rank on the wrong transport slows every rank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsx.model.certification import Transport

EVIDENCE_PER_TRANSPORT = 1

_NETWORK_NAMES = (
    (re.compile(r"^IB(?:ext)?(?:_v\d+)?$", re.IGNORECASE), Transport.NET_IB),
    (re.compile(r"^Socket$", re.IGNORECASE), Transport.NET_SOCKET),
    (re.compile(r"^(?:AWS )?Libfabric$|^OFI$", re.IGNORECASE), Transport.NET_OFI),
    (re.compile(r"^(?:FasTrak|GPUDirectTCPX(?:_v\d+)?)$", re.IGNORECASE), Transport.NET_TCPX),
)
_USING_NETWORK = re.compile(r"\bNCCL INFO Using network (?P<name>[A-Za-z][\w ]*?)\s*$")
_PLUGIN_USING = re.compile(r"\bNCCL INFO NET/(?P<name>IB|Socket) : Using \[\d+\]")
_OFI_PROVIDER = re.compile(r"\bNCCL INFO NET/OFI Selected Provider is efa\b")
_TCPX_PLUGIN = re.compile(r"\bNCCL INFO NET/(?:FasTrak|GPUDirectTCPX)\b")
_CHANNEL = re.compile(r"\bNCCL INFO Channel \d+(?:/\d+)? : .*? via (?P<how>P2P|SHM|NET)/(?P<rest>[^\s/]+(?: [^\s/]+)*)")
_NVLS = re.compile(r"\bNCCL INFO (?:NVLS multicast support is available|NVLS comm )")


@dataclass(frozen=True)
class Transports:
    """What one log says NCCL used; empty when the log has no INFO lines (NCCL_DEBUG below INFO)."""

    network: frozenset[Transport] = frozenset()  # the NET plugins a communicator loaded
    connections: frozenset[Transport] = frozenset()  # how channels connected (P2P, SHM, NET/…, NVLS)
    evidence: tuple[str, ...] = ()  # one line per transport found, in the order found

    @property
    def reported(self) -> bool:
        return bool(self.network or self.connections)

    @property
    def used(self) -> frozenset[Transport]:
        return self.network | self.connections

    def describe(self) -> str:
        return ", ".join(sorted(t.value for t in self.used)) or "none reported"


def read(text: str) -> Transports:
    network: list[Transport] = []
    connections: list[Transport] = []
    evidence: dict[Transport, str] = {}

    def found(into: list[Transport], transport: Transport, line: str) -> None:
        if transport not in into:
            into.append(transport)
        evidence.setdefault(transport, line.strip())

    for line in text.splitlines():
        if "NCCL INFO" not in line:
            continue
        if match := _USING_NETWORK.search(line):
            transport = _network(match.group("name"))
            if transport is not None:
                found(network, transport, line)
        elif match := _PLUGIN_USING.search(line):
            found(network, Transport.NET_IB if match.group("name") == "IB" else Transport.NET_SOCKET, line)
        elif _OFI_PROVIDER.search(line):
            found(network, Transport.NET_OFI, line)
        elif _TCPX_PLUGIN.search(line):
            found(network, Transport.NET_TCPX, line)
        elif match := _CHANNEL.search(line):
            how = match.group("how")
            if how == "P2P":
                found(connections, Transport.P2P, line)
            elif how == "SHM":
                found(connections, Transport.SHM, line)
            else:
                transport = _network(match.group("rest"))
                if transport is not None:
                    found(connections, transport, line)
        elif _NVLS.search(line):
            found(connections, Transport.NVLS, line)
    order = [*network, *(t for t in connections if t not in network)]
    return Transports(frozenset(network), frozenset(connections), tuple(evidence[t] for t in order))


def _network(name: str) -> Transport | None:
    name = name.strip()
    for pattern, transport in _NETWORK_NAMES:
        if pattern.match(name):
            return transport
    return None
