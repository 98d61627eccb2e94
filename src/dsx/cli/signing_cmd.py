"""`dsx keygen`, `dsx sign` and `dsx verify`: keys, signatures and offline trust verdicts."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from dsx import serialization
from dsx.cli.main import run_result
from dsx.errors import BadInputError, NotFoundError

if TYPE_CHECKING:
    from dsx.signing.keys import KeySigner, TrustedKey
    from dsx.signing.verdict import Verdict

F = TypeVar("F", bound=Callable[..., Any])

ALGORITHMS = ("ecdsa-p256", "ed25519")
PASSPHRASE_ENV = "DSX_SIGNING_PASSPHRASE"  # noqa: S105 (the name of a variable, not a secret)


def passphrase_env_option(help_text: str) -> Callable[[F], F]:
    """`--passphrase-env NAME`: the variable a private key's passphrase is read from (never a flag value)."""
    return click.option("--passphrase-env", default=PASSPHRASE_ENV, show_default=True, metavar="NAME", help=help_text)


def _passphrase(env_name: str) -> bytes | None:
    value = os.environ.get(env_name)
    return value.encode("utf-8") if value else None


def load_signer(key_path: str, passphrase_env: str) -> KeySigner:
    """The private key at `key_path`, decrypted with the passphrase in `$passphrase_env` when set."""
    from dsx.files import signing as signing_files

    return signing_files.load_signer(Path(key_path), _passphrase(passphrase_env), passphrase_env=passphrase_env)


@click.command()
@click.option("--out", "prefix", required=True, metavar="PREFIX", help="Writes PREFIX.key (0600) and PREFIX.pub.")
@click.option(
    "--algorithm",
    type=click.Choice(ALGORITHMS),
    default="ecdsa-p256",
    show_default=True,
    help="Key type; both verify offline and with cosign.",
)
@passphrase_env_option("Encrypt the private key with the passphrase in this environment variable (when set).")
def keygen(prefix: str, algorithm: str, passphrase_env: str) -> None:
    """Create a signing key pair."""
    from dsx.files import signing as signing_files
    from dsx.signing.signer import Algorithm

    passphrase = _passphrase(passphrase_env)
    paths = signing_files.write_key_pair(Path(prefix), Algorithm(algorithm), passphrase)
    trusted = signing_files.load_public_key(paths.public)
    state = "encrypted" if passphrase else "unencrypted"
    click.echo(f"private key: {paths.private} ({state}, mode 0600)")
    click.echo(f"public key:  {paths.public}")
    click.echo(f"key id:      {trusted.key_id}")


@click.command()
@click.option("--key", "key_path", required=True, type=click.Path(dir_okay=False), help="Private key file.")
@passphrase_env_option("Environment variable holding the passphrase of an encrypted --key.")
@click.option(
    "--revision",
    type=click.IntRange(min=0),
    help="The publisher's revision, higher for every newer bundle or recipe; `dsx verify --min-revision` holds to it.",
)
@click.argument("path", type=click.Path())
def sign(key_path: str, passphrase_env: str, revision: int | None, path: str) -> None:
    """Sign a recipe file or a bundle directory.

    Writes PATH.intoto.jsonl and PATH.sigstore.json beside a file, or attestation/ inside a bundle.
    The signed statement records when it was signed (SOURCE_DATE_EPOCH when set, else now) and
    --revision when given, so an older signed copy can be refused (`dsx verify --min-revision`).
    """
    from dsx.files import signing as signing_files
    from dsx.settings import source_date
    from dsx.signing import provenance

    signer = load_signer(key_path, passphrase_env)
    signed_at = source_date(os.environ) or datetime.now(UTC).replace(microsecond=0)
    freshness = provenance.Freshness(revision, signed_at)
    target = Path(path)
    if target.is_dir():
        written = signing_files.sign_bundle_directory(target, signer, freshness)
    elif target.exists():
        written = signing_files.sign_file(target, signer, freshness=freshness)
    else:
        raise BadInputError(f"{target}: not found")
    for written_path in written:
        click.echo(f"wrote {written_path}")
    click.echo(f"signed by key {signer.key_id}")


def _instant(text: str) -> datetime:
    from dsx.signing import provenance

    at = provenance.parse_time(text)
    if at is None:
        raise BadInputError(f"--not-before: {text!r} is not an RFC 3339 time (e.g. 2026-12-01T00:00:00Z)")
    if at.tzinfo is None:
        raise BadInputError(f"--not-before: {text!r} has no time zone; add Z or an offset")
    return at.astimezone(UTC)


def load_trusted(key_paths: tuple[str, ...], trusted_dir: str | None) -> list[TrustedKey]:
    from dsx.files import signing as signing_files

    try:
        trusted = [signing_files.load_public_key(Path(p)) for p in key_paths]
        if trusted_dir:
            trusted += signing_files.load_trusted_keys(Path(trusted_dir))
    except NotFoundError as exc:
        raise BadInputError(str(exc)) from exc
    return trusted


def render_verdict(verdict: Verdict) -> str:
    lines = [f"{verdict.level.value}: {verdict.kind.value} {verdict.target}"]
    if verdict.signed_by:
        lines.append(f"  signed by: {', '.join(verdict.signed_by)}")
    lines.append(f"  files checked: {verdict.files_checked}")
    lines += [f"  {finding}" for finding in verdict.findings]
    lines += [f"  note: {note}" for note in verdict.notes]
    return "\n".join(lines) + "\n"


@click.command()
@click.argument("path", type=click.Path())
@click.option("--key", "key_paths", multiple=True, type=click.Path(dir_okay=False), help="Trusted public key (repeat).")
@click.option(
    "--trusted-keys", "trusted_dir", type=click.Path(), metavar="DIR", help="Directory of trusted *.pub / *.pem keys."
)
@click.option(
    "--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True, help="Verdict format."
)
@click.option(
    "--min-revision", type=click.IntRange(min=0), help="Refuse a signature whose revision is lower (or missing)."
)
@click.option(
    "--not-before",
    metavar="TIME",
    help="Refuse a signature made before TIME (RFC 3339, e.g. 2026-12-01T00:00:00Z) or without a time.",
)
@click.option(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="The highest revision verified so far: refuse a lower one, and record this one once verified.",
)
def verify(
    path: str,
    key_paths: tuple[str, ...],
    trusted_dir: str | None,
    fmt: str,
    min_revision: int | None,
    not_before: str | None,
    state_path: str | None,
) -> None:
    """Verify a signed recipe, bundle directory or attestation offline.

    Exit 0 only when verified; 1 when tampered, unsigned or stale (older than --min-revision,
    --not-before or the revision --state recorded); 2 when the input cannot be read.
    """
    from dsx.files import signing as signing_files
    from dsx.signing import verify as verify_module
    from dsx.signing.verdict import TrustLevel

    trusted = load_trusted(key_paths, trusted_dir)
    state = Path(state_path) if state_path else None
    rule = None
    if min_revision is not None or not_before is not None or state is not None:
        recorded = signing_files.read_verified_revision(state) if state is not None else None
        floor, source = min_revision, "--min-revision"
        if recorded is not None and (floor is None or recorded > floor):
            floor, source = recorded, f"last verified, {state}"
        rule = verify_module.FreshnessRule(floor, _instant(not_before) if not_before else None, source)
    try:
        verdict = signing_files.verify_path(Path(path), trusted, rule)
    except NotFoundError as exc:
        raise BadInputError(str(exc)) from exc
    if state is not None and verdict.level is TrustLevel.VERIFIED and verdict.revision is not None:
        signing_files.record_verified_revision(state, path, verdict.revision)
    if fmt == "json":
        click.echo(serialization.dump_json(verdict.to_dict()), nl=False)
    else:
        click.echo(render_verdict(verdict), nl=False)
    run_result(verdict.exit_code)
