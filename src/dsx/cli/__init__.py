"""The `dsx` command line: parses flags, builds adapters, calls the domain, prints results.

No business logic lives here. Each command group is its own module, imported only when
that command runs, so `dsx recipe` does not pay for torch, lightkube or fastapi.
"""
