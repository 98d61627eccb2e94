"""Bundles: a recipe rendered into the files a deployment tool applies.

Why a package of its own: users deploy through the tools they already run (Helm, Argo CD,
Flux, Helmfile), and what they apply must be reviewable, reproducible and provably what was
generated. Rendering is pure: recipe in, in-memory file tree out (`render.render`); each
deployer is one module; `tree` is the only code that touches a directory. Every bundle ends
with `bundle.json` and a closed-world `checksums.txt`, which `dsx.signing` signs and verifies.
"""
