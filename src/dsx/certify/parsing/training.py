"""Training logs → step time, throughput, checkpoints, restarts and goodput, through the log profiles.

Each step line is read with one profile (given, or detected: the profile whose step regex and
field regexes match the most of the log wins, ties to the higher `priority`). A step seen again
(the same number printed by several ranks, or re-run after a restart) counts once, at its first
line. When the profile names a `global_step_field` and the line prints it, that is the step, so
an in-epoch iteration counter starting again at 0 is not a restart.

The log is cut into **runs** (attempts): a new run starts at an application-start line after
steps were seen, or where a step number goes backwards within one launcher stream. Each run
reports its start, first and last step, the checkpoint it resumed from and its warm-up steps:
those within `warmup_steps` of the step the run started from (the loaded checkpoint's step, the
step before the run's first, or 0 for the first run). Checkpoint save and load start/end lines
pair up into `Checkpoint`s with a duration, printed or from the two lines' times.

Summaries report a field only from lines that printed it: a framework that never prints tokens
per second gives None (and names the field in `missing`), never 0. Warm-up steps are left out of
the means while later steps exist.

Step time comes from the log when printed; otherwise it is derived from line timestamps
(elapsed time over steps advanced), and `step_time_source` says which. Goodput is reported two
ways (docs/certify.md):

- dsx: productive time (steps advanced × their printed step time) over the wall time from the
  first to the last step line, clamped to [0, 1]; restarts, re-done steps, checkpoint stalls and
  hangs between logged steps lower it. Needs printed step times and timestamps.
- NVCRE: (t_w − t_ch − t_rm − t_re − t_save) / (t_w − t_re), clamped at 0, from the run
  boundaries: training wall time t_w (first step to last log line), work lost since the last
  checkpoint at each interruption t_ch, resume time t_rm (application start → first step),
  rescheduling gaps t_re (last line of a run → next application start) and checkpoint save
  time t_save. Needs timestamps only.

Also here: `format_dsx_train_line`, the Megatron-like line the local training workload prints
(profile `dsx-train`), next to the parser that reads it.
"""

from __future__ import annotations

import enum
import itertools
import math
import re
import statistics
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar

from dsx.certify.parsing import lines, profiles

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
EventKind = profiles.EventKind


class StepTimeSource(enum.Enum):
    LOG = "log"
    TIMESTAMPS = "timestamps"


class RunStart(enum.Enum):
    """What opened a run: the top of the log, an application-start line, or a step going back."""

    LOG_START = "log_start"
    APPLICATION_START = "application_start"
    STEP_WENT_BACK = "step_went_back"


class CheckpointKind(enum.Enum):
    SAVE = "save"
    LOAD = "load"


class DurationSource(enum.Enum):
    PRINTED = "printed"
    TIMESTAMPS = "timestamps"


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


@dataclass(frozen=True)
class TrainingStep:
    """One step line as the profile read it; absent fields are None."""

    line_number: int
    step: int
    total_steps: int | None
    stream: str
    timestamp: datetime | None
    values: dict[str, float] = field(default_factory=dict)
    """Every field the profile captured on this line, in the field's unit."""
    printed_step: int | None = None
    """The step counter the line printed, when the step came from `global_step` instead."""

    def value(self, name: str) -> float | None:
        return self.values.get(name)

    def to_dict(self) -> dict[str, Any]:
        standard = {name: self.values.get(name) for name in profiles.STANDARD_FIELDS}
        extra = {k: v for k, v in sorted(self.values.items()) if k not in standard}
        return {
            "line": self.line_number,
            "step": self.step,
            "printed_step": self.printed_step,
            "total_steps": self.total_steps,
            "stream": self.stream,
            "timestamp": _iso(self.timestamp),
            **standard,
            "extra": extra,
        }


@dataclass(frozen=True)
class LogEvent:
    """One lifecycle line (application start, checkpoint save or load start/end)."""

    kind: profiles.EventKind
    line_number: int
    stream: str
    timestamp: datetime | None
    step: int | None = None
    path: str | None = None
    duration_seconds: float | None = None


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint save or load: its start and end lines paired, with the time it took."""

    kind: CheckpointKind
    step: int | None
    path: str | None
    run: int
    start_line: int | None
    end_line: int | None
    started_at: datetime | None
    ended_at: datetime | None
    duration_seconds: float | None
    duration_source: DurationSource | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "step": self.step,
            "path": self.path,
            "run": self.run,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at),
            "duration_seconds": self.duration_seconds,
            "duration_source": self.duration_source.value if self.duration_source else None,
        }


@dataclass(frozen=True)
class Run:
    """One attempt of the job within the log (see the module docstring)."""

    index: int
    started_by: RunStart
    start_line: int
    application_start_at: datetime | None
    resumed_from_step: int | None
    first_step: int | None
    last_step: int | None
    first_step_at: datetime | None
    last_step_at: datetime | None
    last_log_at: datetime | None
    step_lines: int
    warmup_steps: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "started_by": self.started_by.value,
            "start_line": self.start_line,
            "application_start_at": _iso(self.application_start_at),
            "resumed_from_step": self.resumed_from_step,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "first_step_at": _iso(self.first_step_at),
            "last_step_at": _iso(self.last_step_at),
            "last_log_at": _iso(self.last_log_at),
            "step_lines": self.step_lines,
            "warmup_steps": list(self.warmup_steps),
        }


@dataclass(frozen=True)
class Statistic:
    mean: float
    minimum: float
    maximum: float
    count: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Statistic | None:
        if not values:
            return None
        try:
            mean = statistics.fmean(values)
        except OverflowError:  # finite values whose sum is not (a log printing 1e308 twice): scale first
            mean = math.fsum(v / len(values) for v in values)
        return cls(mean, min(values), max(values), len(values))

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "min": self.minimum, "max": self.maximum, "count": self.count}


@dataclass(frozen=True)
class Goodput:
    """dsx's goodput: printed step time over the wall time between the first and last step line."""

    ratio: float
    productive_seconds: float
    wall_seconds: float

    def to_dict(self) -> dict[str, float]:
        return {"ratio": self.ratio, "productive_seconds": self.productive_seconds, "wall_seconds": self.wall_seconds}


@dataclass(frozen=True)
class NvcreGoodput:
    """NVCRE's runtime goodput and its terms, as its GoodputMeasurement status names them."""

    ratio: float
    training_seconds: float
    """t_w: first training step to the last log line."""
    lost_work_seconds: float
    """t_ch: per interruption, from the last completed checkpoint save to the run's last line."""
    resume_seconds: float
    """t_rm: application start (or the interruption's reschedule) to the run's first step."""
    reschedule_seconds: float
    """t_re: a run's last line to the next run's application start."""
    checkpoint_save_seconds: float
    """t_save: the summed checkpoint save durations."""
    interruptions: int

    def to_dict(self) -> dict[str, float | int]:
        return {
            "ratio": self.ratio,
            "training_seconds": self.training_seconds,
            "lost_work_seconds": self.lost_work_seconds,
            "resume_seconds": self.resume_seconds,
            "reschedule_seconds": self.reschedule_seconds,
            "checkpoint_save_seconds": self.checkpoint_save_seconds,
            "interruptions": self.interruptions,
        }


@dataclass(frozen=True)
class TrainingRun:
    """What one log says about a training job."""

    profile: str | None
    framework: str | None
    profile_detected: bool
    steps: tuple[TrainingStep, ...]
    """Unique steps in order of first appearance."""
    duplicate_lines: int
    warmup_steps: int
    tokens_per_second_scope: str | None
    step_time_source: StepTimeSource | None
    stats: dict[str, Statistic | None]
    """Per standard field, over the steps after warmup; step_time_seconds may be timestamp-derived."""
    goodput: Goodput | None
    runs: tuple[Run, ...] = ()
    checkpoints: tuple[Checkpoint, ...] = ()
    goodput_nvcre: NvcreGoodput | None = None
    step_numbers: str = "printed"
    """`printed`, or `counted` when the framework prints none and step lines were numbered in order."""

    @property
    def restarts(self) -> int:
        return max(0, len(self.runs) - 1)

    @property
    def step_time_seconds(self) -> Statistic | None:
        return self.stats.get("step_time_seconds")

    @property
    def missing(self) -> list[str]:
        return [name for name in profiles.STANDARD_FIELDS if self.stats.get(name) is None]

    def saves(self) -> list[Checkpoint]:
        return [c for c in self.checkpoints if c.kind is CheckpointKind.SAVE]

    def to_dict(self) -> dict[str, Any]:
        steps = self.steps
        save_time = Statistic.of([c.duration_seconds for c in self.saves() if c.duration_seconds is not None])
        return {
            "profile": self.profile,
            "framework": self.framework,
            "profile_detected": self.profile_detected,
            "step_count": len(steps),
            "first_step": steps[0].step if steps else None,
            "last_step": steps[-1].step if steps else None,
            "total_steps": next((s.total_steps for s in reversed(steps) if s.total_steps is not None), None),
            "duplicate_lines": self.duplicate_lines,
            "restarts": self.restarts,
            "warmup_steps": self.warmup_steps,
            "tokens_per_second_scope": self.tokens_per_second_scope,
            "step_time_source": self.step_time_source.value if self.step_time_source else None,
            "step_numbers": self.step_numbers,
            **{name: (stat.to_dict() if stat else None) for name, stat in self.stats.items()},
            "checkpoint_save_seconds": save_time.to_dict() if save_time else None,
            "goodput": self.goodput.to_dict() if self.goodput else None,
            "goodput_nvcre": self.goodput_nvcre.to_dict() if self.goodput_nvcre else None,
            "missing": self.missing,
            "runs": [r.to_dict() for r in self.runs],
            "checkpoints": [c.to_dict() for c in self.checkpoints],
            "steps": [s.to_dict() for s in steps],
        }


def parse(
    text: str, profile: profiles.LogProfile | None = None, *, candidates: Iterable[profiles.LogProfile] = ()
) -> TrainingRun:
    """Read a training log with `profile`, or with the best of `candidates` (default: all shipped)."""
    log = [_clean(line) for line in lines.log_lines(text)]
    detected = profile is None
    if profile is None:
        profile = detect(log, list(candidates) or profiles.load_all())
    if profile is None:
        return _empty()
    return _summarise(profile, log, detected)


DETECTION_SAMPLE_LINES = 200
"""Detection scores the first step-like lines only: a framework's format does not change mid-log."""


def detect(log: Sequence[lines.LogLine], candidates: Sequence[profiles.LogProfile]) -> profiles.LogProfile | None:
    """The profile that reads the most of `log`: step lines plus fields found on them.

    Ties go to the higher `priority`, then to the name, so the choice is deterministic.
    """
    sample: list[str] = []
    for line in log:
        if any(p.step.search(line.text) for p in candidates):
            sample.append(line.text)
            if len(sample) == DETECTION_SAMPLE_LINES:
                break
    best: tuple[int, int] | None = None
    chosen = None
    for profile in sorted(candidates, key=lambda p: p.name):
        score = 0
        for text in sample:
            if profile.step.search(text):
                score += 1 + sum(1 for pats in profile.fields.values() if any(p.regex.search(text) for p in pats))
        if score and (best is None or (score, profile.priority) > best):
            best, chosen = (score, profile.priority), profile
    return chosen


def line_time(profile: profiles.LogProfile, line: lines.LogLine) -> datetime | None:
    """The line's own time under `profile`, else the kubelet's prefix, else None."""
    timestamp = profile.read_timestamp(line.text)
    if timestamp is None and line.kubelet_time:
        timestamp = lines.parse_kubelet_time(line.kubelet_time)
    return timestamp


def read_fields(profile: profiles.LogProfile, text: str, skip: Collection[str] = ()) -> dict[str, float]:
    """The profile's fields a line prints (first matching pattern per field), in each field's unit."""
    values: dict[str, float] = {}
    for name, patterns in profile.fields.items():
        if name in skip:
            continue
        for pattern in patterns:
            found = pattern.regex.search(text)
            if found:
                try:
                    values[name] = pattern.unit.to_base(found.group("value"))
                except ValueError:
                    continue
                break
    return values


def read_step(profile: profiles.LogProfile, line: lines.LogLine) -> TrainingStep | None:
    """The step a line reports under `profile`, or None when it is not a step line."""
    match = profile.step.search(line.text)
    if match is None:
        return None
    total = match.groupdict().get("total_steps")
    values = read_fields(profile, line.text)
    try:
        step_text = match.groupdict().get("step")
        printed = 1 if step_text is None else lines.parse_count(step_text)  # counted steps: renumbered in order
        total_steps = lines.parse_count(total) if total else None
    except ValueError:
        return None  # a step number no run reaches: not a step line
    step, printed_step = printed, None
    global_step = values.get(profile.global_step_field) if profile.global_step_field else None
    if global_step is not None and 0 <= global_step < 10**lines.MAX_COUNT_DIGITS and global_step.is_integer():
        step, printed_step = int(global_step), printed
    return TrainingStep(
        line_number=line.number,
        step=step,
        total_steps=total_steps,
        stream=line.stream,
        timestamp=line_time(profile, line),
        values=values,
        printed_step=printed_step,
    )


def read_event(profile: profiles.LogProfile, line: lines.LogLine) -> LogEvent | None:
    """The lifecycle event a line reports under `profile` (first matching pattern), or None."""
    for pattern in profile.events:
        match = pattern.regex.search(line.text)
        if match is None:
            continue
        groups = match.groupdict()
        timestamp = None
        if groups.get("timestamp") and profile.timestamp_format:
            timestamp = profiles.parse_time(groups["timestamp"], profile.timestamp_format)
        duration = None
        if groups.get("duration"):
            try:
                duration = pattern.unit.to_base(groups["duration"])
            except ValueError:
                duration = None
        step_text = groups.get("step")
        try:
            step = lines.parse_count(step_text) if step_text else None
        except ValueError:
            step = None
        return LogEvent(
            kind=pattern.kind,
            line_number=line.number,
            stream=line.stream,
            timestamp=timestamp or line_time(profile, line),
            step=step,
            path=groups.get("path") or None,
            duration_seconds=duration,
        )
    return None


def _clean(line: lines.LogLine) -> lines.LogLine:
    if "\x1b" not in line.text:
        return line
    return lines.LogLine(line.number, _ANSI.sub("", line.text), line.stream, line.kubelet_time)


@dataclass
class _OpenRun:
    """A run while the log is being read."""

    index: int
    started_by: RunStart
    start_line: int
    application_start_at: datetime | None = None
    resumed_from_step: int | None = None
    steps: list[TrainingStep] = field(default_factory=list)
    """Steps first seen in this run (re-done steps of an earlier run are not repeated here)."""
    step_lines: int = 0
    first_step_at: datetime | None = None
    last_step_at: datetime | None = None
    last_log_at: datetime | None = None
    last_by_stream: dict[str, int] = field(default_factory=dict)
    first_step: int | None = None
    last_step: int | None = None

    def freeze(self, warmup_steps: int) -> Run:
        if self.resumed_from_step is not None:
            base = self.resumed_from_step
        elif self.index == 0 or self.first_step is None:
            base = -1 if self.first_step == 0 else 0  # a framework that counts from 0 (nanoGPT) warms up at 0
        else:
            base = self.first_step - 1
        warmup = tuple(s.step for s in self.steps if base < s.step <= base + warmup_steps)
        return Run(
            index=self.index,
            started_by=self.started_by,
            start_line=self.start_line,
            application_start_at=self.application_start_at,
            resumed_from_step=self.resumed_from_step,
            first_step=self.first_step,
            last_step=self.last_step,
            first_step_at=self.first_step_at,
            last_step_at=self.last_step_at,
            last_log_at=self.last_log_at,
            step_lines=self.step_lines,
            warmup_steps=warmup,
        )


class _Checkpoints:
    """Pairs start and end lines of saves and loads into `Checkpoint`s."""

    _STARTS: ClassVar[dict[EventKind, CheckpointKind]] = {
        EventKind.CHECKPOINT_SAVE_START: CheckpointKind.SAVE,
        EventKind.CHECKPOINT_LOAD_START: CheckpointKind.LOAD,
    }
    _ENDS: ClassVar[dict[EventKind, CheckpointKind]] = {
        EventKind.CHECKPOINT_SAVE_END: CheckpointKind.SAVE,
        EventKind.CHECKPOINT_LOAD_END: CheckpointKind.LOAD,
    }

    def __init__(self) -> None:
        self.done: list[Checkpoint] = []
        self.pending: dict[CheckpointKind, tuple[LogEvent, int]] = {}

    def add(self, event: LogEvent, run: int) -> None:
        if event.kind in self._STARTS:
            kind = self._STARTS[event.kind]
            self._flush(kind)
            self.pending[kind] = (event, run)
        elif event.kind in self._ENDS:
            kind = self._ENDS[event.kind]
            opened = self.pending.pop(kind, None)
            start = opened[0] if opened and _same_step(opened[0].step, event.step) else None
            if opened and start is None:
                self._flush_event(kind, *opened)
            if start is None and self._merge_repeat(kind, event):
                return
            self.done.append(_checkpoint(kind, start, event, opened[1] if start and opened else run))

    def finish(self) -> list[Checkpoint]:
        for kind in list(self.pending):
            self._flush(kind)
        return self.done

    def _flush(self, kind: CheckpointKind) -> None:
        opened = self.pending.pop(kind, None)
        if opened:
            self._flush_event(kind, *opened)

    def _flush_event(self, kind: CheckpointKind, event: LogEvent, run: int) -> None:
        self.done.append(_checkpoint(kind, event, None, run))

    def _merge_repeat(self, kind: CheckpointKind, event: LogEvent) -> bool:
        """A second end line for the step just completed (NeMo prints two) fills gaps, not a new entry."""
        last = self.done[-1] if self.done else None
        if last is None or last.kind is not kind or last.step is None or last.step != event.step:
            return False
        self.done[-1] = Checkpoint(
            kind=kind,
            step=last.step,
            path=last.path or event.path,
            run=last.run,
            start_line=last.start_line,
            end_line=last.end_line,
            started_at=last.started_at,
            ended_at=last.ended_at or event.timestamp,
            duration_seconds=last.duration_seconds if last.duration_seconds is not None else event.duration_seconds,
            duration_source=last.duration_source or (DurationSource.PRINTED if event.duration_seconds else None),
        )
        return True


def _same_step(a: int | None, b: int | None) -> bool:
    return a is None or b is None or a == b


def _checkpoint(kind: CheckpointKind, start: LogEvent | None, end: LogEvent | None, run: int) -> Checkpoint:
    printed = next((e.duration_seconds for e in (end, start) if e and e.duration_seconds is not None), None)
    duration, source = printed, DurationSource.PRINTED if printed is not None else None
    started_at = start.timestamp if start else None
    ended_at = end.timestamp if end else None
    if duration is None and started_at and ended_at and ended_at >= started_at:
        duration, source = (ended_at - started_at).total_seconds(), DurationSource.TIMESTAMPS
    step = next((e.step for e in (end, start) if e and e.step is not None), None)
    path = next((e.path for e in (end, start) if e and e.path), None)
    return Checkpoint(
        kind=kind,
        step=step,
        path=path,
        run=run,
        start_line=start.line_number if start else None,
        end_line=end.line_number if end else None,
        started_at=started_at,
        ended_at=ended_at,
        duration_seconds=duration,
        duration_source=source,
    )


def _summarise(profile: profiles.LogProfile, log: Sequence[lines.LogLine], detected: bool) -> TrainingRun:
    unique: dict[int, TrainingStep] = {}
    duplicates = 0
    runs = [_OpenRun(0, RunStart.LOG_START, log[0].number if log else 1)]
    checkpoints = _Checkpoints()
    last_step_time: datetime | None = None
    counted = 0
    spanning: TrainingStep | None = None
    """The step whose record continues on the lines after it (`step.spansLines`)."""
    span_left = 0
    for line in log:
        current = runs[-1]
        step = read_step(profile, line)
        if step is not None and profile.counted_steps:
            counted += 1
            step = replace(step, step=counted)
        if step is None and spanning is not None and span_left > 0:
            span_left -= 1
            spanning.values.update(read_fields(profile, line.text, skip=spanning.values))
        elif step is not None and profile.spans_lines:
            spanning, span_left = step, profile.spans_lines
        event = read_event(profile, line) if step is None and profile.events else None
        moment = event.timestamp if event else step.timestamp if step else line_time(profile, line)
        if event is not None and event.kind is EventKind.APPLICATION_START and current.step_lines:
            current = _open(runs, RunStart.APPLICATION_START, line.number)
        if step is not None:
            previous = current.last_by_stream.get(step.stream)
            if previous is not None and step.step < previous:
                current = _open(runs, RunStart.STEP_WENT_BACK, line.number)
        if moment is not None and (current.last_log_at is None or moment > current.last_log_at):
            current.last_log_at = moment
        if event is not None:
            _note_event(current, event)
            if event.kind is not EventKind.APPLICATION_START:
                checkpoints.add(event, current.index)
            continue
        if step is None:
            continue
        current.last_by_stream[step.stream] = step.step
        current.step_lines += 1
        if current.first_step is None:
            current.first_step, current.first_step_at = step.step, step.timestamp
        current.last_step = step.step
        if step.timestamp is not None:
            current.last_step_at = step.timestamp
            if last_step_time is None or step.timestamp > last_step_time:
                last_step_time = step.timestamp
        if step.step in unique:
            duplicates += 1
            continue
        unique[step.step] = step
        current.steps.append(step)
    frozen = tuple(r.freeze(profile.warmup_steps) for r in runs)
    steps = tuple(unique.values())
    warmup = {s for r in frozen for s in r.warmup_steps}
    measured = [s for s in steps if s.step not in warmup] or list(steps)
    stats = {
        name: Statistic.of([v for s in measured if (v := s.value(name)) is not None])
        for name in profiles.STANDARD_FIELDS
    }
    source = StepTimeSource.LOG if stats["step_time_seconds"] else None
    if source is None:
        derived = _derived_step_times(measured)
        stats["step_time_seconds"] = Statistic.of(derived)
        source = StepTimeSource.TIMESTAMPS if derived else None
    saved = tuple(checkpoints.finish())
    return TrainingRun(
        profile=profile.name,
        framework=profile.framework,
        profile_detected=detected,
        steps=steps,
        duplicate_lines=duplicates,
        warmup_steps=profile.warmup_steps,
        tokens_per_second_scope=profile.tokens_per_second_scope.value,
        step_time_source=source,
        step_numbers="counted" if profile.counted_steps else "printed",
        stats=stats,
        goodput=_goodput(steps, last_step_time) if source is StepTimeSource.LOG else None,
        runs=frozen,
        checkpoints=saved,
        goodput_nvcre=nvcre_goodput(frozen, saved),
    )


def _open(runs: list[_OpenRun], why: RunStart, line_number: int) -> _OpenRun:
    run = _OpenRun(len(runs), why, line_number)
    runs.append(run)
    return run


_LOADS = (EventKind.CHECKPOINT_LOAD_START, EventKind.CHECKPOINT_LOAD_END)


def _note_event(run: _OpenRun, event: LogEvent) -> None:
    """The run's start time (first start line with a time) and the checkpoint step it resumed from."""
    if event.kind is EventKind.APPLICATION_START and run.application_start_at is None:
        run.application_start_at = event.timestamp
    elif event.kind in _LOADS and event.step is not None and not run.step_lines:
        run.resumed_from_step = event.step


def _pairs(steps: Sequence[TrainingStep]) -> list[tuple[TrainingStep, TrainingStep]]:
    """Consecutive timestamped steps that advance (in order of appearance)."""
    timed = [s for s in steps if s.timestamp is not None]
    return [(a, b) for a, b in itertools.pairwise(timed) if b.step > a.step]


def _derived_step_times(steps: Sequence[TrainingStep]) -> list[float]:
    out = []
    for a, b in _pairs(steps):
        assert a.timestamp is not None and b.timestamp is not None
        elapsed = (b.timestamp - a.timestamp).total_seconds()
        if elapsed > 0:
            out.append(elapsed / (b.step - a.step))
    return out


def _goodput(steps: Sequence[TrainingStep], last_time: datetime | None) -> Goodput | None:
    pairs = _pairs(steps)
    if not pairs or last_time is None:
        return None
    first = pairs[0][0].timestamp
    assert first is not None
    wall = (last_time - first).total_seconds()
    productive = 0.0
    for a, b in pairs:
        step_time = b.value("step_time_seconds")
        if step_time is None:
            return None
        productive += (b.step - a.step) * step_time
    if wall <= 0:
        return None
    return Goodput(ratio=max(0.0, min(1.0, productive / wall)), productive_seconds=productive, wall_seconds=wall)


def nvcre_goodput(runs: Sequence[Run], checkpoints: Sequence[Checkpoint]) -> NvcreGoodput | None:
    """NVCRE's goodput over `runs` (see the module docstring); None without timed steps."""
    trained = [r for r in runs if r.first_step_at is not None]
    if not trained:
        return None
    start = trained[0].first_step_at
    end = max((r.last_log_at for r in runs if r.last_log_at), default=None)
    assert start is not None
    if end is None or end <= start:
        return None
    saves = [c for c in checkpoints if c.kind is CheckpointKind.SAVE]
    t_save = sum(c.duration_seconds for c in saves if c.duration_seconds is not None)
    t_ch = t_re = t_rm = 0.0
    first = trained[0]
    if first.application_start_at is not None and first.first_step_at is not None:
        t_rm += max(0.0, (first.first_step_at - first.application_start_at).total_seconds())
    interruptions = 0
    for before, after in itertools.pairwise(trained):
        interruptions += 1
        assert after.first_step_at is not None
        stopped = before.last_log_at or before.last_step_at
        if stopped is None:
            continue
        saved = [c.ended_at or c.started_at for c in saves if c.run <= before.index]
        saved_at = max((t for t in saved if t is not None and t <= stopped), default=None)
        if saved_at is not None:
            t_ch += (stopped - saved_at).total_seconds()
        scheduled = after.application_start_at or after.first_step_at
        t_re += max(0.0, (scheduled - stopped).total_seconds())
        t_rm += max(0.0, (after.first_step_at - scheduled).total_seconds())
    t_w = (end - start).total_seconds()
    denominator = t_w - t_re
    numerator = t_w - t_ch - t_rm - t_re - t_save
    ratio = numerator / denominator if denominator > 0 and numerator > 0 else 0.0
    return NvcreGoodput(
        ratio=ratio,
        training_seconds=t_w,
        lost_work_seconds=t_ch,
        resume_seconds=t_rm,
        reschedule_seconds=t_re,
        checkpoint_save_seconds=t_save,
        interruptions=interruptions,
    )


def _empty() -> TrainingRun:
    return TrainingRun(
        profile=None,
        framework=None,
        profile_detected=True,
        steps=(),
        duplicate_lines=0,
        warmup_steps=0,
        tokens_per_second_scope=None,
        step_time_source=None,
        stats={name: None for name in profiles.STANDARD_FIELDS},
        goodput=None,
    )


def format_dsx_train_line(
    *,
    step: int,
    total_steps: int,
    step_time_ms: float,
    tflops_per_gpu: float,
    tokens_per_second: float,
    loss: float,
    global_batch_size: int,
    timestamp: datetime | None = None,
) -> str:
    """The local training workload's step line (profile `dsx-train`), Megatron-like:

    ` [2026-02-16 10:00:04.123456] iteration        3/      20 | elapsed time per iteration (ms): 41.2 |
    throughput per GPU (TFLOP/s/GPU): 0.01 | tokens per second: 12345.6 | loss: 2.310000E+00 |
    global batch size:    16 |` (one line).
    """
    stamp = f" [{timestamp.strftime('%Y-%m-%d %H:%M:%S.%f')}]" if timestamp else ""
    return (
        f"{stamp} iteration {step:8d}/{total_steps:8d} |"
        f" elapsed time per iteration (ms): {step_time_ms:.1f} |"
        f" throughput per GPU (TFLOP/s/GPU): {tflops_per_gpu:.3f} |"
        f" tokens per second: {tokens_per_second:.1f} |"
        f" loss: {loss:E} |"
        f" global batch size: {global_batch_size:5d} |"
    )
