"""Adapters that run certification workloads: the certify engine's executors and the recertifiers.

`kubernetes` runs each run as Jobs and reads their pods' logs; `local` forks ranks of the
torch worker on this machine; `recertify` builds the sentinel's two `Recertifier`s on them.
They implement `dsx.certify.executor.Executor` and `dsx.health.decisions.ports.Recertifier`.
"""
