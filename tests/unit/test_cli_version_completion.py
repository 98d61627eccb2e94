"""Area of concern: `dsx --version` names what runs (the commit, from a checkout; the release and
the build's commit file otherwise), and `dsx completion SHELL` prints a script click answers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsx import __version__
from dsx.cli import version
from dsx.cli.main import main

REPO = Path(__file__).resolve().parents[2]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_version_names_the_commit_of_the_checkout(capsys: pytest.CaptureFixture[str]) -> None:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    code, out, _ = _run(capsys, "--version")
    assert code == 0
    if head.returncode == 0:  # a source checkout (CI clones one)
        assert out.startswith(f"dsx, version {__version__}+g{head.stdout.strip()}")
    else:
        assert out == f"dsx, version {__version__}\n"


def test_without_a_checkout_the_version_is_the_release_and_the_build_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    version.describe.cache_clear()
    monkeypatch.setattr(version, "PACKAGE", tmp_path / "site-packages" / "dsx")
    monkeypatch.setattr(version, "BUILD_COMMIT", tmp_path / "BUILD_COMMIT")
    try:
        assert version.describe() == __version__
        version.describe.cache_clear()
        (tmp_path / "BUILD_COMMIT").write_text("0123456789abcdef0123\n")
        assert version.describe() == f"{__version__}+g0123456789ab"
    finally:
        version.describe.cache_clear()


@pytest.mark.parametrize(
    ("shell", "marker"),
    [("bash", "complete -o nosort -F"), ("zsh", "#compdef dsx"), ("fish", "complete --no-files --command dsx")],
)
def test_completion_prints_the_shells_script(capsys: pytest.CaptureFixture[str], shell: str, marker: str) -> None:
    code, out, _ = _run(capsys, "completion", shell)
    assert code == 0 and marker in out and "_DSX_COMPLETE" in out


def test_the_script_gets_commands_and_subcommands_back() -> None:
    env = dict(os.environ, _DSX_COMPLETE="bash_complete", COMP_WORDS="dsx sim l", COMP_CWORD="2")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-m", "dsx"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.split() == ["plain,list", "plain,load"]


def test_an_unknown_shell_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "completion", "tcsh")
    assert code == 2 and "'tcsh' is not one of 'bash', 'zsh', 'fish'" in err
