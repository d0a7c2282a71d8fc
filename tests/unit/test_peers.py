from __future__ import annotations

import pytest

from queen_threads.errors import ValidationError
from queen_threads.services.peers import from_wire, is_self, to_wire, udp_address


def test_wire_round_trip_of_push_and_free() -> None:
    push = {"kind": "push", "queue": "q", "partition": "p", "consumerGroup": None}
    assert from_wire(to_wire(push)) == push
    free = {"kind": "free", "queue": "q", "partition": "p", "consumerGroup": "g"}
    wire = to_wire(free)
    assert wire["type"] == "partition_free" and wire["consumer_group"] == "g"
    assert from_wire(wire) == free


def test_heartbeat_is_ignored_and_bad_bodies_rejected() -> None:
    assert from_wire({"type": "heartbeat"}) is None
    for bad in ([], {"type": "x", "queue": "q"}, {"type": "message_available"},
                {"type": "message_available", "queue": "q", "partition": 3}):  # fmt: skip
        with pytest.raises(ValidationError):
            from_wire(bad)


def test_self_detection_and_udp_addresses() -> None:
    assert is_self("http://localhost:6632", "0.0.0.0", 6632)
    assert is_self("127.0.0.1:6632", "0.0.0.0", 6632)
    assert not is_self("http://localhost:6633", "0.0.0.0", 6632)
    assert not is_self("http://other-host:6632", "0.0.0.0", 6632)
    assert udp_address("10.0.0.5", 6633) == ("10.0.0.5", 6633)
    assert udp_address("http://peer:7000", 6633) == ("peer", 7000)
