"""Area of concern: after 410 Gone the watch relists and reports exactly what changed while it
was away (added, modified, deleted), then resumes from the relist's version.

The HTTP exchange is scripted with httpx2's MockTransport (pure logic); the real 410 from a
compacted etcd is in tests/integration/kube/test_watch.py.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from dsx import errors
from dsx.kube.watch import EventType, ResourceWatch


def _node(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version}}


def _lines(*events: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


class Script:
    """Answers list and watch requests in order, recording the resourceVersion each watch asked for."""

    def __init__(self, lists: list[dict[str, Any]], watches: list[bytes]) -> None:
        self.lists = lists
        self.watches = watches
        self.watched_from: list[str] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.params.get("watch") == "true":
            self.watched_from.append(request.url.params.get("resourceVersion", ""))
            body = self.watches.pop(0) if self.watches else b""
            return httpx2.Response(200, content=body)
        return httpx2.Response(200, json=self.lists.pop(0))


def _watch(script: Script) -> ResourceWatch:
    client = httpx2.Client(base_url="https://api", transport=httpx2.MockTransport(script))
    return ResourceWatch(client, "/api/v1/nodes", label_selector="a=b")


def test_relist_after_410_reports_the_difference() -> None:
    script = Script(
        lists=[
            {"metadata": {"resourceVersion": "10"}, "items": [_node("a", "5"), _node("b", "6"), _node("c", "7")]},
            {"metadata": {"resourceVersion": "30"}, "items": [_node("a", "5"), _node("b", "25"), _node("d", "28")]},
        ],
        watches=[
            _lines({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}),
            _lines({"type": "MODIFIED", "object": _node("a", "31")}),
        ],
    )
    watch = _watch(script)
    assert [n["metadata"]["name"] for n in watch.sync()] == ["a", "b", "c"]
    seen = []
    for event in watch.events(timeout_seconds=5):
        seen.append((event.type, event.name, event.relisted))
        if event.name == "a":
            break
    assert seen == [
        (EventType.MODIFIED, "b", True),
        (EventType.ADDED, "d", True),
        (EventType.DELETED, "c", True),
        (EventType.MODIFIED, "a", False),
    ]
    assert (watch.relists, watch.expirations) == (1, 1)
    assert script.watched_from == ["10", "30"]
    assert sorted(watch.objects) == ["/a", "/b", "/d"]
    assert watch.resource_version == "31"


def test_bookmarks_move_the_resume_point_without_events() -> None:
    script = Script(
        lists=[{"metadata": {"resourceVersion": "1"}, "items": []}],
        watches=[
            _lines({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}),
            _lines({"type": "ADDED", "object": _node("z", "12")}),
        ],
    )
    watch = _watch(script)
    watch.sync()
    events = []
    for event in watch.events(timeout_seconds=5):
        events.append(event)
        break
    assert [(e.type, e.name) for e in events] == [(EventType.ADDED, "z")]
    assert script.watched_from == ["1", "9"]


def test_without_sync_the_first_list_is_reported_as_added() -> None:
    script = Script(lists=[{"metadata": {"resourceVersion": "3"}, "items": [_node("a", "2")]}], watches=[])
    watch = _watch(script)
    first = next(iter(watch.events(timeout_seconds=1)))
    assert (first.type, first.name, first.relisted) == (EventType.ADDED, "a", False)


def test_a_transient_server_error_reconnects_from_the_same_version() -> None:
    script = Script(
        lists=[{"metadata": {"resourceVersion": "10"}, "items": [_node("a", "5")]}],
        watches=[
            _lines({"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "PrevKv=nil"}}),
            _lines({"type": "MODIFIED", "object": _node("a", "12")}),
        ],
    )
    watch = _watch(script)
    watch.sync()
    event = next(iter(watch.events(timeout_seconds=5)))
    assert (event.type, event.name) == (EventType.MODIFIED, "a")
    assert script.watched_from == ["10", "10"]
    assert watch.relists == 0


def test_an_error_repeating_at_the_resume_point_ends_in_a_relist() -> None:
    broken = _lines({"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "PrevKv=nil"}})
    script = Script(
        lists=[
            {"metadata": {"resourceVersion": "10"}, "items": [_node("a", "5")]},
            {"metadata": {"resourceVersion": "20"}, "items": [_node("a", "15")]},
        ],
        watches=[broken, broken, broken],
    )
    watch = _watch(script)
    watch.sync()
    event = next(iter(watch.events(timeout_seconds=5)))
    assert (event.type, event.name, event.relisted) == (EventType.MODIFIED, "a", True)
    assert script.watched_from == ["10", "10", "10"]
    assert (watch.relists, watch.expirations) == (1, 0)


def test_a_denied_watch_raises_forbidden() -> None:
    script = Script(
        lists=[{"metadata": {"resourceVersion": "1"}, "items": []}],
        watches=[_lines({"type": "ERROR", "object": {"kind": "Status", "code": 403, "message": "nodes is forbidden"}})],
    )
    watch = _watch(script)
    watch.sync()
    with pytest.raises(errors.ForbiddenError, match="nodes is forbidden"):
        next(iter(watch.events(timeout_seconds=5)))


def test_the_view_holds_what_keep_projects_while_events_carry_whole_objects() -> None:
    def whole(name: str, version: str) -> dict[str, Any]:
        return {**_node(name, version), "status": {"images": ["x" * 100]}}

    script = Script(
        lists=[{"metadata": {"resourceVersion": "10"}, "items": [whole("a", "5")]}],
        watches=[
            _lines({"type": "MODIFIED", "object": whole("a", "11")}, {"type": "ADDED", "object": whole("b", "12")})
        ],
    )
    client = httpx2.Client(base_url="https://api", transport=httpx2.MockTransport(script))
    watch = ResourceWatch(client, "/api/v1/nodes", keep=lambda o: {"metadata": o["metadata"]})
    watch.sync()
    assert watch.objects == {"/a": _node("a", "5")}
    seen = list(watch.events(timeout_seconds=0.5))
    assert [e.object for e in seen[:2]] == [whole("a", "11"), whole("b", "12")]
    assert watch.objects == {"/a": _node("a", "11"), "/b": _node("b", "12")}
