"""Area of concern: remediation — the strongest open fault picks the request, unsupported actions
escalate (remediation-failed label, still cordoned, FAILED), one request per incident even when
the event is re-delivered, healed faults skip straight to re-certification, NONE waits; and the
providers: the sim provider's NotReady→Ready cycle, the script provider's argument list (no
shell, placeholders inside arguments only), the webhook provider's JSON POST with a bearer token."""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from dsx import remediators
from dsx.health.decisions import nodes, remediation
from dsx.health.decisions.policy import PIPELINE
from dsx.health.decisions.ports import NodeChange, RemediationKind, RemediationRequest
from dsx.model.health import NODE_REMEDIATED_CHECK, NodeState, RecommendedAction
from dsx.sim.remediation import SimProvider
from dsx.testing.inmemory_nodes import InMemoryNodeOps

from .builders import FakeProvider, Pipeline, cluster, gpu_check, gpu_node, policy_with, xid

REQUEST = RemediationRequest("rem-1", "n1", RemediationKind.REBOOT_NODE, 7, "RESTART_BM: Xid 79", ("0000:3b:00.0",))


def history(store, node: str) -> list[str]:
    return [m.to_state.value for m in store.node_history(node)]


def test_an_unsupported_action_escalates_and_keeps_the_node_cordoned(store, clock, observer) -> None:
    fleet = cluster()
    pipeline = Pipeline(store, fleet, policy_with(*PIPELINE), clock, observer)
    pipeline.feed(xid("n1", "119", action=RecommendedAction.CONTACT_SUPPORT))

    assert history(store, "n1") == ["quarantined", "draining", "drained", "failed"]
    assert "no remediation for CONTACT_SUPPORT" in store.node_state("n1").reason
    node = fleet.get_node("n1")
    assert nodes.unschedulable(node)
    assert nodes.labels_of(node)["sentinel.dsx.run/remediation-failed"] == "true"
    assert pipeline.provider.requests == []
    assert [w.detail["reason"] for w in fleet.writes("event")] == ["RemediationFailed"]


def test_a_provider_that_cannot_do_it_escalates_too(store, clock, observer) -> None:
    fleet = cluster()
    provider = FakeProvider(kinds=[RemediationKind.RESET_GPU])
    Pipeline(store, fleet, policy_with(*PIPELINE), clock, observer, provider=provider).feed(xid("n1"))
    assert store.node_state("n1").state is NodeState.FAILED
    assert "cannot reboot-node" in store.node_state("n1").reason


def test_a_failed_remediation_escalates_with_the_providers_message(store, clock, observer) -> None:
    fleet = cluster()
    Pipeline(store, fleet, policy_with(*PIPELINE), clock, observer, provider=FakeProvider(succeed=False)).feed(
        xid("n1")
    )
    assert store.node_state("n1").state is NodeState.FAILED
    assert "the BMC did not answer" in store.node_state("n1").reason


def test_the_strongest_open_fault_decides_and_one_request_serves_the_incident(store, clock, observer) -> None:
    fleet = cluster()
    policy = policy_with(*PIPELINE)
    pipeline = Pipeline(store, fleet, policy, clock, observer)
    # a GPU-reset fault and a reboot fault on the same node before remediation starts: one reboot
    store.append([gpu_check("n1", healthy=False, gpu="2"), xid("n1", at=timedelta(seconds=1))])
    pipeline.settle()
    assert [(r.kind, r.node_name) for r in pipeline.provider.requests] == [(RemediationKind.REBOOT_NODE, "n1")]
    assert sum(1 for s in store.events() if s.event.check_name == NODE_REMEDIATED_CHECK) == 1
    assert store.count_remediations("n1", store.events()[0].stored_at - timedelta(days=1)) == 1


def test_a_redelivered_event_after_a_crash_does_not_send_a_second_request(store, clock, observer) -> None:
    fleet = cluster()
    policy = policy_with(*PIPELINE)
    first = Pipeline(store, fleet, policy, clock, observer, owner="first")
    store.append([xid("n1")])
    # quarantine and drain finish; remediation is cut after the provider did its work
    first.run_first(2)
    first.remediation.provider = _CrashAfterRemediating(first.provider)
    with pytest.raises(_Crash):
        first.remediation.handle("n1", store.claim("remediation", "first", lease_seconds=30))
    assert store.node_state("n1").state is NodeState.REMEDIATING
    assert nodes.annotations_of(fleet.get_node("n1")).get("sentinel.dsx.run/remediation-done") is None
    clock.advance(31)

    second = Pipeline(store, fleet, policy, clock, observer, owner="second", provider=first.provider)
    second.settle()

    # the request was re-sent with the same id (providers deduplicate on it), and counted once
    assert [r.request_id for r in first.provider.requests] == [first.provider.requests[0].request_id] * 2
    assert history(store, "n1") == ["quarantined", "draining", "drained", "remediating", "recertifying", "healthy"]
    assert sum(1 for s in store.events() if s.event.check_name == NODE_REMEDIATED_CHECK) == 1


def test_a_completed_request_recorded_on_the_node_is_not_sent_again(store, clock, observer) -> None:
    fleet = cluster()
    pipeline = Pipeline(store, fleet, policy_with(*PIPELINE), clock, observer)
    store.append([xid("n1")])
    pipeline.run_first(2)
    request_id = remediation.request_id("n1", RemediationKind.REBOOT_NODE, 1)
    store.transition("n1", NodeState.REMEDIATING, reason="x", event_sequence=1, expected=NodeState.DRAINED)
    fleet.change_node(
        "n1",
        NodeChange(
            annotations={
                "sentinel.dsx.run/remediation": json.dumps(
                    dataclasses.replace(REQUEST, request_id=request_id, incident_sequence=1).to_dict()
                ),
                "sentinel.dsx.run/remediation-done": request_id,
            }
        ),
    )
    pipeline.settle()
    assert pipeline.provider.requests == []
    assert store.node_state("n1").state is NodeState.HEALTHY


def test_faults_that_healed_skip_remediation_and_none_waits(store, clock, observer) -> None:
    fleet = cluster()
    pipeline = Pipeline(store, fleet, policy_with(*PIPELINE), clock, observer)
    pipeline.feed(gpu_check("n1", healthy=False), gpu_check("n1", healthy=True, at=timedelta(seconds=1)))
    assert pipeline.provider.requests == []
    assert store.node_state("n1").state is NodeState.HEALTHY
    assert "recertifying" in history(store, "n1")


def test_request_ids_are_stable_per_node_kind_and_incident() -> None:
    same = remediation.request_id("n1", RemediationKind.REBOOT_NODE, 4)
    assert same == remediation.request_id("n1", RemediationKind.REBOOT_NODE, 4)
    assert same != remediation.request_id("n1", RemediationKind.REBOOT_NODE, 5)
    assert same != remediation.request_id("n2", RemediationKind.REBOOT_NODE, 4)
    assert same != remediation.request_id("n1", RemediationKind.RESET_GPU, 4)


# -- providers ---------------------------------------------------------------------------------


class _Crash(Exception):
    pass


class _CrashAfterRemediating:
    name = "crashing"

    def __init__(self, inner: FakeProvider) -> None:
        self.inner = inner

    def supports(self, kind: RemediationKind) -> bool:
        return self.inner.supports(kind)

    def remediate(self, request: RemediationRequest) -> Any:
        self.inner.remediate(request)
        raise _Crash("killed after the provider acted")


class _KwokLike(InMemoryNodeOps):
    """Flips Ready the way the simulator's node stages do when the not-ready annotation comes and goes."""

    def change_node(self, name: str, change: NodeChange) -> dict[str, Any]:
        node = super().change_node(name, change)
        status = "False" if nodes.annotations_of(node).get("sim.dsx.run/not-ready") == "true" else "True"
        with self._lock:
            self._nodes[name]["status"]["conditions"] = [{"type": "Ready", "status": status}]
        return self.get_node(name)


def test_the_sim_provider_cycles_the_node_not_ready_then_ready() -> None:
    fleet = _KwokLike([gpu_node("n1")])
    seen: list[bool | None] = []
    provider = SimProvider(fleet, poll_seconds=0, sleep=lambda _: None)
    original = fleet.get_node

    def watching(name: str) -> dict[str, Any]:
        node = original(name)
        seen.append(nodes.ready(node))
        return node

    fleet.get_node = watching  # type: ignore[method-assign]
    result = provider.remediate(REQUEST)
    assert result.succeeded, result.message
    assert seen[0] is False and seen[-1] is True
    assert "sim.dsx.run/not-ready" not in nodes.annotations_of(original("n1"))
    assert provider.supports(RemediationKind.REBOOT_NODE) and not provider.supports(RemediationKind.REPLACE_NODE)


def test_the_sim_provider_gives_up_when_the_node_never_goes_down() -> None:
    fleet = InMemoryNodeOps([gpu_node("n1")])
    ticks = iter(range(1000))
    provider = SimProvider(
        fleet,
        timeout_seconds=5,
        sleep=lambda _: None,
        clock=lambda: float(next(ticks)),
    )
    result = provider.remediate(REQUEST)
    assert not result.succeeded and "did not go down" in result.message
    assert "sim.dsx.run/not-ready" not in nodes.annotations_of(fleet.get_node("n1"))


def test_the_script_provider_passes_arguments_without_a_shell(tmp_path: Path) -> None:
    script = tmp_path / "bmc.py"
    ledger = tmp_path / "ledger.json"
    script.write_text(
        "import json, sys\n"
        f"open({str(ledger)!r}, 'w').write(json.dumps({{'argv': sys.argv[1:], 'stdin': json.load(sys.stdin)}}))\n"
        "print('power cycled')\n"
    )
    tricky = dataclasses.replace(REQUEST, reason="$(touch /tmp/pwned); `id` && rm -rf /")
    provider = remediators.ScriptProvider([sys.executable, str(script), "--host={node}", "{kind}", "{reason}"])
    result = provider.remediate(tricky)
    assert result.succeeded and result.message == "power cycled"
    written = json.loads(ledger.read_text())
    assert written["argv"] == ["--host=n1", "reboot-node", "$(touch /tmp/pwned); `id` && rm -rf /"]
    assert written["stdin"]["request_id"] == "rem-1"


def test_the_script_provider_reports_a_failing_exit(tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text("import sys\nprint('BMC unreachable', file=sys.stderr)\nsys.exit(3)\n")
    result = remediators.ScriptProvider([sys.executable, str(script)]).remediate(REQUEST)
    assert not result.succeeded and "exited 3: BMC unreachable" in result.message


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append(
                {"body": body, "auth": self.headers.get("Authorization"), "key": self.headers.get("Idempotency-Key")}
            )
            fail = body["node_name"] == "broken"
            answer = json.dumps({"succeeded": not fail, "message": "queued" if not fail else "no such host"}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/remediate", received
    server.shutdown()
    server.server_close()


def test_the_webhook_provider_posts_the_request_with_a_bearer_token(webhook) -> None:
    url, received = webhook
    provider = remediators.WebhookProvider(url, token="s3cret-token-value")
    assert provider.remediate(REQUEST).message == "queued"
    failed = provider.remediate(dataclasses.replace(REQUEST, node_name="broken"))
    assert not failed.succeeded and failed.message == "no such host"
    assert received[0]["auth"] == "Bearer s3cret-token-value"
    assert received[0]["key"] == "rem-1"
    assert received[0]["body"]["kind"] == "reboot-node"


def test_an_unreachable_webhook_is_a_failure_not_a_crash() -> None:
    result = remediators.WebhookProvider("http://127.0.0.1:9/none", timeout_seconds=2).remediate(REQUEST)
    assert not result.succeeded


def test_a_crash_between_recording_the_request_and_moving_the_state_resumes_the_same_request(
    store, clock, observer
) -> None:
    fleet = cluster()
    policy = policy_with(*PIPELINE)
    first = Pipeline(store, fleet, policy, clock, observer, owner="first")
    store.append([xid("n1")])
    first.run_first(2)
    expected = remediation.request_id("n1", RemediationKind.REBOOT_NODE, 1)
    for lost in ("annotation-only", "transition-only"):
        # one run died after writing the request on the node, another after moving the state but losing the note
        if lost == "annotation-only":
            fleet.change_node("n1", NodeChange(annotations={"sentinel.dsx.run/remediation": json.dumps({"bogus": 1})}))
        else:
            store.transition("n1", NodeState.REMEDIATING, reason="x", event_sequence=1, expected=NodeState.DRAINED)
            fleet.change_node("n1", NodeChange(annotations={"sentinel.dsx.run/remediation": None}))
    pipeline = Pipeline(store, fleet, policy, clock, observer, owner="second")
    pipeline.settle()
    assert [r.request_id for r in pipeline.provider.requests] == [expected]
    assert store.node_state("n1").state is NodeState.HEALTHY


def test_a_crash_after_the_remediation_was_recorded_does_not_record_it_twice(store, clock, observer) -> None:
    fleet = cluster()
    policy = policy_with(*PIPELINE)
    first = Pipeline(store, fleet, policy, clock, observer, owner="first")
    store.append([xid("n1")])
    first.run_first(2)
    # the first run finished the provider call, marked it done and appended NodeRemediated, then died
    original_move = first.remediation._move

    def die_before_recertifying(node_name, target, *args, **kwargs):  # type: ignore[no-untyped-def]
        if target is NodeState.RECERTIFYING:
            raise _Crash("killed before the state moved")
        return original_move(node_name, target, *args, **kwargs)

    first.remediation._move = die_before_recertifying  # type: ignore[method-assign]
    with pytest.raises(_Crash):
        first.remediation.handle("n1", store.claim("remediation", "first", lease_seconds=30))
    clock.advance(31)
    second = Pipeline(store, fleet, policy, clock, observer, owner="second", provider=first.provider)
    second.settle()
    assert len(first.provider.requests) == 1  # done was recorded on the node: not sent again
    assert [s.event.check_name for s in store.events()].count(NODE_REMEDIATED_CHECK) == 1
    assert store.node_state("n1").state is NodeState.HEALTHY
