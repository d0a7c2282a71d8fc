"""Scenario (m)'s plumbing: it is registered, its bodies are what the server accepts (the
server's own validation), and its figures are bounded by no in-run ceiling of the table
(its upsert ceiling is measured inside the scenario)."""

from __future__ import annotations

import random
from typing import Any

import orjson

from bench import kv
from bench.ceiling_map import ceiling_key
from bench.common import Context, TxIds
from bench.options import FULL, QUICK, SCENARIOS
from bench.scenarios import SCENARIOS as BY_LETTER
from queen_threads.kv import body as ops


class FakeContext:
    """What the body builders read of a Context."""

    items = Context.items

    def __init__(self) -> None:
        self.sizes = QUICK
        self.pad = "x" * 40
        self.txids = TxIds(random.Random(1))


def test_scenario_m_is_registered_with_its_figures() -> None:
    assert "m" in SCENARIOS and BY_LETTER["m"].run is kv.key_value
    keys = [f.key for f in BY_LETTER["m"].figures(FULL)]
    assert keys[:2] == ["put_per_s", "get_per_s"] and "tx_guarded_per_s" in keys
    assert all(ceiling_key("m", k) is None for k in keys)


def test_the_kv_bodies_pass_the_servers_rules() -> None:
    ctx: Any = FakeContext()
    for build in (kv.put_body(ctx, "bench-ab-r0"), kv.get_body(ctx, "bench-ab-r0")):
        body = orjson.loads(build(3, QUICK.kv_keys + 5))
        [op] = ops.operations(body["operations"])
        assert op["key"] == "c3:5", "connection and key cycle are in the key"


def test_the_guarded_transaction_carries_the_guard_as_its_kv_rider() -> None:
    ctx: Any = FakeContext()
    guard = {"op": "check", "ns": "queen-locks", "key": "g#0", "expect": 7, "required": True}
    plain = orjson.loads(kv.tx_body(ctx, "q", None)(0, 1))
    guarded = orjson.loads(kv.tx_body(ctx, "q", guard)(0, 2))
    assert "kv" not in plain and plain["operations"][0]["items"][0]["queue"] == "q"
    assert ops.operations(guarded["kv"], in_transaction=True) == [guard]
