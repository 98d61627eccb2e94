"""Training logs → step time, throughput and goodput, through the log profiles.

Each step line is read with one profile (given, or detected: the profile whose step regex and
field regexes match the most of the log wins, ties to the higher `priority`). A step seen again
(the same number printed by several ranks, or re-run after a restart) counts once, at its first
line; a step number going backwards within one launcher stream counts as a restart.

Summaries report a field only from lines that printed it: a framework that never prints tokens
per second gives None (and names the field in `missing`), never 0. Steps up to the profile's
`warmup_steps` are left out of the means while later steps exist.

Step time comes from the log when printed; otherwise it is derived from line timestamps
(elapsed time over steps advanced), and `step_time_source` says which. Goodput needs both a
printed step time and timestamps: productive time (steps advanced × their step time) over the
wall time from the first to the last step line, clamped to [0, 1]; restarts, re-done steps,
checkpoint stalls and hangs between logged steps lower it.

Also here: `format_dsx_train_line`, the Megatron-like line the local training workload prints
(profile `dsx-train`), next to the parser that reads it.
"""

from __future__ import annotations

import enum
import itertools
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dsx.certify.parsing import lines, profiles

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class StepTimeSource(enum.Enum):
    LOG = "log"
    TIMESTAMPS = "timestamps"


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

    def value(self, name: str) -> float | None:
        return self.values.get(name)

    def to_dict(self) -> dict[str, Any]:
        standard = {name: self.values.get(name) for name in profiles.STANDARD_FIELDS}
        extra = {k: v for k, v in sorted(self.values.items()) if k not in standard}
        return {
            "line": self.line_number,
            "step": self.step,
            "total_steps": self.total_steps,
            "stream": self.stream,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            **standard,
            "extra": extra,
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
        return cls(statistics.fmean(values), min(values), max(values), len(values))

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "min": self.minimum, "max": self.maximum, "count": self.count}


@dataclass(frozen=True)
class Goodput:
    ratio: float
    productive_seconds: float
    wall_seconds: float

    def to_dict(self) -> dict[str, float]:
        return {"ratio": self.ratio, "productive_seconds": self.productive_seconds, "wall_seconds": self.wall_seconds}


@dataclass(frozen=True)
class TrainingRun:
    """What one log says about a training run."""

    profile: str | None
    framework: str | None
    profile_detected: bool
    steps: tuple[TrainingStep, ...]
    """Unique steps in order of first appearance."""
    duplicate_lines: int
    restarts: int
    warmup_steps: int
    tokens_per_second_scope: str | None
    step_time_source: StepTimeSource | None
    stats: dict[str, Statistic | None]
    """Per standard field, over the steps after warmup; step_time_seconds may be timestamp-derived."""
    goodput: Goodput | None

    @property
    def step_time_seconds(self) -> Statistic | None:
        return self.stats.get("step_time_seconds")

    @property
    def missing(self) -> list[str]:
        return [name for name in profiles.STANDARD_FIELDS if self.stats.get(name) is None]

    def to_dict(self) -> dict[str, Any]:
        steps = self.steps
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
            **{name: (stat.to_dict() if stat else None) for name, stat in self.stats.items()},
            "goodput": self.goodput.to_dict() if self.goodput else None,
            "missing": self.missing,
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


def read_step(profile: profiles.LogProfile, line: lines.LogLine) -> TrainingStep | None:
    """The step a line reports under `profile`, or None when it is not a step line."""
    match = profile.step.search(line.text)
    if match is None:
        return None
    total = match.groupdict().get("total_steps")
    values: dict[str, float] = {}
    for name, patterns in profile.fields.items():
        for pattern in patterns:
            found = pattern.regex.search(line.text)
            if found:
                try:
                    values[name] = pattern.unit.to_base(found.group("value"))
                except ValueError:
                    continue
                break
    timestamp = profile.read_timestamp(line.text)
    if timestamp is None and line.kubelet_time:
        timestamp = lines.parse_kubelet_time(line.kubelet_time)
    return TrainingStep(
        line_number=line.number,
        step=int(match.group("step")),
        total_steps=int(total) if total else None,
        stream=line.stream,
        timestamp=timestamp,
        values=values,
    )


def _clean(line: lines.LogLine) -> lines.LogLine:
    if "\x1b" not in line.text:
        return line
    return lines.LogLine(line.number, _ANSI.sub("", line.text), line.stream, line.kubelet_time)


def _summarise(profile: profiles.LogProfile, log: Sequence[lines.LogLine], detected: bool) -> TrainingRun:
    unique: dict[int, TrainingStep] = {}
    last_by_stream: dict[str, int] = {}
    duplicates = restarts = 0
    last_time: datetime | None = None
    for line in log:
        step = read_step(profile, line)
        if step is None:
            continue
        previous = last_by_stream.get(step.stream)
        if previous is not None and step.step < previous:
            restarts += 1
        last_by_stream[step.stream] = step.step
        if step.timestamp is not None and (last_time is None or step.timestamp > last_time):
            last_time = step.timestamp
        if step.step in unique:
            duplicates += 1
            continue
        unique[step.step] = step
    steps = tuple(unique.values())
    measured = [s for s in steps if s.step > profile.warmup_steps] or list(steps)
    stats = {
        name: Statistic.of([v for s in measured if (v := s.value(name)) is not None])
        for name in profiles.STANDARD_FIELDS
    }
    source = StepTimeSource.LOG if stats["step_time_seconds"] else None
    if source is None:
        derived = _derived_step_times(measured)
        stats["step_time_seconds"] = Statistic.of(derived)
        source = StepTimeSource.TIMESTAMPS if derived else None
    goodput = _goodput(steps, last_time) if source is StepTimeSource.LOG else None
    return TrainingRun(
        profile=profile.name,
        framework=profile.framework,
        profile_detected=detected,
        steps=steps,
        duplicate_lines=duplicates,
        restarts=restarts,
        warmup_steps=profile.warmup_steps,
        tokens_per_second_scope=profile.tokens_per_second_scope.value,
        step_time_source=source,
        stats=stats,
        goodput=goodput,
    )


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


def _empty() -> TrainingRun:
    return TrainingRun(
        profile=None,
        framework=None,
        profile_detected=True,
        steps=(),
        duplicate_lines=0,
        restarts=0,
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
