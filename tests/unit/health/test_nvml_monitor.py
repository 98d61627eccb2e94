"""Area of concern: the NVML GPU monitor turns NVML readings into the right HealthEvents —
baseline, condition changes only, occurrences once, state advancing only on commit — with the
real nvidia-ml-py marshalling driven by the pure-Python fake library."""

from __future__ import annotations

from collections.abc import Iterator

import pynvml
import pytest

from dsx.errors import UnavailableError
from dsx.health.parsing import xid
from dsx.host import nvml
from dsx.model.health import EntityType, HealthEvent, ProcessingStrategy, RecommendedAction
from dsx.testing.fake_nvml import FakeGpu, FakeNvmlLibrary, installed

NOW = 1_796_000_000.0


def verdict(code: int) -> xid.Verdict:
    """Stand-in classification: 79 restarts the host, 13 is the application's."""
    known = {
        79: xid.Verdict("RESTART_BM", RecommendedAction.RESTART_BM, True, True),
        13: xid.Verdict("RESTART_APP", RecommendedAction.NONE, False, True),
    }
    return known.get(code, xid.Verdict("UNKNOWN", RecommendedAction.CONTACT_SUPPORT, True, False))


def gpu(index: int, **state: object) -> FakeGpu:
    return FakeGpu(
        uuid=f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd",
        pci_bus_id=f"00000000:{0x3B + index:02X}:00.0",
        nvlink_active=[True] * 4,
        **state,  # type: ignore[arg-type]
    )


@pytest.fixture
def library() -> Iterator[FakeNvmlLibrary]:
    lib = FakeNvmlLibrary([gpu(0), gpu(1)])
    with installed(lib):
        yield lib


@pytest.fixture
def monitor(library: FakeNvmlLibrary) -> Iterator[nvml.NvmlMonitor]:
    mon = nvml.NvmlMonitor("n3", xid_verdict=verdict, clock=lambda: NOW)
    yield mon
    mon.close()


def by_check(events: list[HealthEvent]) -> dict[tuple[str, str], HealthEvent]:
    return {(e.check_name, e.entity_values(EntityType.GPU)[0]): e for e in events}


def settle(monitor: nvml.NvmlMonitor) -> None:
    monitor.poll()
    monitor.commit()


def test_first_poll_sends_a_healthy_baseline_per_check_and_gpu(monitor: nvml.NvmlMonitor) -> None:
    events = monitor.poll()
    checks = {"GpuLost", "GpuEccVolatile", "GpuEccAggregate", "GpuRowRemap", "GpuClockSlowdown", "GpuNvlinkState"}
    assert set(by_check(events)) == {(c, g) for c in checks for g in ("0", "1")}
    assert all(e.is_healthy and not e.is_fatal for e in events)
    first = by_check(events)[("GpuRowRemap", "1")]
    assert first.entity_values(EntityType.PCI) == ("0000:3c:00.0",)
    assert first.entity_values(EntityType.GPU_UUID) == ("GPU-00000001-aaaa-bbbb-cccc-dddddddddddd",)
    assert first.node_name == "n3" and first.agent == "gpu-health-monitor"
    monitor.commit()
    assert monitor.poll() == []


def test_conditions_are_sent_when_they_change_and_when_they_clear(
    library: FakeNvmlLibrary, monitor: nvml.NvmlMonitor
) -> None:
    settle(monitor)
    library.gpus[1].remapped_rows = (2, 1, 1, 0)
    library.gpus[0].ecc_volatile[pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED] = 3
    events = by_check(monitor.poll())
    assert set(events) == {("GpuRowRemap", "1"), ("GpuEccVolatile", "0")}
    remap = events[("GpuRowRemap", "1")]
    assert (remap.is_fatal, remap.recommended_action, remap.error_codes) == (
        True,
        RecommendedAction.COMPONENT_RESET,
        ("ROW_REMAP_PENDING",),
    )
    assert "2 correctable and 1 uncorrectable rows remapped" in remap.message
    ecc = events[("GpuEccVolatile", "0")]
    assert (ecc.recommended_action, ecc.error_codes) == (RecommendedAction.COMPONENT_RESET, ("ECC_DBE_VOLATILE",))
    monitor.commit()
    assert monitor.poll() == []
    library.gpus[1].remapped_rows = (2, 1, 0, 1)
    (failed,) = monitor.poll()
    assert (failed.recommended_action, failed.error_codes) == (
        RecommendedAction.CONTACT_SUPPORT,
        ("ROW_REMAP_FAILURE",),
    )
    monitor.commit()
    library.gpus[1].remapped_rows = (3, 1, 0, 0)
    (cleared,) = monitor.poll()
    assert cleared.is_healthy and cleared.check_name == "GpuRowRemap"


def test_state_moves_only_on_commit(library: FakeNvmlLibrary, monitor: nvml.NvmlMonitor) -> None:
    settle(monitor)
    library.gpus[0].clock_event_reasons = (
        pynvml.nvmlClocksEventReasonHwThermalSlowdown | pynvml.nvmlClocksEventReasonGpuIdle
    )
    first = monitor.poll()
    again = monitor.poll()
    assert [e.check_name for e in first] == ["GpuClockSlowdown"] == [e.check_name for e in again]
    assert first == again
    assert first[0].error_codes == ("HW_THERMAL_SLOWDOWN",)
    assert first[0].processing_strategy is ProcessingStrategy.STORE_AND_ANALYSE
    assert not first[0].is_fatal and not first[0].is_healthy


def test_xid_events_are_sent_once_each_with_the_catalog_verdict(
    library: FakeNvmlLibrary, monitor: nvml.NvmlMonitor
) -> None:
    settle(monitor)
    library.inject_xid(1, 79)
    library.inject_xid(1, 79)
    library.inject_xid(0, 13)
    events = monitor.poll()
    assert [(e.check_name, e.error_codes, e.entity_values(EntityType.GPU)) for e in events] == [
        ("GpuXid", ("79",), ("1",)),
        ("GpuXid", ("79",), ("1",)),
        ("GpuXid", ("13",), ("0",)),
    ]
    assert len({e.idempotency_key for e in events}) == 3
    assert (events[0].is_fatal, events[0].recommended_action) == (True, RecommendedAction.RESTART_BM)
    assert (events[2].is_fatal, events[2].recommended_action) == (False, RecommendedAction.NONE)
    assert events[2].metadata == {"immediate_action": "RESTART_APP"}
    assert monitor.poll() == events  # not stored yet: offered again, same keys
    monitor.commit()
    assert monitor.poll() == []


def test_a_lost_gpu_is_reported_and_its_recovery_too(library: FakeNvmlLibrary, monitor: nvml.NvmlMonitor) -> None:
    settle(monitor)
    library.gpus[0].lost = True
    (lost,) = monitor.poll()
    assert (lost.check_name, lost.is_fatal, lost.recommended_action, lost.error_codes) == (
        "GpuLost",
        True,
        RecommendedAction.RESTART_BM,
        ("GPU_LOST",),
    )
    monitor.commit()
    assert monitor.poll() == []
    library.gpus[0].lost = False
    (back,) = monitor.poll()
    assert back.check_name == "GpuLost" and back.is_healthy


def test_a_gpu_lost_before_start_is_reported_without_pci_or_uuid() -> None:
    library = FakeNvmlLibrary([gpu(0, lost=True), gpu(1)])
    with installed(library):
        monitor = nvml.NvmlMonitor("n3", xid_verdict=verdict, clock=lambda: NOW)
        lost = by_check(monitor.poll())[("GpuLost", "0")]
        monitor.close()
    assert lost.is_fatal
    assert [(e.type, e.value) for e in lost.entities] == [(EntityType.GPU, "0")]
    assert HealthEvent.from_dict(lost.to_dict()) == lost


def test_nvlink_down_and_error_counters(library: FakeNvmlLibrary, monitor: nvml.NvmlMonitor) -> None:
    settle(monitor)
    library.gpus[0].nvlink_active[2] = False
    library.gpus[1].nvlink_errors[(3, pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT)] = 40
    library.gpus[1].nvlink_errors[(3, pynvml.NVML_NVLINK_ERROR_DL_REPLAY)] = 2
    events = by_check(monitor.poll())
    down = events[("GpuNvlinkState", "0")]
    assert (down.recommended_action, down.error_codes) == (RecommendedAction.RESTART_VM, ("NVLINK_DOWN",))
    assert down.entity_values(EntityType.NVLINK) == ("2",)
    counters = events[("GpuNvlinkErrors", "1")]
    assert set(counters.error_codes) == {"NVLINK_CRC_FLIT_ERRORS", "NVLINK_REPLAY_ERRORS"}
    assert "NVLINK_CRC_FLIT_ERRORS +40" in counters.message
    assert counters.entity_values(EntityType.NVLINK) == ("3",)
    assert not counters.is_fatal
    monitor.commit()
    assert monitor.poll() == []


def test_expected_nvlinks_catches_a_link_down_at_start() -> None:
    library = FakeNvmlLibrary([gpu(0)])
    library.gpus[0].nvlink_active = [True, False, True, True]
    with installed(library):
        monitor = nvml.NvmlMonitor(
            "n3", xid_verdict=verdict, settings=nvml.NvmlSettings(expected_nvlinks=4), clock=lambda: NOW
        )
        state = by_check(monitor.poll())[("GpuNvlinkState", "0")]
        monitor.close()
    assert state.is_fatal and state.entity_values(EntityType.NVLINK) == ("1",)


def test_retired_pages_on_pre_ampere_gpus() -> None:
    old = gpu(0, remapped_rows=None, retired_pages={0: [0x1000, 0x2000], 1: [0x3000]}, retired_pages_pending=True)
    library = FakeNvmlLibrary([old])
    with installed(library):
        monitor = nvml.NvmlMonitor(
            "n3", xid_verdict=verdict, settings=nvml.NvmlSettings(retired_pages_limit=4), clock=lambda: NOW
        )
        events = by_check(monitor.poll())
        monitor.commit()
        assert ("GpuRowRemap", "0") not in events
        pending = events[("GpuRetiredPages", "0")]
        assert (pending.error_codes, pending.recommended_action) == (
            ("RETIRED_PAGES_PENDING",),
            RecommendedAction.COMPONENT_RESET,
        )
        assert "3 pages retired" in pending.message
        old.retired_pages[1].append(0x4000)  # type: ignore[index]
        (limit,) = monitor.poll()
        monitor.close()
    assert (limit.error_codes, limit.recommended_action) == (
        ("RETIRED_PAGES_LIMIT",),
        RecommendedAction.CONTACT_SUPPORT,
    )


def test_the_fake_goes_through_pynvml_and_is_removed_after(library: FakeNvmlLibrary) -> None:
    monitor = nvml.NvmlMonitor("n3", xid_verdict=verdict, clock=lambda: NOW)
    monitor.close()
    assert "nvmlDeviceGetHandleByIndex_v2" in library.calls
    assert library.calls[-1] == "nvmlShutdown"
    assert pynvml.nvmlLib is library


def test_the_default_verdict_comes_from_the_xid_catalog() -> None:
    fallen, graphics = nvml.catalog_verdict(79), nvml.catalog_verdict(13)
    assert (fallen.recommended_action, fallen.is_fatal) == (RecommendedAction.RESTART_BM, True)
    assert (graphics.recommended_action, graphics.is_fatal, graphics.immediate_action) == (
        RecommendedAction.NONE,
        False,
        "RESTART_APP",
    )


def test_no_driver_is_a_one_line_unavailable_error() -> None:
    library = FakeNvmlLibrary([gpu(0)])
    library.init_error = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    with (
        installed(library),
        pytest.raises(UnavailableError, match="NVML: cannot initialise on node n3: Driver Not Loaded"),
    ):
        nvml.NvmlMonitor("n3", xid_verdict=verdict)


def test_canonical_pci() -> None:
    assert nvml.canonical_pci("00000000:3B:00.0") == "0000:3b:00.0"
    assert nvml.canonical_pci("00000009:01:00.0") == "0009:01:00.0"
