"""The pipeline runtime: stage runners, the analyzer's consumer loop, the validation runner, a source's pump.

It feeds `dsx.health.decisions` from the event store: claims, per-node ordering, worker threads,
retries and dead letters live here, so the decisions stay single-minded.
"""
