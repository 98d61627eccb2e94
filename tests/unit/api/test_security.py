from __future__ import annotations

from pathlib import Path

import pytest

from dsx.api import security
from dsx.errors import BadInputError
from dsx.ratelimit import TokenBucket


def test_tokens_from_file_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "tokens"
    f.write_text("# ci runner\nfile-token-0123456789\n\n")
    monkeypatch.setenv("DSX_API_TOKENS", "env-token-0123456789, other-token-0123456789")
    digests = security.load_tokens(str(f))
    auth = security.TokenAuthenticator(digests)
    assert auth.identify("Bearer file-token-0123456789")
    assert auth.identify("Bearer other-token-0123456789")
    assert auth.identify("Bearer wrong-token-0123456789") is None
    assert auth.identify("Basic file-token-0123456789") is None
    assert auth.identify(None) is None


def test_short_tokens_are_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSX_API_TOKENS", "short")
    with pytest.raises(BadInputError, match="at least 16"):
        security.load_tokens(None)


def test_bucket_allows_burst_then_asks_to_wait() -> None:
    now = [0.0]
    bucket = TokenBucket(rate_per_second=2.0, burst=3, clock=lambda: now[0])
    assert [bucket.wait("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = bucket.wait("a")
    assert wait == pytest.approx(0.5)
    assert bucket.wait("b") == 0.0  # clients are independent
    now[0] += 0.5
    assert bucket.wait("a") == 0.0
