"""Area of concern: what `POST /v1/events` (every ingestion door: dsx.health.parsing.ingest) lets into the
store. Hostile identifiers from issue 29 (a path as a node name, a right-to-left override, a
format string, 100,000 characters, a 1 MB message, 20,000 metadata keys) are refused with the
field named; what real monitors send is kept, and the kernel-log monitor never builds a message
the door would refuse."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from dsx.errors import BadInputError
from dsx.health.parsing import ingest
from dsx.model import health
from dsx.model.health import ComponentClass, HealthEvent, RecommendedAction


def event(**fields: Any) -> dict[str, Any]:
    document = HealthEvent(
        agent="syslog-health-monitor",
        component_class=ComponentClass.GPU,
        check_name="SysLogsXIDError",
        node_name="ip-10-0-1-17.ec2.internal",
        generated_at=datetime(2026, 12, 2, tzinfo=UTC),
        is_fatal=True,
        is_healthy=False,
        message="NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n\tsecond line",
        recommended_action=RecommendedAction.RESTART_BM,
        error_codes=("79",),
        metadata={"source": "/var/log/kern.log"},
    ).to_dict()
    document.pop("idempotencyKey", None)  # derived again from the changed content
    document.update(fields)
    return document


def test_what_real_monitors_send_is_kept() -> None:
    for node in ("gpu-node-05", "ip-10-0-1-17.ec2.internal", "a", "x" * 63 + "." + "y" * 63):
        (parsed,) = ingest.parse_document({"events": [event(nodeName=node)]})
        assert parsed.node_name == node


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"nodeName": "../../etc/passwd"}, "nodeName '../../etc/passwd': must be a Kubernetes node name"),
        ({"nodeName": "Node-A"}, "nodeName 'Node-A'"),
        ({"nodeName": "gpu\u202e50-edon"}, "nodeName"),
        ({"nodeName": "%s%n"}, "nodeName '%s%n'"),
        ({"nodeName": "a" * 100_000}, "at most 253 characters"),
        ({"checkName": "Xid\u202eRORRE"}, "checkName: control or formatting character U+202E at 3"),
        ({"agent": "mon\x00itor"}, "agent: control or formatting character U+0000 at 3"),
        ({"checkName": "c" * 254}, "checkName: 254 characters; at most 253"),
        ({"message": "m" * (1 << 20)}, "message: 1048576 characters; at most 65536"),
        ({"message": "line\u2028hidden"}, "message: control or formatting character U+2028 at 4"),
        ({"metadata": {f"k{i}": "v" for i in range(20_000)}}, "metadata: 20000 items; at most 64"),
        ({"metadata": {"source": "v" * 5000}}, "metadata['source']: 5000 characters; at most 4096"),
        ({"metadata": {"sou\u200brce": "v"}}, "metadata key 'sou\\u200brce': control or formatting character U+200B"),
        ({"errorCodes": [str(i) for i in range(65)]}, "errorCodes: 65 items; at most 64"),
        ({"entities": [{"type": "GPU", "value": "0\x1b[31m"}]}, "entities[0].value: control or formatting"),
    ],
)
def test_hostile_identifiers_are_refused_naming_the_field(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(BadInputError) as refused:
        ingest.parse_document({"events": [event(), event(**fields)]}, source="request body")
    assert refused.value.message.startswith("request body: events[1]: ")
    assert named in refused.value.message


def test_bounded_message_keeps_a_monitors_longest_message_inside_the_door() -> None:
    text = "NVRM: Xid (PCI:0000:3b:00): 79, " + "x" * (16 * 64 * 1024)
    cut = health.bounded_message(text)
    assert len(cut) == health.MAX_MESSAGE_CHARS and cut.endswith(f" [cut: {len(text)} chars]")
    assert cut.startswith("NVRM: Xid (PCI:0000:3b:00): 79, x")
    assert health.bounded_message("short") == "short"
    ingest.parse_document([event(message=cut)])
