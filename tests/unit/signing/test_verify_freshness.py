"""Area of concern: a rolled-back bundle or recipe does not verify as current (issue 29). `dsx sign`
records its time and the publisher's revision in the signed statement; `dsx verify --min-revision`,
`--not-before` and `--state` (the highest revision verified so far) refuse an older one as `stale`,
naming both revisions or times, through the real CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dsx import file_tree as tree
from dsx.bundles import render
from dsx.bundles.options import Deployer
from dsx.cli.main import main
from dsx.files import documents

SMALL_RECIPE = Path(__file__).resolve().parents[2] / "data" / "bundles" / "recipe-small.yaml"


def dsx(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    captured = capsys.readouterr()
    return int(exit_info.value.code or 0), captured.out + captured.err


@pytest.fixture
def key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    prefix = tmp_path / "publisher"
    assert dsx(capsys, "keygen", "--out", str(prefix))[0] == 0
    return prefix


def _signed_bundle(folder: Path, key: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> Path:
    tree.write_tree(render.render(documents.recipe(str(SMALL_RECIPE)), Deployer.HELM), folder)
    code, out = dsx(capsys, "sign", "--key", f"{key}.key", *extra, str(folder))
    assert code == 0, out
    return folder


def _verdict(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code, out = dsx(capsys, "verify", *argv, "--format", "json")
    return code, json.loads(out)


def test_an_older_revision_is_stale_against_min_revision(
    tmp_path: Path, key: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = _signed_bundle(tmp_path / "r5", key, capsys, "--revision", "5")
    older = _signed_bundle(tmp_path / "r3", key, capsys, "--revision", "3")
    code, verdict = _verdict(capsys, str(newer), "--key", f"{key}.pub", "--min-revision", "5")
    assert (code, verdict["trust"], verdict["revision"]) == (0, "verified", 5)
    code, verdict = _verdict(capsys, str(older), "--key", f"{key}.pub", "--min-revision", "5")
    assert (code, verdict["trust"]) == (1, "stale")
    problems = {f["problem"] for f in verdict["findings"]}  # type: ignore[attr-defined]
    assert problems == {"revision 3 is older than 5 (--min-revision)"}
    unrevised = _signed_bundle(tmp_path / "none", key, capsys)
    code, verdict = _verdict(capsys, str(unrevised), "--key", f"{key}.pub", "--min-revision", "1")
    assert (code, verdict["trust"]) == (1, "stale")
    assert "signed without a revision; --min-revision asks for 1" in json.dumps(verdict)


def test_the_state_file_refuses_a_rollback_after_a_newer_one_was_verified(
    tmp_path: Path, key: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The deploy's own record: verify 7 (recorded), then 6 in its place is stale against 7."""
    state = tmp_path / "state" / "verified.json"
    seven = _signed_bundle(tmp_path / "r7", key, capsys, "--revision", "7")
    six = _signed_bundle(tmp_path / "r6", key, capsys, "--revision", "6")
    assert _verdict(capsys, str(six), "--key", f"{key}.pub", "--state", str(state))[0] == 0
    assert json.loads(state.read_text())["revision"] == 6
    assert _verdict(capsys, str(seven), "--key", f"{key}.pub", "--state", str(state))[0] == 0
    assert json.loads(state.read_text())["revision"] == 7
    shutil.rmtree(seven)
    shutil.copytree(six, seven)  # the older bundle put where the newer one was
    code, verdict = _verdict(capsys, str(seven), "--key", f"{key}.pub", "--state", str(state))
    assert (code, verdict["trust"]) == (1, "stale")
    assert f"revision 6 is older than 7 (last verified, {state})" in json.dumps(verdict)
    assert json.loads(state.read_text())["revision"] == 7  # a refused one records nothing
    state.write_text("not: a state\n")
    code, out = dsx(capsys, "verify", str(six), "--key", f"{key}.pub", "--state", str(state))
    assert code == 2 and "not a dsx verify state file" in out


def test_not_before_refuses_a_signature_made_earlier(
    tmp_path: Path, key: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")  # 2026-01-01T00:00:00Z
    signed = _signed_bundle(tmp_path / "b", key, capsys)
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    code, verdict = _verdict(capsys, str(signed), "--key", f"{key}.pub", "--not-before", "2025-12-31T00:00:00Z")
    assert (code, verdict["trust"]) == (0, "verified")
    code, verdict = _verdict(capsys, str(signed), "--key", f"{key}.pub", "--not-before", "2026-06-01T00:00:00Z")
    assert (code, verdict["trust"]) == (1, "stale")
    assert "signed 2026-01-01T00:00:00Z, before 2026-06-01T00:00:00Z (--not-before)" in json.dumps(verdict)
    code, out = dsx(capsys, "verify", str(signed), "--key", f"{key}.pub", "--not-before", "last tuesday")
    assert code == 2 and "--not-before: 'last tuesday' is not an RFC 3339 time" in out


def test_a_tampered_stale_bundle_is_tampered_first(
    tmp_path: Path, key: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    older = _signed_bundle(tmp_path / "r1", key, capsys, "--revision", "1")
    (older / "README.md").write_text("changed\n")
    code, verdict = _verdict(capsys, str(older), "--key", f"{key}.pub", "--min-revision", "2")
    assert (code, verdict["trust"]) == (1, "tampered")


def test_a_signed_recipe_carries_its_revision(tmp_path: Path, key: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = tmp_path / "recipe.yaml"
    shutil.copy(SMALL_RECIPE, recipe)
    assert dsx(capsys, "sign", "--key", f"{key}.key", "--revision", "4", str(recipe))[0] == 0
    code, verdict = _verdict(capsys, str(recipe), "--key", f"{key}.pub", "--min-revision", "4")
    assert (code, verdict["revision"]) == (0, 4)
    code, verdict = _verdict(capsys, str(recipe), "--key", f"{key}.pub", "--min-revision", "9")
    assert (code, verdict["trust"]) == (1, "stale")
    assert "revision 4 is older than 9 (--min-revision)" in json.dumps(verdict)


def test_bundle_sign_revision_goes_with_sign(tmp_path: Path, key: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b"
    argv = ["bundle", "--recipe", str(SMALL_RECIPE), "--output", str(out), "--no-lint"]
    code, text = dsx(capsys, *argv, "--sign-revision", "2")
    assert code == 2 and "--sign-revision: only with --sign" in text
    assert dsx(capsys, *argv, "--sign", "--key", f"{key}.key", "--sign-revision", "2")[0] == 0
    code, verdict = _verdict(capsys, str(out), "--key", f"{key}.pub", "--min-revision", "2")
    assert (code, verdict["revision"]) == (0, 2)
