"""The sentinel's HTTP ingestion alone: CPU per `POST /v1/events`, a new connection per post vs a kept one.

The server is the sentinel's own (`dsx.controllers.http.SentinelHttpServer` on `dsx.api.server`,
h11 framing, token check, `dsx.health.parsing.ingest` parsing, `dsx.store.group_commit` into a SQLite
store) in a child process of its own, so its CPU time (utime + stime from /proc) is the server's
alone. Clients in this process post one healthy event per request, as a node's monitor does at
fleet traffic: `fresh` opens a connection per post (`httpclient.request`, the monitors before
issue 28), `kept` holds one per sender (`monitors.HttpSink` on `httpclient.KeptConnection`).
Rounds alternate the two; medians are printed with the load average.

    python bench/run.py ingest                       # 5 rounds x 2,000 posts from 8 senders
    python bench/run.py ingest --rounds=3 --posts=1000
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))  # bench_scale: one home for the /proc readings

from bench_scale import cpu_seconds, free_port, load_average  # noqa: E402
from dsx import httpclient  # noqa: E402
from dsx.controllers import monitors, sim_load  # noqa: E402
from dsx.health.parsing import ingest  # noqa: E402

TOKEN = "bench-ingest-token-0123456789abcdef"
SENDERS = 8
SERVER = """
import sys, time
from dsx.api import security
from dsx.controllers import http
from dsx.store import open_store
from dsx.store.group_commit import GroupCommit

url, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
open_store(url, init=True)
commit = GroupCommit(open_store(url))

def ingest(events):
    appended = commit.append(events)
    created = sum(1 for a in appended if a.created)
    return {"accepted": len(appended), "created": created, "sequences": [a.sequence for a in appended]}

routes = http.Routes(
    ready=lambda: None, metrics=lambda: b"", status=lambda: {}, ingest=ingest,
    authenticator=security.TokenAuthenticator(security.load_tokens(None, "BENCH_TOKENS")),
)
server = http.SentinelHttpServer(routes, port=port)
server.start()
print("ready", flush=True)
time.sleep(3600)
"""


def post_fresh(url: str) -> Callable[[str], None]:
    def post(node: str) -> None:
        document = ingest.to_document([sim_load.healthy_event(node, 0, datetime.now(UTC))])
        answer = httpclient.request(
            "POST", url, json_body=document, headers={"Authorization": f"Bearer {TOKEN}"}, timeout_seconds=30
        )
        if not answer.ok:
            raise RuntimeError(f"{answer.status}: {answer.text(200)}")

    return post


def post_kept(url: str) -> Callable[[str], None]:
    sink = monitors.HttpSink(url, TOKEN)

    def post(node: str) -> None:
        sink.send([sim_load.healthy_event(node, 0, datetime.now(UTC))])

    return post


def one_round(pid: int, url: str, kind: str, posts: int, tag: str) -> tuple[float, float]:
    """(server CPU ms per post, posts per second)."""
    per_sender = posts // SENDERS
    makers = {"fresh": post_fresh, "kept": post_kept}

    def sender(index: int) -> None:
        post = makers[kind](url)
        for n in range(per_sender):
            post(f"{tag}-{kind}-{index}-{n}")

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(SENDERS)]
    cpu0, started = cpu_seconds(pid), time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed, cpu = time.monotonic() - started, cpu_seconds(pid) - cpu0
    sent = per_sender * SENDERS
    return cpu / sent * 1e3, sent / elapsed


def main(argv: list[str]) -> None:
    options = dict(a.removeprefix("--").split("=", 1) for a in argv if "=" in a)
    rounds, posts = int(options.get("rounds", "5")), int(options.get("posts", "2000"))
    print(f"command: python bench/run.py ingest {' '.join(argv)}  (load average at start: {load_average()})")
    with tempfile.TemporaryDirectory(prefix="dsx-bench-ingest-") as scratch:
        port = free_port()
        env = {**os.environ, "BENCH_TOKENS": TOKEN, "PYTHONPATH": str(ROOT / "src")}
        store = f"sqlite:///{Path(scratch) / 'events.db'}"
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, store, str(port), TOKEN], env=env, stdout=subprocess.PIPE, text=True
        )
        try:
            assert server.stdout is not None and server.stdout.readline().strip() == "ready"
            url = f"http://127.0.0.1:{port}/v1/events"
            figures: dict[str, list[tuple[float, float]]] = {"fresh": [], "kept": []}
            for index in range(rounds):
                for kind in ("fresh", "kept"):
                    cpu_ms, rate = one_round(server.pid, url, kind, posts, f"r{index}")
                    figures[kind].append((cpu_ms, rate))
                    load = load_average()
                    print(f"  round {index + 1} {kind:<5} {cpu_ms:.2f} ms CPU/post, {rate:.0f} posts/s (load {load})")
        finally:
            server.kill()
            server.wait()
    for kind, values in figures.items():
        cpu = statistics.median(v[0] for v in values)
        rate = statistics.median(v[1] for v in values)
        print(f"{kind:<5} median {cpu:.2f} ms server CPU per post, {rate:.0f} posts/s ({SENDERS} senders)")
    ratio = statistics.median(v[0] for v in figures["fresh"]) / statistics.median(v[0] for v in figures["kept"])
    print(f"kept / fresh: {1 / ratio:.2f} x the CPU per post; load average at the end: {load_average()}")
