"""Adapters to the files a command names, for domains that work on bytes.

`signing`: the key files of `dsx keygen`, the attestations `dsx sign` writes beside a recipe or
inside a bundle, and the paths `dsx verify` is given; `dsx.signing` signs and verifies the bytes.
"""
