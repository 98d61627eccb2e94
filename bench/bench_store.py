"""Event-store and analyzer throughput.

- ingest: HealthEvents appended (idempotency key derived, JSON encoded, inserted, committed) per
  second, by batch size, into SQLite (WAL, synchronous=NORMAL, on local disk) and PostgreSQL
  (a local server with its durable defaults: fsync on); batch 1 is one event per transaction.
- re-ingest: the same events appended again (all duplicates), as after a monitor restart.
- consume: claim + ack per second for one consumer (the cost every pipeline stage pays).
- analyzer: events/s through the shipped rules in memory, and as a store consumer on SQLite
  (claim → rules → append escalations → ack).
- parse: `HealthEvent.from_dict` per event, on posted camelCase bodies and on stored rows (the
  version-1 snake_case form every store read decodes); the cost on every ingestion door.
Targets on the 2-core reference machine (issue 7): ≥ 5,000 events/s SQLite ingest, analyzer
≥ 1,000 events/s. Medians of REPEAT runs.

Run: .venv/bin/python bench/bench_store.py   (or `make bench`, `python bench/run.py store`;
`python bench/run.py store --parse-only` for the parse figures alone)
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))  # the PostgreSQL launcher the test suite uses

from dsx.health.decisions import analyzer  # noqa: E402
from dsx.health.decisions.eventstore import EventStore, StageOutcome  # noqa: E402
from dsx.model.health import ComponentClass, Entity, EntityType, HealthEvent, RecommendedAction  # noqa: E402
from dsx.pipeline import analyzer_stage  # noqa: E402
from dsx.store import open_store  # noqa: E402
from fixtures.postgres_server import fresh_schema_url, running_postgres  # noqa: E402

REPEAT = 3
EVENTS = 10_000
BATCHES = (1, 100, 1000)
T0 = datetime(2026, 11, 29, tzinfo=UTC)
CHECKS = ("KernelLogXid", "GpuXid", "GpuNvlinkErrors", "GpuClockSlowdown", "GpuRowRemap", "NodeNotReady")
CODES = ("79", "48", "31", "13", "94", "119", "154")


def fleet_events(count: int, *, salt: str = "", nodes: int = 500) -> list[HealthEvent]:
    """A mixed stream: `nodes` nodes × 8 GPUs, several checks and Xid codes, one event per second."""
    events = []
    for index in range(count):
        node, gpu = index % nodes, index % 8
        check = CHECKS[index % len(CHECKS)]
        events.append(
            HealthEvent(
                agent="kernel-log-monitor" if check == "KernelLogXid" else "gpu-health-monitor",
                component_class=ComponentClass.NODE if check == "NodeNotReady" else ComponentClass.GPU,
                check_name=check,
                node_name=f"node-{node:04d}",
                generated_at=T0 + timedelta(seconds=index),
                is_fatal=index % 3 == 0,
                is_healthy=False,
                message=f"NVRM: Xid (PCI:0000:{0x10 + gpu:02x}:00): {CODES[index % len(CODES)]}, pid={index}",
                recommended_action=RecommendedAction.RESTART_BM if index % 3 == 0 else RecommendedAction.NONE,
                error_codes=(CODES[index % len(CODES)],),
                entities=(
                    Entity(EntityType.GPU, str(gpu)),
                    Entity(EntityType.PCI, f"0000:{0x10 + gpu:02x}:00.0"),
                    Entity(EntityType.NVLINK, str(index % 18)),
                ),
                metadata={"position": f"{salt}{index}", "immediate_action": "RESET_GPU"},
            )
        )
    return events


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def ingest(store: EventStore, events: list[HealthEvent], batch: int) -> None:
    for start in range(0, len(events), batch):
        store.append(events[start : start + batch])


def consume(store: EventStore, limit: int = 500) -> None:
    while claimed := store.claim("bench", "bench-0", limit=limit):
        store.ack("bench", "bench-0", [StageOutcome(s.sequence) for s in claimed])


def store_figures(name: str, opener: Callable[[], Iterator[EventStore]]) -> None:
    for batch in BATCHES:
        count = EVENTS if batch > 1 else EVENTS // 10
        rates, again = [], []
        for run in range(REPEAT):
            events = fleet_events(count, salt=f"{batch}-{run}-")
            with opener() as store:
                rates.append(count / timed(lambda s=store, e=events, b=batch: ingest(s, e, b)))
                if batch == BATCHES[-1]:
                    again.append(count / timed(lambda s=store, e=events, b=batch: ingest(s, e, b)))
                    consumed = count / timed(lambda s=store: consume(s))
        print(f"  {name:<10} ingest, batch {batch:>4}: {statistics.median(rates):>9,.0f} events/s")
        if again:
            print(f"  {name:<10} re-ingest duplicates:  {statistics.median(again):>9,.0f} events/s")
            print(f"  {name:<10} consume (claim+ack):   {consumed:>9,.0f} events/s")


def analyzer_figures() -> None:
    rules = analyzer.shipped_rules()
    events = fleet_events(EVENTS)
    for event in events:
        _ = event.idempotency_key  # computed by the store on append; not the analyzer's cost
    rates = []
    for _ in range(REPEAT):
        engine = analyzer.Analyzer(rules)
        rates.append(len(events) / timed(lambda en=engine: [en.observe(e) for e in events]))
    print(f"  analyzer in memory ({len(rules)} rules): {statistics.median(rates):>9,.0f} events/s")

    stage_rates = []
    for _ in range(REPEAT):
        with tempfile.TemporaryDirectory() as directory:
            store = open_store(f"sqlite:///{directory}/events.db")
            ingest(store, events, 1000)
            stage = analyzer_stage.AnalyzerStage(store, analyzer.Analyzer(rules), owner="bench", batch_size=500)

            def drain(s: analyzer_stage.AnalyzerStage = stage) -> None:
                while s.step():
                    pass

            stage_rates.append(len(events) / timed(drain))
            escalations = store.last_sequence() - len(events)
            store.close()
    print(
        f"  analyzer stage on SQLite:    {statistics.median(stage_rates):>9,.0f} events/s ({escalations} escalations)"
    )


def parse_figures() -> None:
    events = fleet_events(EVENTS)
    forms = {
        "posted (camelCase)": [e.to_dict() for e in events],
        "stored (snake_case)": [json.loads(e.canonical_json) for e in events],
    }
    for name, bodies in forms.items():
        HealthEvent.from_dict(bodies[0])  # warm: the schema's first decode
        seconds = statistics.median(
            timed(lambda b=bodies: [HealthEvent.from_dict(body) for body in b]) for _ in range(REPEAT)
        )
        print(f"  parse {name:<20} {len(bodies) / seconds:>9,.0f} events/s ({seconds / len(bodies) * 1e6:.1f} µs each)")


@contextmanager
def sqlite_store() -> Iterator[EventStore]:
    with tempfile.TemporaryDirectory() as directory:
        store = open_store(f"sqlite:///{directory}/events.db")
        try:
            yield store
        finally:
            store.close()


def main(argv: list[str] | None = None) -> None:
    print(f"command: .venv/bin/python bench/bench_store.py  (medians of {REPEAT}; {EVENTS:,} events per run)")
    parse_figures()
    if "--parse-only" in (argv or []):
        return
    store_figures("sqlite", sqlite_store)
    with running_postgres(durable=True) as server:

        @contextmanager
        def postgres_store() -> Iterator[EventStore]:
            store = open_store(fresh_schema_url(server.url))
            try:
                yield store
            finally:
                store.close()

        print(f"  (PostgreSQL {server.version}, local, fsync on)")
        store_figures("postgresql", postgres_store)
    analyzer_figures()


if __name__ == "__main__":
    main(sys.argv[1:])
