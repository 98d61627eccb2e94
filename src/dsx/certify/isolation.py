"""Adaptive fault isolation: find every bad node behind failed groups in few workload runs.

Group testing under the OR model (a group fails when it holds a bad node, or spans a broken
link). Each failed group from screening is searched by binary splitting with inference:
test the first half; if it fails, descend into it and set the second half aside; if it
passes, the second half must hold the fault, so descend into it *without running it*. A
single node is tested by pairing it with a known-good reference. That costs about
⌈log2 n⌉ runs per bad node; halves set aside are re-tested together in one sweep run, so
more bad nodes cost only what they add. Each suspect is then confirmed by pairing it with a
known-good node, preferring one from the nearest half that passed (same side of any suspect
boundary).

Inference can be wrong only when the parent failed for a reason no single node explains: a
broken link or switch between two halves. That shows up as an inferred suspect passing its
confirmation; the search then runs the inferred half directly. If both halves pass on their
own but not together, the fault is the boundary between them: cross-boundary probing mixes
the halves' halves to narrow it, and it is reported as an infrastructure fault, never
attributed to a node (NVCRE ADR-055/056 call this case "both halves pass").

Everything here is pure: the runs go through a `Prober` the caller supplies (the engine's
executor-backed prober, or `simulated_fabric.SimulatedFabric` in tests and the benchmark).
Tasks for different failed groups advance in lockstep rounds; runs of one round use
disjoint nodes so an executor may run them in parallel.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class Stage(enum.StrEnum):
    SCREENING = "screening"
    BISECTION = "bisection"
    SWEEP = "sweep"
    CONFIRMATION = "confirmation"
    BACKTRACK = "backtrack"
    CROSS_BOUNDARY = "cross-boundary"


@dataclass(frozen=True)
class ProbeVerdict:
    passed: bool
    detail: Any = None  # what the prober knows about the failure (reason, evidence); opaque here


class Prober(Protocol):
    """Runs one round: each group is one workload run; groups are disjoint."""

    def __call__(self, groups: Sequence[tuple[str, ...]], stage: Stage) -> Sequence[ProbeVerdict]: ...


@dataclass(frozen=True)
class Probe:
    """One node of the isolation tree."""

    index: int
    round: int
    stage: Stage
    nodes: tuple[str, ...]
    passed: bool
    parent: int | None
    inferred: bool = False  # concluded from its sibling, not run
    detail: Any = None


@dataclass(frozen=True)
class InfrastructureFault:
    """A fault between two node sets: each passes alone, together they fail."""

    group_a: tuple[str, ...]
    group_b: tuple[str, ...]
    whole_boundary: bool  # every mixed pair failed: the boundary itself (spine, trunk) is bad


@dataclass
class Outcome:
    faulty: dict[str, Any] = field(default_factory=dict)  # node → detail of its confirming run
    unresolved: dict[str, Any] = field(default_factory=dict)  # suspects with no healthy reference
    healthy: set[str] = field(default_factory=set)
    infrastructure_faults: list[InfrastructureFault] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    rounds: int = 0

    @property
    def runs(self) -> int:
        return sum(1 for p in self.probes if not p.inferred)


@dataclass(frozen=True)
class _Request:
    groups: tuple[tuple[str, ...], ...]
    stage: Stage
    parent: int | None
    references: tuple[int, ...] = ()  # per group: how many known-good nodes to add
    avoid: frozenset[str] = frozenset()  # references not to use (already paired with the suspect)


@dataclass(frozen=True)
class _Result:
    verdicts: tuple[ProbeVerdict, ...]
    probes: tuple[int, ...]
    nodes: tuple[tuple[str, ...], ...]  # as run, references included
    untestable: bool = False


_Task = Generator[_Request, _Result, None]


@dataclass
class _Bad:
    nodes: tuple[str, ...]
    careful: bool = False  # test both halves (after an inference proved wrong)
    observed: int = 0  # runs it failed alone with known-good partners (singletons)
    origin: tuple[tuple[str, ...], tuple[str, ...], int | None] | None = None  # inferred: (set, passing sibling, probe)
    probe: int | None = None
    detail: Any = None


class Isolator:
    def __init__(
        self,
        prober: Prober,
        *,
        healthy: Iterable[str] = (),
        domains: Mapping[str, str] | None = None,
        confirmations: int = 1,
        max_runs: int | None = None,
        max_probe_rounds: int = 4,
    ) -> None:
        self.prober = prober
        self.outcome = Outcome(healthy=set(healthy))
        self.domains = dict(domains or {})
        self.confirmations = max(1, confirmations)
        self.max_runs = max_runs
        self.max_probe_rounds = max_probe_rounds
        self._recent: dict[int, list[str]] = {}
        self._screened: dict[tuple[str, ...], int] = {}
        self._pending: dict[int, list[tuple[tuple[str, ...], int | None]]] = {}

    # --- public -------------------------------------------------------------------------------

    def screen(self, groups: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
        """Run screening groups; return the failed ones (passing nodes become references)."""
        verdicts = self._run_round([(tuple(g), Stage.SCREENING, None) for g in groups])
        failed = []
        for group, (probe, verdict) in zip(groups, verdicts, strict=True):
            if verdict.passed:
                self.outcome.healthy.update(group)
            else:
                failed.append(tuple(group))
                self._screened[tuple(sorted(group))] = probe
        return failed

    def isolate(self, failed: Sequence[tuple[str, ...]], details: Sequence[Any] = ()) -> Outcome:
        """Search every failed group (already run once, e.g. by screening) for its bad nodes."""
        tasks: list[tuple[int, _Task]] = []
        for index, group in enumerate(failed):
            key = tuple(sorted(group))
            parent = self._screened.get(key)
            if parent is None:  # screened by the caller: record it, it is the root of this tree
                parent = self._record(Stage.SCREENING, key, False, None, inferred=True, detail=None)
            if index < len(details):
                self.outcome.probes[parent] = _with_detail(self.outcome.probes[parent], details[index])
            tasks.append((index, self._task(index, key, parent)))
        self._drive(tasks)
        return self.outcome

    # --- driver -------------------------------------------------------------------------------

    def _drive(self, tasks: list[tuple[int, _Task]]) -> None:
        waiting: dict[int, _Request] = {}
        live: dict[int, _Task] = {}
        for ident, task in tasks:
            request = next(task, None)
            if request is not None:
                waiting[ident], live[ident] = request, task
        while waiting:
            busy: set[str] = set()
            batch: list[tuple[int, _Request, list[tuple[str, ...]]]] = []
            untestable: list[int] = []
            for ident in sorted(waiting):
                request = waiting[ident]
                filled = self._fill(ident, request, busy)
                if filled is None:
                    untestable.append(ident)
                elif filled:
                    batch.append((ident, request, filled))
                    for group in filled:
                        busy.update(group)
            over_budget = self.max_runs is not None and self.outcome.runs >= self.max_runs
            if over_budget:
                untestable = sorted(waiting)
                batch = []
            if batch:
                runs = [(g, req.stage, req.parent) for _, req, groups in batch for g in groups]
                results = iter(self._run_round(runs))
                for ident, _request, groups in batch:
                    pairs = [next(results) for _ in groups]
                    answer = _Result(
                        verdicts=tuple(v for _, v in pairs), probes=tuple(p for p, _ in pairs), nodes=tuple(groups)
                    )
                    self._advance(ident, live, waiting, answer)
            for ident in untestable:
                self._advance(ident, live, waiting, _Result((), (), (), untestable=True))
            if not batch and not untestable and not self._hunt_references():
                for ident in sorted(waiting):  # all wait for references that nobody can provide
                    self._advance(ident, live, waiting, _Result((), (), (), untestable=True))

    def _hunt_references(self) -> bool:
        """Every task waits for a known-good node: run the halves they set aside, together."""
        hunted = tuple(sorted(n for pending in self._pending.values() for nodes, _ in pending for n in nodes))
        candidates = [hunted]
        while candidates:
            group = candidates.pop(0)
            if len(group) < 2:
                continue
            ((_, verdict),) = self._run_round([(group, Stage.SWEEP, None)])
            if verdict.passed:
                self.outcome.healthy.update(group)
                for pending in self._pending.values():
                    kept = [(tuple(n for n in nodes if n not in group), p) for nodes, p in pending]
                    pending[:] = [(nodes, p) for nodes, p in kept if nodes]
                return True
            candidates.extend(self._halves(group))
        return False

    def _advance(self, ident: int, live: dict[int, _Task], waiting: dict[int, _Request], answer: _Result) -> None:
        try:
            waiting[ident] = live[ident].send(answer)
        except StopIteration:
            del waiting[ident], live[ident]

    def _fill(self, ident: int, request: _Request, busy: set[str]) -> list[tuple[str, ...]] | None:
        """Add references to the groups; [] = wait a round (busy); None = no reference exists."""
        references = request.references or (0,) * len(request.groups)
        filled: list[tuple[str, ...]] = []
        taken = set(busy)
        for group in request.groups:
            taken.update(group)
        for group, wanted in zip(request.groups, references, strict=True):
            chosen: list[str] = []
            for candidate in self._candidates(ident, request.avoid | set(group)):
                if len(chosen) == wanted:
                    break
                if candidate not in taken:
                    chosen.append(candidate)
                    taken.add(candidate)
            if len(chosen) < wanted:
                return []  # wait: a reference is busy this round or may turn up from another task
            filled.append(tuple(group) + tuple(chosen))
        return filled

    def _candidates(self, ident: int, exclude: set[str] | frozenset[str]) -> Iterable[str]:
        seen: set[str] = set()
        for node in self._recent.get(ident, []):
            if node not in exclude and node in self.outcome.healthy and node not in seen:
                seen.add(node)
                yield node
        for node in sorted(self.outcome.healthy):
            if node not in exclude and node not in seen:
                yield node

    def _run_round(self, runs: list[tuple[tuple[str, ...], Stage, int | None]]) -> list[tuple[int, ProbeVerdict]]:
        self.outcome.rounds += 1
        out: list[tuple[int, ProbeVerdict]] = []
        by_stage: dict[Stage, list[int]] = {}
        for position, (_, stage, _) in enumerate(runs):
            by_stage.setdefault(stage, []).append(position)
        verdicts: dict[int, ProbeVerdict] = {}
        for stage, positions in by_stage.items():
            answers = self.prober([runs[p][0] for p in positions], stage)
            for position, verdict in zip(positions, answers, strict=True):
                verdicts[position] = verdict
        for position, (group, stage, parent) in enumerate(runs):
            verdict = verdicts[position]
            index = self._record(stage, group, verdict.passed, parent, detail=verdict.detail)
            out.append((index, verdict))
        return out

    def _record(
        self,
        stage: Stage,
        group: tuple[str, ...],
        passed: bool,
        parent: int | None,
        *,
        inferred: bool = False,
        detail: Any = None,
    ) -> int:
        index = len(self.outcome.probes)
        round_number = self.outcome.rounds if not inferred else max(self.outcome.rounds, 0)
        self.outcome.probes.append(Probe(index, round_number, stage, tuple(group), passed, parent, inferred, detail))
        return index

    # --- one failed group ---------------------------------------------------------------------

    def _task(self, ident: int, group: tuple[str, ...], root: int) -> _Task:
        items: deque[_Bad] = deque([_Bad(group, probe=root)])
        pending: list[tuple[tuple[str, ...], int | None]] = []
        self._pending[ident] = pending  # shared: a reference hunt may clear it
        while items or pending:
            if not items:
                union = tuple(sorted(n for nodes, _ in pending for n in nodes))
                parent = pending[0][1]
                pending.clear()
                answer = yield _Request((union,), Stage.SWEEP, parent, references=(_pad(union),))
                if answer.untestable:  # never cleared and nothing to clear them against: still suspects
                    self._unresolve(union, self._detail(parent))
                    return
                if answer.verdicts[0].passed:
                    self._healthy(ident, union)
                else:
                    items.append(_Bad(union, probe=answer.probes[0], detail=answer.verdicts[0].detail))
                continue
            item = items.popleft()
            if len(item.nodes) == 1:
                yield from self._confirm(ident, item, items)
                continue
            left, right = self._halves(item.nodes)
            if item.careful:
                answer = yield _Request(
                    (left, right), Stage.BISECTION, item.probe, references=(_pad(left), _pad(right))
                )
                if answer.untestable:
                    self._unresolve(item.nodes, item.detail)
                    continue
                (lv, rv), (lp, rp) = answer.verdicts, answer.probes
                for half, verdict, probe in ((left, lv, lp), (right, rv, rp)):
                    if verdict.passed:
                        self._healthy(ident, half)
                    else:
                        items.appendleft(
                            _Bad(half, careful=True, observed=int(len(half) == 1), probe=probe, detail=verdict.detail)
                        )
                if lv.passed and rv.passed:
                    yield from self._cross_boundary(ident, left, right, item.probe)
                continue
            if len(left) == 1 and len(right) > 1 and not self.outcome.healthy:
                left, right = right, left  # no reference to pair a single node with yet
            answer = yield _Request((left,), Stage.BISECTION, item.probe, references=(_pad(left),))
            if answer.untestable:
                self._unresolve(item.nodes, item.detail)
                continue
            verdict, probe = answer.verdicts[0], answer.probes[0]
            if not verdict.passed:
                pending.append((right, item.probe))
                items.appendleft(_Bad(left, observed=int(len(left) == 1), probe=probe, detail=verdict.detail))
            else:
                self._healthy(ident, left)
                origin = item.origin or (right, left, item.probe)
                inferred = self._record(Stage.BISECTION, right, False, item.probe, inferred=True, detail=item.detail)
                items.appendleft(_Bad(right, origin=origin, probe=inferred, detail=item.detail))

    def _confirm(self, ident: int, item: _Bad, items: deque[_Bad]) -> Generator[_Request, _Result, None]:
        suspect = item.nodes[0]
        observed, detail, used = item.observed, item.detail, frozenset[str]()
        while observed < self.confirmations:
            answer = yield _Request((item.nodes,), Stage.CONFIRMATION, item.probe, references=(1,), avoid=used)
            if answer.untestable:
                if observed:
                    break
                self.outcome.unresolved[suspect] = detail
                return
            used = used | set(answer.nodes[0][1:])
            verdict = answer.verdicts[0]
            if verdict.passed:
                self._healthy(ident, item.nodes)
                if item.origin is not None:
                    yield from self._backtrack(ident, item.origin, items)
                return
            observed, detail = observed + 1, verdict.detail
        self.outcome.faulty[suspect] = detail

    def _backtrack(
        self, ident: int, origin: tuple[tuple[str, ...], tuple[str, ...], int | None], items: deque[_Bad]
    ) -> Generator[_Request, _Result, None]:
        """An inferred suspect passed alone: run the inferred half for real."""
        inferred_set, sibling, parent = origin
        answer = yield _Request((inferred_set,), Stage.BACKTRACK, parent, references=(_pad(inferred_set),))
        if answer.untestable:
            self._unresolve((n for n in inferred_set if n not in self.outcome.healthy), self._detail(parent))
            return
        verdict = answer.verdicts[0]
        if verdict.passed:
            self._healthy(ident, inferred_set)
            yield from self._cross_boundary(ident, sibling, inferred_set, parent)
        else:
            items.appendleft(_Bad(inferred_set, careful=True, probe=answer.probes[0], detail=verdict.detail))

    def _cross_boundary(
        self, ident: int, side_a: tuple[str, ...], side_b: tuple[str, ...], parent: int | None
    ) -> Generator[_Request, _Result, None]:
        """Both sides pass alone but failed together: narrow the boundary with mixed groups.

        The two sides are first run together once more: a failure that does not reproduce was
        transient (noise on a shared machine, a flapping link) and blames nothing.
        """
        a, b = side_a, side_b
        again = yield _Request((tuple(sorted(a + b)),), Stage.CROSS_BOUNDARY, parent)
        if answer_passed(again):
            return
        for _ in range(self.max_probe_rounds):
            if len(a) <= 2 and len(b) <= 2:
                break
            a1, a2 = self._halves(a) if len(a) > 1 else (a, a)
            b1, b2 = self._halves(b) if len(b) > 1 else (b, b)
            narrowed = None
            for pairing in (((a1, b1), (a2, b2)), ((a1, b2), (a2, b1))):
                (x1, y1), (x2, y2) = pairing
                first, second = tuple(sorted(set(x1) | set(y1))), tuple(sorted(set(x2) | set(y2)))
                if set(first) & set(second):
                    continue
                answer = yield _Request((first, second), Stage.CROSS_BOUNDARY, parent)
                if answer.untestable:
                    break
                f, s = answer.verdicts
                if not f.passed and not s.passed:
                    self.outcome.infrastructure_faults.append(InfrastructureFault(a, b, whole_boundary=True))
                    return
                if not f.passed or not s.passed:
                    narrowed = (x1, y1) if not f.passed else (x2, y2)
                    break
            if narrowed is None:
                return  # no mix of the two sides fails again: transient, cleared
            a, b = narrowed
        self.outcome.infrastructure_faults.append(InfrastructureFault(a, b, whole_boundary=False))

    # --- helpers ------------------------------------------------------------------------------

    def _healthy(self, ident: int, nodes: Iterable[str]) -> None:
        nodes = list(nodes)
        self.outcome.healthy.update(nodes)
        recent = self._recent.setdefault(ident, [])
        self._recent[ident] = nodes + [n for n in recent if n not in nodes]

    def _detail(self, probe: int | None) -> Any:
        return self.outcome.probes[probe].detail if probe is not None else None

    def _unresolve(self, nodes: Iterable[str], detail: Any) -> None:
        for node in nodes:
            self.outcome.unresolved[node] = detail

    def _halves(self, nodes: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Split at the topology-domain boundary nearest the middle, else at the middle by name."""
        ordered = sorted(nodes, key=lambda n: (self.domains.get(n, ""), n))
        middle = len(ordered) // 2
        cuts = [i for i in range(1, len(ordered)) if self.domains.get(ordered[i - 1]) != self.domains.get(ordered[i])]
        if cuts:
            cut = min(cuts, key=lambda i: (abs(i - middle), i))
            if 0 < cut < len(ordered):
                middle = cut
        return tuple(ordered[:middle]), tuple(ordered[middle:])


def answer_passed(answer: _Result) -> bool:
    """A run that could not be made counts as not reproducing the failure."""
    return answer.untestable or answer.verdicts[0].passed


def _pad(group: tuple[str, ...]) -> int:
    """A single node cannot run a collective alone: pair it with one known-good node."""
    return 1 if len(group) == 1 else 0


def _with_detail(probe: Probe, detail: Any) -> Probe:
    from dataclasses import replace

    return replace(probe, detail=detail)


def isolate(
    prober: Prober,
    groups: Sequence[tuple[str, ...]],
    *,
    domains: Mapping[str, str] | None = None,
    confirmations: int = 1,
) -> tuple[Outcome, int]:
    """Screen `groups`, then isolate inside the failed ones. Returns (outcome, screening runs)."""
    isolator = Isolator(prober, domains=domains, confirmations=confirmations)
    failed = isolator.screen(groups)
    screening_runs = isolator.outcome.runs
    if failed:
        isolator.isolate(failed)
    return isolator.outcome, screening_runs
