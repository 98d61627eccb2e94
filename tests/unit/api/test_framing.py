"""Area of concern: HTTP/1.1 framing on both servers (`dsx serve`, the sentinel) agrees with h11,
uvicorn's parser: every raw-byte case is sent over a real socket and the server's answers are read
back with h11's client; the server never answers a request h11 would not have read (no smuggling),
answers what h11 refuses with one JSON error envelope and closes, and never crashes or hangs.

The cases are the classes issue 28 lists (header lines that are not `token: value`, bare CRs,
conflicting or malformed lengths, Transfer-Encoding, Host, NUL, the header-block cap, Expect:
100-continue, the bearer scheme's case) and the ones h11's own tests cover for requests.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import h11
import pytest

from dsx.api import app as api_app
from dsx.api import security, server
from dsx.controllers import http as sentinel_http

from .conftest import TOKEN

AUTH = f"Authorization: Bearer {TOKEN}\r\n"
BODY = b'{"events": []}'
SMUGGLED = b"GET /v1/status HTTP/1.1\r\nHost: dsx\r\n\r\n"


@dataclass(frozen=True)
class Case:
    name: str
    raw: bytes
    post_path: bool = False  # the case's POST goes to the server's own ingestion path


def _post(head: str, body: bytes = BODY) -> bytes:
    return (f"POST {{path}} HTTP/1.1\r\nHost: dsx\r\n{head}").encode() + b"\r\n" + body


CASES = [
    Case("plain GET", b"GET /healthz HTTP/1.1\r\nHost: dsx\r\n\r\n"),
    Case("pipelined GETs", b"GET /healthz HTTP/1.1\r\nHost: dsx\r\n\r\n" * 2),
    Case("HTTP/1.0 without Host", b"GET /healthz HTTP/1.0\r\n\r\n"),
    Case("HTTP/1.1 without Host", b"GET /healthz HTTP/1.1\r\n\r\n"),
    Case("two Host headers", b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
    Case(
        "space in a header name hides the length",
        b"GET /healthz HTTP/1.1\r\nHost: dsx\r\nX Foo: bar\r\nContent-Length: 39\r\n\r\n" + SMUGGLED,
    ),
    Case("space before the colon", b"GET /healthz HTTP/1.1\r\nHost: dsx\r\nContent-Length : 39\r\n\r\n" + SMUGGLED),
    Case("non-ASCII header name", "GET /healthz HTTP/1.1\r\nHost: dsx\r\nX-Ünï: 1\r\n\r\n".encode()),
    Case("lone CR ends a header line", b"GET /healthz HTTP/1.1\r\nHost: dsx\rContent-Length: 39\r\n\r\n" + SMUGGLED),
    Case("bare CR inside a value", ("GET /v1/status HTTP/1.1\r\nHost: dsx\r\nX-A: a\r" + AUTH + "\r\n").encode()),
    Case("NUL in a value", b"GET /healthz HTTP/1.1\r\nHost: dsx\r\nX-A: a\x00b\r\n\r\n"),
    Case("vertical tab as a separator", b"GET /healthz HTTP/1.1\r\nHost:\x0bdsx\r\n\r\n"),
    Case("obsolete line folding", b"GET /healthz HTTP/1.1\r\nHost: dsx\r\nX-A: a\r\n b\r\n\r\n"),
    Case(
        "two differing Content-Lengths",
        _post(AUTH + "Content-Length: 14\r\nContent-Length: 53\r\n", BODY + SMUGGLED),
        post_path=True,
    ),
    Case("Content-Length with trailing whitespace", _post(AUTH + "Content-Length: 14 \r\n"), post_path=True),
    Case("Content-Length superscript two", _post(AUTH + "Content-Length: \u00b2\r\n", b"{}"), post_path=True),
    Case(
        "Content-Length of 5,000 digits",
        b"GET /healthz HTTP/1.1\r\nHost: dsx\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n",
    ),
    Case("negative Content-Length", _post(AUTH + "Content-Length: -1\r\n", b""), post_path=True),
    Case(
        "chunked POST",
        _post(AUTH + "Transfer-Encoding: chunked\r\n", b"e\r\n" + BODY + b"\r\n0\r\n\r\n"),
        post_path=True,
    ),
    Case(
        "chunked GET smuggles",
        b"GET /healthz HTTP/1.1\r\nHost: dsx\r\nTransfer-Encoding: chunked\r\n\r\n27\r\n" + SMUGGLED + b"\r\n0\r\n\r\n",
    ),
    Case("chunked without a token", _post("Transfer-Encoding: chunked\r\n", b"0\r\n\r\n"), post_path=True),
    Case(
        "Transfer-Encoding and Content-Length",
        _post(AUTH + "Transfer-Encoding: chunked\r\nContent-Length: 14\r\n", b"0\r\n\r\n" + SMUGGLED),
        post_path=True,
    ),
    Case("body left after a 401", _post("Content-Length: 53\r\n", BODY + SMUGGLED), post_path=True),
    Case(
        "header block over the cap", b"GET /healthz HTTP/1.1\r\nHost: dsx\r\n" + b"X-Pad: " + b"a" * 65000 + b"\r\n\r\n"
    ),
    Case("request line without a version", b"GET /healthz\r\n\r\n"),
    Case("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
    Case(
        "lowercase bearer",
        ("GET /v1/status HTTP/1.1\r\nHost: dsx\r\nAuthorization: bearer " + TOKEN + "\r\n\r\n").encode(),
    ),
    Case(
        "uppercase BEARER",
        ("GET /v1/status HTTP/1.1\r\nHost: dsx\r\nAuthorization: BEARER " + TOKEN + "\r\n\r\n").encode(),
    ),
    Case(
        "Expect 100-continue without a token",
        _post("Content-Length: 14\r\nExpect: 100-continue\r\n", b""),
        post_path=True,
    ),
]


def h11_requests(raw: bytes) -> tuple[int, bool]:
    """(requests h11 reads from `raw` as a server, whether it refuses the bytes after them)."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=server.HEADER_BLOCK_BYTES)
    conn.receive_data(raw)
    requests = 0
    try:
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Request):
                requests += 1
            elif isinstance(event, h11.EndOfMessage):
                if conn.our_state is h11.SEND_RESPONSE:
                    conn.send(h11.Response(status_code=200, headers=[("Content-Length", "0")]))
                    conn.send(h11.EndOfMessage())
                if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                    conn.start_next_cycle()
            elif event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                return requests, False
    except h11.RemoteProtocolError:
        return requests, True


def answers(port: int, raw: bytes) -> tuple[list[tuple[int, bytes]], bool]:
    """Every response the server sends (status, body), read by h11's client, and whether the server
    closed the connection within 5 s. Bytes h11 cannot read as a response fail the test."""
    client = h11.Connection(h11.CLIENT)

    def expect_one() -> None:  # h11's client reads an answer only to a request it sent
        client.send(h11.Request(method="GET", target="/", headers=[("Host", "dsx")]))
        client.send(h11.EndOfMessage())

    expect_one()
    out: list[tuple[int, bytes]] = []
    status, body = 0, b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(raw)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                data = sock.recv(65536)
            except TimeoutError:
                return out, False
            except ConnectionResetError:
                return out, True
            client.receive_data(data)
            while True:
                try:
                    event = client.next_event()
                except h11.RemoteProtocolError:
                    if data:  # bytes that are no response
                        raise
                    return out, True  # closed while no answer was due (our own next-request guess)
                if event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                    break
                if isinstance(event, h11.InformationalResponse):
                    out.append((event.status_code, b""))
                elif isinstance(event, h11.Response):
                    status, body = event.status_code, b""
                elif isinstance(event, h11.Data):
                    body += bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    out.append((status, body))
                    if client.our_state is h11.DONE and client.their_state is h11.DONE:
                        client.start_next_cycle()
                        expect_one()
            if not data:
                return out, True
    return out, False


@pytest.fixture(params=["sentinel", "api"], scope="module")
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    authenticator = security.TokenAuthenticator(frozenset({security._digest(TOKEN)}))
    limits = server.ServerLimits(header_timeout_seconds=2, body_timeout_seconds=2, idle_timeout_seconds=2)
    stops: list[Callable[[], None]] = []
    if request.param == "sentinel":
        routes = sentinel_http.Routes(
            ready=lambda: None,
            metrics=lambda: b"dsx_sentinel_up 1\n",
            status=lambda: {"ok": True},
            ingest=lambda events: {"accepted": len(events)},
            authenticator=authenticator,
        )
        running = sentinel_http.SentinelHttpServer(routes, port=0, limits=limits)
        running.start()
        stops.append(running.stop)
        port, post = running.port, "/v1/events"
    else:
        settings = api_app.ApiSettings(token_digests=authenticator.token_digests, rate_per_second=1000, burst=1000)
        bound, loop = server.asgi_server(api_app.create_app(settings), authenticator, port=0, limits=limits)
        bound.start("test-api")
        stops.extend([loop.close, bound.stop])
        port, post = bound.port, "/v1/recipe"
    yield post, port
    for stop in reversed(stops):
        stop()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_framing_agrees_with_h11(served: tuple[str, int], case: Case) -> None:
    post, port = served
    raw = case.raw.replace(b"{path}", post.encode()) if case.post_path else case.raw
    parsed, refused = h11_requests(raw)
    got, closed = answers(port, raw)
    finals = [(status, body) for status, body in got if status >= 200]
    assert closed, f"{case.name}: the server kept the connection open after {got}"
    assert len(finals) <= parsed + (1 if refused else 0) or (parsed == 0 and len(finals) == 1), (
        f"{case.name}: {len(finals)} answers for {parsed} request(s) h11 reads: a request was smuggled ({got})"
    )
    if refused and parsed == 0:
        assert len(finals) == 1, f"{case.name}: h11 refuses it; the server answered {got}"
    for status, body in finals:
        assert status < 500 or status == 501, f"{case.name}: {status} {body[:200]!r}"  # 501: a method not served
        if status >= 400:
            error = json.loads(body)["error"]  # dsx's envelope, never an HTML page
            assert error["code"] and error["message"]
    if case.name == "Expect 100-continue without a token":
        assert [s for s, _ in got] == [401], got  # no 100 Continue before the token is checked
    if case.name in ("lowercase bearer", "uppercase BEARER"):
        assert finals[0][0] != 401, got  # RFC 9110: the scheme is case-insensitive (the API: 404, authorized)
    if "smuggle" in case.name or "hides" in case.name or "after a 401" in case.name:
        assert not any(b'"ok"' in body for _, body in finals[1:]), got  # /v1/status never answered from a body
