"""The plumbing of (r) offset fetch and (u) ephemeral against durable push/pop."""

from __future__ import annotations

import random
from typing import Any, cast

import orjson
import pytest

from bench import ephemeral, reads
from bench.common import BenchError, Context, TxIds
from bench.options import FULL, QUICK, SCENARIOS, parse_args
from bench.scenarios import SCENARIOS as BY_LETTER


class _Ctx:
    """What the bodies need of a Context."""

    pad = "x" * 8

    def __init__(self) -> None:
        self.txids = TxIds(random.Random(1))

    def items(self, queue: str, partition: str, start: int, count: int) -> list[dict[str, Any]]:
        return [{"queue": queue, "partition": partition, "payload": {"seq": start + i},
                 "transactionId": self.txids.next()} for i in range(count)]  # fmt: skip

    def push_body(self, queue: str, partition: str, start: int, count: int) -> bytes:
        return orjson.dumps({"items": self.items(queue, partition, start, count)})


CTX = cast(Context, _Ctx())


def test_the_scenarios_are_registered_and_selectable() -> None:
    assert {"r", "u"} <= set(SCENARIOS) and {"r", "u"} <= set(BY_LETTER)
    assert parse_args(["--quick", "--scenarios", "r,u"]).scenarios == ("r", "u")
    assert [f.key for f in BY_LETTER["r"].figures(FULL)] == [
        "fetch_ms_p50", "fetch_ms_p99", "records_per_s",
    ]  # fmt: skip
    assert [f.key for f in BY_LETTER["u"].figures(QUICK)] == [
        "ephemeral_push", "ephemeral_pop", "durable_push", "durable_pop",
    ]  # fmt: skip
    assert FULL.reads_partitions == 1000


def test_fetch_asks_every_partition_from_offset_zero() -> None:
    entries = orjson.loads(reads.fetch_body("q", 3))["entries"]
    assert entries == [{"queue": "q", "partition": f"p{i}", "offset": 0} for i in range(3)]


def test_the_fill_keeps_each_partitions_items_together() -> None:
    items = orjson.loads(reads.fill_body(CTX, "q", 4, 2, 3))["items"]
    assert [i["partition"] for i in items] == ["p4"] * 3 + ["p5"] * 3


def test_a_short_fetch_is_an_error() -> None:
    full = {"entries": [{"records": [1, 2]}, {"records": [3, 4]}]}
    assert reads.check_fetched(full, 2, 2) == 4
    with pytest.raises(BenchError):
        reads.check_fetched({"entries": [{"records": [1]}, {"records": [3, 4]}]}, 2, 2)


def test_the_two_kinds_push_and_pop_their_own_routes() -> None:
    body, status = ephemeral.push_request(CTX, "ephemeral", "q", 10, 2)
    assert orjson.loads(body)["messages"] == [
        {"payload": {"seq": 10, "pad": CTX.pad}}, {"payload": {"seq": 11, "pad": CTX.pad}},
    ]  # fmt: skip
    assert status == 201
    durable, _ = ephemeral.push_request(CTX, "durable", "q", 0, 2)
    assert len(orjson.loads(durable)["items"]) == 2
    assert ephemeral.pop_path("ephemeral", "a b", 5).startswith(
        "/api/v1/ephemeral/pop?queue=a%20b&batch=5"
    )
    assert "autoAck=true" in ephemeral.pop_path("durable", "q", 5)
    assert ephemeral.popped("durable", 204, dict) == 0
    assert ephemeral.popped("ephemeral", 200, lambda: {"messages": [1, 2]}) == 2
