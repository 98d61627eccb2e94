"""Area of concern: a stage held back shows how far behind it is, in events and in seconds, in
/metrics within one scrape and in `dsx sentinel status`; and the shipped PrometheusRule's lag and
lost-history alerts fire under Prometheus's own rule engine (`promtool test rules`), not just
parse. The stage is held the way it happens: a drain waiting on a PodDisruptionBudget that
allows no disruption, on a node a real Xid 79 had cordoned."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dsx import serialization
from dsx.health.decisions import nodes
from dsx.kube.client import KubeClient

from .harness import SentinelProcess, gpu_fault_rule, policy_file, restore, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
RULES = REPO / "deploy" / "sentinel" / "prometheusrule.yaml"
SCRAPE_SECONDS = 15.0
"""Prometheus's default scrape interval: the lag must show within one."""


def pinned_pod(namespace: str, name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "held"}},
        "spec": {"nodeName": node, "containers": [{"name": "train", "image": "trainer:1"}]},
    }


def test_a_drain_held_by_its_budget_shows_its_lag_within_one_scrape(
    sim_cluster: Any, kube_client: KubeClient, sim_namespace: str, tmp_path: Path
) -> None:
    node = sim_cluster.node_names[1]
    for name in ("held-a", "held-b"):
        kube_client.create(pinned_pod(sim_namespace, name, node))
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "held", "namespace": sim_namespace},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "held"}}},
    }
    kube_client.create(budget)
    policy = policy_file(
        tmp_path,
        {
            "stages": {"quarantine": {"enabled": True}, "drain": {"enabled": True}},
            "breaker": {"maxQuarantinedPercent": 50},
            "quarantine": {"ruleSets": [gpu_fault_rule(f"node.metadata.name == '{node}'")]},
            "drain": {"pollSeconds": 0.5, "backoffSeconds": 0.5, "maxBackoffSeconds": 2},
            "monitors": {"startAtEnd": True},
        },
    )
    store_url = f"sqlite:///{tmp_path / 'events.db'}"
    sentinel = SentinelProcess(tmp_path, policy, store_url, "--sim", sim_cluster.name)
    try:
        sentinel.start()
        inject = ["sim", "inject", "--name", sim_cluster.name, "--node", node, "--fault", "xid79"]
        subprocess.run([sys.executable, "-m", "dsx", *inject], check=True, capture_output=True)
        wait_for(lambda: nodes.unschedulable(kube_client.get_node(node)), 60, f"{node} cordoned", sentinel)
        cordoned = time.monotonic()
        drain = '{stage="drain"}'
        wait_for(
            lambda: (
                sentinel.metric("dsx_sentinel_stage_lag_events", drain) >= 1
                and sentinel.metric("dsx_sentinel_stage_lag_seconds", drain) > 0
            ),
            SCRAPE_SECONDS,
            "the drain's lag in /metrics",
            sentinel,
        )
        shown_after = time.monotonic() - cordoned
        assert shown_after < SCRAPE_SECONDS
        first = sentinel.metric("dsx_sentinel_stage_lag_seconds", drain)
        wait_for(
            lambda: sentinel.metric("dsx_sentinel_stage_lag_seconds", drain) >= first + 4, 20, "lag growing", sentinel
        )
        assert sentinel.metric("dsx_sentinel_stage_lag_events", '{stage="quarantine"}') == 0  # it finished
        assert sentinel.metric("dsx_sentinel_stage_history_lost", drain) == 0
        assert kube_client.get_pod(sim_namespace, "held-a") and kube_client.get_pod(sim_namespace, "held-b")

        status = subprocess.run(
            [sys.executable, "-m", "dsx", "sentinel", "status", "--store", store_url, "--format", "json"],
            check=True,
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
        )
        consumers = {c["consumer"]: c for c in json.loads(status.stdout)["consumers"]}
        assert consumers["drain"]["behindEvents"] >= 1 and consumers["drain"]["behindSeconds"] > 0
        assert consumers["quarantine"]["behindEvents"] == 0
    finally:
        sentinel.stop()
        kube_client.delete("policy/v1", "PodDisruptionBudget", "held", sim_namespace)
        for name in ("held-a", "held-b"):
            kube_client.delete("v1", "Pod", name, sim_namespace)
        restore(kube_client, node)


RULE_TESTS = """\
rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'dsx_sentinel_stage_lag_seconds{stage="drain", pod="dsx-sentinel-0"}'
        values: '0+60x20'
      - series: 'dsx_sentinel_stage_lag_seconds{stage="quarantine", pod="dsx-sentinel-0"}'
        values: '0x20'
      - series: 'dsx_sentinel_stage_history_lost{stage="analyzer", pod="dsx-sentinel-0"}'
        values: '0 0 1 1 1 1'
    alert_rule_test:
      - eval_time: 9m
        alertname: SentinelStageBehind
        exp_alerts: []
      - eval_time: 12m
        alertname: SentinelStageBehind
        exp_alerts:
          - exp_labels: {severity: warning, stage: drain}
            exp_annotations:
              summary: Stage drain has left an event waiting 12m 0s.
              runbook_url: https://github.com/dsx-run/dsx/blob/main/docs/runbooks/stage-lag.md
      - eval_time: 1m
        alertname: SentinelHistoryLost
        exp_alerts: []
      - eval_time: 2m
        alertname: SentinelHistoryLost
        exp_alerts:
          - exp_labels: {severity: critical, stage: analyzer}
            exp_annotations:
              summary: >-
                Stage analyzer is past the newest stored event: the store lost history; the stage claims nothing.
              runbook_url: https://github.com/dsx-run/dsx/blob/main/docs/runbooks/history-lost.md
"""


@pytest.mark.timeout(2400)  # the first run on a machine builds promtool (tests/fixtures/promtool.py, ~8 min)
def test_the_lag_and_history_alerts_fire_in_prometheus_rule_tests(promtool_binary: Path, tmp_path: Path) -> None:
    """The rendered PrometheusRule's groups as a Prometheus rule file, checked and unit-tested by promtool."""
    (rule,) = serialization.parse_yaml_documents(RULES.read_text(), source=str(RULES))
    (tmp_path / "rules.yaml").write_text(serialization.dump_yaml({"groups": rule["spec"]["groups"]}))
    (tmp_path / "tests.yaml").write_text(RULE_TESTS)
    checked = subprocess.run(
        [str(promtool_binary), "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [str(promtool_binary), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    broken = RULE_TESTS.replace("eval_time: 9m", "eval_time: 12m", 1)  # the same suite must fail when wrong
    (tmp_path / "tests.yaml").write_text(broken)
    failing = subprocess.run(
        [str(promtool_binary), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert failing.returncode != 0 and "SentinelStageBehind" in failing.stdout + failing.stderr
