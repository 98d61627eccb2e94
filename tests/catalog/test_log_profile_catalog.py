"""Area of concern: the shipped log profiles (dsx/catalog/log_profiles) hold their invariants:
each loads, is named after its file, reads its own examples to the stated values, and is the
profile auto-detection picks for them."""

from __future__ import annotations

import pytest

from dsx.certify.parsing import lines, profiles, training

PROFILES = profiles.load_all()
EXAMPLES = [(p, e) for p in PROFILES for e in p.examples]


def test_the_frameworks_of_the_issue_are_covered() -> None:
    assert {p.name for p in PROFILES} >= {"megatron-lm", "nemo1", "nemo2", "torchtitan", "nanochat", "dsx-train"}


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_profile_is_named_after_its_file(profile: profiles.LogProfile) -> None:
    assert profile.source.endswith(f"/{profile.name}.yaml")


@pytest.mark.parametrize(("profile", "example"), EXAMPLES, ids=lambda v: getattr(v, "name", ""))
def test_profile_reads_its_examples(profile: profiles.LogProfile, example: profiles.Example) -> None:
    step = training.read_step(profile, lines.strip_prefixes(1, example.line))
    assert step is not None, f"{profile.name}: step regex does not match {example.line!r}"
    expect = dict(example.expect)
    assert step.step == expect.pop("step")
    if "total_steps" in expect:
        assert step.total_steps == expect.pop("total_steps")
    for name, value in expect.items():
        if value is None:
            assert step.value(name) is None, f"{profile.name}: {name} should be absent"
        else:
            assert step.value(name) == pytest.approx(value), f"{profile.name}: {name}"


@pytest.mark.parametrize(("profile", "example"), EXAMPLES, ids=lambda v: getattr(v, "name", ""))
def test_detection_picks_the_profile_for_its_own_examples(
    profile: profiles.LogProfile, example: profiles.Example
) -> None:
    chosen = training.detect([lines.strip_prefixes(1, example.line)], PROFILES)
    assert chosen is not None and chosen.name == profile.name


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_expected_fields_are_fields_of_the_profile(profile: profiles.LogProfile) -> None:
    for example in profile.examples:
        unknown = set(example.expect) - {"step", "total_steps"} - set(profile.fields) - set(profiles.STANDARD_FIELDS)
        assert not unknown, f"{profile.name}: example names fields the profile does not define: {unknown}"


EVENTS = [(p, e) for p in PROFILES for e in p.events]


@pytest.mark.parametrize(("profile", "pattern"), EVENTS, ids=lambda v: getattr(v, "name", getattr(v, "example", "")))
def test_event_examples_read_as_their_kind(profile: profiles.LogProfile, pattern: profiles.EventPattern) -> None:
    line = lines.strip_prefixes(1, pattern.example)
    event = training.read_event(profile, line)
    assert event is not None and event.kind is pattern.kind, f"{profile.name}: {pattern.example!r}"
    assert training.read_step(profile, line) is None or event is not None


TIMED = [p for p in PROFILES if p.timestamp is not None]


@pytest.mark.parametrize("profile", TIMED, ids=lambda p: p.name)
def test_timestamps_read_with_and_without_fractional_seconds(profile: profiles.LogProfile) -> None:
    for example in profile.examples:
        stamped = profile.read_timestamp(example.line)
        if stamped is None:
            continue
        text = profile.timestamp.search(example.line).group("value")  # type: ignore[union-attr]
        whole = text.split(".")[0].split(",")[0]
        for variant, micros in ((whole, 0), (whole + ".889599", 889599), (whole + ",5", 500000)):
            moment = profile.read_timestamp(example.line.replace(text, variant))
            assert moment is not None and moment.microsecond == micros, f"{profile.name}: {variant}"


def test_every_frameworks_profile_reads_a_timestamp_or_uses_the_kubelets() -> None:
    """Megatron, torchtitan, NeMo and dsx-train print times; the rest rely on the kubelet prefix."""
    assert {p.name for p in TIMED} >= {"megatron-lm", "torchtitan", "nemo1", "nemo2", "dsx-train"}
