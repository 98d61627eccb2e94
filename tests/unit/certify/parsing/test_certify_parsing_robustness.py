"""Area of concern: garbage never crashes the workload-log parsers, and what they return still
serialises to strict JSON (no NaN or infinity sneaks through); a log profile document is either a
profile or a CatalogError naming the field, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsx.certify.parsing import nccl, profiles, training
from dsx.errors import CatalogError

DATA = Path(__file__).resolve().parents[3] / "data"
REAL_LINES = [
    line
    for folder in ("nccl", "training")
    for path in sorted((DATA / folder).glob("*.log"))
    for line in path.read_text(encoding="utf-8").split("\n")
]
TOKENS = [
    "#",
    "size",
    "count",
    "busbw",
    "#wrong",
    "N/A",
    "nan",
    "inf",
    "-inf",
    "1e+308",
    "1e999",
    "-1",
    "0",
    "00",
    "4294967296",
    "float",
    "sum",
    "none",
    "|",
    "iteration",
    "/",
    "step",
    "loss:",
    "tps:",
    "5,856",
    "1,2,3",
    "[1,0]<stdout>:",
    "0:",
    "[rank0]:",
    "Avg bus bandwidth :",
    "Out of bounds values :",
    "FAILED",
    "OK",
    "elapsed time per iteration (ms):",
    "dt:",
    "ms",
    "s/it",
    "it/s",
    "9:07:58",
    "\r",
    "\t",
    "²",
    "٣",
    "\x1b[31m",
    "2026-02-16T10:00:04.000000000Z",
    "[2024-04-06 02:59:36]",
    "NCCL WARN",
    "Test NCCL failure",
    "[2026-02-05 16:03:52.889599]",
    "[2026-02-05 16:03:52,5]",
    "[before the start of training step] datetime: 2026-02-05 16:01:40.326255",
    "using world size: 16, data-parallel size: 2",
    "saving checkpoint at iteration",
    "successfully saved checkpoint from iteration",
    "scheduled an async checkpoint save at iteration",
    "loading checkpoint from /ckpt at iteration",
    "successfully loaded checkpoint from /ckpt at iteration",
    "Global Checkpoint Save : Rank: 0 : Iteration: 199 : Save duration:",
    "0.309s",
    "Training epoch 4, iteration 0/49 |",
    "global_step: 200 |",
    "global_step=-1.5,",
    "All distributed processes registered. Starting with 16 processes",
    "Restoring states from the checkpoint path at",
    "Finished saving the checkpoint (or staging if async is enabled)in 3.21 seconds.",
    "[NeMo I 2026-02-05 16:03:52 nemo_logging:393]",
]

line_of_tokens = st.lists(st.sampled_from(TOKENS), max_size=16).map(" ".join)
mutated_real = st.tuples(st.sampled_from(REAL_LINES), st.integers(0, 200), st.text(max_size=8)).map(
    lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :]
)
any_line = st.one_of(st.text(max_size=120), line_of_tokens, mutated_real, st.sampled_from(REAL_LINES))
logs = st.lists(any_line, max_size=40).map("\n".join)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(logs)
def test_nccl_parser_never_crashes(text: str) -> None:
    log = nccl.parse(text)
    json.dumps(log.to_dict(), allow_nan=False)
    assert log.status in (nccl.Status.PASSED, nccl.Status.FAILED)


@SETTINGS
@given(logs)
def test_training_parser_never_crashes(text: str) -> None:
    run = training.parse(text)
    json.dumps(run.to_dict(), allow_nan=False)
    assert len({s.step for s in run.steps}) == len(run.steps)


@SETTINGS
@given(logs)
def test_every_run_and_checkpoint_of_a_log_is_consistent(text: str) -> None:
    run = training.parse(text)
    assert [r.index for r in run.runs] == list(range(len(run.runs)))
    assert all(0 <= c.run < max(1, len(run.runs)) for c in run.checkpoints)
    assert all(c.duration_seconds is None or c.duration_seconds >= 0 for c in run.checkpoints)
    if run.goodput_nvcre is not None:
        assert 0.0 <= run.goodput_nvcre.ratio <= 1.0


SHIPPED = {p.name: p for p in profiles.load_all()}
profile_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=12), st.sampled_from(TOKENS)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)
PROFILE_KEYS = ["step", "fields", "events", "timestamp", "examples", "priority", "warmup_steps", "name"]
REGEXES = [*TOKENS, "(?P<step>\\d+)", "(?P<x>a)"]
EVENT_KINDS = [k.value for k in profiles.EventKind] + ["checkpoint", "Application_Start"]


@SETTINGS
@given(
    st.sampled_from(sorted(SHIPPED)),
    st.sampled_from(PROFILE_KEYS),
    profile_values,
    st.sampled_from(EVENT_KINDS),
    st.one_of(profile_values, st.fixed_dictionaries({"regex": st.sampled_from(REGEXES)})),
)
def test_a_mangled_profile_is_a_profile_or_a_catalog_error(
    name: str, key: str, value: object, kind: str, event: object
) -> None:
    document = serialization_of(SHIPPED[name])
    document[key] = value
    document.setdefault("events", {})
    if isinstance(document["events"], dict):
        document["events"][kind] = event
    try:
        profile = profiles.from_dict(document, source="mangled.yaml")
    except CatalogError as error:
        assert "mangled.yaml" in str(error)
        return
    training.parse("\n".join(TOKENS), profile)


def serialization_of(profile: profiles.LogProfile) -> dict[str, object]:
    from dsx.files import documents

    return dict(documents.load_mapping_file(profile.source))
