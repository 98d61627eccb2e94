"""Area of concern: nvidia-smi (text, XML, CSV) and dcgmi diag (text, JSON) samples read to the
values and verdicts their README states, fragments and cut output included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsx.errors import BadInputError
from dsx.health.parsing import dcgm_diag, gpu_reports
from dsx.health.parsing.dcgm_diag import DiagStatus
from dsx.health.parsing.gpu_reports import FindingKind
from dsx.model.health import RecommendedAction

DATA = Path(__file__).resolve().parents[3] / "data"


def read(folder: str, name: str) -> str:
    return (DATA / folder / name).read_text(encoding="utf-8")


def kinds(findings: list[gpu_reports.Finding]) -> list[FindingKind]:
    return [f.kind for f in findings]


# --- nvidia-smi -q text ---------------------------------------------------------------------------


def test_a100_remap_pending() -> None:
    report = gpu_reports.parse_smi(read("nvidia-smi", "01-a100-xid63-dram-correctable-remap-pending.txt"))
    assert report.driver_version == "510.73.08"
    (gpu,) = report.gpus
    assert (gpu.pci_bus_id, gpu.pci_bdf, gpu.product_name) == (
        "00000000:10:1C.0",
        "0000:10:1c.0",
        "NVIDIA A100-SXM4-80GB",
    )
    assert gpu.ecc == gpu_reports.EccCounts(177, 0, 177, 0, None)
    assert gpu.retired_pages == gpu_reports.RetiredPages(None, None, None)  # N/A on Ampere
    rows = gpu.remapped_rows
    assert rows is not None
    assert (rows.correctable, rows.uncorrectable, rows.pending, rows.failure) == (1, 0, True, False)
    assert rows.histogram_banks == {"max": 639, "high": 1, "partial": 0, "low": 0, "none": 0}
    findings = report.findings()
    assert kinds(findings) == [FindingKind.ECC_CORRECTABLE, FindingKind.ROW_REMAP_PENDING]
    pending = findings[1]
    assert pending.is_fatal and pending.recommended_action is RecommendedAction.COMPONENT_RESET  # reset, not RMA
    assert pending.pci_bdf == "0000:10:1c.0"
    assert not findings[0].is_fatal


def test_retired_pages_pending_blacklist_fragment() -> None:
    report = gpu_reports.parse_smi(read("nvidia-smi", "03-retired-pages-pending-blacklist.txt"))
    (gpu,) = report.gpus
    assert gpu.pci_bus_id is None
    assert gpu.retired_pages == gpu_reports.RetiredPages(2, 0, True)
    (finding,) = report.findings()
    assert finding.kind is FindingKind.RETIRED_PAGES_PENDING and finding.is_fatal


def test_old_throttle_section_with_only_idle_is_not_throttled() -> None:
    report = gpu_reports.parse_smi(read("nvidia-smi", "06-clocks-throttle-reasons-idle.txt"))
    reasons = report.gpus[0].clock_event_reasons
    assert reasons is not None
    assert reasons.active == ("idle",) and reasons.throttling == ()
    assert report.findings() == []


def test_query_gpu_csv() -> None:
    rows = gpu_reports.parse_query_csv(read("nvidia-smi", "07-query-gpu-csv-h100-vbios.txt"))
    assert rows == [
        {"name": "NVIDIA H100 80GB HBM3", "pci.bus_id": "00000000:04:00.0", "vbios_version": "96.00.89.00.01"},
        {"name": "NVIDIA H100 80GB HBM3", "pci.bus_id": "00000000:8B:00.0", "vbios_version": "96.00.89.00.01"},
    ]


def test_pre_ampere_single_and_double_bit_totals() -> None:
    text = """GPU 00000000:3B:00.0
    Product Name                    : Tesla V100-SXM2-32GB
    ECC Errors
        Volatile
            Single Bit
                Device Memory       : 4
                Total               : 4
            Double Bit
                Device Memory       : 1
                Total               : 1
        Aggregate
            Single Bit
                Total               : 9
            Double Bit
                Total               : 1
    Clocks Event Reasons
        Idle                        : Not Active
        SW Power Cap                : Active
        HW Slowdown                 : Active
            HW Thermal Slowdown     : Active
"""
    report = gpu_reports.parse_smi(text)
    gpu = report.gpus[0]
    assert gpu.ecc == gpu_reports.EccCounts(4, 1, 9, 1, None)
    assert gpu.clock_event_reasons is not None
    assert gpu.clock_event_reasons.throttling == ("sw_power_cap", "hw_slowdown", "hw_thermal_slowdown")
    assert kinds(report.findings()) == [
        FindingKind.ECC_UNCORRECTABLE,
        FindingKind.ECC_CORRECTABLE,
        FindingKind.CLOCKS_THROTTLED,
    ]


# --- nvidia-smi -q -x ----------------------------------------------------------------------------

XML = read("nvidia-smi", "10-constructed-xml-two-gpus.xml")


def test_xml_reads_like_the_text_report() -> None:
    from_xml = gpu_reports.parse_smi(XML).gpus[0]
    from_text = gpu_reports.parse_smi(read("nvidia-smi", "01-a100-xid63-dram-correctable-remap-pending.txt")).gpus[0]
    assert from_xml.pci_bdf == from_text.pci_bdf
    assert from_xml.ecc is not None and from_text.ecc is not None
    assert from_xml.ecc.volatile_correctable == from_text.ecc.volatile_correctable == 177
    assert from_xml.remapped_rows == from_text.remapped_rows


def test_xml_two_gpus() -> None:
    report = gpu_reports.parse_smi(XML)
    assert report.driver_version == "535.129.03" and report.cuda_version == "12.2"
    first, second = report.gpus
    assert first.uuid == "GPU-00000000-1111-2222-3333-444444444444"
    assert first.clock_event_reasons is not None
    assert first.clock_event_reasons.throttling == ("hw_slowdown", "hw_thermal_slowdown")
    assert second.ecc == gpu_reports.EccCounts(0, 3, 0, 3, True)
    assert second.retired_pages == gpu_reports.RetiredPages(0, 0, False)
    assert second.remapped_rows is not None and second.remapped_rows.failure is True
    assert second.clock_event_reasons is not None and second.clock_event_reasons.throttling == ()
    by_gpu = {(f.pci_bdf, f.kind): f for f in report.findings()}
    failure = by_gpu[("0000:8b:00.0", FindingKind.ROW_REMAP_FAILURE)]
    assert failure.is_fatal and failure.recommended_action is RecommendedAction.CONTACT_SUPPORT
    assert (
        by_gpu[("0000:8b:00.0", FindingKind.ECC_UNCORRECTABLE)].recommended_action is RecommendedAction.COMPONENT_RESET
    )
    assert (
        by_gpu[("0000:8b:00.0", FindingKind.SRAM_THRESHOLD_EXCEEDED)].recommended_action
        is RecommendedAction.RUN_FIELDDIAG
    )
    assert not by_gpu[("0000:10:1c.0", FindingKind.CLOCKS_THROTTLED)].is_fatal


def test_malformed_xml_is_a_clear_error() -> None:
    with pytest.raises(BadInputError, match=r"gpu\.xml: not well-formed nvidia-smi XML"):
        gpu_reports.parse_smi("<nvidia_smi_log><gpu>", source="gpu.xml")


# --- dcgmi diag ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "xml",
    [
        '<!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log><gpu id="0">&a;</gpu></nvidia_smi_log>',
        '<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><nvidia_smi_log>&e;</nvidia_smi_log>',
    ],
)
def test_xml_entities_are_refused_not_expanded(xml: str) -> None:
    with pytest.raises(BadInputError, match=r"gpu\.xml: nvidia-smi XML declares entities or a DTD"):
        gpu_reports.parse_smi(xml, source="gpu.xml")


def test_dcgm_deployment_pass_cut_table_is_incomplete_without_failures() -> None:
    report = dcgm_diag.parse_diag(read("dcgm", "01-pass-r3-deployment-dcgm3.0.4.txt"))
    assert report.count(DiagStatus.PASS) == 9 and len(report.results) == 9
    assert {r.category for r in report.results} == {"Deployment"}
    assert report.results[-1].test == "Inforom"
    assert report.complete is False
    assert kinds(report.findings()) == [FindingKind.DIAG_INCOMPLETE]
    assert not any(f.is_fatal for f in report.findings())


def test_dcgm_pcie_fail_with_wrapped_warnings() -> None:
    report = dcgm_diag.parse_diag(read("dcgm", "03-fail-r2-pcie-nvlink-down-a100-dcgm2.4.6.txt"))
    (result,) = report.results
    assert (result.category, result.test, result.status, result.gpu) == ("Integration", "PCIe", DiagStatus.FAIL, None)
    (detail,) = result.details
    for link in range(5):
        assert f"GPU 0's NvLink link {link} is currently down Run a field diagnostic on the GPU." in detail
    assert report.complete is False
    failed = report.findings()[0]
    assert failed.kind is FindingKind.DIAG_FAILED and failed.is_fatal
    assert failed.recommended_action is RecommendedAction.RUN_FIELDDIAG and failed.test == "PCIe"


def test_dcgm_cut_json_is_read_token_by_token() -> None:
    report = dcgm_diag.parse_diag(read("dcgm", "05-json-r3-all-skip-dcgm3.3.1.json.txt"))
    assert [(r.test, r.status, r.gpu) for r in report.results] == [
        ("PCIe", DiagStatus.SKIP, "0"),
        ("GPU Memory", DiagStatus.SKIP, "0"),
        ("Diagnostic", DiagStatus.SKIP, "0"),
        ("EUD Test", DiagStatus.SKIP, "0"),
        ("Targeted Stress", DiagStatus.SKIP, "0"),
    ]
    assert [r.category for r in report.results] == ["Integration", "Hardware", "Hardware", "Hardware", "Stress"]
    assert report.complete is False
    assert not any(f.is_fatal for f in report.findings())


def test_dcgm_valid_json_with_a_failure() -> None:
    document = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {"category": "Deployment", "tests": [{"name": "Persistence Mode", "results": [{"status": "Fail"}]}]},
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "GPU Memory",
                            "results": [
                                {"gpu_id": "0", "status": "Pass"},
                                {
                                    "gpu_id": "1",
                                    "status": "Fail",
                                    "warnings": [{"warning": "Pending page retirements detected", "error_id": 40}],
                                },
                            ],
                        }
                    ],
                },
            ]
        }
    }
    report = dcgm_diag.parse_diag(json.dumps(document))
    assert report.complete is True
    assert [(r.test, r.gpu, r.status) for r in report.results] == [
        ("Persistence Mode", None, DiagStatus.FAIL),
        ("GPU Memory", "0", DiagStatus.PASS),
        ("GPU Memory", "1", DiagStatus.FAIL),
    ]
    deployment, memory = report.findings()
    assert deployment.kind is FindingKind.DIAG_FAILED_DEPLOYMENT
    assert not deployment.is_fatal  # software set-up, not the GPU
    assert memory.is_fatal and memory.gpu_index == "1"
    assert "Pending page retirements detected" in memory.message


def test_dcgm_complete_text_table() -> None:
    text = """+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Deployment  --------+------------------------------------------------|
| Denylist                  | Pass                                           |
+-----  Hardware  ----------+------------------------------------------------+
| GPU Memory                | Warn - GPU: 1                                  |
| Info                      | GPU 1 throttled during the test                |
+---------------------------+------------------------------------------------+
"""
    report = dcgm_diag.parse_diag(text)
    assert report.complete is True
    assert report.results[1] == dcgm_diag.DiagResult(
        "Hardware", "GPU Memory", DiagStatus.WARN, "1", ("GPU 1 throttled during the test",)
    )
    assert kinds(report.findings()) == [FindingKind.DIAG_WARNING]


@pytest.mark.parametrize("text", ["", "no table here", '{"something": 1}', "{ not json and no tokens"])
def test_dcgm_without_results_is_a_clear_error(text: str) -> None:
    with pytest.raises(BadInputError, match=r"diag\.txt: "):
        dcgm_diag.parse_diag(text, source="diag.txt")


def test_findings_serialise() -> None:
    report = gpu_reports.parse_smi(XML)
    data = [f.to_dict() for f in report.findings()]
    assert json.loads(json.dumps(data)) == data
    assert {d["error_code"] for d in data} >= {"ROW_REMAP_PENDING", "ROW_REMAP_FAILURE"}


def test_every_finding_kind_has_a_verdict_and_fatal_ones_act() -> None:
    assert set(gpu_reports.VERDICTS) == set(FindingKind)
    for fatal, action in gpu_reports.VERDICTS.values():
        assert fatal == (action is not RecommendedAction.NONE)


def test_an_xml_fragment_without_its_root_is_read() -> None:
    """A pasted part of `nvidia-smi -q -x` (several sibling elements) reads as one GPU's sections."""
    text = read("nvidia-smi", "11-xml-fragment-a100-535-checkmk.xml").split("\n", 1)[1]
    report = gpu_reports.parse_smi(text)
    (gpu,) = report.gpus
    assert gpu.ecc == gpu_reports.EccCounts(0, 0, 0, 0)
    assert gpu.retired_pages is None or gpu.retired_pages.pending is None
    assert gpu.remapped_rows is None or gpu.remapped_rows.pending is None
    assert report.findings() == []


def test_a_single_gpu_element_keeps_its_bus_id() -> None:
    whole = read("nvidia-smi", "10-constructed-xml-two-gpus.xml")
    start = whole.index("<gpu id=")
    end = whole.index("</gpu>", start) + len("</gpu>")
    report = gpu_reports.parse_smi(whole[start:end])
    assert [g.pci_bus_id for g in report.gpus] == ["00000000:10:1C.0"]


def test_xml_that_is_not_a_fragment_either_is_refused_naming_the_source() -> None:
    with pytest.raises(BadInputError, match=r"smi\.xml: not well-formed nvidia-smi XML"):
        gpu_reports.parse_smi("<ecc_errors><volatile>", source="smi.xml")


def test_dcgm4_per_gpu_rows_give_one_result_per_gpu() -> None:
    """DCGM 4.x prints a test's summary row, then `|  | GPU0: Pass |` per GPU: the GPUs' rows replace the summary."""
    report = dcgm_diag.parse_diag(read("dcgm", "06-pass-per-gpu-rows-dcgm4.2.3.txt"))
    assert [(r.category, r.test, r.gpu, r.status) for r in report.results] == [
        ("Deployment", "software", str(gpu), DiagStatus.PASS) for gpu in range(4)
    ]
    assert not report.complete  # the excerpt stops at the Hardware border
    assert [f.kind for f in report.findings()] == [FindingKind.DIAG_INCOMPLETE]


def test_a_failing_gpu_row_names_its_gpu() -> None:
    text = read("dcgm", "06-pass-per-gpu-rows-dcgm4.2.3.txt").replace(
        "| software                  | Pass ", "| software                  | Fail "
    )
    text = text.replace("GPU2: Pass", "GPU2: Fail")
    report = dcgm_diag.parse_diag(text)
    failed = [f for f in report.findings() if f.kind is FindingKind.DIAG_FAILED_DEPLOYMENT]  # software set-up
    assert [(f.gpu_index, f.test, f.is_fatal) for f in failed] == [("2", "software", False)]


def test_dcgm4_json_names_its_document_dcgm_diagnostic() -> None:
    document = {
        "DCGM Diagnostic": {
            "test_categories": [
                {"category": "Hardware", "tests": [{"name": "memory", "results": [{"gpu_id": "0", "status": "Pass"}]}]}
            ]
        }
    }
    report = dcgm_diag.parse_diag(json.dumps(document))
    assert [(r.category, r.test, r.gpu, r.status) for r in report.results] == [
        ("Hardware", "memory", "0", DiagStatus.PASS)
    ]


def test_dcgm4_json_results_name_their_gpu_as_an_entity() -> None:
    """DCGM 4.x writes `entity_group: GPU, entity_id: N` where 3.x wrote `gpu_id` (the shape of a
    4.2.3 `dcgmi diag -r 1 -j` document from a GB10, kept as a fixture in a public repository)."""
    document = {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {
                            "name": "software",
                            "results": [
                                {
                                    "entity_group": "GPU",
                                    "entity_group_id": 1,
                                    "entity_id": 0,
                                    "status": "Fail",
                                    "warnings": [{"error_id": 29, "warning": "Persistence Mode: disabled"}],
                                }
                            ],
                            "test_summary": {"status": "Fail"},
                        }
                    ],
                }
            ]
        },
        "metadata": {"Driver Version Detected": "580.82.09", "version": "4.2.3"},
    }
    report = dcgm_diag.parse_diag(json.dumps(document))
    assert [(r.test, r.gpu, r.status, r.details) for r in report.results] == [
        ("software", "0", DiagStatus.FAIL, ("Persistence Mode: disabled",))
    ]


def test_dcgm4_json_from_a_real_gb10_run_fails_software_on_gpu_0() -> None:
    """DCGM 4.2.3 `dcgmi diag -r 1 -j` (glimmer-burnin's captured fixture): results name their GPU
    as `entity_group: GPU, entity_id: 0`."""
    report = dcgm_diag.parse_diag(read("dcgm", "07-json-fail-software-gb10-dcgm4.2.3.json.txt"))
    assert [(r.category, r.test, r.gpu, r.status) for r in report.results] == [
        ("Deployment", "software", "0", DiagStatus.FAIL)
    ]
    assert report.results[0].details[0].startswith("Persistence Mode: Persistence mode for GPU 0 is disabled.")
    assert report.complete
    failed = report.findings()
    assert [(f.kind, f.gpu_index, f.test, f.is_fatal) for f in failed] == [
        (FindingKind.DIAG_FAILED_DEPLOYMENT, "0", "software", False)  # a set-up finding, not a broken GPU
    ]


def test_dcgm4_json_as_dcgmi_prints_it_passes_memory_and_pcie() -> None:
    """DCGM 4.5.2 level 2 in jsoncpp's own layout (tabs, `"key" : value`)."""
    report = dcgm_diag.parse_diag(read("dcgm", "08-json-pass-memory-pcie-gb10-dcgm4.5.2.json.txt"))
    assert [(r.category, r.test, r.gpu, r.status) for r in report.results] == [
        ("Deployment", "software", "0", DiagStatus.FAIL),
        ("Hardware", "memory", "0", DiagStatus.PASS),
        ("Integration", "pcie", "0", DiagStatus.PASS),
    ]
    assert [f.kind for f in report.findings()] == [FindingKind.DIAG_FAILED_DEPLOYMENT]
