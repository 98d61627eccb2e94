"""Plain data shared by the domains: no I/O, no third-party clients."""
