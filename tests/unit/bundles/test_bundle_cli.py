"""Area of concern: the issue's acceptance through the real CLI — `dsx bundle` of the
eks/h100/ubuntu/training/kubeflow recipe (resolved by the recipe engine) for all five
deployers, keygen → bundle --sign → verify, and one-line errors with exit 2 on bad input."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from dsx import file_tree as tree
from dsx.cli.main import main
from dsx.files import signing as signing_files
from dsx.model import bundle_layout as layout
from dsx.model.recipe import Recipe

CRITERIA = [
    "--service",
    "eks",
    "--accelerator",
    "h100",
    "--os",
    "ubuntu",
    "--intent",
    "training",
    "--platform",
    "kubeflow",
]
DEPLOYERS = ["helm", "argocd", "argocd-helm", "flux", "helmfile"]


def dsx(*argv: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    return int(exit_info.value.code or 0)


@pytest.fixture(scope="module")
def real_bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("real")
    out = {}
    for deployer in DEPLOYERS:
        with pytest.raises(SystemExit) as exit_info:
            main(["bundle", *CRITERIA, "--deployer", deployer, "--output", str(base / deployer)])
        assert exit_info.value.code == 0, deployer
        out[deployer] = base / deployer
    return out


@pytest.mark.parametrize("deployer", DEPLOYERS)
def test_real_recipe_bundles_pass_sha256sum_and_parse(real_bundles: dict[str, Path], deployer: str) -> None:
    folder = real_bundles[deployer]
    checked = subprocess.run(["sha256sum", "--check", "--strict", layout.CHECKSUMS], cwd=folder, capture_output=True)
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.count(b": OK\n") == len(tree.read_tree(folder).tree.files) - 1  # all but checksums.txt
    documents = [
        document
        for path in folder.rglob("*.yaml")
        if "templates" not in path.parts  # argocd-helm templates are Go templates, rendered by helm
        for document in yaml.safe_load_all(path.read_text())
    ]
    assert documents
    assert all(isinstance(d, dict) for d in documents)


def _real_recipe(real_bundles: dict[str, Path]) -> Recipe:
    return Recipe.from_dict(yaml.safe_load((real_bundles["helm"] / layout.RECIPE_COPY).read_text()), source="copy")


def test_real_recipe_order_reaches_every_tool(real_bundles: dict[str, Path]) -> None:
    recipe = _real_recipe(real_bundles)
    assert len(recipe.component_refs) >= 8
    waves = {}
    for ref in recipe.component_refs:
        app = yaml.safe_load((real_bundles["argocd"] / ref.name / "application.yaml").read_text())
        waves[ref.name] = int(app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"])
    with_deps = [r for r in recipe.component_refs if r.dependency_refs]
    assert with_deps
    for ref in with_deps:
        assert all(waves[d] < waves[ref.name] for d in ref.dependency_refs)
        flux = yaml.safe_load_all((real_bundles["flux"] / "components.yaml").read_text())
        depends = {d["metadata"]["name"]: [x["name"] for x in d["spec"].get("dependsOn", [])] for d in flux}
        assert depends[ref.name] == list(ref.dependency_refs)
    releases = {
        r["name"]: r for r in yaml.safe_load((real_bundles["helmfile"] / "helmfile.yaml").read_text())["releases"]
    }
    assert all(releases[r.name]["needs"] for r in with_deps)
    helm_deps = [
        r
        for r in with_deps
        if r.type.value == "Helm" and any(recipe.component(d).type.value == "Helm" for d in r.dependency_refs)
    ]
    for ref in helm_deps:
        release = yaml.safe_load((real_bundles["flux"] / ref.name / "helmrelease.yaml").read_text())
        assert release["spec"]["dependsOn"]


def test_bundling_twice_gives_identical_trees(real_bundles: dict[str, Path], tmp_path: Path) -> None:
    assert dsx("bundle", *CRITERIA, "--deployer", "flux", "--output", str(tmp_path / "again")) == 0
    assert tree.read_tree(tmp_path / "again").tree == tree.read_tree(real_bundles["flux"]).tree


def test_keygen_bundle_sign_verify_and_tampering(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key, other = tmp_path / "ops", tmp_path / "other"
    assert dsx("keygen", "--out", str(key)) == 0
    assert dsx("keygen", "--out", str(other), "--algorithm", "ed25519") == 0
    out = tmp_path / "b"
    assert dsx("bundle", *CRITERIA, "--deployer", "helm", "--output", str(out), "--sign", "--key", f"{key}.key") == 0
    assert dsx("verify", str(out), "--key", f"{key}.pub") == 0
    assert "verified" in capsys.readouterr().out

    values = next(out.glob("*/values.yaml"))
    original = values.read_bytes()
    values.write_bytes(original.replace(b":", b";", 1))
    assert dsx("verify", str(out), "--key", f"{key}.pub") == 1
    assert str(values.relative_to(out)) in capsys.readouterr().out
    values.write_bytes(original)

    (out / "added.yaml").write_text("x: 1\n")
    assert dsx("verify", str(out), "--key", f"{key}.pub") == 1
    assert "added.yaml" in capsys.readouterr().out
    (out / "added.yaml").unlink()

    signer_id = signing_files.load_public_key(Path(f"{key}.pub")).key_id
    assert dsx("verify", str(out), "--key", f"{other}.pub") == 1
    assert f"key {signer_id}: signed by a key that is not trusted" in capsys.readouterr().out
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    (trusted / "ops.pub").write_bytes(Path(f"{key}.pub").read_bytes())
    assert dsx("verify", str(out), "--trusted-keys", str(trusted)) == 0


def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert dsx("bundle", "--recipe", str(tmp_path / "absent.yaml"), "--output", str(tmp_path / "o")) == 3
    assert dsx("bundle", *CRITERIA, "--output", str(tmp_path / "o"), "--sign") == 2
    assert "--sign and --key" in capsys.readouterr().err
    (tmp_path / "not-a-recipe.yaml").write_text("kind: Other\n")
    assert dsx("bundle", "--recipe", str(tmp_path / "not-a-recipe.yaml"), "--output", str(tmp_path / "o")) == 2
    assert dsx("verify", str(tmp_path / "nothing-here"), "--key", str(tmp_path / "k.pub")) == 2
    assert dsx("bundle", *CRITERIA, "--deployer", "kubectl", "--output", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err
    assert "not-a-recipe.yaml: not a dsx recipe" in err
    assert "k.pub: key file not found" in err
    assert "'kubectl' is not one of" in err
    assert dsx("bundle", "--output", str(tmp_path / "o")) == 2
    assert "give --recipe FILE" in capsys.readouterr().err
    assert dsx("bundle", "--recipe", str(tmp_path / "r.yaml"), "--os", "ubuntu", "--output", str(tmp_path / "o")) == 2
    assert capsys.readouterr().err == "dsx: error: --recipe and criteria flags (--os) are exclusive\n"
    assert not (tmp_path / "o").exists()


def test_an_encrypted_key_opens_with_the_named_passphrase_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPS_KEY_PASSPHRASE", "correct horse")
    key = tmp_path / "ops"
    assert dsx("keygen", "--out", str(key), "--passphrase-env", "OPS_KEY_PASSPHRASE") == 0
    signed = ["bundle", *CRITERIA, "--output", str(tmp_path / "b"), "--sign", "--key", f"{key}.key"]
    assert dsx(*signed) == 2
    assert "set DSX_SIGNING_PASSPHRASE" in capsys.readouterr().err
    assert dsx(*signed, "--passphrase-env", "OPS_KEY_PASSPHRASE") == 0
    assert dsx("verify", str(tmp_path / "b"), "--key", f"{key}.pub") == 0


@pytest.mark.parametrize(("deployer", "warned"), [("argocd", True), ("argocd-helm", True), ("flux", False)])
def test_a_gitops_bundle_without_repo_warns_about_the_placeholder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], deployer: str, warned: bool
) -> None:
    assert dsx("bundle", *CRITERIA, "--deployer", deployer, "--output", str(tmp_path / "o")) == 0
    assert ("no --repo given" in capsys.readouterr().err) is warned
    repo = ["--repo", "https://git.example.org/ops/gpu.git"]
    assert dsx("bundle", *CRITERIA, "--deployer", deployer, *repo, "--output", str(tmp_path / "p")) == 0
    assert "no --repo given" not in capsys.readouterr().err


def test_lint_gate_stops_unknown_values_unless_no_lint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixture = Path(__file__).resolve().parents[2] / "data" / "bundles" / "recipe-small.yaml"
    assert dsx("bundle", "--recipe", str(fixture), "--output", str(tmp_path / "o")) == 1
    captured = capsys.readouterr()
    assert "bigNumber" in captured.err and "--no-lint" in captured.err
    assert not (tmp_path / "o").exists()
    assert dsx("bundle", "--recipe", str(fixture), "--output", str(tmp_path / "o"), "--no-lint") == 0
    assert (tmp_path / "o" / layout.CHECKSUMS).is_file()


def test_a_misspelt_driver_key_is_linted_with_a_suggestion_and_refused_unless_no_lint(
    real_bundles: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    document = yaml.safe_load((real_bundles["helm"] / layout.RECIPE_COPY).read_text())
    gpu_operator = next(ref for ref in document["componentRefs"] if ref["name"] == "gpu-operator")
    driver = gpu_operator["values"]["driver"]
    driver["verison"] = driver.pop("version")
    misspelt = tmp_path / "misspelt.yaml"
    misspelt.write_text(yaml.safe_dump(document))
    capsys.readouterr()

    assert dsx("lint", "--recipe", str(misspelt), "--offline", "--format", "json") == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["component"], f["path"], f.get("suggestion")) for f in findings] == [
        ("gpu-operator", "driver.verison", "driver.version")
    ]
    assert dsx("bundle", "--recipe", str(misspelt), "--output", str(tmp_path / "refused")) == 1
    assert "did you mean driver.version?" in capsys.readouterr().err
    assert not (tmp_path / "refused").exists()
    assert dsx("bundle", "--recipe", str(misspelt), "--output", str(tmp_path / "forced"), "--no-lint") == 0
    assert (tmp_path / "forced" / "gpu-operator" / "values.yaml").is_file()


def test_recipe_from_stdin_and_source_date_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io
    import json

    fixture = Path(__file__).resolve().parents[2] / "data" / "bundles" / "recipe-small.yaml"
    monkeypatch.setattr("sys.stdin", io.StringIO(fixture.read_text()))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    assert dsx("bundle", "--recipe", "-", "--deployer", "argocd", "--output", str(tmp_path / "o"), "--no-lint") == 0
    assert json.loads((tmp_path / "o" / layout.MANIFEST).read_text())["createdAt"] == "2026-01-01T00:00:00Z"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    assert dsx("bundle", "--recipe", str(fixture), "--output", str(tmp_path / "p"), "--no-lint") == 2
    assert "SOURCE_DATE_EPOCH" in capsys.readouterr().err
