"""Area of concern: Lease-based leader election — one leader at a time, takeover only after the
lease expired on the candidate's own clock, compare-and-swap writes, a leader that cannot renew
in time steps down, a released lease is taken at once."""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

import pytest

from dsx import errors
from dsx.kube.leader import ElectionSettings, LeaderElector


class FakeLeases:
    """The apiserver's Lease semantics that matter: 404, create-once, replace at resourceVersion."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.failing = False
        self.lock = threading.Lock()

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        if self.failing:
            raise errors.UnavailableError("apiserver down")
        with self.lock:
            return copy.deepcopy(self.lease)

    def _store(self, lease: Mapping[str, Any]) -> dict[str, Any]:
        self.version += 1
        stored = copy.deepcopy(dict(lease))
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.lease = stored
        return copy.deepcopy(stored)

    def create_lease(self, lease: Mapping[str, Any]) -> dict[str, Any]:
        with self.lock:
            if self.lease is not None:
                raise errors.ConflictError("already exists")
            return self._store(lease)

    def replace_lease(self, lease: Mapping[str, Any]) -> dict[str, Any]:
        if self.failing:
            raise errors.UnavailableError("apiserver down")
        with self.lock:
            assert self.lease is not None
            if lease["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
                raise errors.ConflictError("the object has been modified")
            return self._store(lease)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def elector(leases: FakeLeases, identity: str, clock: Clock, **timing: float) -> LeaderElector:
    settings = ElectionSettings(namespace="dsx-system", identity=identity, **timing)  # type: ignore[arg-type]
    return LeaderElector(
        leases, settings, on_started_leading=lambda: None, on_stopped_leading=lambda: None, monotonic=clock
    )


def test_the_first_candidate_creates_the_lease_and_others_wait_while_it_renews() -> None:
    leases, clock = FakeLeases(), Clock()
    a, b = elector(leases, "a", clock), elector(leases, "b", clock)
    assert a.try_acquire_or_renew()
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == "a"
    assert leases.lease["spec"]["leaseDurationSeconds"] == 15
    for _ in range(20):  # 40 s of a renewing leader
        assert not b.try_acquire_or_renew()
        clock.now += 2
        assert a.try_acquire_or_renew()
    assert leases.lease["spec"]["holderIdentity"] == "a"
    assert leases.lease["spec"]["leaseTransitions"] == 0


def test_a_silent_leader_is_replaced_only_after_the_lease_duration_on_the_candidates_clock() -> None:
    leases, clock = FakeLeases(), Clock()
    a, b = elector(leases, "a", clock), elector(leases, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # b first sees the record now
    clock.now += 14.9
    assert not b.try_acquire_or_renew()
    clock.now += 0.1
    assert b.try_acquire_or_renew()
    assert leases.lease is not None
    assert (leases.lease["spec"]["holderIdentity"], leases.lease["spec"]["leaseTransitions"]) == ("b", 1)
    assert not a.try_acquire_or_renew(), "the old leader sees a live lease held by b"
    assert a.holder == "b"


def test_two_candidates_racing_for_an_expired_lease_cannot_both_win() -> None:
    leases, clock = FakeLeases(), Clock()
    assert elector(leases, "a", clock).try_acquire_or_renew()
    b, c = elector(leases, "b", clock), elector(leases, "c", clock)
    assert not b.try_acquire_or_renew() and not c.try_acquire_or_renew()
    clock.now += 16
    seen = leases.get_lease("dsx-system", "dsx-sentinel")
    original = leases.get_lease

    def stale_get(namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(seen)  # both read the same version before either writes

    leases.get_lease = stale_get  # type: ignore[method-assign]
    outcomes = [b.try_acquire_or_renew(), c.try_acquire_or_renew()]
    leases.get_lease = original  # type: ignore[method-assign]
    assert outcomes == [True, False]
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == "b"


def test_a_leader_that_cannot_renew_within_the_deadline_steps_down() -> None:
    leases = FakeLeases()
    stopped, started = threading.Event(), threading.Event()
    settings = ElectionSettings(
        namespace="dsx-system",
        identity="a",
        lease_duration_seconds=0.6,
        renew_deadline_seconds=0.4,
        retry_period_seconds=0.05,
    )
    leader = LeaderElector(leases, settings, on_started_leading=started.set, on_stopped_leading=stopped.set)
    stop = threading.Event()
    thread = threading.Thread(target=leader.run, args=(stop,))
    thread.start()
    assert started.wait(5)
    assert leader.leading
    leases.failing = True
    assert stopped.wait(5)
    thread.join(5)
    assert not thread.is_alive() and not leader.leading


def test_a_released_lease_is_taken_at_once() -> None:
    leases, clock = FakeLeases(), Clock()
    a, b = elector(leases, "a", clock), elector(leases, "b", clock)
    assert a.try_acquire_or_renew()
    a.leading = True
    assert not b.try_acquire_or_renew()
    assert a.release()
    assert leases.lease is not None and leases.lease["spec"].get("holderIdentity") is None
    assert b.try_acquire_or_renew()
    assert leases.lease["spec"]["holderIdentity"] == "b"


@pytest.mark.parametrize(
    ("lease", "renew", "retry"), [(10.0, 10.0, 2.0), (15.0, 2.0, 2.0), (15.0, 10.0, 0.0), (5.0, 10.0, 2.0)]
)
def test_timings_must_nest(lease: float, renew: float, retry: float) -> None:
    with pytest.raises(errors.BadInputError, match="lease duration > renew deadline > retry period"):
        ElectionSettings(
            namespace="n",
            identity="a",
            lease_duration_seconds=lease,
            renew_deadline_seconds=renew,
            retry_period_seconds=retry,
        )


def test_a_leader_whose_start_fails_steps_down_instead_of_leading_half_started() -> None:
    leases = FakeLeases()
    stopped = threading.Event()

    def broken_start() -> None:
        raise RuntimeError("could not open the analyzer's store")

    settings = ElectionSettings(namespace="dsx-system", identity="a", retry_period_seconds=0.05)
    leader = LeaderElector(leases, settings, on_started_leading=broken_start, on_stopped_leading=stopped.set)
    leader.run(threading.Event())
    assert stopped.is_set() and not leader.leading
