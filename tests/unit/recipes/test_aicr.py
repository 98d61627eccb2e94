"""Area of concern: AICR's documents are read as they are — snapshots (measurement lists) by
`dsx recipe --snapshot`, `dsx validate --snapshot` and `dsx diff`, RecipeCriteria by `--config` —
and `dsx snapshot --format aicr` writes a snapshot AICR's own criteria extraction reads; criteria
fall back to version suffixes when no providerID is known; malformed documents are clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsx.cli import main as cli_main
from dsx.errors import BadInputError
from dsx.files import documents
from dsx.model import aicr
from dsx.model import snapshot as model
from dsx.recipes import inputs, snapshot_criteria

DATA = Path(__file__).resolve().parents[2] / "data" / "recipes"
AICR = DATA / "aicr"
EKS_AICR = AICR / "snapshot-eks-h100-ubuntu.yaml"
EKS_DSX = DATA / "snapshots" / "eks-h100-ubuntu.yaml"


def _named(path: object) -> inputs.NamedDocument:
    """The document as an entry point hands it in: read by dsx.files, named by its path."""
    return inputs.NamedDocument(str(path), documents.load_mapping_file(str(path)))


def run(argv: list[str]) -> Any:
    return CliRunner().invoke(cli_main.cli, argv)


def recipe_criteria(*argv: str) -> dict[str, Any]:
    result = run(["recipe", *argv, "--format", "json"])
    assert result.exit_code == 0, result.output
    criteria: dict[str, Any] = json.loads(result.stdout)["metadata"]["criteria"]
    return criteria


def test_an_aicr_snapshot_gives_the_criteria_of_the_same_facts_as_dsx_nodes() -> None:
    from_aicr = recipe_criteria("--snapshot", str(EKS_AICR))
    from_dsx = recipe_criteria("--snapshot", str(EKS_DSX))
    assert from_aicr == from_dsx
    assert from_aicr == {
        "service": "eks",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "any",
        "platform": "any",
        "nodes": 4,
    }


def test_without_a_provider_id_the_kubelet_suffix_names_the_service() -> None:
    criteria = recipe_criteria("--snapshot", str(AICR / "snapshot-eks-h100-ubuntu-no-provider.yaml"))
    assert criteria["service"] == "eks"


@pytest.mark.parametrize(
    ("node_info", "server", "service"),
    [
        ({"kubeletVersion": "v1.30.4-eks-a737599"}, "", "eks"),
        ({"kubeletVersion": "v1.30.5-gke.1014001"}, "", "gke"),
        ({"kernelVersion": "6.1.102-111.182.amzn2023.x86_64"}, "", "eks"),
        ({"kernelVersion": "5.15.0-1064-azure"}, "", "aks"),
        ({"kernelVersion": "5.15.0-1049-gke"}, "", "gke"),
        ({"kubeletVersion": "v1.30.3"}, "v1.32.4-gke.1415000", "gke"),
        ({"kubeletVersion": "v1.30.3", "kernelVersion": "6.6.87+"}, "v1.30.3", None),
    ],
)
def test_version_suffixes_stand_in_for_the_provider_id(
    node_info: dict[str, str], server: str, service: str | None
) -> None:
    document = {
        "cluster": {"serverVersion": server},
        "nodes": [{"name": "n", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100"}, "nodeInfo": node_info}],
    }
    derived = snapshot_criteria.derive(document, source="s.yaml")
    assert derived.criteria.get("service") == service


def test_a_provider_id_wins_over_suffixes() -> None:
    node = {"providerID": "azure:///subscriptions/x", "nodeInfo": {"kubeletVersion": "v1.30.4-eks-a737599"}}
    derived = snapshot_criteria.derive({"nodes": [{**node, "name": "n"}]}, source="s.yaml")
    assert derived.criteria["service"] == "aks"


def test_newer_items_topology_and_truncated_node_lists() -> None:
    snap = documents.snapshot_file(str(AICR / "snapshot-items-topology.yaml"))
    assert [n.name for n in snap.nodes] == ["gke-a3-0", "gke-a3-1"]  # "(+1 more)" names no node
    assert snap.nodes[1].labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert snap.nodes[0].taints == (model.Taint("nvidia.com/gpu", "NoSchedule", "present"),)
    assert recipe_criteria("--snapshot", str(AICR / "snapshot-items-topology.yaml"))["service"] == "gke"


def test_the_aicr_snapshot_as_a_dsx_snapshot() -> None:
    snap = documents.snapshot_file(str(EKS_AICR))
    assert [n.name for n in snap.nodes] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3", "system-0", "system-1"]
    agent = snap.nodes[0]
    assert agent.provider_id == "aws:///us-east-1a/i-0gpu-0"
    assert agent.node_info["osImage"] == "Ubuntu 24.04.1 LTS"
    assert agent.labels["node.kubernetes.io/instance-type"] == "p5.48xlarge"  # `<key>.<value>` folded back
    assert agent.host is not None
    assert [g.product for g in agent.host.gpus] == ["NVIDIA H100 80GB HBM3"] * 8
    assert agent.host.driver_version == "570.86.16"
    assert agent.host.os_release["ID"] == "ubuntu"
    assert agent.host.sysctls["kernel.osrelease"] == "6.8.0-1028-aws"
    assert agent.host.kernel_modules == ("nvidia", "nvidia_uvm")
    assert {u.name: (u.active, u.enabled) for u in agent.host.systemd_units} == {
        "containerd.service": (True, True),
        "kubelet.service": (True, True),
    }
    assert snap.nodes[4].host is None and snap.nodes[4].taints == ()
    assert snap.cluster is not None and snap.cluster.server_version == "v1.33.5-eks-3025e55"
    assert snap.cluster.cluster_policy == {
        "name": "",
        "state": "",
        "spec": {"driver": {"enabled": True, "version": "570.86.16"}, "toolkit": {"enabled": True}},
    }


def test_aicr_recipe_criteria_are_a_config(tmp_path: Path) -> None:
    criteria = recipe_criteria("--config", str(AICR / "criteria-h100-eks-ubuntu-training.yaml"))
    assert criteria == {
        "service": "eks",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "training",
        "platform": "any",
    }
    aliased = tmp_path / "c.yaml"
    aliased.write_text(
        "kind: recipeCriteria\napiVersion: aicr.nvidia.com/v1alpha1\nspec: {service: self-managed, os: al2023}\n",
        encoding="utf-8",
    )
    assert inputs.gather({}, config=_named(str(aliased))).criteria.os == "amazonlinux"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{accelerator: mi300}", "c.yaml: accelerator: 'mi300' is not allowed"),
        ("{colour: red}", "c.yaml: spec key: 'colour' is not allowed; allowed values: service"),
        ("[eks]", "c.yaml: spec: expected a mapping"),
    ],
)
def test_bad_aicr_criteria_name_the_file_and_field(tmp_path: Path, spec: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"kind: RecipeCriteria\napiVersion: aicr.run/v1\nspec: {spec}\n", encoding="utf-8")
    with pytest.raises(BadInputError, match=message.replace("'", "'").replace("(", r"\(")):
        inputs.gather({}, config=_named(str(path)))


def test_validate_and_diff_take_aicr_snapshots(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    assert (
        run(["recipe", "--config", str(AICR / "criteria-h100-eks-ubuntu-training.yaml"), "-o", str(recipe)]).exit_code
        == 0
    )
    checked = run(["validate", "--recipe", str(recipe), "--snapshot", str(EKS_AICR), "--phase", "readiness"])
    assert checked.exit_code == 0, checked.output
    assert "K8s.server.version" in checked.output and "PASSED" in checked.output
    changed = run(["diff", str(EKS_AICR), str(AICR / "snapshot-eks-h100-ubuntu-no-provider.yaml"), "--format", "json"])
    assert changed.exit_code == 0, changed.output
    paths = {(c["subject"], c.get("path")) for c in json.loads(changed.stdout)["changes"]}
    assert ("gpu-0", "providerID") in paths


def aicr_criteria(document: dict[str, Any]) -> dict[str, str]:
    """AICR's own criteria extraction (pkg/recipe/snapshot.go), restated: service from K8s.server
    `service`, else its version suffix; accelerator from a GPU.smi model substring (gb200 before
    b200); os from OS.release ID."""
    found: dict[str, str] = {}
    for measurement in document["measurements"]:
        for subtype in measurement["subtypes"]:
            data, name = subtype["data"], subtype["subtype"]
            if (measurement["type"], name) == ("K8s", "server"):
                version = str(data.get("version", ""))
                suffix = next((s for m, s in (("-eks-", "eks"), ("-gke", "gke"), ("-aks", "aks")) if m in version), "")
                found["service"] = str(data.get("service") or suffix)
            elif (measurement["type"], name) == ("GPU", "smi"):
                model_name = str(data.get("gpu.model", "")).lower()
                found["accelerator"] = next(a for a in ("gb200", "b200", "h100", "a100", "l40", "") if a in model_name)
            elif (measurement["type"], name) == ("OS", "release"):
                found["os"] = str(data["ID"])
    return found


def dsx_cluster_snapshot() -> model.Snapshot:
    """The EKS cluster as `dsx snapshot` reads it from the API server (no host facts)."""
    document = documents.load_mapping_file(EKS_DSX)
    nodes = [
        model.Node(
            name=n["metadata"]["name"],
            provider_id=n["spec"]["providerID"],
            labels=n["metadata"]["labels"],
            node_info={**n["status"]["nodeInfo"], "kubeletVersion": "v1.33.5-eks-3025e55"},
            taints=(model.Taint("nvidia.com/gpu", "NoSchedule", "present"),) if "gpu" in n["metadata"]["name"] else (),
        )
        for n in document["nodes"]
    ]
    return model.Snapshot(
        nodes=tuple(nodes),
        cluster=model.ClusterFacts(server_version="v1.33.5-eks-3025e55", provider="eks"),
        generator="dsx/test",
        captured_at="2026-02-16T10:00:00Z",
    )


def test_dsx_snapshot_in_aicr_format_reads_as_aicr_reads_it() -> None:
    document = aicr.snapshot_to_aicr(dsx_cluster_snapshot())
    assert (document["kind"], document["apiVersion"]) == ("Snapshot", "aicr.run/v1")
    assert document["metadata"]["source-node"] == "gpu-0"
    assert aicr_criteria(document) == {"service": "eks", "accelerator": "h100", "os": "ubuntu"}
    release = next(s for m in document["measurements"] for s in m["subtypes"] if s["subtype"] == "release")
    assert release["context"] == {"source": "nodeInfo.osImage"}
    assert all(s["data"] for m in document["measurements"] for s in m["subtypes"])  # AICR rejects empty data


def test_aicr_format_round_trips_to_the_same_criteria(tmp_path: Path) -> None:
    written = tmp_path / "aicr.yaml"
    result = run(["snapshot", "merge", str(EKS_AICR), "--format", "aicr", "-o", str(written)])
    assert result.exit_code == 0, result.output
    document = documents.load_mapping_file(written)
    assert aicr_criteria(document) == {"service": "eks", "accelerator": "h100", "os": "ubuntu"}
    assert recipe_criteria("--snapshot", str(written)) == recipe_criteria("--snapshot", str(EKS_AICR))
    again = aicr.snapshot_to_aicr(documents.snapshot_file(str(written)))
    assert again["measurements"] == document["measurements"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"kind": "Snapshot", "apiVersion": "aicr.run/v1", "measurements": {}}, "measurements: expected a list"),
        ({"kind": "Snapshot", "apiVersion": "aicr.run/v1", "measurements": []}, "no measurement with a type"),
        ({"apiVersion": "aicr.run/v1", "measurements": [{"type": "K8s", "subtypes": [3]}]}, r"subtypes\[0\]"),
        (
            {"apiVersion": "aicr.run/v1", "measurements": [{"type": "K8s", "subtypes": "x"}]},
            "subtypes: expected a list",
        ),
    ],
)
def test_malformed_aicr_snapshots_are_clear_errors(document: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        model.Snapshot.from_dict(document, source="aicr.yaml")


KEYS = ["data", "items", "context", "subtype", "key", "node-list", "gpu-count", "x.y", "source-node", "gpu.model"]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 10),
    st.text(max_size=20),
    st.sampled_from(
        ["NVIDIA H100 80GB HBM3", "v1.33.5-eks-3025e55", "ubuntu", "a|b|c,d", "x|(+2 more)", "/proc/sys/a/b", "a.b.c"]
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["data", "items", "context", "subtype", "key", "node-list", "gpu-count", "x.y"]),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=10,
)
SUBTYPE_NAMES = [
    "server",
    "node",
    "smi",
    "release",
    "sysctl",
    "kmod",
    "label",
    "taint",
    "summary",
    "policy",
    "x.service",
]
SUBTYPES = st.fixed_dictionaries(
    {"subtype": st.sampled_from(SUBTYPE_NAMES)},
    optional={
        "data": st.one_of(
            VALUES, st.dictionaries(st.one_of(st.text(max_size=12), st.sampled_from(KEYS)), SCALARS, max_size=4)
        ),
        "items": st.lists(st.one_of(VALUES, st.fixed_dictionaries({"context": VALUES, "data": VALUES})), max_size=3),
    },
)
MEASUREMENTS = st.lists(
    st.one_of(
        VALUES,
        st.fixed_dictionaries(
            {"type": st.sampled_from([*aicr.MEASUREMENT_TYPES, "", "Other"])},
            optional={"subtypes": st.one_of(VALUES, st.lists(st.one_of(SUBTYPES, VALUES), max_size=4))},
        ),
    ),
    max_size=5,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MEASUREMENTS, st.one_of(st.none(), VALUES))
def test_any_aicr_snapshot_is_a_snapshot_or_a_clear_error(measurements: list[Any], metadata: Any) -> None:
    document = {"kind": "Snapshot", "apiVersion": "aicr.run/v1", "metadata": metadata, "measurements": measurements}
    try:
        snap = model.Snapshot.from_dict(document, source="fuzz.yaml")
    except BadInputError as error:
        assert "fuzz.yaml" in str(error)
        return
    json.dumps(snap.to_dict(), allow_nan=False)
    snapshot_criteria.derive(snap.to_dict(), source="fuzz.yaml") if snap.nodes else None
    json.dumps(aicr.snapshot_to_aicr(snap), allow_nan=False)


@settings(max_examples=100, deadline=None)
@given(VALUES)
def test_any_aicr_criteria_spec_is_criteria_or_a_clear_error(spec: Any) -> None:
    from dsx.model import criteria as criteria_model

    document = {"kind": "RecipeCriteria", "apiVersion": "aicr.run/v1", "spec": spec}
    try:
        criteria_model.normalize_mapping(aicr.criteria_mapping(document, source="c.yaml"), source="c.yaml")
    except BadInputError as error:
        assert "c.yaml" in str(error)


def test_an_impossible_gpu_count_is_an_error_not_a_million_gpus() -> None:
    document = documents.load_mapping_file(EKS_AICR)
    gpu = next(m for m in document["measurements"] if m["type"] == "GPU")
    gpu["subtypes"][0]["data"]["gpu-count"] = 10**30
    with pytest.raises(BadInputError, match=r"aicr.yaml: GPU.smi.gpu-count: 10+ is not a GPU count"):
        model.Snapshot.from_dict(document, source="aicr.yaml")
