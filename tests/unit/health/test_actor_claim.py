"""Area of concern: one sentinel acts on a store at a time unless a Lease says who leads; a crashed
holder does not block its successor; a holder that lost the claim finds out at its next renewal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dsx.errors import ConflictError
from dsx.health.decisions import actor
from dsx.testing.inmemory import InMemoryEventStore

T0 = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)
A = actor.Actor("host-a-100", "host-a", 100)
B = actor.Actor("host-b-200", "host-b", 200)
LEADER_1 = actor.Actor("pod-1-1", "pod-1", 1, "dsx-system/dsx-sentinel")
LEADER_2 = actor.Actor("pod-2-1", "pod-2", 1, "dsx-system/dsx-sentinel")


def running(_: actor.Actor) -> bool:
    return False


def test_the_first_actor_takes_the_claim_and_renews_it_keeping_since() -> None:
    first = actor.decide(None, A, T0, gone=running)
    assert actor.Claim.from_dict(first) == actor.Claim(A, T0, T0)
    later = actor.renewal(first, A, T0 + timedelta(seconds=5))
    assert later is not None and actor.Claim.from_dict(later) == actor.Claim(A, T0, T0 + timedelta(seconds=5))


def test_a_second_actor_without_a_shared_lease_is_refused_naming_the_holder() -> None:
    held = actor.decide(None, A, T0, gone=running)
    with pytest.raises(ConflictError) as refused:
        actor.decide(held, B, T0 + timedelta(seconds=3), gone=running)
    message = str(refused.value)
    assert "host-a-100 (no leader election)" in message and "renewed 3 s ago" in message
    assert "--leader-elect" in message and "--store" in message
    with pytest.raises(ConflictError):  # an elected leader too: the other acts without the Lease
        actor.decide(held, LEADER_1, T0 + timedelta(seconds=3), gone=running)


def test_replicas_of_one_lease_hand_over_at_once() -> None:
    held = actor.decide(None, LEADER_1, T0, gone=running)
    taken = actor.decide(held, LEADER_2, T0 + timedelta(seconds=1), gone=running)
    assert actor.Claim.from_dict(taken) == actor.Claim(LEADER_2, T0 + timedelta(seconds=1), T0 + timedelta(seconds=1))
    assert actor.renewal(taken, LEADER_1, T0 + timedelta(seconds=2)) is None  # the old leader has lost it


def test_a_crashed_holder_is_replaced_when_gone_or_stale() -> None:
    held = actor.decide(None, A, T0, gone=running)
    assert actor.Claim.from_dict(actor.decide(held, B, T0 + timedelta(seconds=1), gone=lambda h: h == A))
    just_fresh = T0 + timedelta(seconds=actor.STALE_SECONDS - 1)
    with pytest.raises(ConflictError):
        actor.decide(held, B, just_fresh, gone=running)
    stale = T0 + timedelta(seconds=actor.STALE_SECONDS)
    assert actor.Claim.from_dict(actor.decide(held, B, stale, gone=running)).actor == B  # type: ignore[union-attr]


def test_a_released_claim_is_free_and_only_its_holder_releases_it() -> None:
    held = actor.decide(None, A, T0, gone=running)
    assert actor.released(held, B) is None
    free = actor.released(held, A)
    assert free is not None and actor.Claim.from_dict(free) is None
    assert actor.Claim.from_dict(actor.decide(free, B, T0, gone=running)).actor == B  # type: ignore[union-attr]


def test_the_claim_lives_in_the_stores_atomic_document() -> None:
    """Through the port: what the runtime does, on the fake that shares the contract suite."""
    store = InMemoryEventStore()
    store.update_breaker(actor.DOCUMENT, lambda current: (actor.decide(current, A, T0, gone=running), None))
    with pytest.raises(ConflictError):
        store.update_breaker(actor.DOCUMENT, lambda current: (actor.decide(current, B, T0, gone=running), None))
    document = store.load_breaker(actor.DOCUMENT)
    assert document is not None and document["instance"] == "host-a-100"
