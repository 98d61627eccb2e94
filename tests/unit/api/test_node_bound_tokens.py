"""Area of concern: a monitor's pod-bound service-account token is accepted only as what the
apiserver's TokenReview says it is (the monitors' service account, this audience, a pod on a
node), verdicts are cached per token, and shared tokens keep working beside it."""

from __future__ import annotations

from typing import Any

from dsx.api import security

AUDIENCE = "dsx-sentinel"
MONITOR = "system:serviceaccount:dsx-system:dsx-sentinel-monitor"
SHARED = "shared-token-0123456789abcdef"
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJtb25pdG9yIn0.c2lnbmF0dXJl"


class Reviewer:
    """Answers as the apiserver's TokenReview does, from a table; counts the questions."""

    def __init__(self, answers: dict[str, dict[str, Any]]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    def review_token(self, token: str, audiences: tuple[str, ...]) -> dict[str, Any]:
        self.asked.append((token, audiences))
        return self.answers.get(token, {"authenticated": False, "error": "invalid bearer token"})


def bound(username: str = MONITOR, node: str | None = "gpu-node-03", audiences: tuple[str, ...] = (AUDIENCE,)) -> dict:
    extra: dict[str, list[str]] = {security.POD_NAME_EXTRA: ["dsx-sentinel-monitor-x7k2p"]}
    if node is not None:
        extra[security.NODE_NAME_EXTRA] = [node]
    return {"authenticated": True, "user": {"username": username, "extra": extra}, "audiences": list(audiences)}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def authenticator(reviewer: Reviewer, clock: Clock | None = None) -> security.NodeBoundAuthenticator:
    shared = security.TokenAuthenticator(frozenset({security._digest(SHARED)}))
    return security.NodeBoundAuthenticator(
        shared, reviewer, audience=AUDIENCE, service_accounts=[MONITOR], clock=clock or Clock()
    )


def test_a_pod_bound_monitor_token_is_its_node() -> None:
    reviewer = Reviewer({JWT: bound()})
    caller = authenticator(reviewer).caller(f"Bearer {JWT}")
    assert caller is not None and (caller.node, caller.pod) == ("gpu-node-03", "dsx-sentinel-monitor-x7k2p")
    assert reviewer.asked == [(JWT, (AUDIENCE,))]


def test_shared_tokens_still_work_and_are_bound_to_no_node() -> None:
    reviewer = Reviewer({})
    caller = authenticator(reviewer).caller(f"bearer {SHARED}")
    assert caller is not None and caller.node is None
    assert reviewer.asked == []  # never sent to the apiserver


def test_what_the_review_does_not_vouch_for_is_refused() -> None:
    cases = {
        "other service account": bound(username="system:serviceaccount:team-a:default"),
        "not bound to a node": bound(node=None),
        "another audience": bound(audiences=("https://kubernetes.default.svc",)),
        "not authenticated": {"authenticated": False},
    }
    for why, answer in cases.items():
        assert authenticator(Reviewer({JWT: answer})).caller(f"Bearer {JWT}") is None, why
    reviewer = Reviewer({})
    assert authenticator(reviewer).caller("Bearer not-a-jwt-but-long-enough") is None
    assert reviewer.asked == []  # only JWT-shaped tokens reach the apiserver


def test_verdicts_are_cached_then_asked_again() -> None:
    clock = Clock()
    reviewer = Reviewer({JWT: bound()})
    auth = authenticator(reviewer, clock)
    for _ in range(50):
        assert auth.caller(f"Bearer {JWT}") is not None
    assert len(reviewer.asked) == 1
    clock.now += 61
    assert auth.caller(f"Bearer {JWT}") is not None
    assert len(reviewer.asked) == 2


def test_an_unreachable_apiserver_refuses_and_is_asked_again_soon() -> None:
    class Down:
        calls = 0

        def review_token(self, token: str, audiences: tuple[str, ...]) -> dict[str, Any]:
            Down.calls += 1
            raise OSError("connection refused")

    clock = Clock()
    shared = security.TokenAuthenticator(frozenset())
    auth = security.NodeBoundAuthenticator(shared, Down(), audience=AUDIENCE, service_accounts=[MONITOR], clock=clock)
    assert auth.caller(f"Bearer {JWT}") is None
    assert auth.caller(f"Bearer {JWT}") is None and Down.calls == 1
    clock.now += 6
    assert auth.caller(f"Bearer {JWT}") is None and Down.calls == 2
