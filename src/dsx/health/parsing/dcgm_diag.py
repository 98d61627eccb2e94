"""`dcgmi diag` reports (text table and `-j` JSON) → plain findings.

Why apart from `gpu_reports` (nvidia-smi): a different tool with a different layout; the two
share only the finding model and the verdict table, which live in `gpu_reports`. A failed test
outside the Deployment category → RUN_FIELDDIAG (DCGM's own advice); Deployment failures are
software set-up, recorded non-fatal. Skips and an incomplete run are recorded, never fatal.

`dcgmi diag -j` output that is not valid JSON (cut short, elided by hand) is read token by
token and marked incomplete; wrapped warning cells in the text table are rejoined.
"""

from __future__ import annotations

import enum
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dsx.errors import BadInputError
from dsx.health.parsing.gpu_reports import VERDICTS, Finding, FindingKind


class DiagStatus(enum.Enum):
    PASS = "pass"  # noqa: S105  (a test verdict, not a password)
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"


@dataclass(frozen=True)
class DiagResult:
    category: str | None
    test: str
    status: DiagStatus
    gpu: str | None = None
    """DCGM gpu_id; None when the result covers all GPUs (`Fail - All`) or names none."""
    details: tuple[str, ...] = ()
    """Warning and info text attached to the test, wrapped cells rejoined."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "test": self.test,
            "status": self.status.value,
            "gpu": self.gpu,
            "details": list(self.details),
        }


@dataclass(frozen=True)
class DiagReport:
    results: tuple[DiagResult, ...]
    complete: bool
    """False when the table or JSON was cut short; missing tests are then unknown, not passed."""

    def count(self, status: DiagStatus) -> int:
        return sum(1 for r in self.results if r.status is status)

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        for r in self.results:
            detail = f": {'; '.join(r.details)}" if r.details else ""
            scope = f" (GPU {r.gpu})" if r.gpu is not None else ""
            message = f"dcgmi diag {r.category or ''}/{r.test}{scope} {r.status.value}{detail}".replace(" /", " ")
            kind = _DIAG_KINDS.get(r.status)
            if kind is FindingKind.DIAG_FAILED and (r.category or "").lower() == "deployment":
                kind = FindingKind.DIAG_FAILED_DEPLOYMENT
            if kind is not None:
                out.append(Finding(kind, *VERDICTS[kind], message=message, gpu_index=r.gpu, test=r.test))
        if not self.complete:
            text = f"dcgmi diag output is incomplete after {len(self.results)} results"
            out.append(Finding(FindingKind.DIAG_INCOMPLETE, *VERDICTS[FindingKind.DIAG_INCOMPLETE], message=text))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "passed": self.count(DiagStatus.PASS),
            "failed": self.count(DiagStatus.FAIL),
            "warned": self.count(DiagStatus.WARN),
            "skipped": self.count(DiagStatus.SKIP),
            "results": [r.to_dict() for r in self.results],
        }


_DIAG_KINDS = {
    DiagStatus.FAIL: FindingKind.DIAG_FAILED,
    DiagStatus.WARN: FindingKind.DIAG_WARNING,
    DiagStatus.SKIP: FindingKind.DIAG_SKIPPED,
}
_STATUS = re.compile(r"^(pass|fail|warn|skip)\w*(?:\s*-\s*(?P<scope>.*))?$", re.IGNORECASE)
_CATEGORY_BORDER = re.compile(r"^[|+]-+\s+(?P<name>\w[\w ]*?)\s+-+[+|]")
_PER_GPU = re.compile(r"^GPU\s?(?P<gpu>\d{1,4})\s*:\s*(?P<status>pass|fail|warn|skip)\w*$", re.IGNORECASE)
_PLAIN_BORDER = re.compile(r"^\+[-=]+\+[-=]+\+$")
_DETAIL_NAMES = ("warning", "info", "error")


def parse_diag(text: str, *, source: str = "dcgmi diag output") -> DiagReport:
    """Read `dcgmi diag` output: the JSON of `-j` (tolerating cut or elided JSON) or the text table."""
    body = "\n".join(line for line in text.split("\n") if not line.startswith("# source:"))
    start = body.find("{")
    if start >= 0 and "|" not in body[:start]:
        return _diag_json(body[start:], source)
    return _diag_table(body, source)


def _diag_table(text: str, source: str) -> DiagReport:
    results: list[DiagResult] = []
    category: str | None = None
    chunks: list[str] = []
    width = 0
    complete = True
    last_border_plain = False
    summary: DiagResult | None = None
    """The test row just read, until per-GPU rows (DCGM 4.x: `|  | GPU0: Pass |`) replace it."""

    def flush() -> None:
        if chunks and results:
            last = results[-1]
            details = (*last.details, _rejoin(chunks, width))
            results[-1] = DiagResult(last.category, last.test, last.status, last.gpu, details)
        chunks.clear()

    for raw in text.split("\n"):
        line = raw.rstrip()
        if not line:
            continue
        if line.strip() == "...":
            complete = False
            continue
        if line.startswith("+") or (line.startswith("|") and _CATEGORY_BORDER.match(line)):
            flush()
            border = _CATEGORY_BORDER.match(line)
            if border:
                category = border.group("name").strip()
            last_border_plain = border is None and _PLAIN_BORDER.match(line) is not None
            continue
        if not line.startswith("|"):
            continue
        last_border_plain = False
        cells = line.split("|")
        terminated = line.endswith("|") and len(cells) >= 4
        if not terminated:
            complete = False
        name = cells[1].strip() if len(cells) > 1 else ""
        value_cell = cells[2] if len(cells) > 2 else ""
        value = value_cell.strip()
        if name.lower() == "diagnostic" and value.lower() == "result":
            continue
        if name.lower() in _DETAIL_NAMES:
            flush()
            width = max(len(value_cell) - 3, 1) if terminated else width
            chunks.append(value)
            continue
        if not name:
            per_gpu = _PER_GPU.match(value)
            if per_gpu and not chunks and results:
                if summary is not None and results[-1] is summary:
                    results.pop()  # the test's summary row: its GPUs' rows say more
                test = summary or results[-1]
                summary = None
                gpu_status = DiagStatus(per_gpu.group("status").lower())
                results.append(DiagResult(test.category, test.test, gpu_status, per_gpu.group("gpu")))
            elif chunks:
                chunks.append(value)
            continue
        flush()
        status = _STATUS.match(value)
        if status is None:
            continue
        scope = (status.group("scope") or "").strip()
        gpu = None if not scope or scope.lower() == "all" else re.sub(r"^gpus?\s*:?\s*", "", scope, flags=re.IGNORECASE)
        summary = DiagResult(category, name, DiagStatus(status.group(1).lower()), gpu)
        results.append(summary)
    flush()
    if not results:
        raise BadInputError(
            f"{source}: no dcgmi diag result rows found (expected a '| Test | Result |' table or -j JSON)"
        )
    return DiagReport(tuple(results), complete and last_border_plain)


def _rejoin(chunks: Sequence[str], width: int) -> str:
    """Undo DCGM's fixed-width wrapping: a full-width chunk cut mid-word joins without a space."""
    text = chunks[0]
    for previous, chunk in itertools.pairwise(chunks):
        mid_word = len(previous) >= width and previous[-1:].isalpha() and chunk[:1].islower()
        text += chunk if mid_word else " " + chunk
    return text.strip()


def _diag_json(text: str, source: str) -> DiagReport:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return _diag_json_tokens(text, source)
    results: list[DiagResult] = []
    # DCGM 3.x names the document "DCGM GPU Diagnostic", 4.x "DCGM Diagnostic" (its release notes'
    # breaking changes; facebookresearch/gcm#38 reads both)
    root = (data.get("DCGM GPU Diagnostic") or data.get("DCGM Diagnostic") or data) if isinstance(data, dict) else {}
    for category in root.get("test_categories", []) if isinstance(root, dict) else []:
        for test in category.get("tests", []):
            for result in test.get("results", []):
                status = _STATUS.match(str(result.get("status", "")))
                if status is None:
                    continue
                details = tuple(
                    str(w.get("warning", w)) if isinstance(w, dict) else str(w) for w in result.get("warnings", [])
                )
                gpu = result.get("gpu_id", result.get("gpu_ids"))
                if gpu is None and str(result.get("entity_group", "GPU")).upper() == "GPU":
                    gpu = result.get("entity_id")  # DCGM 4.x names the device as an entity
                results.append(
                    DiagResult(
                        category.get("category"),
                        str(test.get("name")),
                        DiagStatus(status.group(1).lower()),
                        None if gpu is None else str(gpu),
                        details,
                    )
                )
    if not results:
        raise BadInputError(f"{source}: JSON has no DCGM GPU Diagnostic test results")
    return DiagReport(tuple(results), True)


_JSON_TOKEN = re.compile(r'"(category|name|gpu_id|status|warning)"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _diag_json_tokens(text: str, source: str) -> DiagReport:
    """Salvage results from JSON that does not parse: keys are read in the order DCGM writes them."""
    results: list[DiagResult] = []
    category = test = gpu = None
    for match in _JSON_TOKEN.finditer(text):
        key, value = match.group(1), match.group(2)
        if key == "category":
            category, test, gpu = value, None, None
        elif key == "name":
            test, gpu = value, None
        elif key == "gpu_id":
            gpu = value
        elif key == "status" and test is not None:
            status = _STATUS.match(value)
            if status:
                results.append(DiagResult(category, test, DiagStatus(status.group(1).lower()), gpu))
        elif key == "warning" and results:
            last = results[-1]
            results[-1] = DiagResult(last.category, last.test, last.status, last.gpu, (*last.details, value))
    if not results:
        raise BadInputError(f"{source}: not valid JSON and no test results could be read from it")
    return DiagReport(tuple(results), False)
