"""Plain data shared by the domains, and loaders that read it from a named file.

The loaders (`recipe.load`, `snapshot.load`, `certify_catalog`) read through
`dsx.serialization`; nothing here writes a file, opens a socket, starts a process or imports a
third-party client (import-linter's tier and foundation contracts hold the last three).
"""
