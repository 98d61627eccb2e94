"""Log profiles: how one training framework prints a step, kept as data.

A profile (`dsx/catalog/log_profiles/<name>.yaml`, kind `LogProfile`) names the regex that
recognises a step line (with the groups `step` and optionally `total_steps`), one regex per
measured field (each with a `value` group and the unit it is printed in), an optional timestamp
regex with its `strptime` format, optional event regexes (checkpoint saves and loads, application
start), and example lines with the values they must give, which the catalog tests check. Adding a
framework is adding a file; see docs/parsers.md.

Timestamps are read with or without fractional seconds whatever the `format` says: frameworks
print `16:03:52` and `16:03:52.889599` from the same code path depending on version. When the
line prints `global_step` (Lightning, NeMo), `step.globalStepField` makes it the step number, so
the in-epoch iteration that restarts at 0 every epoch is not read as a restart.

Field names carry their unit (`step_time_seconds`, `tflops_per_gpu`, `mfu_percent`); a field
printed in another unit says so with `unit` and is converted on read. The macros `<number>`
(a decimal with optional thousands separators and exponent) and `<int>` keep the regexes short.

Keys are camelCase (`warmupSteps`, `tokensPerSecondScope`); files written before that are still
read with one warning per old key. The file is decoded by a schema (`ProfileDocument`).
"""

from __future__ import annotations

import enum
import functools
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec

from dsx import catalog
from dsx.certify.parsing import lines
from dsx.errors import CatalogError, NotFoundError, allowed_values_message
from dsx.model import schema

log = logging.getLogger("dsx.certify.parsing.profiles")

API_VERSION = "dsx.certify/v1alpha1"
KIND = "LogProfile"

STANDARD_FIELDS = (
    "step_time_seconds",
    "tokens_per_second",
    "tflops_per_gpu",
    "mfu_percent",
    "loss",
    "global_batch_size",
    "consumed_samples",
)
"""Fields every profile may fill and every summary reports (None when a framework does not print them)."""


class Unit(enum.Enum):
    """How a value is printed; `to_base` turns it into the field's unit (seconds for times)."""

    NONE = "none"
    SECONDS = "s"
    MILLISECONDS = "ms"
    MICROSECONDS = "us"
    MINUTES = "min"
    SECONDS_PER_ITERATION = "s/it"
    ITERATIONS_PER_SECOND = "it/s"
    DURATION = "h:m:s"
    """`[H:]MM:SS` clock text, as progress bars print elapsed time."""
    SI = "si"
    """A figure with an optional SI suffix (`1.23K`, `4.5G`; the value group takes the letter): the plain number."""
    SI_TERA = "si/T"
    """The same, in tera: `112.9T`, `950.0G`, `1.2P` (of FLOPS) → 112.9, 0.95, 1200 TFLOP/s."""
    SI_MILLISECONDS = "si/ms"
    """Milliseconds with an optional SI suffix (nanotron's `11.5K` ms → 11.5 s)."""

    @property
    def is_time(self) -> bool:
        return self not in (Unit.NONE, Unit.SI, Unit.SI_TERA)

    def to_base(self, text: str) -> float:
        """The printed value in the field's unit. Scaling is decimal, so 989.44 ms is 0.98944 s exactly."""
        if len(text) > lines.MAX_NUMBER_CHARS:
            raise ValueError(f"not a figure: a number of {len(text)} characters")
        if self is Unit.DURATION:
            seconds = 0.0
            for part in text.split(":"):
                seconds = seconds * 60 + float(part)
            return seconds
        scale = Decimal(1)
        if self in (Unit.SI, Unit.SI_TERA, Unit.SI_MILLISECONDS):
            letter = text[-1:]  # upper case only: `m` would be milli, not mega
            if letter in _SI_EXPONENTS:
                text, scale = text[:-1], Decimal(10) ** _SI_EXPONENTS[letter]
            if self is Unit.SI_TERA:
                scale /= Decimal(10) ** 12
        try:
            value = Decimal(text.replace(",", "")) * scale
            if not value.is_finite():
                raise ValueError(f"not a finite number: {text!r}")
            if self is Unit.ITERATIONS_PER_SECOND:
                if value == 0:
                    raise ValueError("a rate of 0 it/s has no step time")
                result = float(1 / value)
            else:
                result = float(value * _SECONDS_PER_UNIT.get(self, Decimal(1)))
        except (InvalidOperation, ArithmeticError) as exc:  # 1e2147483648: the context's exponent range
            raise ValueError(f"not a number a log reports: {text!r}") from exc
        if not math.isfinite(result):
            raise ValueError(f"not a finite number: {text!r}")
        return result


_SI_EXPONENTS = {"K": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

_SECONDS_PER_UNIT: dict[Unit, Decimal] = {
    Unit.MILLISECONDS: Decimal("0.001"),
    Unit.SI_MILLISECONDS: Decimal("0.001"),
    Unit.MICROSECONDS: Decimal("0.000001"),
    Unit.MINUTES: Decimal(60),
}


class EventKind(enum.Enum):
    """A lifecycle line a profile can recognise besides step lines."""

    APPLICATION_START = "application_start"
    CHECKPOINT_SAVE_START = "checkpoint_save_start"
    CHECKPOINT_SAVE_END = "checkpoint_save_end"
    CHECKPOINT_LOAD_START = "checkpoint_load_start"
    CHECKPOINT_LOAD_END = "checkpoint_load_end"


EVENT_GROUPS = frozenset({"step", "path", "duration", "timestamp"})
"""Named groups an event regex may use: the checkpoint's step and path, a printed duration (in
the pattern's `unit`), and the line's own time (read with the profile's timestamp format)."""


@dataclass(frozen=True)
class EventPattern:
    kind: EventKind
    regex: re.Pattern[str]
    unit: Unit
    example: str


class TokensScope(enum.Enum):
    """What the framework's tokens-per-second figure counts."""

    PER_GPU = "per_gpu"
    GLOBAL = "global"
    NOT_PRINTED = "not_printed"


@dataclass(frozen=True)
class FieldPattern:
    regex: re.Pattern[str]
    unit: Unit


@dataclass(frozen=True)
class Example:
    line: str
    expect: Mapping[str, float | int | None]


@dataclass(frozen=True)
class LogProfile:
    name: str
    framework: str
    description: str
    step: re.Pattern[str]
    global_step_field: str | None
    """A field that, when printed, is the step number (Lightning's `global_step`)."""
    fields: Mapping[str, tuple[FieldPattern, ...]]
    events: tuple[EventPattern, ...]
    timestamp: re.Pattern[str] | None
    timestamp_format: str | None
    priority: int
    warmup_steps: int
    tokens_per_second_scope: TokensScope
    examples: tuple[Example, ...]
    source: str
    spans_lines: int = 0
    """A step's record continues on up to this many lines after the step line (Composer prints one
    metric a line below `[batch=N/T]:`); their fields belong to that step, until the next step line."""
    counted_steps: bool = False
    """The framework prints no step number (Hugging Face Trainer's log dicts): step lines are numbered
    1, 2, ... in the order they appear, and the result says so (`stepNumbers: counted`)."""

    def read_timestamp(self, text: str) -> datetime | None:
        """The line's own time (naive times are taken as UTC; only differences are used)."""
        if self.timestamp is None or self.timestamp_format is None:
            return None
        match = self.timestamp.search(text)
        if match is None:
            return None
        return parse_time(match.group("value"), self.timestamp_format)


_FRACTION = re.compile(r"(\d{2}:\d{2}:\d{2})[.,](\d+)")


@functools.cache
def _whole_seconds(time_format: str) -> str:
    """`time_format` without its fraction directive: the fraction is read apart, whatever its width."""
    return re.sub(r"(%S)[.,]?%f", r"\1", time_format)


def parse_time(text: str, time_format: str) -> datetime | None:
    """`text` read with `time_format`, with or without fractional seconds (`.889599`, `,322`,
    nanoseconds), whether or not the format names `%f`; naive times are taken as UTC."""
    fraction = _FRACTION.search(text)
    micros = 0
    if fraction is not None:
        micros = int((fraction.group(2) + "000000")[:6])
        text = text[: fraction.start()] + fraction.group(1) + text[fraction.end() :]
    time_format = _whole_seconds(time_format)
    try:
        moment = datetime.strptime(text, time_format)
    except ValueError:
        return None
    moment = moment.replace(microsecond=micros)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


_MACROS = {"<number>": f"(?:{lines.NUMBER})", "<int>": r"\d+"}
_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]*$")
_Text = Annotated[str, msgspec.Meta(min_length=1)]
_P = TypeVar("_P", bound=schema.Section)


FOLDER = "log_profiles"


def directory() -> Path:
    return catalog.path(FOLDER)


def names() -> list[str]:
    return catalog.names(FOLDER)


def load_all() -> list[LogProfile]:
    """Every shipped profile, sorted by name (read once per process; profiles are immutable)."""
    return list(_shipped())


@functools.cache
def _shipped() -> tuple[LogProfile, ...]:
    return tuple(_shipped_file(name) for name in names())


def load(name: str) -> LogProfile:
    """A shipped profile by name (`dsx.files.certify_files.log_profile` also takes a path)."""
    if name not in names():  # a name is one of these, never a path to probe (a 5,000-character one)
        raise NotFoundError(allowed_values_message("log profile", "name", name[:80], names()))
    return _shipped_file(name)


def _shipped_file(name: str) -> LogProfile:
    return from_dict(catalog.mapping(FOLDER, f"{name}.yaml"), source=str(directory() / f"{name}.yaml"))


class _StepDoc(schema.Section, frozen=True):
    regex: str
    global_step_field: str | None = None
    counted: bool = False
    spans_lines: Annotated[int, msgspec.Meta(ge=0, le=200)] = 0


class _FieldDoc(schema.Section, frozen=True):
    regex: str
    unit: Unit = Unit.NONE


class _EventDoc(schema.Section, frozen=True):
    regex: str
    example: str
    unit: Unit = Unit.SECONDS


class _TimestampDoc(schema.Section, frozen=True):
    regex: str
    format: _Text


class _ExampleDoc(schema.Section, frozen=True):
    line: str
    expect: dict[str, float | int | None]


class ProfileDocument(schema.Section, frozen=True):
    """The LogProfile file as written (camelCase keys; old snake_case keys read with a warning).

    Field names under `fields` and `expect` and event kinds under `events` are data, not keys:
    they keep their spelling (`step_time_seconds`, `checkpoint_save_end`).
    """

    api_version: str
    kind: str
    name: _Text
    framework: _Text
    description: _Text
    step: _StepDoc
    fields: Annotated[dict[str, object], msgspec.Meta(min_length=1)]
    """Field name → a pattern (`_FieldDoc`) or a list of them, decoded one by one so errors name the field."""
    examples: Annotated[list[_ExampleDoc], msgspec.Meta(min_length=1)]
    events: dict[str, object] = msgspec.field(default_factory=dict)
    """Event kind → a pattern (`_EventDoc`) or a list of them."""
    timestamp: _TimestampDoc | None = None
    priority: Annotated[int, msgspec.Meta(ge=0)] = 0
    warmup_steps: Annotated[int, msgspec.Meta(ge=0)] = 0
    tokens_per_second_scope: TokensScope = TokensScope.NOT_PRINTED


def from_dict(data: Mapping[str, Any], *, source: str) -> LogProfile:
    """Validate and compile one profile; every error names `source` and the field."""
    doc = schema.document(
        data,
        ProfileDocument,
        api_version=API_VERSION,
        kind_name=KIND,
        source=source,
        log=log,
        separator=": ",
        error=CatalogError,
    )
    step = _compile(doc.step.regex, source, "step.regex")
    if doc.step.counted and "step" in step.groupindex:
        raise CatalogError(f"{source}: step.regex: a counted step takes no group 'step' (step.counted is true)")
    if not doc.step.counted and "step" not in step.groupindex:
        raise CatalogError(f"{source}: step.regex: needs a named group 'step' (or step.counted: true)")
    fields = _fields(doc.fields, source)
    global_step_field = doc.step.global_step_field
    if global_step_field is not None and global_step_field not in fields:
        raise CatalogError(allowed_values_message(source, "step.globalStepField", global_step_field, sorted(fields)))
    timestamp, timestamp_format = _timestamp(doc.timestamp, source)
    return LogProfile(
        name=doc.name,
        framework=doc.framework,
        description=doc.description,
        step=step,
        global_step_field=global_step_field,
        fields=fields,
        events=_events(doc.events, source),
        timestamp=timestamp,
        timestamp_format=timestamp_format,
        priority=doc.priority,
        warmup_steps=doc.warmup_steps,
        tokens_per_second_scope=doc.tokens_per_second_scope,
        examples=_examples(doc.examples, source),
        source=source,
        counted_steps=doc.step.counted,
        spans_lines=doc.step.spans_lines,
    )


def _alternatives(value: object, kind: type[_P], source: str, where: str) -> list[tuple[str, _P]]:
    """One pattern or a list of them, each decoded with its own path (`fields.loss[1]`)."""
    items = value if isinstance(value, list) else [value]
    out = []
    for index, item in enumerate(items):
        at = f"{where}[{index}]" if isinstance(value, list) else where
        out.append((at, schema.decode(item, kind, source=f"{source}: {at}", separator=".", error=CatalogError)))
    return out


def _fields(spec: Mapping[str, object], source: str) -> dict[str, tuple[FieldPattern, ...]]:
    out: dict[str, tuple[FieldPattern, ...]] = {}
    for name, alternatives in spec.items():
        where = f"fields.{name}"
        if not _FIELD_NAME.match(name) or name == "step":
            raise CatalogError(f"{source}: {where}: field names are snake_case and not 'step'")
        patterns = []
        for at, item in _alternatives(alternatives, _FieldDoc, source, where):
            regex = _compile(item.regex, source, f"{at}.regex")
            if "value" not in regex.groupindex:
                raise CatalogError(f"{source}: {at}.regex: needs a named group 'value'")
            if item.unit.is_time and not name.endswith("_seconds"):
                raise CatalogError(f"{source}: {at}: a time unit converts to seconds; name the field *_seconds")
            patterns.append(FieldPattern(regex, item.unit))
        out[name] = tuple(patterns)
    return out


def _events(spec: Mapping[str, object], source: str) -> tuple[EventPattern, ...]:
    """`events: {kind: {regex, unit?, example}}` or a list of such per kind; none is fine."""
    kinds = [k.value for k in EventKind]
    out: list[EventPattern] = []
    for name, alternatives in spec.items():
        if name not in kinds:
            raise CatalogError(allowed_values_message(source, "events", name, kinds))
        for at, item in _alternatives(alternatives, _EventDoc, source, f"events.{name}"):
            regex = _compile(item.regex, source, f"{at}.regex")
            extra = sorted(set(regex.groupindex) - EVENT_GROUPS)
            if extra:
                raise CatalogError(allowed_values_message(source, f"{at}.regex group", extra[0], sorted(EVENT_GROUPS)))
            if not item.unit.is_time:
                allowed = [u.value for u in Unit if u.is_time]
                raise CatalogError(allowed_values_message(source, f"{at}.unit", item.unit.value, allowed))
            if not regex.search(item.example):
                raise CatalogError(f"{source}: {at}.example: expected a line the regex matches")
            out.append(EventPattern(EventKind(name), regex, item.unit, item.example))
    return tuple(out)


def _timestamp(spec: _TimestampDoc | None, source: str) -> tuple[re.Pattern[str] | None, str | None]:
    if spec is None:
        return None, None
    regex = _compile(spec.regex, source, "timestamp.regex")
    if "value" not in regex.groupindex:
        raise CatalogError(f"{source}: timestamp.regex: needs a named group 'value'")
    return regex, spec.format


def _examples(spec: list[_ExampleDoc], source: str) -> tuple[Example, ...]:
    out = []
    for index, item in enumerate(spec):
        if "step" not in item.expect:
            raise CatalogError(f"{source}: examples[{index}].expect: expected a mapping that names at least step")
        out.append(Example(item.line, dict(item.expect)))
    return tuple(out)


def _compile(text: object, source: str, where: str) -> re.Pattern[str]:
    if not isinstance(text, str) or not text:
        raise CatalogError(f"{source}: {where}: expected a regular expression string")
    for macro, replacement in _MACROS.items():
        text = text.replace(macro, replacement)
    try:
        return re.compile(text)
    except re.error as exc:
        raise CatalogError(f"{source}: {where}: invalid regular expression: {exc}") from exc
