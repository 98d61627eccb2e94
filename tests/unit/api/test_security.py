from __future__ import annotations

import re
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
    monkeypatch.setenv("DSX_API_TOKENS", "long-enough-token-0123, short")
    with pytest.raises(BadInputError) as refused:
        security.load_tokens(None)
    assert refused.value.message == "DSX_API_TOKENS: item 2: a token of 5 characters; tokens must be at least 16"


def test_a_short_token_in_a_file_is_named_by_file_and_line(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# tokens\nfile-token-0123456789\n\nshort\n", encoding="utf-8")
    with pytest.raises(BadInputError, match=rf"^{re.escape(str(tokens))}: line 4: a token of 5 characters"):
        security.load_tokens(str(tokens))


def test_a_token_file_that_is_not_utf8_is_bad_input(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_bytes(b"file-token-0123456789\n\xff\xfe-token-0123456789\n")
    with pytest.raises(BadInputError, match=rf"^{re.escape(str(tokens))}: byte 22: not UTF-8"):
        security.load_tokens(str(tokens))


def test_bucket_allows_burst_then_asks_to_wait() -> None:
    now = [0.0]
    bucket = TokenBucket(rate_per_second=2.0, burst=3, clock=lambda: now[0])
    assert [bucket.wait("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = bucket.wait("a")
    assert wait == pytest.approx(0.5)
    assert bucket.wait("b") == 0.0  # clients are independent
    now[0] += 0.5
    assert bucket.wait("a") == 0.0
