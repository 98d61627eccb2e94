"""Area of concern: the one hardened HTTP server under `dsx serve` and the sentinel — slow clients
(headers or bodies trickled byte by byte, idle kept-alive connections, more connections than
the bound) never stop /healthz answering, each is cut at its deadline, and both servers apply
the same token rule. Real sockets against real servers on loopback."""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dsx.api import app as api_app
from dsx.api import security, server
from dsx.controllers import http as sentinel_http

from .conftest import TOKEN

Start = Callable[[server.ServerLimits], int]
"""Start a server with these limits; its port."""

POST_PATH = {"sentinel": "/v1/events", "api": "/v1/recipe"}
SRC = Path(__file__).resolve().parents[3] / "src"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(params=["sentinel", "api"])
def start(request: pytest.FixtureRequest) -> Iterator[Start]:
    authenticator = security.TokenAuthenticator(frozenset({security._digest(TOKEN)}))
    stops: list[Callable[[], None]] = []

    def sentinel(limits: server.ServerLimits) -> int:
        routes = sentinel_http.Routes(
            ready=lambda: None,
            metrics=lambda: b"dsx_sentinel_up 1\n",
            status=lambda: {},
            ingest=lambda events: {"accepted": len(events)},
            authenticator=authenticator,
        )
        running = sentinel_http.SentinelHttpServer(routes, port=0, limits=limits)
        running.start()
        stops.append(running.stop)
        return running.port

    def api(limits: server.ServerLimits) -> int:
        settings = api_app.ApiSettings(token_digests=authenticator.token_digests, rate_per_second=1000, burst=1000)
        bound, loop = server.asgi_server(api_app.create_app(settings), authenticator, port=0, limits=limits)
        bound.start("test-api")
        stops.extend([loop.close, bound.stop])
        return bound.port

    yield sentinel if request.param == "sentinel" else api
    for stop in reversed(stops):
        stop()


def get(port: int, path: str, *, token: bool = False, timeout: float = 5.0) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"} if token else {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def closed_after(sock: socket.socket, trickle: bytes, *, every_seconds: float, limit_seconds: float) -> float:
    """Send `trickle` a byte at a time; seconds until the server closes the connection."""
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < limit_seconds:
        readable, _, _ = select.select([sock], [], [], every_seconds)
        if readable:
            try:
                if not sock.recv(65536):
                    return time.monotonic() - started
            except ConnectionResetError:
                return time.monotonic() - started
            continue  # an answer (e.g. 408/500) before the close
        try:
            sock.sendall(trickle[sent % len(trickle) : sent % len(trickle) + 1])
        except (BrokenPipeError, ConnectionResetError):
            return time.monotonic() - started
        sent += 1
    raise AssertionError(f"still open after {limit_seconds} s")


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


@pytest.mark.parametrize(("clients", "settle_seconds"), [(50, 0.0), (300, 2.0)])
def test_clients_trickling_headers_do_not_stop_healthz(start: Start, clients: int, settle_seconds: float) -> None:
    """300 is more than the 128-connection bound: a newcomer takes the slot of the one that waited
    longest for its headers, so the probe is served, not refused."""
    port = start(server.ServerLimits())
    slow = [connect(port) for _ in range(clients)]
    request = b"GET /healthz HTTP/1.1\r\nHost: dsx\r\nX-Slow: " + b"z" * 200
    stop = threading.Event()

    def trickle() -> None:
        position = 0
        while not stop.is_set() and position < len(request):
            for sock in slow:
                with contextlib.suppress(OSError):
                    sock.sendall(request[position : position + 1])
            position += 1
            stop.wait(0.05)

    sender = threading.Thread(target=trickle)
    sender.start()
    try:
        time.sleep(settle_seconds)  # request lines complete, headers still trickling: these are waiting too
        for _ in range(10):
            status, body = get(port, "/healthz", timeout=5)  # a starved server would time this out
            assert (status, body.strip()) == (200, b"ok")
            time.sleep(0.1)
    finally:
        stop.set()
        sender.join()
        for sock in slow:
            sock.close()


def test_uploads_stuck_in_their_body_give_way_to_probes(start: Start) -> None:
    """A client holding a token can still only hold a slot while nobody needs it: with every slot
    waiting for a body, /healthz takes the oldest upload's slot (issue 28: 150 slow uploads kept
    /healthz at 503); the uploads that keep theirs finish."""
    port = start(server.ServerLimits(max_connections=3))
    path = "/v1/events" if start.__name__ == "sentinel" else "/v1/recipe"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: dsx\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n"
    ).encode()
    busy = [connect(port) for _ in range(3)]
    try:
        for sock in busy:
            sock.sendall(head)  # headers read: the body is awaited
            time.sleep(0.05)
        time.sleep(0.3)
        status, _ = get(port, "/healthz")
        assert status == 200
        assert busy[0].recv(65536) == b""  # the oldest upload was closed for the probe
        for sock in busy[1:]:
            sock.sendall(b"{}")
            assert sock.recv(65536).startswith(b"HTTP/1.1 ")
    finally:
        for sock in busy:
            sock.close()


def test_trickled_headers_are_cut_at_the_header_deadline(start: Start) -> None:
    port = start(server.ServerLimits(header_timeout_seconds=1.0))
    with connect(port) as sock:
        seconds = closed_after(
            sock, b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"z" * 500, every_seconds=0.05, limit_seconds=10
        )
    assert 0.8 <= seconds <= 4.0, seconds


def test_a_trickled_body_is_cut_at_the_body_deadline(request: pytest.FixtureRequest, start: Start) -> None:
    port = start(server.ServerLimits(body_timeout_seconds=1.0))
    path = POST_PATH[request.node.callspec.params["start"]]
    head = (
        f"POST {path} HTTP/1.1\r\nHost: dsx\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
    ).encode()
    with connect(port) as sock:
        sock.sendall(head)
        seconds = closed_after(sock, b" ", every_seconds=0.05, limit_seconds=10)
    assert 0.8 <= seconds <= 4.0, seconds


def test_an_idle_kept_alive_connection_is_closed(start: Start) -> None:
    port = start(server.ServerLimits(idle_timeout_seconds=1.0))
    with connect(port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: dsx\r\n\r\n")
        answer = b""
        while not answer.rstrip().endswith(b"ok"):  # the head and the body may come in two reads
            answer += sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200")
        began = time.monotonic()
        sock.settimeout(5)  # never closed: recv raises
        assert sock.recv(65536) == b""
        assert time.monotonic() - began >= 0.8  # closed by the idle timeout, not at once


def test_connections_over_the_bound_evict_the_longest_waiting(start: Start) -> None:
    port = start(server.ServerLimits(max_connections=4, header_timeout_seconds=30.0))
    silent = [connect(port) for _ in range(4)]
    try:
        time.sleep(0.3)  # accepted: each holds a slot, waiting for headers
        assert get(port, "/healthz", timeout=5)[0] == 200  # without eviction it would wait 30 s for a slot
        silent[0].settimeout(2)
        assert silent[0].recv(65536) == b""  # the oldest gave up its slot
    finally:
        for sock in silent:
            sock.close()


MALFORMED = {
    "nested 100,000 deep": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "NaN": (b'{"service": NaN}', "not a finite number"),
    "duplicate key": (b'{"service": "eks", "service": "gke"}', "appears twice"),
    "not JSON": (b"{'service': 'eks'}", "not JSON"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_json_bodies_are_400_on_both_servers(
    request: pytest.FixtureRequest, start: Start, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    port = start(server.ServerLimits())
    body, problem = MALFORMED[case]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(
            "POST",
            POST_PATH[request.node.callspec.params["start"]],
            body=body,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        response = connection.getresponse()
        answer = json.loads(response.read())
    finally:
        connection.close()
    assert response.status == 400, answer
    assert answer["error"]["code"] == "INVALID_REQUEST" and problem in answer["error"]["message"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_one_token_rule_on_both_servers(start: Start) -> None:
    port = start(server.ServerLimits())
    assert get(port, "/healthz")[0] == 200
    assert get(port, "/readyz")[0] == 200
    for path in ("/metrics", "/v1/nothing"):
        status, body = get(port, path)
        assert status == 401 and json.loads(body)["error"]["code"] == "UNAUTHORIZED", path
    status, body = get(port, "/metrics", token=True)
    assert status == 200 and b"dsx_" in body
    assert get(port, "/v1/nothing", token=True)[0] == 404


def test_dsx_serve_runs_the_api_on_this_server_and_stops_on_sigterm() -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC), "DSX_API_TOKENS": TOKEN}
    process = subprocess.Popen(
        [sys.executable, "-m", "dsx", "serve", "--port", str(port)], env=env, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                status, body = get(port, "/healthz", timeout=1)
                break
            assert process.poll() is None and time.monotonic() < deadline, "dsx serve did not come up"
            time.sleep(0.2)
        assert (status, body) == (200, b"ok")
        assert get(port, "/metrics")[0] == 401
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        assert response.getheader("Server") == "dsx"
        connection.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_stop_lets_answers_in_flight_finish_and_closes_the_idle() -> None:
    """SIGTERM drains (issue 28): a request already in its handler is answered; an idle
    kept-alive connection is closed at once; nothing new is accepted."""
    authenticator = security.TokenAuthenticator(frozenset({security._digest(TOKEN)}))
    stored: list[int] = []

    def slow_status() -> dict[str, int]:
        time.sleep(1.0)
        stored.append(1)
        return {"nodes": 0}

    routes = sentinel_http.Routes(
        ready=lambda: None, metrics=lambda: b"", status=slow_status, ingest=lambda _: {}, authenticator=authenticator
    )
    running = sentinel_http.SentinelHttpServer(routes, port=0)
    running.start()
    port = running.port
    idle = connect(port)
    idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: dsx\r\n\r\n")
    assert idle.recv(65536).startswith(b"HTTP/1.1 200")
    answers: list[int] = []

    def post() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/v1/status", headers={"Authorization": f"Bearer {TOKEN}"})
        answers.append(connection.getresponse().status)

    sender = threading.Thread(target=post)
    sender.start()
    time.sleep(0.3)  # the POST is in the handler
    began = time.monotonic()
    left = running._server.stop(drain_seconds=5)
    sender.join(5)
    assert left == 0 and answers == [200] and stored == [1]
    assert time.monotonic() - began < 3
    assert idle.recv(65536) == b""  # the idle connection was closed
    idle.close()
    with pytest.raises(OSError):
        connect(port).sendall(b"GET /healthz HTTP/1.1\r\nHost: dsx\r\n\r\n")
