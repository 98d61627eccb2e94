"""A pure-Python stand-in for libnvidia-ml.so, driven through the real nvidia-ml-py code.

Why here and not a mock of our own wrapper: pynvml resolves every C entry point with
`getattr(pynvml.nvmlLib, name)` and skips loading the shared library when `nvmlLib` is
already set. Installing a `FakeNvmlLibrary` there means the monitor's calls run through
nvidia-ml-py's real marshalling (ctypes structs, `byref` out-parameters, return-code to
exception mapping); only the C side is replaced. Out-parameters arrive as `byref(...)`
objects whose `._obj` is the ctypes value to fill in.

Tests (and demos without a GPU) script the state of each `FakeGpu` and queue Xid events;
`installed(library)` swaps it in for the duration of a `with` block.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pynvml

# NVML return codes, typed for the entry points below
SUCCESS: int = pynvml.NVML_SUCCESS
NOT_SUPPORTED: int = pynvml.NVML_ERROR_NOT_SUPPORTED
GPU_IS_LOST: int = pynvml.NVML_ERROR_GPU_IS_LOST
INVALID_ARGUMENT: int = pynvml.NVML_ERROR_INVALID_ARGUMENT
TIMEOUT: int = pynvml.NVML_ERROR_TIMEOUT
INSUFFICIENT_SIZE: int = pynvml.NVML_ERROR_INSUFFICIENT_SIZE


@dataclass
class FakeGpu:
    """Scriptable state of one GPU; `None` for a feature means NVML_ERROR_NOT_SUPPORTED."""

    uuid: str
    pci_bus_id: str
    """As NVML reports it: 8-digit domain, upper case, e.g. "00000000:3B:00.0"."""
    name: str = "NVIDIA H100 80GB HBM3"
    ecc_volatile: dict[int, int] = field(default_factory=dict)
    """NVML_MEMORY_ERROR_TYPE_* → volatile count."""
    ecc_aggregate: dict[int, int] = field(default_factory=dict)
    remapped_rows: tuple[int, int, int, int] | None = (0, 0, 0, 0)
    """(correctable, uncorrectable, pending, failure); None on pre-Ampere GPUs."""
    retired_pages: dict[int, list[int]] | None = None
    """NVML_PAGE_RETIREMENT_CAUSE_* → page addresses; None where page retirement is not supported."""
    retired_pages_pending: bool = False
    clock_event_reasons: int = 0
    nvlink_active: list[bool] = field(default_factory=list)
    """One entry per NVLink; links past the end are not supported."""
    nvlink_errors: dict[tuple[int, int], int] = field(default_factory=dict)
    """(link, NVML_NVLINK_ERROR_*) → counter."""
    xid_events_supported: bool = True
    lost: bool = False
    """Every call for this GPU fails with NVML_ERROR_GPU_IS_LOST."""


class FakeNvmlLibrary:
    """The NVML C entry points the dsx GPU monitor uses, over a list of `FakeGpu`."""

    def __init__(self, gpus: list[FakeGpu]) -> None:
        self.gpus = gpus
        self.calls: list[str] = []
        self._lock = threading.Lock()
        self._handles = [pynvml.struct_c_nvmlDevice_t() for _ in gpus]
        self._event_sets: dict[int, _EventSet] = {}
        self.initialized = False
        self.init_error: int | None = None
        """An NVML return code for nvmlInit to fail with (e.g. NVML_ERROR_DRIVER_NOT_LOADED)."""

    def inject_xid(self, index: int, xid: int) -> None:
        """Queue an Xid critical error for GPU `index` on every event set it is registered with."""
        with self._lock:
            for event_set in self._event_sets.values():
                if index in event_set.devices:
                    event_set.queue.append((index, pynvml.nvmlEventTypeXidCriticalError, xid))

    # -- plumbing (an entry point not defined here reads as a missing symbol to pynvml) -------
    def _gpu(self, handle: Any) -> tuple[int, FakeGpu] | int:
        """The GPU behind a handle, or an NVML error code."""
        if not handle:
            return INVALID_ARGUMENT
        address = ctypes.addressof(handle.contents)
        for index, own in enumerate(self._handles):
            if ctypes.addressof(own) == address:
                gpu = self.gpus[index]
                return GPU_IS_LOST if gpu.lost else (index, gpu)
        return INVALID_ARGUMENT

    def _record(self, name: str) -> None:
        self.calls.append(name)

    # -- init --------------------------------------------------------------------------------
    def nvmlInitWithFlags(self, flags: int) -> int:
        self._record("nvmlInitWithFlags")
        if self.init_error is not None:
            return self.init_error
        self.initialized = True
        return SUCCESS

    def nvmlShutdown(self) -> int:
        self._record("nvmlShutdown")
        self.initialized = False
        return SUCCESS

    # -- devices -----------------------------------------------------------------------------
    def nvmlDeviceGetCount_v2(self, count: Any) -> int:
        self._record("nvmlDeviceGetCount_v2")
        count._obj.value = len(self.gpus)
        return SUCCESS

    def nvmlDeviceGetHandleByIndex_v2(self, index: Any, device: Any) -> int:
        self._record("nvmlDeviceGetHandleByIndex_v2")
        position = index.value
        if not 0 <= position < len(self.gpus):
            return INVALID_ARGUMENT
        if self.gpus[position].lost:
            return GPU_IS_LOST
        device._obj.contents = self._handles[position]
        return SUCCESS

    def nvmlDeviceGetUUID(self, handle: Any, buffer: Any, size: Any) -> int:
        found = self._gpu(handle)
        if isinstance(found, int):
            return found
        buffer.value = found[1].uuid.encode()
        return SUCCESS

    def nvmlDeviceGetPciInfo_v3(self, handle: Any, info: Any) -> int:
        found = self._gpu(handle)
        if isinstance(found, int):
            return found
        bus_id = found[1].pci_bus_id
        info._obj.busId = bus_id.encode()
        info._obj.busIdLegacy = bus_id.encode()[: pynvml.NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE - 1]
        domain, bus, rest = bus_id.split(":")
        info._obj.domain, info._obj.bus, info._obj.device = int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
        return SUCCESS

    # -- memory errors -----------------------------------------------------------------------
    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: Any, counter_type: Any, count: Any) -> int:
        found = self._gpu(handle)
        if isinstance(found, int):
            return found
        gpu = found[1]
        table = gpu.ecc_volatile if counter_type.value == pynvml.NVML_VOLATILE_ECC else gpu.ecc_aggregate
        count._obj.value = table.get(error_type.value, 0)
        return SUCCESS

    def nvmlDeviceGetRemappedRows(self, handle: Any, corr: Any, unc: Any, pending: Any, failure: Any) -> int:
        found = self._gpu(handle)
        if isinstance(found, int):
            return found
        rows = found[1].remapped_rows
        if rows is None:
            return NOT_SUPPORTED
        corr._obj.value, unc._obj.value, pending._obj.value, failure._obj.value = rows
        return SUCCESS

    def nvmlDeviceGetRetiredPages(self, handle: Any, cause: Any, count: Any, pages: Any) -> int:
        found = self._gpu(handle)
        if isinstance(found, int):
            return found
        table = found[1].retired_pages
        if table is None:
            return NOT_SUPPORTED
        addresses = table.get(cause.value, [])
        if pages is None or count._obj.value < len(addresses):
            count._obj.value = len(addresses)
            return INSUFFICIENT_SIZE if addresses else SUCCESS
        for slot, address in enumerate(addresses):
            pages[slot] = address
        count._obj.value = len(addresses)
        return SUCCESS

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: Any, pending: Any) -> int:
        found = self._gpu(handle)
        if isinstance(found, int):
            return found
        if found[1].retired_pages is None:
            return NOT_SUPPORTED
        pending._obj.value = int(found[1].retired_pages_pending)
        return SUCCESS

    # -- clocks ------------------------------------------------------------------------------
    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any, reasons: Any) -> int:
        found = self._gpu(handle)
        if isinstance(found, int):
            return found
        reasons._obj.value = found[1].clock_event_reasons
        return SUCCESS

    # -- NVLink ------------------------------------------------------------------------------
    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int, active: Any) -> int:
        found = self._gpu(handle)
        if isinstance(found, int):
            return found
        links = found[1].nvlink_active
        if not 0 <= link < len(links):
            return NOT_SUPPORTED
        active._obj.value = pynvml.NVML_FEATURE_ENABLED if links[link] else pynvml.NVML_FEATURE_DISABLED
        return SUCCESS

    def nvmlDeviceGetNvLinkErrorCounter(self, handle: Any, link: int, counter: int, value: Any) -> int:
        found = self._gpu(handle)
        if isinstance(found, int):
            return found
        if not 0 <= link < len(found[1].nvlink_active):
            return NOT_SUPPORTED
        value._obj.value = found[1].nvlink_errors.get((link, counter), 0)
        return SUCCESS

    # -- events ------------------------------------------------------------------------------
    def nvmlEventSetCreate(self, event_set: Any) -> int:
        with self._lock:
            handle = pynvml.struct_c_nvmlEventSet_t()
            event_set._obj.contents = handle
            self._event_sets[ctypes.addressof(handle)] = _EventSet(handle)
        return SUCCESS

    def _event_set(self, event_set: Any) -> _EventSet | None:
        return self._event_sets.get(ctypes.addressof(event_set.contents)) if event_set else None

    def nvmlDeviceRegisterEvents(self, handle: Any, event_types: Any, event_set: Any) -> int:
        found = self._gpu(handle)
        if isinstance(found, int):
            return found
        index, gpu = found
        target = self._event_set(event_set)
        if target is None:
            return INVALID_ARGUMENT
        if not gpu.xid_events_supported:
            return NOT_SUPPORTED
        with self._lock:
            target.devices.add(index)
        return SUCCESS

    def nvmlEventSetWait_v2(self, event_set: Any, data: Any, timeout_ms: Any) -> int:
        target = self._event_set(event_set)
        if target is None:
            return INVALID_ARGUMENT
        with self._lock:
            if not target.queue:
                return TIMEOUT
            index, event_type, value = target.queue.popleft()
        data._obj.device = ctypes.pointer(self._handles[index])
        data._obj.eventType = event_type
        data._obj.eventData = value
        return SUCCESS

    def nvmlEventSetFree(self, event_set: Any) -> int:
        with self._lock:
            removed = self._event_sets.pop(ctypes.addressof(event_set.contents), None) if event_set else None
        return SUCCESS if removed is not None else INVALID_ARGUMENT


@dataclass
class _EventSet:
    handle: Any
    devices: set[int] = field(default_factory=set)
    queue: deque[tuple[int, int, int]] = field(default_factory=deque)


@contextlib.contextmanager
def installed(library: FakeNvmlLibrary) -> Iterator[FakeNvmlLibrary]:
    """Make pynvml call `library` inside the block; restores the previous library after."""
    previous = pynvml.nvmlLib
    pynvml.nvmlLib = library
    pynvml._nvmlGetFunctionPointer_cache.clear()  # it caches resolved entry points by name
    try:
        yield library
    finally:
        pynvml.nvmlLib = previous
        pynvml._nvmlGetFunctionPointer_cache.clear()
