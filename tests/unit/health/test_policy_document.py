"""Area of concern: the SentinelPolicy file as a schema — camelCase keys, the old snake_case
spelling still read with one warning per old key, and errors that name the file, the field path
and the allowed values."""

from __future__ import annotations

import logging

import pytest

from dsx import serialization
from dsx.errors import BadInputError
from dsx.files import documents
from dsx.health.decisions import policy
from dsx.model import schema
from dsx.model.health import camel_expression

OLD_SPELLING = """
apiVersion: dsx.health/v1alpha1
kind: SentinelPolicy
dry_run: true
stages:
  quarantine: {enabled: true, dry_run: false}
gpu_node_selector: {example.com/fleet: a}
quarantine:
  opt_out_label: {key: example.com/skip, value: "yes"}
  rule_sets:
    - name: fatal
      match: {all: [event.is_fatal]}
      labels: {example.com/some_label: x}
breaker: {max_quarantined_percent: 25, window_seconds: 60}
drain:
  default_mode: AllowCompletion
  namespaces: [{match: "batch-*", mode: DeleteAfterTimeout, timeout_seconds: 30}]
  grace_period_seconds: 5
remediation: {provider: {kind: webhook, url: "https://example.com/fix", token_file: /t, timeout_seconds: 5}}
certification: {group_peers: 2, ranks_per_node: 1, max_running: 3}
monitors: {kernel_logs: [{node: n1, journal: true, driver_version: 575.57.08}], start_at_end: true}
dead_letter: {max_attempts: 2}
"""


def _document(text: str) -> dict[str, object]:
    data = serialization.parse_yaml(text, source="test")
    assert isinstance(data, dict)
    return data


def _camel(value: object, *, keep: bool = False) -> object:
    """The document with every key of a policy section in camelCase (label maps keep theirs)."""
    if isinstance(value, dict):
        return {
            (k if keep else schema.camel(k)): _camel(v, keep=k in ("gpu_node_selector", "labels"))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_camel(v) for v in value]
    if isinstance(value, str):
        return camel_expression(value)[0]  # CEL rules name event fields in camelCase too
    return value


def test_the_old_snake_case_spelling_reads_the_same_with_one_warning_per_old_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="dsx.health.decisions.policy"):
        old = policy.from_dict(_document(OLD_SPELLING), source="old.yaml")
    warned = [r.getMessage() for r in caplog.records]
    assert "old.yaml: dry_run: old snake_case key, read as dryRun; rename it (keys are camelCase)" in warned
    assert any(m.startswith("old.yaml: drain.namespaces[0].timeout_seconds: ") for m in warned)
    assert (
        "old.yaml.quarantine.ruleSets[0].match.all[0]: event.is_fatal: old snake_case field, read as event.isFatal;"
        " rename it (keys are camelCase)" in warned
    )
    assert len(warned) == 21  # one per old key and old event field; the label key with an underscore is not a field

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dsx.health.decisions.policy"):
        new = policy.from_dict(_camel(_document(OLD_SPELLING)), source="new.yaml")  # type: ignore[arg-type]
    assert caplog.records == []
    assert old == policy.SentinelPolicy(**{**vars(new), "source": "old.yaml"})
    assert old.dry_run and old.breaker.max_quarantined_percent == 25.0 and old.drain.grace_period_seconds == 5
    assert old.quarantine.rule_sets[0].labels == {"example.com/some_label": "x"}
    assert old.monitors.kernel_logs[0].driver_version == "575.57.08"


def test_the_shipped_policy_files_use_only_camel_case_keys() -> None:
    for path in (policy.DEFAULT_PATH,):
        _, old_keys = schema.renamed(documents.load_mapping_file(path), policy.PolicyDocument)
        assert old_keys == []


def test_a_key_in_both_spellings_is_refused() -> None:
    data = _document("apiVersion: dsx.health/v1alpha1\nkind: SentinelPolicy\ndryRun: true\ndry_run: false\n")
    with pytest.raises(BadInputError, match=r"^both\.yaml: field: 'dry_run' is not allowed; allowed values: api"):
        policy.from_dict(data, source="both.yaml")


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {"drain": {"defaultMode": "Now"}},
            "p.yaml.drain: defaultMode: 'Now' is not allowed; allowed values: Imm",
        ),
        (
            {"drain": {"bogus": 1}},
            "p.yaml.drain: field: 'bogus' is not allowed; allowed values: defaultMode, na",
        ),
        ({"drain": {"evictionBurst": "20"}}, "p.yaml.drain.evictionBurst: expected an integer, got '20'"),
        ({"drain": {"evictionBurst": True}}, "p.yaml.drain.evictionBurst: expected an integer, got True"),
        (
            {"drain": {"evictionBurst": 0}},
            "p.yaml.drain.evictionBurst: 0 is out of range; allowed: an integer at l",
        ),
        ({"breaker": {"windowSeconds": float("inf")}}, "p.yaml.breaker.windowSeconds: expected a finite number"),
        (
            {"breaker": {"windowSeconds": 0}},
            "p.yaml.breaker.windowSeconds: 0 is out of range; allowed: a number a",
        ),
        (
            {"quarantine": {"ruleSets": [{"match": {"all": ["true"]}}]}},
            r"p.yaml.quarantine.ruleSets\[0\].name: required",
        ),
        (
            {"certification": {"categories": [{"name": "training", "scale": "huge"}]}},
            r"p.yaml.certification.categories\[0\]: scale: 'huge' is not allowed; allowed values: ",
        ),
        ({"monitors": {"kernelLogs": "n1"}}, "p.yaml.monitors.kernelLogs: expected a list, got 'n1'"),
        (
            {"stages": {"drian": {}}},
            "p.yaml.stages: field: 'drian' is not allowed; allowed values: analyzer, q",
        ),
    ],
)
def test_errors_name_the_file_the_field_and_the_allowed_values(section: dict[str, object], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        policy.from_dict({"apiVersion": policy.API_VERSION, "kind": policy.KIND, **section}, source="p.yaml")


def test_an_empty_section_takes_the_defaults() -> None:
    data = _document("apiVersion: dsx.health/v1alpha1\nkind: SentinelPolicy\ndrain:\nbreaker:\n")
    loaded = policy.from_dict(data, source="p.yaml")
    assert loaded.drain == policy.DrainSettings() and loaded.breaker == policy.BreakerSettings()
