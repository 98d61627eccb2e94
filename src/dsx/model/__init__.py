"""Plain data shared by the domains, decoded from mappings (`from_dict`), never from a path.

Nothing here reads or writes a file (tests/test_architecture.py scans for it: `dsx.files` reads
what a user names, `dsx.catalog` what the package ships), opens a socket, starts a process or
imports a third-party client (import-linter's tier and foundation contracts hold the last three).
"""
