"""Names every bundle shares, whatever the deployer: the integrity files and the attestation folder.

`checksums.txt` covers every file except itself and `attestation/`; `bundle.json` says what
the bundle is; `attestation/` holds signatures over those two and is the only place a
signature may live, so signing never changes a covered file.
"""

from __future__ import annotations

CHECKSUMS = "checksums.txt"
MANIFEST = "bundle.json"
RECIPE_COPY = "recipe.yaml"
ATTESTATION_DIR = "attestation"
INTOTO = f"{ATTESTATION_DIR}/bundle.intoto.jsonl"
SIGSTORE = f"{ATTESTATION_DIR}/bundle.sigstore.json"
ATTESTATION_FILES = (INTOTO, SIGSTORE)

RESERVED_COMPONENT_NAMES = frozenset({ATTESTATION_DIR, "templates"})
"""Top-level folders a bundle writes for itself (`templates/` is the argocd-helm chart's); a
component's folder of the same name would collide, so such a component is refused."""

BUNDLE_SCHEMA = "dsx.run/bundle/v1"
"""`bundle.json` format identifier."""


def reserved_name_message(where: str) -> str:
    reserved = ", ".join(sorted(RESERVED_COMPONENT_NAMES))
    return f"{where}: name is reserved for the bundle's own folders ({reserved}); rename the component"


def is_attestation(path: str) -> bool:
    return path == ATTESTATION_DIR or path.startswith(ATTESTATION_DIR + "/")


def is_covered(path: str) -> bool:
    """Whether `path` must appear in checksums.txt."""
    return path != CHECKSUMS and not is_attestation(path)
