"""Area of concern: training logs of each framework read to the values their README states;
duplicates count once, restarts and stalls show, absent fields stay absent (None, never 0)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsx import serialization
from dsx.certify.parsing import profiles, training
from dsx.errors import CatalogError, NotFoundError
from dsx.files import certify_files

DATA = Path(__file__).resolve().parents[3] / "data" / "training"


def sample(name: str) -> str:
    lines = (DATA / name).read_text(encoding="utf-8").split("\n")
    return "\n".join(["", *lines[1:]])


def column(run: training.TrainingRun, name: str) -> list[float | None]:
    return [s.value(name) for s in run.steps]


def test_megatron_lm() -> None:
    run = training.parse(sample("01-megatron-lm-mixtral8x7b-16xH100.log"))
    assert run.profile == "megatron-lm" and run.profile_detected
    assert [s.step for s in run.steps] == [43, 44, 45]
    assert {s.total_steps for s in run.steps} == {100}
    assert column(run, "step_time_seconds") == pytest.approx([5.4449, 5.5338, 5.7186])
    assert run.stats["step_time_seconds"] is not None
    assert run.stats["step_time_seconds"].mean == pytest.approx(5.56577, abs=1e-5)
    assert column(run, "tflops_per_gpu") == [239.8, 236.0, 228.4]
    assert run.stats["tflops_per_gpu"] is not None and run.stats["tflops_per_gpu"].mean == pytest.approx(
        234.73, abs=5e-3
    )
    assert column(run, "global_batch_size") == [128, 128, 128]
    assert column(run, "consumed_samples") == [5504, 5632, 5760]
    assert run.steps[0].timestamp == datetime(2024, 4, 6, 2, 59, 36, tzinfo=UTC)
    assert column(run, "tokens_per_second") == [None, None, None]
    assert run.stats["tokens_per_second"] is None
    assert "tokens_per_second" in run.missing
    assert run.step_time_source is training.StepTimeSource.LOG


def test_torchtitan_step_time_from_timestamps() -> None:
    run = training.parse(sample("03-torchtitan-rank0-steps-200-250-gc-profiler.log"))
    assert run.profile == "torchtitan"
    assert [s.step for s in run.steps] == [200, 210, 220, 230, 240, 250]
    assert {s.stream for s in run.steps} == {"rank0"}
    assert column(run, "tokens_per_second") == [5856, 5593, 5868, 5869, 5864, 5862]
    assert column(run, "tflops_per_gpu") == [339.16, 323.92, 339.82, 339.88, 339.59, 339.48]
    mfu = column(run, "mfu_percent")
    assert (mfu[0], mfu[-1]) == (34.29, 34.33)
    assert {s.value("memory_gib") for s in run.steps} == {49.66}
    assert {s.value("memory_percent") for s in run.steps} == {52.28}
    assert column(run, "step_time_seconds") == [None] * 6
    assert run.step_time_source is training.StepTimeSource.TIMESTAMPS
    step_time = run.stats["step_time_seconds"]
    assert step_time is not None and step_time.mean == pytest.approx(1.41, abs=0.01)  # ~14 s per 10 steps
    assert run.goodput is None  # no printed step time to hold the wall clock against


def test_nemo1_progress_bar() -> None:
    run = training.parse(sample("05-nemo1-progressbar-slow-41s-per-it.log"))
    assert run.profile == "nemo1"
    (step,) = run.steps
    assert (step.printed_step, step.total_steps) == (795, 77225)  # the bar counts batches in the epoch
    assert step.step == 794  # global_step counts across epochs, and is the step
    assert step.value("step_time_seconds") == 41.36
    assert step.value("global_step") == 794.0
    assert step.value("consumed_samples") == 1.63e6
    assert step.value("loss") == 3.090
    assert step.value("elapsed_seconds") == 9 * 3600 + 7 * 60 + 58


def test_nemo2_train_step_timing() -> None:
    run = training.parse(sample("06-nemo2-bionemo-train-step-timing.log"))
    assert run.profile == "nemo2"
    assert [s.step for s in run.steps] == [120, 121, 122, 123, 124, 125]
    assert [s.value("global_step") for s in run.steps] == [120, 121, 122, 123, 124, 125]
    assert {s.total_steps for s in run.steps} == {149}
    assert column(run, "step_time_seconds") == [0.03146, 0.03163, 0.03215, 0.03157, 0.0317, 0.03147]
    assert run.stats["step_time_seconds"] is not None
    assert run.stats["step_time_seconds"].mean == pytest.approx(0.031663, abs=1e-6)
    assert {s.value("global_batch_size") for s in run.steps} == {1}
    assert {s.value("val_loss") for s in run.steps} == {4.106}


def test_nanochat() -> None:
    run = training.parse(sample("07-nanochat-a100-dt-toksec-mfu.log"))
    assert run.profile == "nanochat"
    assert [s.step for s in run.steps] == list(range(4, 11))
    assert {s.total_steps for s in run.steps} == {21400}
    times = column(run, "step_time_seconds")
    assert (times[0], times[-1]) == (0.98944, 0.99681)
    assert run.stats["step_time_seconds"] is not None
    assert run.stats["step_time_seconds"].mean * 1000 == pytest.approx(993.21, abs=5e-3)
    tokens = column(run, "tokens_per_second")
    assert (tokens[0], tokens[-1]) == (529882, 525967)
    mfu = column(run, "mfu_percent")
    assert (mfu[0], mfu[-1]) == (74.13, 73.58)
    assert run.tokens_per_second_scope == "global"


def test_nanogpt_counts_from_zero_and_its_placeholder_mfu_is_not_a_reading() -> None:
    run = training.parse(sample("08-nanogpt-a100-shakespeare-char.log"))
    assert run.profile == "nanogpt"
    assert [s.step for s in run.steps] == list(range(0, 250, 10))
    assert run.steps[0].value("mfu_percent") is None  # printed -100.00%: no estimate yet
    assert run.steps[0].value("step_time_seconds") == 9.37181
    assert run.warmup_steps == 1
    stats = run.stats["step_time_seconds"]
    assert stats is not None and stats.count == 24  # iteration 0 (torch.compile) is the warm-up
    assert stats.mean * 1000 == pytest.approx(898.04, abs=5e-3)
    mfu = run.stats["mfu_percent"]
    assert mfu is not None and (mfu.minimum, mfu.maximum, mfu.mean) == (16.55, 16.68, pytest.approx(16.62))
    assert "tokens_per_second" in run.missing and "mfu_percent" not in run.missing


def test_deepspeed_timer_lines_give_samples_per_second_and_the_step_time_from_timestamps() -> None:
    run = training.parse(sample("09-deepspeed-engine-timer-2022.log"))
    assert run.profile == "deepspeed"
    assert [s.step for s in run.steps] == [40, 50]  # the engine's step= lines are not a second step
    assert [s.value("samples_per_second") for s in run.steps] == [83.48609168106144, 83.73838805358588]
    assert {s.value("memory_gib") for s in run.steps} == {0.26}
    stats = run.stats["step_time_seconds"]
    assert run.step_time_source is training.StepTimeSource.TIMESTAMPS
    assert stats is not None and stats.mean == pytest.approx(1.5145)
    assert {"tokens_per_second", "loss"} <= set(run.missing)  # never claimed: DeepSpeed prints neither


def test_maxtext_per_device_figures_after_the_two_warm_up_steps() -> None:
    run = training.parse(sample("10-maxtext-v5p-deepseek2-16b.log"))
    assert run.profile == "maxtext"
    assert [s.step for s in run.steps] == list(range(10))
    assert run.tokens_per_second_scope == "per_gpu"
    expected = {"step_time_seconds": 5.633625, "tflops_per_gpu": 135.7655, "tokens_per_second": 8726.870375}
    for name, mean in expected.items():
        stat = run.stats[name]
        assert stat is not None and stat.count == 8, name  # steps 0 (compile) and 1 left out
        assert stat.mean == pytest.approx(mean), name
    assert {s.value("total_weights") for s in run.steps} == {196608}


def test_a_gpt_neox_line_is_read_as_gpt_neox_with_its_flops_and_lm_loss() -> None:
    """Taken for Megatron-LM before: step time right, `approx flops per GPU` and `lm_loss` dropped."""
    run = training.parse(sample("11-gpt-neox-deepspeed-llemma.log"))
    assert run.profile == "gpt-neox"
    (step,) = run.steps
    assert (step.step, step.total_steps, step.value("step_time_seconds")) == (34, 10000, 4.1031)
    assert (step.value("tflops_per_gpu"), step.value("loss"), step.value("samples_per_second")) == (
        112.9,
        11.18665,
        7.799,
    )
    assert "tflops_per_gpu" not in run.missing and "loss" not in run.missing


@pytest.mark.parametrize(
    ("unit", "text", "value"),
    [
        (profiles.Unit.SI_TERA, "112.9T", 112.9),
        (profiles.Unit.SI_TERA, "950.0G", 0.95),
        (profiles.Unit.SI_TERA, "1.2P", 1200.0),
        (profiles.Unit.SI, "1.23K", 1230.0),
        (profiles.Unit.SI, "4.5G", 4.5e9),
        (profiles.Unit.SI, "17", 17.0),
        (profiles.Unit.SI_MILLISECONDS, "11.5K", 11.5),
        (profiles.Unit.SI_MILLISECONDS, "272", 0.272),
    ],
)
def test_si_prefixed_figures_read_at_their_printed_scale(unit: profiles.Unit, text: str, value: float) -> None:
    assert unit.to_base(text) == pytest.approx(value)
    assert unit.is_time is (unit is profiles.Unit.SI_MILLISECONDS)


def test_hf_trainer_dicts_are_counted_steps_and_the_bar_is_not_a_step() -> None:
    run = training.parse(sample("12-hf-trainer-deepspeed-t5.log"))
    assert run.profile == "hf-trainer"
    assert run.step_numbers == "counted"
    assert [s.step for s in run.steps] == [1, 2, 3, 4, 5]  # the tqdm redraw and DeepSpeed's lines are not steps
    assert [s.value("loss") for s in run.steps] == [6.2645, 0.0, 0.0, 0.0, 0.0]
    assert [s.value("epoch") for s in run.steps] == [0.02, 0.04, 0.06, 0.08, 0.1]
    assert {"step_time_seconds", "tokens_per_second"} <= set(run.missing)  # never printed, never claimed
    assert training.parse(sample("01-megatron-lm-mixtral8x7b-16xH100.log")).step_numbers == "printed"


def test_nanotron_reads_si_suffixed_figures_at_their_printed_scale() -> None:
    run = training.parse(sample("13-nanotron-si-suffixes.log"))
    assert run.profile == "nanotron"
    assert [s.step for s in run.steps] == [327281, 327282, 327283, 327284]
    assert {s.total_steps for s in run.steps} == {378950}
    first = run.steps[0]
    assert first.value("step_time_seconds") == 11.5  # 11.5K ms
    assert first.value("tokens_per_second") == 11400  # 11.4K, per GPU
    assert first.value("tokens_per_second_job") == 22800
    assert first.value("consumed_tokens") == 85.8e9  # 85.8G
    assert [s.value("loss") for s in run.steps] == [2.38, 2.35, 2.51, 2.36]
    assert run.tokens_per_second_scope == "per_gpu"
    loss = run.stats["loss"]
    assert loss is not None and loss.mean == pytest.approx(2.40)


def test_composer_reads_a_records_metrics_from_the_lines_below_its_batch_line() -> None:
    run = training.parse(sample("14-composer-llm-shearing.log"))
    assert run.profile == "composer"
    (step,) = run.steps
    assert (step.step, step.total_steps) == (366, 48000)
    assert (step.value("loss"), step.value("consumed_samples"), step.value("consumed_tokens")) == (
        10.375,
        93440,
        382730240,
    )
    assert "step_time_seconds" in run.missing and "loss" not in run.missing


def test_a_spanning_records_fields_stop_at_the_next_step_line_and_at_the_span() -> None:
    profile = profiles.load("composer")
    text = "\n".join(
        [
            "[batch=1/10]:",
            "\t Train loss/train/total: 2.5",
            "[batch=2/10]:",
            "\t Train time/sample: 64",
            *["\t Train memory/alloc_retries: 0"] * 200,
            "\t Train loss/train/total: 9.9",  # 201 lines below: past the span
        ]
    )
    run = training.parse(text, profile)
    assert [(s.step, s.value("loss"), s.value("consumed_samples")) for s in run.steps] == [
        (1, 2.5, None),
        (2, None, 64),
    ]


NANOCHAT = sample("07-nanochat-a100-dt-toksec-mfu.log")


def test_lines_from_several_ranks_count_once() -> None:
    lines = [line for line in NANOCHAT.split("\n") if line]
    doubled = "\n".join(f"[rank{r}]:{line}" for line in lines for r in (0, 1))
    run = training.parse(doubled)
    assert [s.step for s in run.steps] == list(range(4, 11))
    assert run.duplicate_lines == len(lines)
    assert run.restarts == 0


def test_a_restart_is_counted_and_re_done_steps_count_once() -> None:
    lines = [line for line in NANOCHAT.split("\n") if line]
    run = training.parse("\n".join(lines + lines[3:]))
    assert run.restarts == 1
    assert run.duplicate_lines == 4
    assert len(run.steps) == 7


def dsx_lines(step_seconds: list[float], *, gap_after: int | None = None, gap_seconds: float = 0.0) -> str:
    start = datetime(2026, 2, 16, 10, 0, 0, tzinfo=UTC)
    moment = start
    out = []
    for index, seconds in enumerate(step_seconds, start=1):
        moment += timedelta(seconds=seconds)
        if gap_after is not None and index == gap_after + 1:
            moment += timedelta(seconds=gap_seconds)
        out.append(
            training.format_dsx_train_line(
                step=index,
                total_steps=len(step_seconds),
                step_time_ms=seconds * 1000,
                tflops_per_gpu=0.012,
                tokens_per_second=4096 / seconds,
                loss=3.0 - index * 0.1,
                global_batch_size=16,
                timestamp=moment,
            )
        )
    return "\n".join(out)


def test_dsx_train_lines_read_back_and_warmup_is_left_out() -> None:
    run = training.parse(dsx_lines([5.0, 1.0, 1.0, 1.0]))
    assert run.profile == "dsx-train"
    assert [s.step for s in run.steps] == [1, 2, 3, 4]
    assert run.steps[0].value("step_time_seconds") == 5.0
    assert run.stats["step_time_seconds"] is not None
    assert run.stats["step_time_seconds"].mean == 1.0  # step 1 is warm-up
    assert run.stats["tokens_per_second"] is not None and run.stats["tokens_per_second"].mean == 4096.0
    assert run.steps[1].value("global_batch_size") == 16
    assert run.steps[1].value("loss") == pytest.approx(2.8)


def test_goodput_is_one_when_the_wall_clock_is_all_steps() -> None:
    run = training.parse(dsx_lines([1.0] * 10))
    assert run.goodput is not None
    assert run.goodput.ratio == pytest.approx(1.0)
    assert run.goodput.wall_seconds == pytest.approx(9.0)


def test_goodput_drops_with_a_stall_between_steps() -> None:
    run = training.parse(dsx_lines([1.0] * 10, gap_after=5, gap_seconds=9.0))
    assert run.goodput is not None
    assert run.goodput.productive_seconds == pytest.approx(9.0)
    assert run.goodput.wall_seconds == pytest.approx(18.0)
    assert run.goodput.ratio == pytest.approx(0.5)


def test_kubelet_timestamps_serve_when_the_line_has_none() -> None:
    lines = [
        f"2026-02-16T10:00:0{i}.000000000Z  iteration {i}/5 | elapsed time per iteration (ms): 1000.0 |"
        f" throughput per GPU (TFLOP/s/GPU): 0.010 | tokens per second: 100.0 | loss: 2.0"
        for i in range(1, 6)
    ]
    run = training.parse("\n".join(lines))
    assert run.steps[0].timestamp == datetime(2026, 2, 16, 10, 0, 1, tzinfo=UTC)
    assert run.goodput is not None and run.goodput.ratio == pytest.approx(1.0)


def test_an_explicit_profile_is_used_even_when_another_would_fit_better() -> None:
    text = dsx_lines([1.0, 1.0])
    run = training.parse(text, profiles.load("megatron-lm"))
    assert run.profile == "megatron-lm" and not run.profile_detected
    assert run.stats["tokens_per_second"] is None  # Megatron's profile does not read it


def test_coloured_torchtitan_lines_are_read() -> None:
    line = (
        "[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - \x1b[31mstep: 200  \x1b[32mloss:  6.1384  "
        "\x1b[33mmemory: 49.66GiB(52.28%)  \x1b[34mtps: 5,856  \x1b[36mtflops: 339.16  \x1b[35mmfu: 34.29%\x1b[39m"
    )
    run = training.parse(line)
    assert run.profile == "torchtitan"
    assert run.steps[0].value("tokens_per_second") == 5856


def test_fast_progress_bars_give_a_step_time_from_the_rate() -> None:
    text = "Epoch 0:  10%|#         | 10/100 [00:04<00:36,  2.50it/s, loss=7.5, reduced_train_loss=7.52]\r"
    text += "Epoch 0:  11%|#         | 11/100 [00:04<00:35,  0it/s, loss=7.4]"
    run = training.parse(text)
    assert run.profile == "nemo1"
    assert column(run, "step_time_seconds") == [0.4, None]  # a rate of 0 is no step time
    assert [s.step for s in run.steps] == [10, 11]  # no global_step printed: the bar's count


def test_a_log_without_steps_reads_empty() -> None:
    run = training.parse("starting\nloading data\n")
    assert run.profile is None and run.steps == ()
    assert run.missing == list(profiles.STANDARD_FIELDS)
    assert run.to_dict()["step_count"] == 0


def test_to_dict_names_every_standard_field() -> None:
    data = training.parse(NANOCHAT).to_dict()
    for name in profiles.STANDARD_FIELDS:
        assert name in data
        assert name in data["steps"][0]
    assert data["tflops_per_gpu"] is None and data["steps"][0]["tflops_per_gpu"] is None


def test_unknown_profile_name_lists_the_known_ones() -> None:
    known = "composer, deepspeed, dsx-train, gpt-neox, hf-trainer, maxtext, megatron-lm, nanochat, nanogpt"
    with pytest.raises(NotFoundError, match=f"allowed values: {known}"):
        profiles.load("megatron")


def test_profile_file_by_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "apiVersion: dsx.certify/v1alpha1\nkind: LogProfile\nname: mine\nframework: mine\ndescription: mine\n"
        "step: {regex: 'STEP (?P<step>\\d+)'}\n"
        "fields: {step_time_seconds: {regex: 'took (?P<value><number>) us', unit: us}}\n"
        "examples: [{line: 'STEP 1 took 2500 us', expect: {step: 1, step_time_seconds: 0.0025}}]\n",
        encoding="utf-8",
    )
    run = training.parse("STEP 1 took 2500 us\nSTEP 2 took 3,500 us\n", certify_files.log_profile(str(path)))
    assert column(run, "step_time_seconds") == [0.0025, 0.0035]


def test_old_snake_case_profile_keys_read_the_same_with_one_warning_each(caplog: pytest.LogCaptureFixture) -> None:
    shipped = profiles.load("nemo2")
    text = Path(shipped.source).read_text(encoding="utf-8")
    old_text = text.replace("warmupSteps:", "warmup_steps:").replace(
        "tokensPerSecondScope:", "tokens_per_second_scope:"
    )
    old_text = old_text.replace("globalStepField:", "global_step_field:")
    assert old_text != text
    with caplog.at_level(logging.WARNING, logger="dsx.certify.parsing.profiles"):
        old = profiles.from_dict(serialization.parse_yaml(old_text, source="old.yaml"), source=shipped.source)
    assert old == shipped
    assert sorted(r.getMessage().split(": ")[1] for r in caplog.records) == [
        "step.global_step_field",
        "tokens_per_second_scope",
        "warmup_steps",
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "Profile"}, "expected apiVersion dsx.certify/v1alpha1 and kind LogProfile"),
        ({"step": {"regex": "iteration (\\d+)"}}, "needs a named group 'step'"),
        ({"step": {"regex": "iteration (?P<step>"}}, "step.regex: invalid regular expression"),
        ({"fields": {"step_time": {"regex": "(?P<value>\\d+)", "unit": "ms"}}}, "name the field \\*_seconds"),
        ({"fields": {"loss": {"regex": "loss (\\d+)"}}}, "fields.loss.regex: needs a named group 'value'"),
        (
            {"fields": {"loss": {"regex": "(?P<value>x)", "unit": "hours"}}},
            "x.yaml: fields.loss: unit: 'hours' is not allowed; allowed values: none, s, ms",
        ),
        ({"fields": {"loss": [{"regex": "(?P<value>x)"}, {"rx": "y"}]}}, "x.yaml: fields.loss\\[1\\]: field: 'rx'"),
        ({"priority": -1}, "x.yaml: priority: -1 is out of range; allowed: an integer at least 0"),
        ({"warmupSteps": "2"}, "x.yaml: warmupSteps: expected an integer, got '2'"),
        ({"tokensPerSecondScope": "node"}, "tokensPerSecondScope: 'node' is not allowed; allowed values: per_gpu"),
        ({"colour": "red"}, "x.yaml: field: 'colour' is not allowed; allowed values: apiVersion, kind, name"),
        ({"examples": []}, "x.yaml: examples: \\[\\] is out of range; allowed: a list of length at least 1"),
        ({"step": {"regex": "s (?P<step>\\d+)", "globalStepField": "gs"}}, "step.globalStepField: 'gs' is not allowed"),
        ({"step": {"regex": "s (?P<step>\\d+)", "counted": True}}, "a counted step takes no group 'step'"),
    ],
)
def test_profile_errors_name_the_field(change: dict[str, object], message: str) -> None:
    base = {
        "apiVersion": "dsx.certify/v1alpha1",
        "kind": "LogProfile",
        "name": "x",
        "framework": "x",
        "description": "x",
        "step": {"regex": "step (?P<step>\\d+)"},
        "fields": {"loss": {"regex": "loss (?P<value><number>)"}},
        "examples": [{"line": "step 1 loss 2", "expect": {"step": 1, "loss": 2}}],
    }
    with pytest.raises(CatalogError, match=message):
        profiles.from_dict({**base, **change}, source="x.yaml")
