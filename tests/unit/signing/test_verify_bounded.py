"""Area of concern: `dsx verify` of a bundle directory in bounded memory, and what its bytes cannot
show: an unlisted file is reported from the listing without being read, listed files are hashed in
a stream, a hard link (a name for bytes outside the bundle) and a mode a bundle never has (setuid,
a script that lost its exec bit, an executable that is not a script) are findings (issue 29)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dsx.bundles import render
from dsx.bundles.options import Deployer
from dsx.files import documents
from dsx.files import signing as signing_files
from dsx.signing import keys, verify
from dsx.signing.verdict import TrustLevel

PEAK_RSS = """
import json, os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
out = child.stdout.read().decode()
_, status, usage = os.wait4(child.pid, 0)
print(json.dumps({"code": os.waitstatus_to_exitcode(status), "peak_rss_kib": usage.ru_maxrss, "out": out}))
"""
SMALL_RECIPE = Path(__file__).resolve().parents[2] / "data" / "bundles" / "recipe-small.yaml"


def _findings(bundle: Path, trusted: list[keys.TrustedKey]) -> dict[str, str]:
    verdict = signing_files.verify_path(bundle, trusted)
    assert verdict.level is TrustLevel.TAMPERED, verdict
    return {f.subject: f.problem for f in verdict.findings}


def test_an_intact_bundle_still_verifies(signed_bundle: Path, trusted: list[keys.TrustedKey]) -> None:
    verdict = signing_files.verify_path(signed_bundle, trusted)
    assert verdict.level is TrustLevel.VERIFIED, verdict.findings
    assert stat.S_IMODE((signed_bundle / "deploy.sh").stat().st_mode) == 0o755


@pytest.mark.parametrize("algorithm_name", ["ed25519"])
def test_a_huge_unlisted_file_is_reported_without_being_read(
    signed_bundle: Path, trusted: list[keys.TrustedKey], algorithm_name: str
) -> None:
    """4 GiB (sparse) beside the bundle's files: named from the listing; the verifying process (a real
    `dsx verify`) reads none of it, so its peak RSS stays far under the file (here: under 100 MB)."""
    with (signed_bundle / "extra.bin").open("wb") as sparse:
        sparse.truncate(4 << 30)
    findings = _findings(signed_bundle, trusted)
    assert findings == {"extra.bin": "not listed in checksums.txt (added after the bundle was made)"}
    listing = signing_files.scan_bundle(signed_bundle)
    assert listing.facts["extra.bin"].sha256 is None and listing.facts["extra.bin"].size_bytes == 4 << 30
    # measured from a small launcher: a child's peak RSS on Linux starts from its parent's at exec
    done = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, sys.executable, "-m", "dsx", "verify", str(signed_bundle), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    measured = json.loads(done.stdout)
    assert measured["code"] == 1 and "extra.bin" in measured["out"], measured
    assert measured["peak_rss_kib"] < 100 * 1024, f"peak RSS {measured['peak_rss_kib']} KiB"


def test_a_listed_file_is_hashed_in_a_stream(signed_bundle: Path, trusted: list[keys.TrustedKey]) -> None:
    values = next(p for p in sorted(signed_bundle.rglob("values.yaml")))
    with values.open("ab") as grown:
        grown.truncate(values.stat().st_size + (8 << 20))  # 8 MiB more: a listed file, changed
    rel = values.relative_to(signed_bundle).as_posix()
    assert _findings(signed_bundle, trusted) == {rel: "content does not match checksums.txt"}
    assert signing_files.scan_bundle(signed_bundle).facts[rel].size_bytes == values.stat().st_size


def test_a_hard_link_is_reported(signed_bundle: Path, trusted: list[keys.TrustedKey], tmp_path: Path) -> None:
    """Same bytes, so every checksum holds; but whoever can write the outside name changes the bundle."""
    outside = tmp_path / "outside-deploy.sh"
    target = signed_bundle / "deploy.sh"
    os.link(target, outside)
    findings = _findings(signed_bundle, trusted)
    assert findings == {"deploy.sh": "a hard link (2 names): its bytes may change from outside the bundle"}


@pytest.mark.parametrize(
    ("path", "mode", "message"),
    [
        ("deploy.sh", 0o4755, "mode 4755: setuid; a bundle's files are 0644 or 0755"),
        ("deploy.sh", 0o2755, "mode 2755: setgid; a bundle's files are 0644 or 0755"),
        (
            "deploy.sh",
            0o644,
            "mode 0644: a script that is not executable (dsx bundle writes scripts 0755, the rest 0644)",
        ),
        (
            "README.md",
            0o755,
            "mode 0755: executable, and not a script (dsx bundle writes scripts 0755, the rest 0644)",
        ),
    ],
)
def test_a_mode_a_bundle_never_has_is_reported(
    signed_bundle: Path, trusted: list[keys.TrustedKey], path: str, mode: int, message: str
) -> None:
    os.chmod(signed_bundle / path, mode)
    assert _findings(signed_bundle, trusted) == {path: message}


def test_group_writable_files_from_a_umask_002_checkout_still_verify(
    signed_bundle: Path, trusted: list[keys.TrustedKey]
) -> None:
    for path in (signed_bundle / "deploy.sh", signed_bundle / "README.md"):
        os.chmod(path, stat.S_IMODE(path.stat().st_mode) | 0o020)
    assert signing_files.verify_path(signed_bundle, trusted).level is TrustLevel.VERIFIED


def test_an_oversized_checksums_file_is_not_read(signed_bundle: Path, trusted: list[keys.TrustedKey]) -> None:
    with (signed_bundle / "checksums.txt").open("ab") as grown:
        grown.truncate(verify.MAX_SMALL_FILE_BYTES + 1)
    verdict = signing_files.verify_path(signed_bundle, trusted)
    assert verdict.level is TrustLevel.TAMPERED
    assert any(f.subject == "checksums.txt" and f.problem.endswith("(not read)") for f in verdict.findings)


@pytest.mark.parametrize("deployer", list(Deployer))
def test_every_bundle_makes_its_scripts_and_only_them_executable(deployer: Deployer) -> None:
    """The rule the mode check reads (a file that starts with `#!` is 0755, every other 0644) is the
    one each deployer writes by, so an intact bundle of any deployer verifies."""
    tree = render.render(documents.recipe(str(SMALL_RECIPE)), deployer)
    assert {p for p, data in tree.files.items() if data.startswith(b"#!")} == set(tree.executables)
    findings, _ = verify.integrity_findings(tree)
    assert findings == []
