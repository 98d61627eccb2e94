"""`dsx keygen`, `dsx sign` and `dsx verify`: keys, signatures and offline trust verdicts."""

from __future__ import annotations

import os
from collections.abc import Callable
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
@click.argument("path", type=click.Path())
def sign(key_path: str, passphrase_env: str, path: str) -> None:
    """Sign a recipe file or a bundle directory.

    Writes PATH.intoto.jsonl and PATH.sigstore.json beside a file, or attestation/ inside a bundle.
    """
    from dsx.files import signing as signing_files

    signer = load_signer(key_path, passphrase_env)
    target = Path(path)
    if target.is_dir():
        written = signing_files.sign_bundle_directory(target, signer)
    elif target.exists():
        written = signing_files.sign_file(target, signer)
    else:
        raise BadInputError(f"{target}: not found")
    for written_path in written:
        click.echo(f"wrote {written_path}")
    click.echo(f"signed by key {signer.key_id}")


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
def verify(path: str, key_paths: tuple[str, ...], trusted_dir: str | None, fmt: str) -> None:
    """Verify a signed recipe, bundle directory or attestation offline.

    Exit 0 only when verified; 1 when tampered or unsigned; 2 when the input cannot be read.
    """
    from dsx.files import signing as signing_files

    trusted = load_trusted(key_paths, trusted_dir)
    try:
        verdict = signing_files.verify_path(Path(path), trusted)
    except NotFoundError as exc:
        raise BadInputError(str(exc)) from exc
    if fmt == "json":
        click.echo(serialization.dump_json(verdict.to_dict()), nl=False)
    else:
        click.echo(render_verdict(verdict), nl=False)
    run_result(verdict.exit_code)
