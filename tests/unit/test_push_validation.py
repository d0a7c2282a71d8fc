"""validation.push_items: each item checked as push_item checks it, a name shared by several
items checked once (the cache must never let through what the check refuses)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from queen_threads.errors import ValidationError
from queen_threads.queue import body as v


def test_items_are_normalised() -> None:
    trace = str(uuid.uuid4()).upper()
    [first, second] = v.push_items(
        [
            {"queue": "q", "payload": {"n": 1}, "transactionId": "t1", "traceId": trace},
            {"queue": "q", "partition": "p", "payload": None},
        ],
        "alice",
    )
    assert first == {
        "queue": "q",
        "partition": "Default",
        "payload": {"n": 1},
        "transactionId": "t1",
        "traceId": trace.lower(),
        "producerSub": "alice",
    }
    assert second["partition"] == "p" and second["traceId"] is None
    uuid.UUID(second["transactionId"])  # generated


@pytest.mark.parametrize(
    ("bad", "message"),
    [({"queue": "bad name!"}, "Invalid queue name"),
     ({"queue": "q", "partition": "bad/part"}, "Invalid partition name"),
     ({"queue": ["q"]}, "Queue must be a string"),
     ({"queue": "q", "partition": 7}, "Partition must be a string"),
     ({"partition": "q"}, "Queue is required"),
     ({"queue": "q", "transactionId": ""}, "TransactionId must not be empty"),
     ({"queue": "q", "traceId": "nope"}, "TraceId must be a UUID"),
     ("q", "Each item must be a JSON object")],
)  # fmt: skip
def test_a_bad_item_after_good_ones_with_the_same_names_is_refused(bad: Any, message: str) -> None:
    good = [{"queue": "q", "partition": "p"}, {"queue": "q", "partition": "q"}]
    with pytest.raises(ValidationError, match=message):
        v.push_items([*good, bad])
