"""Area of concern: seeded pod logs are written in the CRI format kwok (like the kubelet) reads."""

from __future__ import annotations

import datetime

import pytest

from dsx import errors
from dsx.sim import pod_logs


def test_cri_format_is_what_the_kubelet_writes() -> None:
    when = datetime.datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=datetime.UTC)
    assert pod_logs.cri_format("a\nb", when=when) == (
        "2026-11-29T12:00:00.123456Z stdout F a\n2026-11-29T12:00:00.123456Z stdout F b\n"
    )
    assert pod_logs.cri_format("oops", stream="stderr", when=when) == "2026-11-29T12:00:00.123456Z stderr F oops\n"


def test_unknown_stream_is_bad_input() -> None:
    with pytest.raises(errors.BadInputError, match="allowed values: stdout, stderr"):
        pod_logs.cri_format("x", stream="stdin")
