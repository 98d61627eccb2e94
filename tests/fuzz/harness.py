"""Fuzzing harness: hostile documents and logs through the real command line, in-process.

Why in-process: `dsx.cli.main.main` is the one place errors become exit codes, and calling it
(catching SystemExit) costs milliseconds where a child process costs a second, so 20,000 cases
per kind fit in minutes. A few readers have no command of their own (overlays, calibration
files, nvidia-smi and dcgmi reports); those are called directly and their exceptions mapped
to exit codes the way `main` maps them.

Cases come from Hypothesis strategies: the real samples (tests/data, copied from the team collection, the
shipped catalog) mutated as trees (a field replaced by any JSON value or a schema word, deleted,
added, a list item repeated), as text (YAML specials spliced in, bytes cut), or documents drawn
from scratch with the sample's own keys; logs are mutated line by line (dropped, repeated,
swapped, numbers made huge or negative, lines cut short, binary bytes). A case fails on exit 8,
a traceback in the output, a hang past the per-case limit, or a write outside its output folder.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import random
import re
import shutil
import signal
import string
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
CATALOG = REPO / "src" / "dsx" / "catalog"
SEEDS = Path(__file__).resolve().parent / "seeds"

CASE_TIMEOUT_SECONDS = 10.0
"""A case still running after this long is a hang (the slowest real case takes well under a second)."""


class Hang(BaseException):
    """Raised by the alarm inside a case; a BaseException so `except Exception` cannot swallow it."""


# --- targets --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One document kind or parser: its seeds, how a case is written, and how it is run."""

    name: str
    seeds: Callable[[], list[Path]]
    suffix: str
    document: bool
    """A YAML/JSON document (tree mutations) rather than a log (line mutations)."""
    argv: Sequence[Sequence[str]] = ()
    """CLI argument lists with {file} and {out}; one is drawn per case."""
    call: Callable[[Path, Path], object] | None = None
    """A reader without a command of its own: called with (input file, output folder)."""


def _files(*patterns: str) -> Callable[[], list[Path]]:
    def found() -> list[Path]:
        paths: list[Path] = []
        for pattern in patterns:
            root, _, glob = pattern.partition(":")
            base = Path(root)
            paths += sorted(p for p in base.glob(glob) if p.is_file() and p.name != "README.md")
        return paths

    return found


def _overlay(path: Path, _out: Path) -> object:
    from dsx.files import documents
    from dsx.recipes import catalog

    document = documents.load_mapping_file(path)
    # the catalog wants metadata.name to be the file's name: name the source after it, so cases get past the header
    meta = document.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    source = path.with_name(f"{name}.yaml") if isinstance(name, str) and name and "/" not in name else path
    return catalog._parse_overlay(document, str(source))


def _calibration(path: Path, _out: Path) -> object:
    from dsx.cli import certify_cmd

    return certify_cmd._load_calibration(str(path), "fuzz-host")


def _smi(path: Path, _out: Path) -> object:
    from dsx.files import documents
    from dsx.health.parsing import gpu_reports

    text = documents.read_text(path)
    gpu_reports.parse_query_csv(text)
    return gpu_reports.parse_smi(text, source=str(path)).findings()


def _dcgm(path: Path, _out: Path) -> object:
    from dsx.files import documents
    from dsx.health.parsing import dcgm_diag

    return dcgm_diag.parse_diag(documents.read_text(path), source=str(path)).findings()


SMALL_RECIPE = DATA / "bundles" / "recipe-small.yaml"
TRAINING_LOG = DATA / "training" / "01-megatron-lm-mixtral8x7b-16xH100.log"
_JSON_OUT = ("--format", "json", "-o", "{out}/result.json")

TARGETS: dict[str, Target] = {
    target.name: target
    for target in (
        Target(
            "recipe",
            _files(f"{DATA}/bundles:*.yaml", f"{DATA}/lint/recipes:*.yaml"),
            ".yaml",
            True,
            argv=(
                ("query", "--recipe", "{file}", "--selector", "componentRefs", *_JSON_OUT),
                ("diff", "{file}", str(SMALL_RECIPE), *_JSON_OUT),
            ),
        ),
        Target(
            "snapshot",
            _files(f"{DATA}/recipes/snapshots:*.yaml"),
            ".yaml",
            True,
            argv=(
                ("snapshot", "merge", "{file}", *_JSON_OUT),
                ("recipe", "--snapshot", "{file}", *_JSON_OUT),
            ),
        ),
        Target(
            "sentinel-policy",
            _files(f"{CATALOG}/rules:sentinel-*.yaml"),
            ".yaml",
            True,
            argv=(("sentinel", "replay", "--policy", "{file}", "--store", "memory:", *_JSON_OUT),),
        ),
        Target(
            "criteria-config",
            _files(f"{SEEDS}:criteria*.yaml"),
            ".yaml",
            True,
            argv=(
                ("recipe", "--config", "{file}", *_JSON_OUT),
                ("lint", "--config", "{file}", "--offline", *_JSON_OUT),
            ),
        ),
        Target("overlay", _files(f"{CATALOG}/overlays:**/*.yaml"), ".yaml", True, call=_overlay),
        Target("calibration", _files(f"{SEEDS}:calibration*.yaml"), ".yaml", True, call=_calibration),
        Target(
            "drift-document",
            _files(f"{DATA}/bundles:*.yaml", f"{DATA}/recipes/snapshots:eks-*.yaml"),
            ".yaml",
            True,
            argv=(("diff", str(SMALL_RECIPE), "{file}", *_JSON_OUT), ("diff", "{file}", "{file}", *_JSON_OUT)),
        ),
        Target(
            "log-profile",
            _files(f"{CATALOG}/log_profiles:*.yaml"),
            ".yaml",
            True,
            argv=(("certify", "parse", "training", "--profile", "{file}", str(TRAINING_LOG), *_JSON_OUT),),
        ),
        Target(
            "kernel-log",
            _files(
                f"{DATA}/xid:kernel-lines.txt",
                f"{DATA}/xid:sxid-reports.txt",
                f"{DATA}/health/kernel_log:kern.log",
                f"{DATA}/sim:*.txt",
            ),
            ".log",
            False,
            argv=(("sentinel", "parse", "{file}", *_JSON_OUT),),
        ),
        Target(
            "nccl-tests",
            _files(f"{DATA}/nccl:*.log"),
            ".log",
            False,
            argv=(("certify", "parse", "nccl", "{file}", *_JSON_OUT),),
        ),
        Target(
            "training-log",
            _files(f"{DATA}/training:*.log", f"{DATA}/certify:dsx-train-*.log"),
            ".log",
            False,
            argv=(("certify", "parse", "training", "{file}", *_JSON_OUT),),
        ),
        Target(
            "nvidia-smi",
            _files(f"{DATA}/nvidia-smi:*"),
            ".txt",
            False,
            call=_smi,
        ),
        Target("dcgm", _files(f"{DATA}/dcgm:*.txt"), ".txt", False, call=_dcgm),
    )
}

# --- strategies -----------------------------------------------------------------------------------

YAML_SPECIALS = (
    "&a [*a]",
    "*undefined",
    "<<: *a",
    "!!python/object/apply:os.system ['true']",
    "!!binary AAAA",
    "? [a, b]\n: c",
    "%YAML 1.1\n---\n",
    "---\n",
    "...\n",
    "{",
    "[",
    "- ",
    ": ",
    "'",
    '"',
    "\t",
    "\x00",
    "\ufeff",
    ".nan",
    ".inf",
    "-.inf",
    "1e999",
    "0x7fffffffffffffffff",
    "~",
    "2024-02-30",
    "2024-01-01 10:00:00",
    "yes",
    "null",
    "9" * 40,
)
NUMBERS = ("0", "-1", "99999999999999999999999", "1e308", "-1e308", "nan", "inf", "-0", "0.0000001", "1_000")
LINE_SPECIALS = ("\x00", "\x1b[31m", "\r", "\ufffd", "\u202e", "\\", "%s%n", "{", "[", "|", "#", "  ", "\t")


def _vocabulary(document: object) -> list[str]:
    """Every key and string value of a sample: the words its schema knows."""
    words: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                words.add(str(key))
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, str) and len(node) < 80:
            words.add(node)

    walk(document)
    return sorted(words) or ["x"]


def _text(rnd: random.Random, size: int = 20) -> str:
    alphabet = rnd.choice((string.printable, "\x00\x7f\ufeff\u202e\ufffd\U0001f600 :-#&*!|>'\"{}[],"))
    return "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, size)))


def _value(rnd: random.Random, words: Sequence[str], depth: int = 0) -> Any:
    """Any JSON value, schema words and YAML specials included, at most three levels deep."""
    kind = rnd.randrange(12 if depth < 3 else 9)
    if kind == 0:
        return None
    if kind == 1:
        return rnd.random() < 0.5
    if kind == 2:
        return rnd.choice((0, -1, 1, 2**31, 2**63, -(2**63) - 1, 10**30, rnd.randint(-1000, 1000)))
    if kind == 3:
        return rnd.choice((0.5, -0.0, 1e308, -1e308, 5e-324, math.nan, math.inf, -math.inf, rnd.uniform(-1e6, 1e6)))
    if kind == 4:
        return _text(rnd)
    if kind in (5, 6):
        return rnd.choice(words)
    if kind in (7, 8):
        return rnd.choice(YAML_SPECIALS)
    if kind in (9, 10):
        return {
            rnd.choice(words) if rnd.random() < 0.7 else _text(rnd, 8): _value(rnd, words, depth + 1)
            for _ in range(rnd.randint(0, 4))
        }
    return [_value(rnd, words, depth + 1) for _ in range(rnd.randint(0, 4))]


def _paths(document: object, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(document, dict):
        found += [p for key, value in document.items() for p in _paths(value, (*path, key))]
    elif isinstance(document, list):
        found += [p for index, value in enumerate(document) for p in _paths(value, (*path, index))]
    return found


def _mutate_tree(rnd: random.Random, document: object, words: Sequence[str]) -> object:
    changed = copy.deepcopy(document)
    for _ in range(rnd.randint(1, 4)):
        path = rnd.choice(_paths(changed))
        op = rnd.choice(("replace", "replace", "delete", "add", "repeat"))
        if not path:
            if op == "replace":
                changed = _value(rnd, words)
            continue
        parent: Any = changed
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        if op == "replace":
            parent[last] = _value(rnd, words)
        elif op == "delete":
            del parent[last]
        elif op == "add" and isinstance(parent[last], dict):
            parent[last][rnd.choice(words)] = _value(rnd, words)
        elif op == "repeat" and isinstance(parent, list):
            parent.extend([parent[last]] * rnd.randint(1, 50))
    return changed


_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _dump(rnd: random.Random, document: object) -> str:
    if rnd.random() < 0.5:
        return json.dumps(document, allow_nan=True, default=str)
    try:
        return yaml.dump(document, Dumper=_Dumper, allow_unicode=True, sort_keys=False)
    except (yaml.YAMLError, ValueError):
        return json.dumps(document, allow_nan=True, default=str)


def _splice(rnd: random.Random, text: str, inserts: Sequence[str]) -> str:
    for _ in range(rnd.randint(1, 4)):
        at = rnd.randint(0, len(text))
        insert = rnd.choice(inserts) if rnd.random() < 0.6 else _text(rnd)
        text = text[:at] + insert + text[at + rnd.randint(0, 16) :]
    return text


def document_case(rnd: random.Random, seeds: Sequence[tuple[str, object, list[str]]]) -> str:
    """A sample document mutated as a tree or as text, or one drawn from its keys alone."""
    text, document, words = rnd.choice(seeds)
    mode = rnd.choice(("tree", "tree", "tree", "text", "scratch", "as-is"))
    if mode == "tree":
        return _dump(rnd, _mutate_tree(rnd, document, words))
    if mode == "text":
        return _splice(rnd, text, YAML_SPECIALS)
    if mode == "scratch":
        keys = list(document) if isinstance(document, dict) and document else words
        return _dump(rnd, {rnd.choice(keys): _value(rnd, words) for _ in range(rnd.randint(0, len(keys)))})
    return text


def log_case(rnd: random.Random, seeds: Sequence[list[str]]) -> str:
    """A sample log with lines dropped, repeated, swapped, cut, renumbered or spliced with bytes."""
    lines = list(rnd.choice(seeds)) or [""]
    for _ in range(rnd.randint(1, 8)):
        at = rnd.randrange(len(lines))
        op = rnd.choice(("drop", "repeat", "swap", "cut", "number", "number", "splice", "other", "join"))
        line = lines[at]
        if op == "drop" and len(lines) > 1:
            del lines[at]
        elif op == "repeat":
            lines[at:at] = [line] * rnd.randint(1, 200)
        elif op == "swap":
            other = rnd.randrange(len(lines))
            lines[at], lines[other] = lines[other], lines[at]
        elif op == "cut":
            lines[at] = line[: rnd.randint(0, len(line))]
        elif op == "number":
            digits = [m.span() for m in _NUMBER.finditer(line)]
            if digits:
                begin, end = rnd.choice(digits)
                lines[at] = line[:begin] + rnd.choice(NUMBERS) + line[end:]
        elif op == "splice":
            lines[at] = _splice(rnd, line, LINE_SPECIALS)
        elif op == "other":
            lines.insert(at, rnd.choice(rnd.choice(seeds) or [""]))
        elif op == "join":
            lines[at] = line.rstrip("\r\n")
    return "".join(lines)


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def strategy(target: Target) -> st.SearchStrategy[str]:
    """Cases for one target: Hypothesis draws a seed, the mutators above turn it into a case.

    One integer per case keeps Hypothesis' own cost per case near zero (drawing every choice
    through it cost three times the run itself), and a failing seed replays exactly."""
    from dsx import serialization
    from dsx.files import documents

    paths = target.seeds()
    if not paths:
        raise AssertionError(f"{target.name}: no seed samples found")
    if target.document:
        documents = []
        for path in paths:
            text = path.read_text()
            document = serialization.parse_yaml(text, source=str(path))
            documents.append((text, document, _vocabulary(document)))
        return st.integers(0, 2**64).map(lambda seed: document_case(random.Random(seed), documents))
    logs = [path.read_text(errors="replace").splitlines(keepends=True) for path in paths]
    return st.integers(0, 2**64).map(lambda seed: log_case(random.Random(seed), logs))


# --- running one case -----------------------------------------------------------------------------


@dataclass
class _Guard:
    """Writes seen by the audit hook while a case runs, outside the folders it may write."""

    allowed: tuple[str, ...] = ()
    active: bool = False
    escaped: list[str] = field(default_factory=list)


_GUARD = _Guard()
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _GUARD.active:
        return
    if event == "open":
        path, mode, flags = args
        writing = ("w" in mode or "a" in mode or "x" in mode or "+" in mode) if isinstance(mode, str) else False
        writing = writing or (mode is None and isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
        if not writing or isinstance(path, int):
            return
    elif event in ("os.rename", "os.replace", "os.remove", "os.mkdir", "os.symlink", "os.link", "os.truncate"):
        path = args[1] if event in ("os.rename", "os.replace", "os.symlink", "os.link") else args[0]
        if isinstance(path, int):
            return
    else:
        return
    where = os.path.abspath(os.fsdecode(path))
    if where.endswith(".pyc") or "__pycache__" in where:
        return  # a lazily imported module compiled for the first time
    if not any(where == root or where.startswith(root + os.sep) for root in _GUARD.allowed):
        _GUARD.escaped.append(f"{event} {where}")


_HOOKED = False


def _install_hook() -> None:
    global _HOOKED
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED = True


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    def ring(_signum: int, _frame: object) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _argv(target: Target, choice: int, path: Path, out: Path) -> list[str]:
    """The drawn argument list; one case in four writes its result with -o (an atomic write, two fsyncs)."""
    argv = [a.format(file=path, out=out) for a in target.argv[choice % len(target.argv)]]
    if choice % 4 and "-o" in argv:
        at = argv.index("-o")
        del argv[at : at + 2]
    return argv


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    seconds: float
    problem: str | None
    """Why the case failed (exit 8, traceback, hang, escaped write); None when it passed."""


def run_case(
    target: Target, case_dir: Path, text: str, choice: int = 0, *, timeout: float = CASE_TIMEOUT_SECONDS
) -> Outcome:
    """Write the case, run it in-process, classify what happened."""
    from dsx.cli.main import main
    from dsx.errors import exit_code_for

    out = case_dir / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    path = case_dir / f"input{target.suffix}"
    path.write_text(text, errors="surrogateescape")
    stdout, stderr = io.StringIO(), io.StringIO()
    code = 0
    problem: str | None = None
    from dsx.settings import folders

    _GUARD.allowed = (str(case_dir.resolve()), str(case_dir), str(folders.paths().cache_dir))
    _GUARD.escaped = []
    started = time.perf_counter()
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
            _alarm(timeout),
        ):
            warnings.simplefilter("ignore")
            _GUARD.active = True
            try:
                if target.call is not None:
                    target.call(path, out)
                else:
                    main(_argv(target, choice, path, out))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Hang:
                raise
            except Exception as exc:
                code = exit_code_for(exc)
                if code == 8:
                    problem = f"exit 8: {type(exc).__name__}: {exc}"
            finally:
                _GUARD.active = False
    except Hang as exc:
        problem, code = f"hang: {exc}", -1
    seconds = time.perf_counter() - started
    output = stdout.getvalue() + stderr.getvalue()
    if problem is None and code == 8:
        problem = "exit 8: " + output.strip().splitlines()[-1] if output.strip() else "exit 8"
    if problem is None and "Traceback (most recent call last)" in output:
        problem = "traceback in the output"
    if problem is None and _GUARD.escaped:
        problem = "wrote outside its output: " + ", ".join(sorted(set(_GUARD.escaped))[:3])
    return Outcome(code, seconds, problem)


# --- running many ---------------------------------------------------------------------------------


@dataclass
class Report:
    name: str
    cases: int = 0
    exit_codes: Counter[int] = field(default_factory=Counter)
    max_seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cases": self.cases,
            "exit_codes": {str(k): v for k, v in sorted(self.exit_codes.items())},
            "max_seconds": round(self.max_seconds, 4),
            "failures": self.failures,
        }

    def row(self) -> str:
        histogram = " ".join(f"{code}:{count}" for code, count in sorted(self.exit_codes.items()))
        return f"| {self.name} | {self.cases} | {histogram} | {self.max_seconds:.3f} | {len(self.failures)} |"


def fuzz(name: str, cases: int, workdir: Path, *, keep_failures: int = 20) -> Report:
    """Run `cases` Hypothesis-drawn cases of one target; failing inputs are kept under workdir/failures."""
    _install_hook()
    target = TARGETS[name]
    report = Report(name)
    case_dir = workdir / name
    failures = workdir / "failures" / name
    case_dir.mkdir(parents=True, exist_ok=True)

    @settings(
        max_examples=cases,
        database=None,
        deadline=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(text=strategy(target), choice=st.integers(0, 7))
    def one(text: str, choice: int) -> None:
        outcome = run_case(target, case_dir, text, choice)
        report.cases += 1
        report.exit_codes[outcome.exit_code] += 1
        report.max_seconds = max(report.max_seconds, outcome.seconds)
        if report.cases % 1000 == 0:  # progress that survives the run being stopped
            (workdir / f"{name}.progress.json").write_text(json.dumps(report.to_dict()))
        if outcome.problem is not None:
            report.failures.append(outcome.problem)
            if len(report.failures) <= keep_failures:
                failures.mkdir(parents=True, exist_ok=True)
                kept = failures / f"{len(report.failures):03d}{target.suffix}"
                kept.write_text(text, errors="surrogateescape")
                (failures / f"{len(report.failures):03d}.txt").write_text(f"choice {choice}\n{outcome.problem}\n")

    one()
    (workdir / f"{name}.progress.json").write_text(json.dumps(report.to_dict()))
    return report


def table(reports: Sequence[Report]) -> str:
    header = "| kind / parser | cases | exit codes (code:count) | max seconds | failures |\n|---|---|---|---|---|"
    return "\n".join([header, *(r.row() for r in reports)])
