"""Signing and offline verification of what dsx generates.

Why a package of its own: an operator in an air-gapped site must prove, with nothing but a
public key, that the recipe or bundle they apply is what was generated and approved. Every
signature is a DSSE envelope over an in-toto Statement v1; the predicate type says what is
claimed (SLSA provenance for bundles and recipes, a validity predicate for certification).
Nothing here opens a network connection or a file: the domain works on bytes, and
`dsx.files.signing` reads and writes the key files, attestations and signed files a command names.

Modules: `signer` (the Signer protocol and its test fake), `keys` (Ed25519 / ECDSA P-256 keys as
PEM), `dsse` (envelope and pre-authentication encoding), `statement` (in-toto statements,
`sign_statement` / `verify_envelope`), `sigstore` (Sigstore bundle v0.3 form), `provenance`
(SLSA predicates), `attest` (attach attestations to bundles and files), `verify` (trust levels).
"""
