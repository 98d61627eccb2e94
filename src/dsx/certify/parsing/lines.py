"""Log lines as launchers and Kubernetes hand them over, with their prefixes taken off once.

A workload's output rarely reaches us bare: the kubelet puts an RFC 3339 time in front of every
line (logs are fetched with timestamps), and launchers tag each line with the rank that wrote it
(`[1,0]<stdout>:` from `mpirun --tag-output`, `0: ` from `srun --label`, `[0]`, `[rank0]:` and
`[default0]:` from torchrun). Both parsers read through `log_lines`, so a table or a step line
looks the same whatever launched it, and the tag becomes the line's `stream`: output of several
ranks interleaved in one log is kept apart by it.

Progress bars rewrite their line with carriage returns; every `\\r` segment is a line of its own
that keeps the file's line number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

_KUBELET_TIME = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2}))\s")
_RANK_TAG = re.compile(
    r"\[(?P<mpi>\d+,\d+)\]<(?:stdout|stderr)>:"  # mpirun --tag-output
    r"|\[(?P<torch>(?:rank|default)\d+)\]:"  # torchrun --tee / log prefix
    r"|\[(?P<bracket>\d+)\] ?(?=\s|#|\d)"  # [0] before table text
    r"|(?P<srun> {0,8}\d{1,5}): "  # srun --label, right-aligned
)

NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?|[-+]?\.\d+(?:[eE][-+]?\d+)?"
"""A decimal as logs print it: thousands separators (`5,856`), fractions, exponents (`1.63e+6`)."""


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of a log with the kubelet time and the launcher's rank tag taken off."""

    number: int
    """1-based line number in the file as given."""
    text: str
    stream: str
    """The launcher's rank tag without brackets ("1,0", "0", "rank0"), or "" when the line has none."""
    kubelet_time: str | None
    """The kubelet's RFC 3339 prefix as printed, when the log was fetched with timestamps."""


def log_lines(text: str) -> Iterator[LogLine]:
    """Every non-empty line (and carriage-return segment) of `text`, prefixes removed."""
    for number, raw in enumerate(text.split("\n"), start=1):
        for segment in raw.split("\r"):
            if segment.strip():
                yield strip_prefixes(number, segment)


def strip_prefixes(number: int, raw: str) -> LogLine:
    """Take the kubelet time, then one launcher rank tag, off the front of `raw`."""
    kubelet_time: str | None = None
    text = raw
    match = _KUBELET_TIME.match(text)
    if match:
        kubelet_time = match.group(1)
        text = text[match.end() :]
    stream = ""
    match = _RANK_TAG.match(text)
    if match:
        stream = next(group for group in match.groups() if group is not None).strip()
        text = text[match.end() :]
    return LogLine(number, text, stream, kubelet_time)


MAX_NUMBER_CHARS = 64
"""The longest number a workload prints is ~25 characters; a longer one is not a figure."""
MAX_COUNT_DIGITS = 18
"""Counts (steps, ranks, sizes, pids) fit in 64 bits; Python refuses int() of 4,300+ digits anyway."""


def parse_number(text: str) -> float:
    """The value of a `NUMBER` match, finite, or ValueError; thousands separators are dropped.
    The one reader of printed figures, so a 5,000-digit number or `1e2147483648` is a line that is
    not read, never an overflow."""
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(f"not a figure: a number of {len(text)} characters")
    value = float(text.replace(",", ""))
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text!r}")
    return value


def parse_count(text: str) -> int:
    """A printed whole number (`-?\\d+`, nccl-tests prints root -1) of at most `MAX_COUNT_DIGITS`
    digits, or ValueError."""
    written = text.strip()
    digits = written.removeprefix("-")
    if not digits.isascii() or not digits.isdigit() or len(digits) > MAX_COUNT_DIGITS:
        raise ValueError(f"not a count: {text[:40]!r}")
    return int(written)


def parse_kubelet_time(text: str) -> datetime | None:
    """The kubelet prefix as an aware datetime (nanoseconds cut to microseconds), or None."""
    cleaned = re.sub(r"([.,])(\d{6})\d+", r".\2", text).replace(",", ".")
    try:
        return datetime.fromisoformat(cleaned)
    except ValueError:
        return None
