"""Area of concern: the `dsx sentinel` commands that read and steer a store — events, status (a table
per node with its history), breaker status/reset, replay, request-validation — print what the
store holds, exit 0, and refuse bad input with one line naming the flag and exit 2; `run` without
a cluster says how to give one. The `/v1/sentinel` API routes read and write the same store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from dsx.api import app as api_app
from dsx.api import security
from dsx.cli.main import main
from dsx.health.decisions import breaker, policy
from dsx.health.decisions.eventstore import StageOutcome, StageStatus
from dsx.model.health import NodeState
from dsx.store import open_store

from .builders import xid

TOKEN = "api-test-token-0123456789abcdef"


def dsx(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'events.db'}"
    store = open_store(url)
    store.append([xid("n1"), xid("n2", "48")])
    for state in (NodeState.QUARANTINED, NodeState.DRAINING, NodeState.DRAINED):
        store.transition("n1", state, reason=f"to {state.value}", event_sequence=1)
    gate = breaker.CircuitBreaker(store, policy.BreakerSettings(max_quarantined_percent=10), lambda: 10)
    gate.admit("n1", xid().generated_at)
    gate.admit("n2", xid().generated_at)
    store.close()
    return url


def test_events_lists_stored_events_with_filters(capsys, store_url) -> None:
    code, out, _ = dsx(capsys, "sentinel", "events", "--store", store_url, "--format", "json")
    rows = json.loads(out)
    assert code == 0 and [r["sequence"] for r in rows] == [1, 2]
    assert rows[0]["errorCodes"] == ["79"] and rows[0]["idempotencyKey"] == xid("n1").idempotency_key
    code, out, _ = dsx(capsys, "sentinel", "events", "--store", store_url, "--node", "n2", "--format", "table")
    assert code == 0 and "n2" in out and "n1" not in out.split("\n", 2)[2]


def test_a_stage_detail_is_shown_camel_case_and_stored_as_written(capsys, store_url) -> None:
    store = open_store(store_url)
    (claimed, *_) = store.claim("quarantine", "test-owner")
    detail = {"node": "n1", "disposition": "quarantined", "rule_sets": ["xid-fatal"], "with_event": 1}
    detail["labels"] = {"team_a/owner": "x"}  # label keys are data
    store.ack("quarantine", "test-owner", [StageOutcome(claimed.sequence, StageStatus.DONE, detail)])
    store.close()
    code, out, _ = dsx(capsys, "sentinel", "events", "--store", store_url, "--format", "json")
    shown = json.loads(out)[0]["stages"]["quarantine"]
    assert code == 0 and shown == {
        "status": "done",
        "node": "n1",
        "disposition": "quarantined",
        "ruleSets": ["xid-fatal"],
        "withEvent": 1,
        "labels": {"team_a/owner": "x"},
    }
    store = open_store(store_url)
    try:
        record = store.stage_record("quarantine", claimed.sequence)
        assert record is not None and dict(record.detail) == detail  # the stored row keeps its v1 form
    finally:
        store.close()


def test_status_is_a_table_per_node_with_its_history_and_the_breaker(capsys, store_url) -> None:
    code, out, _ = dsx(capsys, "sentinel", "status", "--store", store_url)
    assert code == 0
    assert "n1    drained" in out or "n1  drained" in out
    assert "healthy → quarantined → draining → drained" in out
    assert "breaker: tripped" in out
    code, out, _ = dsx(capsys, "sentinel", "status", "--store", store_url, "--format", "json")
    assert json.loads(out)["nodes"][0]["history"][0] == {
        **json.loads(out)["nodes"][0]["history"][0],
        "from": "healthy",
        "to": "quarantined",
    }


def test_breaker_reset_closes_it(capsys, store_url) -> None:
    code, out, _ = dsx(capsys, "sentinel", "breaker", "reset", "--store", store_url)
    assert code == 0 and out.strip() == "breaker quarantine: tripped → closed (resets: 1)"
    code, out, _ = dsx(capsys, "sentinel", "breaker", "status", "--store", store_url, "--format", "json")
    assert json.loads(out)["state"] == "closed"


def test_replay_prints_what_a_policy_would_do(capsys, store_url, tmp_path: Path) -> None:
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text(
        "apiVersion: dsx.health/v1alpha1\nkind: SentinelPolicy\nbreaker: {maxQuarantinedPercent: 100}\n"
        "remediation: {provider: {kind: script, command: [/bin/true]}}\n"
    )
    code, out, _ = dsx(
        capsys, "sentinel", "replay", "--policy", str(candidate), "--store", store_url, "--format", "table"
    )
    assert code == 0
    assert "would quarantine: 2" in out and "would remediate: 2" in out and "breaker: closed" in out
    code, out, _ = dsx(
        capsys, "sentinel", "replay", "--policy", str(candidate), "--store", store_url, "--format", "json"
    )
    shown = json.loads(out)
    assert shown["kind"] == "ReplayReport"
    assert {"derivedEvents", "finalStates", "dispositions"} <= set(shown) and "final_states" not in shown
    assert all("_" not in key for entry in shown["remediated"] for key in entry)  # requestId, not request_id
    assert set(shown["dispositions"]) <= {"quarantine", "drain", "remediation", "recertify", "analyzer"}


def test_request_validation_by_name_and_from_a_drift_report(capsys, store_url, tmp_path: Path) -> None:
    code, out, _ = dsx(capsys, "sentinel", "request-validation", "--store", store_url, "--node", "n7", "--node", "n8")
    assert code == 0 and out.splitlines() == [
        "request 1: n7 pending (manual: requested by a person)",
        "request 2: n8 pending (manual: requested by a person)",
    ]
    report = tmp_path / "drift.json"
    report.write_text(json.dumps({"kind": "DriftReport", "changes": [{"kind": "node-added", "subject": "n9"}]}))
    code, out, err = dsx(
        capsys, "sentinel", "request-validation", "--store", store_url, "--drift", str(report), "--dry-run"
    )
    assert code == 0 and out == "" and "no node is affected" not in err  # no fleet given: nothing to match


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sentinel", "request-validation", "--store", "memory:"], "give --node NAME (repeatable) or --drift REPORT"),
        (["sentinel", "events", "--store", "memory:", "--since", "yesterday"], "--since: 'yesterday' is neither"),
        (["sentinel", "events", "--store", "mysql://x"], "unknown scheme"),
        (["sentinel", "run", "--store", "memory:", "--enable", "quarantine,drian"], "stage: 'drian' is not allowed"),
        (["sentinel", "replay", "--policy", "/nonexistent/p.yaml", "--store", "memory:"], "/nonexistent/p.yaml"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_or_3(capsys, argv: list[str], message: str) -> None:
    code, _, err = dsx(capsys, *argv)
    assert code in (2, 3) and message in err and len(err.strip().splitlines()) == 1


def test_run_without_a_cluster_says_how_to_give_one(capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = dsx(capsys, "sentinel", "run", "--store", "memory:", "--port", "0")
    assert code == 3 and "give --kubeconfig FILE or --sim NAME" in err and str(tmp_path / "absent") in err


def test_api_routes_read_and_write_the_store(store_url) -> None:
    settings = api_app.ApiSettings(
        token_digests=frozenset({security._digest(TOKEN)}), rate_per_second=1000, burst=1000, store_url=store_url
    )
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(api_app.create_app(settings), raise_server_exceptions=False) as client:
        nodes = client.get("/v1/sentinel/nodes", headers=auth).json()
        assert nodes["nodes"][0]["node"] == "n1" and nodes["breaker"]["state"] == "tripped"
        posted = client.post(
            "/v1/sentinel/events", headers=auth, json={"events": [xid("n3").to_dict(), xid("n1").to_dict()]}
        )
        assert posted.status_code == 202 and posted.json() == {"accepted": 2, "created": 1, "sequences": [3, 1]}
        page = client.get("/v1/sentinel/events", headers=auth, params={"node": "n3"}).json()
        assert [e["event"]["nodeName"] for e in page["events"]] == ["n3"]
        assert "Deprecation" not in posted.headers
        old = {re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), k): v for k, v in xid("n3").to_dict().items()}
        again = client.post("/v1/sentinel/events", headers=auth, json={"events": [old]})
        assert again.status_code == 202 and again.json() == {"accepted": 1, "created": 0, "sequences": [3]}
        assert again.headers["Deprecation"] == "true" and "is_fatal" in again.headers["Warning"]
        bad = client.post("/v1/sentinel/events", headers=auth, json={"events": [{"agent": "x"}]})
        assert bad.status_code == 400 and bad.json()["error"]["message"].endswith("componentClass: required")
        assert client.get("/v1/sentinel/nodes").status_code == 401
        assert client.get("/readyz").status_code == 200


def test_without_a_store_the_sentinel_routes_answer_404_naming_the_flag() -> None:
    settings = api_app.ApiSettings(token_digests=frozenset({security._digest(TOKEN)}))
    with TestClient(api_app.create_app(settings), raise_server_exceptions=False) as client:
        answer = client.get("/v1/sentinel/nodes", headers={"Authorization": f"Bearer {TOKEN}"})
        assert answer.status_code == 404 and "--store" in answer.json()["error"]["message"]


def test_status_lists_dead_letters_and_retry_offers_them_again(capsys, store_url: str) -> None:
    from dsx.health.decisions.eventstore import StageOutcome, StageStatus

    store = open_store(store_url)
    detail = {"node": "n2", "attempts": 5, "error": "ValueError: bad reason", "traceback": "Traceback ..."}
    store.ack("drain", "t", [StageOutcome(2, StageStatus.DEAD_LETTER, detail)])
    store.close()

    code, out, _ = dsx(capsys, "sentinel", "status", "--store", store_url)
    assert code == 0
    assert "dead letters" in out and "ValueError: bad reason" in out
    code, out, _ = dsx(capsys, "sentinel", "status", "--store", store_url, "--format", "json")
    assert [(d["stage"], d["sequence"], d["attempts"]) for d in json.loads(out)["deadLetters"]] == [("drain", 2, 5)]

    code, _, err = dsx(capsys, "sentinel", "retry", "--store", store_url, "--stage", "quarantine")
    assert code == 3 and "no dead letter with stage quarantine" in err
    code, out, _ = dsx(capsys, "sentinel", "retry", "--store", store_url, "--event", "2")
    assert code == 0 and out == "event 2: offered to stage drain again\n"
    store = open_store(store_url)
    assert store.dead_letters() == [] and store.stage_record("drain", 2) is None
    assert [s.sequence for s in store.claim("drain", "t")] == [1, 2]
    store.close()
