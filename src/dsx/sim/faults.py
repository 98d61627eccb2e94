"""Faults `dsx sim inject` puts on a simulated node, for health monitoring to find.

    not-ready                   the node reports Ready=False (a kwok stage, driven by an annotation)
    ready                       clears not-ready; the node reports Ready=True again
    condition:TYPE=STATUS[:REASON]   sets a node condition, e.g. condition:GpuHealthy=False
    xid:CODE  (or xidCODE)      appends an NVRM Xid line to the node's kernel log, e.g. xid:79
    sxid:CODE (or sxidCODE)     appends an NVSwitch SXid line, e.g. sxid:20034

Kernel-log lines use the `dmesg --decode --time-format=iso` shape of real driver output
(`kern  :warn  : 2025-01-21T04:41:44,283390+00:00 NVRM: Xid (PCI:0000:38:00): 13, ...`),
appended to `<state>/nodes/<node>/kern.log`, which a log monitor can follow.
"""

from __future__ import annotations

import datetime
import enum
import re
from dataclasses import dataclass
from typing import Any

from dsx import errors
from dsx.sim import nodes, profiles
from dsx.sim.cluster import SimCluster
from dsx.sim.remediation import NOT_READY_ANNOTATION

FAULT_FORMS = (
    "not-ready",
    "ready",
    "condition:TYPE=True|False|Unknown[:REASON]",
    "xid:CODE",
    "sxid:CODE",
)
_CONDITION = re.compile(r"^condition:([A-Za-z][A-Za-z0-9]*)=(True|False|Unknown)(?::([A-Za-z][A-Za-z0-9]*))?$")
_LOG_CODE = re.compile(r"^(xid|sxid):?(\d{1,5})$")
WORKLOAD_PID = 48213
WORKLOAD_PROCESS = "python3"


class FaultKind(enum.StrEnum):
    NOT_READY = "not-ready"
    READY = "ready"
    CONDITION = "condition"
    XID = "xid"
    SXID = "sxid"


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    code: int | None = None
    condition_type: str | None = None
    condition_status: str | None = None
    reason: str | None = None

    @property
    def writes_kernel_log(self) -> bool:
        return self.kind in (FaultKind.XID, FaultKind.SXID)


def parse(text: str) -> Fault:
    """A fault from its command-line form; BadInputError lists the accepted forms."""
    value = text.strip()
    if value == FaultKind.NOT_READY.value:
        return Fault(FaultKind.NOT_READY)
    if value == FaultKind.READY.value:
        return Fault(FaultKind.READY)
    match = _CONDITION.match(value)
    if match:
        return Fault(FaultKind.CONDITION, condition_type=match[1], condition_status=match[2], reason=match[3])
    match = _LOG_CODE.match(value.lower())
    if match:
        return Fault(FaultKind(match[1]), code=int(match[2]))
    raise errors.BadInputError(errors.allowed_values_message("dsx sim inject", "fault", text, FAULT_FORMS))


def _stamp(when: datetime.datetime) -> str:
    """dmesg's ISO form: comma before the microseconds, numeric UTC offset."""
    return when.strftime("%Y-%m-%dT%H:%M:%S,%f") + when.strftime("%z")[:3] + ":" + when.strftime("%z")[3:]


def kernel_line(fault: Fault, board: profiles.Accelerator, *, gpu: int, when: datetime.datetime) -> str:
    """One kernel-log line for an Xid or SXid fault on GPU (or NVSwitch) number `gpu`."""
    messages: dict[str, Any] = profiles.kernel_messages()
    if fault.kind is FaultKind.XID:
        if not 0 <= gpu < len(board.gpu_pci):
            raise errors.BadInputError(
                f"dsx sim inject: gpu: {gpu} is out of range; allowed: 0..{len(board.gpu_pci) - 1}"
            )
        template = messages["xid"].get(fault.code, messages["generic"])
        text = template.format(pid=WORKLOAD_PID, process=WORKLOAD_PROCESS, gpu=gpu)
        return f"kern  :warn  : {_stamp(when)} NVRM: Xid (PCI:{board.gpu_pci[gpu]}): {fault.code}, {text}"
    if fault.kind is FaultKind.SXID:
        if not board.nvswitch_pci:
            raise errors.BadInputError(f"dsx sim inject: {board.key} nodes have no NVSwitch; sxid faults do not apply")
        switch = gpu % len(board.nvswitch_pci)
        template = messages["sxid"].get(fault.code, messages["generic_sxid"])
        return (
            f"kern  :err   : {_stamp(when)} nvidia-nvswitch{switch}: SXid (PCI:{board.nvswitch_pci[switch]}): "
            f"{fault.code}, {template.format()}"
        )
    raise errors.InternalError(f"fault {fault.kind} writes no kernel line")


@dataclass(frozen=True)
class Injection:
    node: str
    fault: str
    actions: tuple[str, ...]
    """What was done (or, with dry_run, would be done), one line each."""
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "fault": self.fault, "actions": list(self.actions), "dryRun": self.dry_run}


def inject(
    cluster: SimCluster,
    node: str,
    fault_text: str,
    *,
    count: int = 1,
    gpu: int = 0,
    dry_run: bool = False,
    when: datetime.datetime | None = None,
) -> Injection:
    fault = parse(fault_text)
    if count < 1:
        raise errors.BadInputError(f"dsx sim inject: count: {count} is out of range; allowed: 1 or more")
    if count != 1 and not fault.writes_kernel_log:
        raise errors.BadInputError(f"dsx sim inject: count: applies to xid and sxid faults only, not {fault.kind}")
    state = cluster.load_state()
    if state is None:
        raise errors.NotFoundError(f"no simulated cluster named {cluster.name!r}; start it with `dsx sim up`")
    names = [n.name for n in nodes.layout(state.options)]
    if node not in names:
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise errors.NotFoundError(f"dsx sim inject: node {node!r} is not in cluster {cluster.name!r} ({shown})")

    if fault.writes_kernel_log:
        board = profiles.accelerator(state.options.accelerator)
        moment = when or datetime.datetime.now(datetime.UTC)
        lines = [
            kernel_line(fault, board, gpu=gpu, when=moment + datetime.timedelta(microseconds=i)) for i in range(count)
        ]
        path = cluster.kernel_log(node)
        if not dry_run:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                handle.writelines(line + "\n" for line in lines)
        return Injection(node, fault_text, tuple(f"append to {path}: {line}" for line in lines), dry_run)

    if fault.kind is FaultKind.CONDITION:
        assert fault.condition_type and fault.condition_status
        reason = fault.reason or f"{fault.condition_type}{fault.condition_status}"
        action = f"set condition {fault.condition_type}={fault.condition_status} (reason {reason})"
        if not dry_run:
            with cluster.client() as kube:
                kube.set_node_condition(
                    node,
                    fault.condition_type,
                    fault.condition_status,
                    reason=reason,
                    message="fault injected by dsx sim",
                )
        return Injection(node, fault_text, (action,), dry_run)

    value = "true" if fault.kind is FaultKind.NOT_READY else None
    action = (
        f"annotate {NOT_READY_ANNOTATION}=true (kwok reports Ready=False)"
        if value
        else f"remove {NOT_READY_ANNOTATION} (kwok reports Ready=True)"
    )
    if not dry_run:
        with cluster.client() as kube:
            kube.annotate_node(node, {NOT_READY_ANNOTATION: value})
    return Injection(node, fault_text, (action,), dry_run)
