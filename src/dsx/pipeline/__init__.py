"""The sentinel's pipeline runtime: stage runners, the analyzer's consumer loop, the validation runner, a source's pump.

It feeds `dsx.health.decisions` from the event store: claims, per-node ordering, worker threads,
retries and dead letters live here, so the decisions stay single-threaded in what they decide and
the domain owns no thread, lock or pool (import-linter's `thread-pools` contract). An adapter: it imports
the domain and the foundation, and the entry points and fakes import it.
"""
