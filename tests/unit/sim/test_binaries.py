"""Area of concern: where control-plane binaries are found (envtest variables, then the cache),
and the one-line errors when they are missing, unusable or too old."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from dsx import errors, settings
from dsx.sim import binaries


def _tool(folder: Path, name: str, version_line: str = "Kubernetes v1.36.3") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho '{version_line}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _all(folder: Path) -> None:
    for name in binaries.NAMES:
        _tool(folder, name)


def test_kubebuilder_assets_before_cache_and_overrides_before_both(tmp_path: Path) -> None:
    assets, cache = tmp_path / "assets", tmp_path / "cache"
    _all(cache)
    _tool(assets, "kube-apiserver")
    _tool(assets, "etcd")
    special = _tool(tmp_path / "special", "etcd-3.6")
    found, missing = binaries.locate({"KUBEBUILDER_ASSETS": str(assets), "TEST_ASSET_ETCD": str(special)}, cache)
    assert missing == []
    assert found["kube-apiserver"] == assets / "kube-apiserver"
    assert found["etcd"] == special
    assert found["kwok"] == cache / "kwok"


def test_missing_binaries_are_listed_with_how_to_provide_them(tmp_path: Path) -> None:
    _tool(tmp_path / "cache", "etcd")
    found, missing = binaries.locate({}, tmp_path / "cache")
    assert list(found) == ["etcd"]
    assert missing == ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl"]
    with pytest.raises(errors.NotFoundError, match=r"KUBEBUILDER_ASSETS.*build-control-plane\.sh"):
        binaries.resolve(env={}, cache=tmp_path / "cache", allow_build=False)


def test_a_broken_override_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(errors.BadInputError, match=r"TEST_ASSET_KUBE_APISERVER=.*not an executable"):
        binaries.locate({"TEST_ASSET_KUBE_APISERVER": str(tmp_path / "nope")}, tmp_path)


def test_version_is_read_from_the_apiserver_and_must_be_recent(tmp_path: Path) -> None:
    _all(tmp_path / "ok")
    said: list[str] = []
    found = binaries.resolve(env={}, cache=tmp_path / "ok", allow_build=False, progress=said.append)
    assert found.kubernetes_version == "v1.36.3"
    assert said == [f"control-plane binaries (Kubernetes v1.36.3) from {tmp_path / 'ok'}"]  # sim up says where
    old = _tool(tmp_path / "old", "kube-apiserver", "Kubernetes v1.31.4")
    with pytest.raises(errors.BadInputError, match=re.escape("v1.31.4 is too old; dsx sim needs >= 1.34")):
        binaries.kubernetes_version(old)
    silent = _tool(tmp_path / "silent", "kube-apiserver", "hello")
    with pytest.raises(errors.BadInputError, match="printed no Kubernetes version"):
        binaries.kubernetes_version(silent)


def test_the_build_script_ships_with_the_checkout() -> None:
    script = binaries.build_script()
    assert script is not None and script.name == "build-control-plane.sh"
    text = script.read_text()
    assert "gitVersion=v$K8S_VERSION" in text  # versions stamped so --version tells the truth


def _script(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "hack" / "build-control-plane.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("#!/usr/bin/env bash\nset -euo pipefail\n" + body)
    return script


def test_the_build_reports_each_binary_and_fails_with_its_own_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _script(
        tmp_path,
        'echo "[build-control-plane] step 1/6 kube-apiserver (elapsed 0 s; next: kube-controller-manager)" >&2\n'
        'echo "go: downloading k8s.io/api v0.36.3"\n'
        'echo "[build-control-plane] step 2/6 kube-controller-manager (elapsed 95 s; next: kube-scheduler)" >&2\n'
        'echo "compile: out of memory" >&2\nexit 2\n',
    )
    monkeypatch.setattr(binaries, "build_script", lambda: script)
    monkeypatch.setattr(binaries.shutil, "which", lambda name: f"/usr/bin/{name}")
    cache = tmp_path / "cache" / "control-plane" / "v1.36.3"
    said: list[str] = []
    with pytest.raises(errors.UnavailableError) as raised:
        binaries.build(cache, progress=said.append)
    message = str(raised.value)
    assert message.startswith("control-plane build failed while building kube-controller-manager (exit status 2)")
    assert "compile: out of memory" in message
    assert str(binaries.build_log(cache)) in message
    assert said[1:] == [
        "step 1/6 kube-apiserver (elapsed 0 s; next: kube-controller-manager)",
        "step 2/6 kube-controller-manager (elapsed 95 s; next: kube-scheduler)",
    ]
    assert "go: downloading k8s.io/api v0.36.3" in binaries.build_log(cache).read_text()


def test_the_build_script_survives_long_version_output_under_pipefail(tmp_path: Path) -> None:
    """With every binary present the script only prints versions; `| head -1` there died of SIGPIPE (issue 12)."""
    import subprocess

    script = binaries.build_script()
    assert script is not None
    out = tmp_path / "bin"
    out.mkdir()
    for name in (*binaries.NAMES, *binaries.ENGINE_NAMES):
        tool = out / name
        # far more output than a pipe buffer, so a reader that stops early would kill the writer
        tool.write_text("#!/bin/sh\necho 'v1.36.3'\nseq 1 200000\n")
        tool.chmod(0o755)
    for folder in (f"jobset-v{settings.JOBSET_VERSION}", f"trainer-v{settings.TRAINER_VERSION}"):
        (out / "engine" / folder).mkdir(parents=True)
        (out / "engine" / folder / "crds.yaml").write_text("# built\n")
    for _ in range(3):
        done = subprocess.run(
            ["bash", str(script), str(out)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DSX_CACHE_DIR": str(tmp_path / "cache")},
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "kubectl: v1.36.3" in done.stderr
    assert "| head" not in script.read_text()
