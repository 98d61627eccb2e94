"""GPU monitor over NVML (nvidia-ml-py): memory errors, row remapping, retired pages, Xid
events, clock slowdowns, NVLink state and errors, and GPUs that fell off the bus.

Why NVML and not DCGM: NVML ships with every driver and needs no host engine; DCGM's
bindings are not even on PyPI. The checks mirror DCGM's health watches and their actions
(NVSentinel's `dcgmerrorsmapping.csv`): a volatile double-bit ECC error or a pending row
remap wants a GPU reset, a failed remap or too many retired pages wants support, a lost GPU
or a downed NVLink wants a restart.

Two kinds of observation:
- **conditions** (ECC, remap, retired pages, slowdown, NVLink state, GPU lost) are states.
  An event is sent when a condition changes, and on the first poll as a baseline (a healthy
  baseline is what lets the pipeline release a node after a reboot);
- **occurrences** (Xid events, NVLink error-counter increases) are sent once each.

State moves forward only on `commit`, i.e. after the store has the events.
"""

from __future__ import annotations

import contextlib
import ctypes
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pynvml

from dsx.errors import UnavailableError
from dsx.health.parsing import xid
from dsx.model.health import (
    ComponentClass,
    Entity,
    EntityType,
    HealthEvent,
    ProcessingStrategy,
    RecommendedAction,
)

AGENT = "gpu-health-monitor"
XID_CHECK = "GpuXid"

SLOWDOWN_REASONS = {
    pynvml.nvmlClocksEventReasonHwSlowdown: "HW_SLOWDOWN",
    pynvml.nvmlClocksEventReasonHwThermalSlowdown: "HW_THERMAL_SLOWDOWN",
    pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown: "HW_POWER_BRAKE_SLOWDOWN",
    pynvml.nvmlClocksEventReasonSwThermalSlowdown: "SW_THERMAL_SLOWDOWN",
}
"""Clock-event bits reported as slowdowns. Idle, application clocks and the software power
cap are normal operation and ignored."""

NVLINK_COUNTERS = {
    pynvml.NVML_NVLINK_ERROR_DL_REPLAY: "NVLINK_REPLAY_ERRORS",
    pynvml.NVML_NVLINK_ERROR_DL_RECOVERY: "NVLINK_RECOVERY_ERRORS",
    pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT: "NVLINK_CRC_FLIT_ERRORS",
    pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA: "NVLINK_CRC_DATA_ERRORS",
}

XidVerdict = Callable[[int], xid.Verdict]
"""Xid code → what it means (action, fatality, NVIDIA's resolution bucket)."""


def catalog_verdict(code: int) -> xid.Verdict:
    """The Xid catalog's verdict for a code NVML reported (NVML gives no message text)."""
    return xid.default_catalog().classify(xid.Family.XID, code, "")


@dataclass(frozen=True)
class NvmlSettings:
    retired_pages_limit: int = 60
    """Retired pages (single- plus double-bit) at which a pre-Ampere GPU needs replacing (DCGM's limit)."""
    expected_nvlinks: int | None = None
    """Links per GPU that must be up; None: any link seen up before must stay up."""
    slowdown_strategy: ProcessingStrategy = ProcessingStrategy.STORE_AND_ANALYSE
    """Slowdowns flap with load and temperature: recorded and analysed, never acted on alone."""


@dataclass(frozen=True)
class _Condition:
    healthy: bool
    fatal: bool
    action: RecommendedAction
    codes: tuple[str, ...]
    message: str
    entities: tuple[Entity, ...] = ()
    strategy: ProcessingStrategy = ProcessingStrategy.EXECUTE_REMEDIATION

    def same_as(self, other: _Condition | None) -> bool:
        return other is not None and (self.healthy, self.codes, self.entities) == (
            other.healthy,
            other.codes,
            other.entities,
        )


def _ok(message: str) -> _Condition:
    return _Condition(True, False, RecommendedAction.NONE, (), message)


@dataclass
class _Gpu:
    index: int
    handle: Any
    uuid: str
    pci: str

    def entities(self) -> tuple[Entity, ...]:
        """Index, UUID and PCI address; a GPU lost before start has only its index."""
        found = [(EntityType.GPU, str(self.index)), (EntityType.GPU_UUID, self.uuid), (EntityType.PCI, self.pci)]
        return tuple(Entity(kind, value) for kind, value in found if value)


@dataclass
class _Pending:
    conditions: dict[tuple[str, int], _Condition] = field(default_factory=dict)
    counters: dict[tuple[int, int, int], int] = field(default_factory=dict)
    links_seen_up: dict[int, set[int]] = field(default_factory=dict)
    xids: list[HealthEvent] = field(default_factory=list)


class NvmlMonitor:
    """HealthSource over NVML for the GPUs of one node."""

    agent = AGENT

    def __init__(
        self,
        node_name: str,
        *,
        xid_verdict: XidVerdict = catalog_verdict,
        settings: NvmlSettings = NvmlSettings(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.node_name = node_name
        self._xid_verdict = xid_verdict
        self._settings = settings
        self._clock = clock
        self._committed = _Pending()
        self._pending = _Pending()
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise UnavailableError(f"NVML: cannot initialise on node {node_name}: {exc}") from exc
        self._gpus = [self._open_gpu(index) for index in range(pynvml.nvmlDeviceGetCount())]
        self._event_set = pynvml.nvmlEventSetCreate()
        for gpu in self._gpus:
            if gpu.handle is None:
                continue
            try:
                pynvml.nvmlDeviceRegisterEvents(gpu.handle, pynvml.nvmlEventTypeXidCriticalError, self._event_set)
            except pynvml.NVMLError_NotSupported:
                continue

    def _open_gpu(self, index: int) -> _Gpu:
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
            pci = canonical_pci(_text(pynvml.nvmlDeviceGetPciInfo(handle).busId))
        except pynvml.NVMLError_GpuIsLost:
            return _Gpu(index, None, "", "")
        return _Gpu(index, handle, uuid, pci)

    # -- HealthSource ------------------------------------------------------------------------
    def poll(self) -> list[HealthEvent]:
        now = datetime.fromtimestamp(self._clock(), UTC)
        pending = _Pending(
            conditions=dict(self._committed.conditions),
            counters=dict(self._committed.counters),
            links_seen_up={k: set(v) for k, v in self._committed.links_seen_up.items()},
            xids=list(self._pending.xids),  # drained from NVML, not yet stored
        )
        events: list[HealthEvent] = []
        for gpu in self._gpus:
            conditions, occurrences = self._observe(gpu, pending, now)
            for check, condition in conditions.items():
                key = (check, gpu.index)
                if condition.same_as(pending.conditions.get(key)):
                    continue
                pending.conditions[key] = condition
                events.append(self._event(gpu, check, condition, now))
            events.extend(occurrences)
        pending.xids.extend(self._xid_events(now))
        events.extend(pending.xids)
        self._pending = pending
        return events

    def commit(self) -> None:
        self._pending.xids = []
        self._committed = self._pending

    def close(self) -> None:
        pynvml.nvmlEventSetFree(self._event_set)
        pynvml.nvmlShutdown()

    # -- conditions --------------------------------------------------------------------------
    def _observe(self, gpu: _Gpu, pending: _Pending, now: datetime) -> tuple[dict[str, _Condition], list[HealthEvent]]:
        """The GPU's conditions and new occurrences; a lost GPU reports only that (the rest keep their state)."""
        if gpu.handle is None:
            return {"GpuLost": _lost(gpu)}, []
        try:
            return self._conditions(gpu, pending), self._nvlink_errors(gpu, pending, now)
        except pynvml.NVMLError_GpuIsLost:
            return {"GpuLost": _lost(gpu)}, []

    def _conditions(self, gpu: _Gpu, pending: _Pending) -> dict[str, _Condition]:
        found = {"GpuLost": _ok("GPU is reachable")}
        found["GpuEccVolatile"] = self._ecc_volatile(gpu)
        found["GpuEccAggregate"] = self._ecc_aggregate(gpu)
        for check, probe in (("GpuRowRemap", self._row_remap), ("GpuRetiredPages", self._retired_pages)):
            with contextlib.suppress(pynvml.NVMLError_NotSupported):
                found[check] = probe(gpu)
        found["GpuClockSlowdown"] = self._slowdown(gpu)
        nvlink = self._nvlink_state(gpu, pending)
        if nvlink is not None:
            found["GpuNvlinkState"] = nvlink
        return found

    def _ecc_volatile(self, gpu: _Gpu) -> _Condition:
        uncorrected = _ecc(gpu, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)
        if uncorrected:
            return _Condition(
                False,
                True,
                RecommendedAction.COMPONENT_RESET,
                ("ECC_DBE_VOLATILE",),
                f"{uncorrected} uncorrectable (double-bit) ECC errors since the last driver load",
            )
        return _ok("no uncorrectable ECC errors since the last driver load")

    def _ecc_aggregate(self, gpu: _Gpu) -> _Condition:
        uncorrected = _ecc(gpu, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC)
        if uncorrected:
            return _Condition(
                False,
                False,
                RecommendedAction.NONE,
                ("ECC_DBE_AGGREGATE",),
                f"{uncorrected} uncorrectable ECC errors over the GPU's lifetime",
                strategy=ProcessingStrategy.STORE_AND_ANALYSE,
            )
        return _ok("no uncorrectable ECC errors over the GPU's lifetime")

    def _row_remap(self, gpu: _Gpu) -> _Condition:
        corrected, uncorrected, pending, failure = pynvml.nvmlDeviceGetRemappedRows(gpu.handle)
        counts = f"{corrected} correctable and {uncorrected} uncorrectable rows remapped"
        if failure:
            return _Condition(
                False,
                True,
                RecommendedAction.CONTACT_SUPPORT,
                ("ROW_REMAP_FAILURE",),
                f"row remapping failed; {counts}",
            )
        if pending:
            return _Condition(
                False,
                True,
                RecommendedAction.COMPONENT_RESET,
                ("ROW_REMAP_PENDING",),
                f"a row remap is pending until the GPU is reset; {counts}",
            )
        return _ok(counts)

    def _retired_pages(self, gpu: _Gpu) -> _Condition:
        retired = sum(
            len(pynvml.nvmlDeviceGetRetiredPages(gpu.handle, cause))
            for cause in (
                pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
            )
        )
        if retired >= self._settings.retired_pages_limit:
            return _Condition(
                False,
                True,
                RecommendedAction.CONTACT_SUPPORT,
                ("RETIRED_PAGES_LIMIT",),
                f"{retired} retired pages reach the limit of {self._settings.retired_pages_limit}",
            )
        if pynvml.nvmlDeviceGetRetiredPagesPendingStatus(gpu.handle):
            return _Condition(
                False,
                True,
                RecommendedAction.COMPONENT_RESET,
                ("RETIRED_PAGES_PENDING",),
                f"a page retirement is pending until the GPU is reset; {retired} pages retired",
            )
        return _ok(f"{retired} pages retired")

    def _slowdown(self, gpu: _Gpu) -> _Condition:
        reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(gpu.handle)
        codes = tuple(code for bit, code in SLOWDOWN_REASONS.items() if reasons & bit)
        if codes:
            return _Condition(
                False,
                False,
                RecommendedAction.NONE,
                codes,
                f"clocks slowed down: {', '.join(codes)} (reasons 0x{reasons:x})",
                strategy=self._settings.slowdown_strategy,
            )
        return _ok("no hardware or thermal clock slowdown")

    def _links(self, gpu: _Gpu) -> list[bool]:
        states: list[bool] = []
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                states.append(pynvml.nvmlDeviceGetNvLinkState(gpu.handle, link) == pynvml.NVML_FEATURE_ENABLED)
            except pynvml.NVMLError_NotSupported:
                break
        return states

    def _nvlink_state(self, gpu: _Gpu, pending: _Pending) -> _Condition | None:
        states = self._links(gpu)
        if not states:
            return None
        seen_up = pending.links_seen_up.setdefault(gpu.index, set())
        seen_up.update(link for link, up in enumerate(states) if up)
        expected = self._settings.expected_nvlinks
        required = set(range(expected)) if expected is not None else seen_up
        down = sorted(link for link in required if link >= len(states) or not states[link])
        if down:
            return _Condition(
                False,
                True,
                RecommendedAction.RESTART_VM,
                ("NVLINK_DOWN",),
                f"NVLink {', '.join(map(str, down))} down",
                entities=tuple(Entity(EntityType.NVLINK, str(link)) for link in down),
            )
        return _ok(f"{sum(states)} NVLinks up")

    # -- occurrences -------------------------------------------------------------------------
    def _nvlink_errors(self, gpu: _Gpu, pending: _Pending, now: datetime) -> list[HealthEvent]:
        events: list[HealthEvent] = []
        for link in range(len(self._links(gpu))):
            grown: dict[str, int] = {}
            for counter, code in NVLINK_COUNTERS.items():
                value = pynvml.nvmlDeviceGetNvLinkErrorCounter(gpu.handle, link, counter)
                key = (gpu.index, link, counter)
                previous = pending.counters.get(key)
                pending.counters[key] = value
                if previous is not None and value > previous:
                    grown[code] = value - previous
            if grown:
                described = ", ".join(f"{code} +{delta}" for code, delta in grown.items())
                condition = _Condition(
                    False,
                    False,
                    RecommendedAction.NONE,
                    tuple(grown),
                    f"NVLink {link} error counters grew: {described}",
                    entities=(Entity(EntityType.NVLINK, str(link)),),
                    strategy=ProcessingStrategy.STORE_AND_ANALYSE,
                )
                events.append(self._event(gpu, "GpuNvlinkErrors", condition, now))
        return events

    def _xid_events(self, now: datetime) -> list[HealthEvent]:
        events: list[HealthEvent] = []
        by_address = {_address(gpu.handle): gpu for gpu in self._gpus if gpu.handle is not None}
        while True:
            try:
                data = pynvml.nvmlEventSetWait_v2(self._event_set, 0)
            except pynvml.NVMLError_Timeout:
                return events
            if data.eventType != pynvml.nvmlEventTypeXidCriticalError:
                continue
            gpu = by_address.get(_address(data.device))
            if gpu is None:
                continue
            code = int(data.eventData)
            verdict = self._xid_verdict(code)
            condition = _Condition(
                False, verdict.is_fatal, verdict.recommended_action, (str(code),), f"NVML reported Xid {code}"
            )
            event = replace(
                self._event(gpu, XID_CHECK, condition, now), metadata={"immediate_action": verdict.immediate_action}
            )
            # two identical Xids in one poll are two occurrences: number them
            events.append(_numbered(event, sum(1 for e in events if e.error_codes == event.error_codes)))

    def _event(self, gpu: _Gpu, check: str, condition: _Condition, now: datetime) -> HealthEvent:
        return HealthEvent(
            agent=AGENT,
            component_class=ComponentClass.GPU,
            check_name=check,
            node_name=self.node_name,
            generated_at=now,
            is_fatal=condition.fatal,
            is_healthy=condition.healthy,
            message=condition.message,
            recommended_action=condition.action,
            error_codes=condition.codes,
            entities=gpu.entities() + condition.entities,
            processing_strategy=condition.strategy,
        )


def canonical_pci(bus_id: str) -> str:
    """NVML's "00000000:3B:00.0" → "0000:3b:00.0" (the kernel's and the HealthEvent's spelling)."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{int(domain, 16):04x}:{rest}" if rest else bus_id.lower()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _ecc(gpu: _Gpu, error_type: int, counter_type: int) -> int:
    try:
        return int(pynvml.nvmlDeviceGetTotalEccErrors(gpu.handle, error_type, counter_type))
    except pynvml.NVMLError_NotSupported:
        return 0


def _lost(gpu: _Gpu) -> _Condition:
    return _Condition(
        False, True, RecommendedAction.RESTART_BM, ("GPU_LOST",), f"GPU {gpu.index} has fallen off the bus (NVML)"
    )


def _address(handle: Any) -> int:
    return ctypes.addressof(handle.contents) if handle else 0


def _numbered(event: HealthEvent, ordinal: int) -> HealthEvent:
    if ordinal == 0:
        return event
    return replace(event, metadata={**event.metadata, "occurrence": str(ordinal)})
