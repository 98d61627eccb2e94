"""`dsx.httpclient`: an error status is an answer, a missing answer is a TransportError, bodies are bounded."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest

from dsx import httpclient


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status = 418 if body.get("refuse") else 200
        answer = json.dumps({"echo": body, "type": self.headers["Content-Type"]}).encode() * body.get("repeat", 1)
        self.send_response(status)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_: object) -> None:
        return


@pytest.fixture
def url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/x"
    server.shutdown()
    server.server_close()


def test_json_round_trip_and_an_error_status_is_an_answer(url: str) -> None:
    ok = httpclient.request("POST", url, json_body={"a": 1}, timeout_seconds=5)
    assert ok.ok and ok.json() == {"echo": {"a": 1}, "type": "application/json"}
    refused = httpclient.request("POST", url, json_body={"refuse": True}, timeout_seconds=5)
    assert (refused.ok, refused.status) == (False, 418)
    assert refused.json()["echo"] == {"refuse": True}


def test_bodies_are_cut_at_max_bytes(url: str) -> None:
    answer = httpclient.request("POST", url, json_body={"repeat": 50}, timeout_seconds=5, max_bytes=100)
    assert answer.truncated and len(answer.body) == 100


def test_no_answer_is_a_transport_error() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(httpclient.TransportError, match="cannot connect") as caught:
        httpclient.request("GET", f"http://127.0.0.1:{port}/", timeout_seconds=5)
    assert not caught.value.offline
    with pytest.raises(httpclient.TransportError, match="only http"):
        httpclient.request("GET", "file:///etc/passwd", timeout_seconds=5)


class _KeptHandler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1, kept alive; `{"hang_up": true}` answers, then closes without saying so (an idle close)."""

    protocol_version = "HTTP/1.1"
    peers: ClassVar[list[int]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.peers.append(self.client_address[1])
        answer = json.dumps({"n": body["n"]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)
        self.wfile.flush()
        if body.get("hang_up"):
            self.close_connection = True

    def log_message(self, *_: object) -> None:
        return


@pytest.fixture
def kept_url() -> Iterator[str]:
    _KeptHandler.peers = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KeptHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/events"
    server.shutdown()
    server.server_close()


def test_a_kept_connection_carries_every_request(kept_url: str) -> None:
    kept = httpclient.KeptConnection(kept_url, timeout_seconds=5)
    answers = [kept.request("POST", json_body={"n": n}).json()["n"] for n in range(20)]
    assert answers == list(range(20))
    assert kept.connections_opened == 1
    assert len(set(_KeptHandler.peers)) == 1  # the server saw one client port
    kept.close()


def test_a_connection_the_server_closed_is_opened_again_and_the_request_sent_once_more(kept_url: str) -> None:
    kept = httpclient.KeptConnection(kept_url, timeout_seconds=5)
    assert kept.request("POST", json_body={"n": 1, "hang_up": True}).json() == {"n": 1}
    assert kept.request("POST", json_body={"n": 2}).json() == {"n": 2}
    assert kept.connections_opened == 2
    assert [p for p in _KeptHandler.peers].count(_KeptHandler.peers[-1]) == 1  # the second went on a new connection
    kept.close()


def test_a_kept_connection_that_cannot_connect_is_a_transport_error() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    kept = httpclient.KeptConnection(f"http://127.0.0.1:{port}/", timeout_seconds=5)
    with pytest.raises(httpclient.TransportError, match="connection failed"):
        kept.request("GET")
    with pytest.raises(httpclient.TransportError, match="only http"):
        httpclient.KeptConnection("file:///etc/passwd", timeout_seconds=5)
