"""Area of concern: what a training log says beyond its step lines — fractional-second timestamps,
`global_step` across epochs, checkpoint saves and loads with their durations, application starts,
restarts and warm-up per run — and goodput computed both as dsx and as NVCRE define it."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsx.certify.parsing import profiles, training
from dsx.cli.certify_parse_cmd import parse

T0 = datetime(2026, 2, 5, 16, 0, 0, tzinfo=UTC)


def kubelet(seconds: float, text: str) -> str:
    """`text` as `kubectl logs --timestamps` prints it, `seconds` after T0."""
    return f"{(T0 + timedelta(seconds=seconds)).strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {text}"


def megatron_step(step: int, ms: float, stamp: str | None = None) -> str:
    prefix = f"[{stamp}] " if stamp else ""
    return (
        f"{prefix}iteration {step:8d}/     100 | consumed samples: {step * 128} | elapsed time per iteration (ms):"
        f" {ms:.1f} | throughput per GPU (TFLOP/s/GPU): 138.5 | lm loss: 1.218472E+01 |"
    )


# Megatron-LM as recent versions print it: microseconds in every bracketed timestamp (NVCRE's
# nemotron-6 profile reads the same lines), no kubelet prefix.
MEGATRON_FRACTIONAL = "\n".join(
    [
        "using world size: 16, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: 8",
        "[before the start of training step] datetime: 2026-02-05 16:01:40.326255",
        megatron_step(10, 13256.3, "2026-02-05 16:03:52.889599"),
        megatron_step(20, 6000.0, "2026-02-05 16:04:52.889599"),
        megatron_step(30, 6000.0, "2026-02-05 16:05:52.889599"),
        "[2026-02-05 16:05:53.000000] saving checkpoint at iteration      30 to /mnt/ckpt in torch_dist format",
        "[2026-02-05 16:06:03.000000] successfully saved checkpoint from iteration      30 to /mnt/ckpt",
        megatron_step(40, 6000.0, "2026-02-05 16:07:03.000000"),
    ]
)


def test_megatron_fractional_timestamps_give_step_times_and_goodput() -> None:
    run = training.parse(MEGATRON_FRACTIONAL)
    assert run.profile == "megatron-lm"
    assert [s.step for s in run.steps] == [10, 20, 30, 40]
    assert run.steps[0].timestamp == datetime(2026, 2, 5, 16, 3, 52, 889599, tzinfo=UTC)
    assert all(s.timestamp is not None for s in run.steps)
    assert run.step_time_seconds is not None and run.step_time_seconds.maximum == pytest.approx(13.2563)
    # dsx: 3 × 10 steps × 6 s productive over 190.110401 s between the first and last step line
    assert run.goodput is not None
    assert run.goodput.productive_seconds == pytest.approx(180.0)
    assert run.goodput.wall_seconds == pytest.approx(190.110401)
    assert run.goodput.ratio == pytest.approx(180.0 / 190.110401)
    (save,) = run.checkpoints
    assert (save.kind, save.step, save.path) == (training.CheckpointKind.SAVE, 30, "/mnt/ckpt")
    assert save.duration_seconds == pytest.approx(10.0)
    assert save.duration_source is training.DurationSource.TIMESTAMPS
    (only,) = run.runs
    assert only.application_start_at == datetime(2026, 2, 5, 16, 1, 40, 326255, tzinfo=UTC)
    # NVCRE: t_w 190.110401, t_rm = start → first step 132.563344, t_save 10
    nvcre = run.goodput_nvcre
    assert nvcre is not None
    assert nvcre.training_seconds == pytest.approx(190.110401)
    assert nvcre.resume_seconds == pytest.approx(132.563344)
    assert nvcre.checkpoint_save_seconds == pytest.approx(10.0)
    assert (nvcre.lost_work_seconds, nvcre.reschedule_seconds, nvcre.interruptions) == (0.0, 0.0, 0)
    assert nvcre.ratio == pytest.approx((190.110401 - 132.563344 - 10.0) / 190.110401)


def test_whole_second_megatron_timestamps_still_read() -> None:
    run = training.parse(megatron_step(43, 5444.9, "2024-04-06 02:59:36"))
    assert run.steps[0].timestamp == datetime(2024, 4, 6, 2, 59, 36, tzinfo=UTC)


def nemo2_line(epoch: int, iteration: int, per_epoch: int, global_step: int) -> str:
    return (
        f"Training epoch {epoch}, iteration {iteration}/{per_epoch - 1} | lr: 1e-05 | global_step: {global_step}"
        f" | reduced_train_loss: 2.5 | train_step_timing in s: 1.0"
    )


def nemo2_two_epochs(per_epoch: int = 3) -> str:
    rows = []
    for global_step in range(2 * per_epoch):
        epoch, iteration = divmod(global_step, per_epoch)
        rows.append(kubelet(global_step, nemo2_line(epoch, iteration, per_epoch, global_step)))
    return "\n".join(rows)


def test_nemo_steps_increase_across_the_epoch_boundary() -> None:
    run = training.parse(nemo2_two_epochs())
    assert run.profile == "nemo2"
    assert [s.step for s in run.steps] == [0, 1, 2, 3, 4, 5]
    assert [s.printed_step for s in run.steps] == [0, 1, 2, 0, 1, 2]
    assert run.restarts == 0 and run.duplicate_lines == 0
    assert run.goodput is not None and run.goodput.ratio == pytest.approx(1.0)


def test_nemo_issue_example_epoch_4_iteration_0_is_global_step_200() -> None:
    line = "Training epoch 4, iteration 0/49 | global_step: 200 | reduced_train_loss: 2.1 | train_step_timing in s: 1.2"
    (step,) = training.parse(line).steps
    assert (step.step, step.printed_step) == (200, 0)


def restarted_megatron() -> str:
    """Run 1 saves at 20 and dies after 30; run 2 starts 60 s later, loads 20 and goes on to 50."""
    return "\n".join(
        [
            kubelet(0, "using world size: 16, data-parallel size: 2, context-parallel size: 1"),
            kubelet(10, megatron_step(10, 1000.0)),
            kubelet(20, megatron_step(20, 1000.0)),
            kubelet(21, "saving checkpoint at iteration      20 to /mnt/ckpt in torch_dist format"),
            kubelet(26, "  successfully saved checkpoint from iteration      20 to /mnt/ckpt [ t 1/8, p 1/1 ]"),
            kubelet(36, megatron_step(30, 1000.0)),
            kubelet(40, "NCCL WARN Net : Connection closed by remote peer"),
            kubelet(100, "using world size: 16, data-parallel size: 2, context-parallel size: 1"),
            kubelet(110, " loading checkpoint from /mnt/ckpt at iteration 20"),
            kubelet(112, "  successfully loaded checkpoint from /mnt/ckpt [ t 0/8, p 0/1 ] at iteration 20"),
            kubelet(130, megatron_step(30, 1000.0)),
            kubelet(140, megatron_step(40, 1000.0)),
            kubelet(150, megatron_step(50, 1000.0)),
        ]
    )


def test_a_restart_from_a_checkpoint_is_one_run_more_with_its_checkpoints() -> None:
    run = training.parse(restarted_megatron())
    assert run.restarts == 1 and run.duplicate_lines == 1
    first, second = run.runs
    assert (first.started_by, first.first_step, first.last_step) == (training.RunStart.LOG_START, 10, 30)
    assert first.last_log_at == T0 + timedelta(seconds=40)
    assert (second.started_by, second.resumed_from_step) == (training.RunStart.APPLICATION_START, 20)
    assert (second.first_step, second.last_step) == (30, 50)
    assert second.application_start_at == T0 + timedelta(seconds=100)
    save, load = run.checkpoints
    assert (save.kind, save.step, save.run, save.duration_seconds) == (training.CheckpointKind.SAVE, 20, 0, 5.0)
    assert (load.kind, load.step, load.run, load.duration_seconds) == (training.CheckpointKind.LOAD, 20, 1, 2.0)


def test_nvcre_goodput_terms_of_a_restart() -> None:
    nvcre = training.parse(restarted_megatron()).goodput_nvcre
    assert nvcre is not None
    assert nvcre.training_seconds == 140.0  # first step (10 s) → last line (150 s)
    assert nvcre.checkpoint_save_seconds == 5.0
    assert nvcre.lost_work_seconds == 14.0  # checkpoint done at 26 s, run 1 last seen at 40 s
    assert nvcre.reschedule_seconds == 60.0  # 40 s → application start at 100 s
    assert nvcre.resume_seconds == 40.0  # 10 s startup + 100 s → first step at 130 s
    assert nvcre.interruptions == 1
    assert nvcre.ratio == pytest.approx((140 - 14 - 40 - 60 - 5) / (140 - 60))


def test_dsx_goodput_of_a_restart_counts_the_lost_wall_time() -> None:
    goodput = training.parse(restarted_megatron()).goodput
    assert goodput is not None
    assert goodput.productive_seconds == 40.0  # four advances of 10 steps × 1 s
    assert goodput.wall_seconds == 140.0
    assert goodput.ratio == pytest.approx(40 / 140)


def test_warm_up_steps_are_counted_per_run_from_the_step_it_resumed() -> None:
    profile = replace(profiles.load("megatron-lm"), warmup_steps=20)
    run = training.parse(restarted_megatron(), profile)
    assert [r.warmup_steps for r in run.runs] == [(10, 20), (40,)]
    assert run.step_time_seconds is not None and run.step_time_seconds.count == 2  # steps 30 and 50


def test_a_step_going_back_without_a_start_line_opens_a_run() -> None:
    lines = [kubelet(i, megatron_step(step, 1000.0)) for i, step in enumerate([1, 2, 3, 2, 3, 4])]
    run = training.parse("\n".join(lines))
    assert [r.started_by for r in run.runs] == [training.RunStart.LOG_START, training.RunStart.STEP_WENT_BACK]
    assert run.runs[1].first_step == 2 and run.duplicate_lines == 2


def test_printed_save_durations_and_a_repeated_end_line_make_one_checkpoint() -> None:
    text = "\n".join(
        [
            kubelet(0, nemo2_line(0, 199, 200, 199)),
            kubelet(
                1,
                "Global Checkpoint Save : Rank: 0 : Iteration: 199 : Start time: 1738771432.345s :"
                " Save duration: 0.309s",
            ),
            kubelet(2, "Successfully saved checkpoint from iteration     199 to /results/checkpoints/step=199"),
        ]
    )
    (save,) = training.parse(text).checkpoints
    assert (save.step, save.path, save.duration_seconds) == (199, "/results/checkpoints/step=199", 0.309)
    assert save.duration_source is training.DurationSource.PRINTED


def test_an_unfinished_save_is_reported_without_a_duration() -> None:
    text = "\n".join(
        [
            kubelet(0, megatron_step(10, 1000.0)),
            kubelet(1, "saving checkpoint at iteration      10 to /mnt/ckpt in torch_dist format"),
        ]
    )
    (save,) = training.parse(text).checkpoints
    assert (save.step, save.end_line, save.duration_seconds) == (10, None, None)


@pytest.mark.parametrize(
    ("text", "time_format", "expected"),
    [
        ("2026-02-05 16:03:52", "%Y-%m-%d %H:%M:%S", datetime(2026, 2, 5, 16, 3, 52, tzinfo=UTC)),
        ("2026-02-05 16:03:52.889599", "%Y-%m-%d %H:%M:%S", datetime(2026, 2, 5, 16, 3, 52, 889599, tzinfo=UTC)),
        ("2026-02-05 16:03:52.8", "%Y-%m-%d %H:%M:%S.%f", datetime(2026, 2, 5, 16, 3, 52, 800000, tzinfo=UTC)),
        ("2025-06-16 22:30:50,322", "%Y-%m-%d %H:%M:%S,%f", datetime(2025, 6, 16, 22, 30, 50, 322000, tzinfo=UTC)),
        ("2026-02-05 16:03:52.889599123", "%Y-%m-%d %H:%M:%S", datetime(2026, 2, 5, 16, 3, 52, 889599, tzinfo=UTC)),
        ("2026-02-05 16:03", "%Y-%m-%d %H:%M:%S", None),
    ],
)
def test_parse_time_with_and_without_fractions(text: str, time_format: str, expected: datetime | None) -> None:
    assert profiles.parse_time(text, time_format) == expected


def test_cli_reports_runs_checkpoints_and_both_goodputs(tmp_path: Path) -> None:
    path = tmp_path / "megatron.log"
    path.write_text(MEGATRON_FRACTIONAL, encoding="utf-8")
    result = CliRunner().invoke(parse, ["training", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["stepTimeSeconds"]["count"] == 4
    assert data["goodput"]["ratio"] == pytest.approx(180.0 / 190.110401)
    assert data["goodputNvcre"]["checkpointSaveSeconds"] == pytest.approx(10.0)
    assert data["checkpoints"][0]["durationSeconds"] == pytest.approx(10.0)
    assert data["runs"][0]["applicationStartAt"] == "2026-02-05T16:01:40.326255+00:00"
    table = CliRunner().invoke(parse, ["training", str(path), "--format", "table"])
    assert table.exit_code == 0 and "goodput (NVCRE): 0.25" in table.output


def test_cli_nemo_two_epochs(tmp_path: Path) -> None:
    path = tmp_path / "nemo.log"
    path.write_text(nemo2_two_epochs(), encoding="utf-8")
    data = json.loads(CliRunner().invoke(parse, ["training", str(path), "--format", "json"]).output)
    assert [s["step"] for s in data["steps"]] == [0, 1, 2, 3, 4, 5]
    assert data["restarts"] == 0
