"""scripts/bench (p) pop autopilot against fixed settings: the configurations' query
parameters, the figure keys, the books of one configuration and its ceiling."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest

from bench.autopilot import (
    AUTOPILOT,
    DEFAULTS,
    METRICS,
    Deliveries,
    PopConfig,
    autopilot_figures,
    configs,
    consume,
    cpu_figures,
    figure_key,
    turned,
)
from bench.ceiling_map import SKIP_LOCKED, ceiling_key, planned
from bench.common import Context
from bench.httpclient import Response
from bench.options import DEFAULT_SCENARIOS, FULL, QUICK, parse_args


def query(config: PopConfig, wait: bool) -> dict[str, list[str]]:
    return parse_qs(urlsplit(Context.pop_path("q", **config.params(wait))).query)


def test_the_autopilot_leaves_batch_and_partitions_to_the_server() -> None:
    assert query(AUTOPILOT, False) == {"autopilot": ["true"], "wait": ["false"]}
    assert query(AUTOPILOT, True) == {"autopilot": ["true"], "wait": ["true"], "timeout": ["5000"]}


def test_the_defaults_and_fixed_settings_pin_both_without_autopilot() -> None:
    assert query(DEFAULTS, False) == {"batch": ["1"], "partitions": ["1"], "wait": ["false"]}
    fixed = {c.name: c for c in configs(FULL)}["b1000_p10"]
    q = query(fixed, True)
    assert "autopilot" not in q
    assert (q["batch"], q["partitions"], q["wait"]) == (["1000"], ["10"], ["true"])


def test_every_run_measures_the_same_configurations_in_a_turned_order() -> None:
    names = [c.name for c in configs(FULL)]
    assert names == ["autopilot", "defaults", "b100_p1", "b1000_p1", "b100_p10", "b1000_p10"]
    assert [c.name for c in turned(configs(FULL), 1)] == names[1:] + names[:1]
    assert [c.name for c in turned(configs(FULL), len(names))] == names


def test_figure_keys_cover_each_phase_configuration_and_metric_once() -> None:
    keys = [f.key for f in autopilot_figures(FULL)]
    assert len(keys) == len(set(keys)) == 2 * len(configs(FULL)) * len(METRICS)
    assert figure_key("backlog", "autopilot", "msg_per_s") in keys
    assert figure_key("trickle", "defaults", "p99_ms") in keys
    labels = {f.key: f.label for f in autopilot_figures(FULL)}
    assert "100,000 msgs / 100 partitions" in labels["backlog_autopilot_msg_per_s"]
    assert "batch 1, 1 partition:" in labels["backlog_defaults_msg_per_s"]


def test_sizes_full_quick_and_on_request_only() -> None:
    assert (FULL.autopilot_messages, FULL.autopilot_partitions, FULL.autopilot_consumers) == (
        100_000, 100, 4)  # fmt: skip
    assert FULL.trickle_rate == 500.0
    assert QUICK.autopilot_messages < FULL.autopilot_messages
    assert QUICK.trickle_duration_s < FULL.trickle_duration_s
    assert "p" not in DEFAULT_SCENARIOS
    assert parse_args(["--scenarios", "p"]).scenarios == ("p",)
    sizes = parse_args(["--quick", "--backlog-messages", "3000", "--trickle-duration", "2"]).sizes
    assert (sizes.autopilot_messages, sizes.trickle_duration_s) == (3000, 2.0)


def test_autopilot_only_picks_phases_and_configurations() -> None:
    sizes = parse_args(["--autopilot-only", "trickle,autopilot,b100_p10"]).sizes
    assert [c.name for c in configs(sizes)] == ["autopilot", "b100_p10"]
    keys = [f.key for f in autopilot_figures(sizes)]
    assert len(keys) == 2 * len(METRICS) and all(k.startswith("trickle_") for k in keys)
    assert [c.name for c in configs(parse_args(["--autopilot-only", "backlog"]).sizes)] == [
        c.name for c in configs(FULL)]  # fmt: skip


def test_the_backlog_rate_is_bounded_by_the_skip_locked_ceiling() -> None:
    assert ceiling_key("p", "backlog_autopilot_msg_per_s") == SKIP_LOCKED
    assert ceiling_key("p", "backlog_autopilot_p99_ms") is None
    assert ceiling_key("p", "trickle_autopilot_msg_per_s") is None
    assert [c.key for c in planned(["p"], FULL, 2)] == [SKIP_LOCKED]


def test_postgres_cpu_per_thousand_messages() -> None:
    assert cpu_figures({"postgres": 50.0, "seconds": 2.0}, 4000) == {
        "pg_cpu": 50.0, "pg_ms_per_1k": 250.0}  # fmt: skip
    assert cpu_figures({"postgres": None, "seconds": 2.0}, 10) == {}


class FakeConnection:
    """Answers a pop with `messages` (and the autopilot's echo) once, then 204s; acks all."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages
        self.sent: list[bytes] = []

    async def request_raw(self, raw: bytes, method: str = "GET") -> Response:
        self.sent.append(raw)
        if method == "POST":
            acks = orjson.loads(raw.split(b"\r\n\r\n", 1)[1])["acknowledgments"]
            return Response(200, {}, orjson.dumps([{"success": True} for _ in acks]))
        if self.messages:
            body = {"messages": self.messages, "autopilot": {"partitions": 4, "batch": 1000}}
            self.messages = []
            return Response(200, {}, orjson.dumps(body))
        return Response(204, {}, b"")

    def render(self, method: str, path: str, body: bytes | None = None) -> bytes:
        return f"{method} {path} HTTP/1.1\r\n\r\n".encode() + (body or b"")


def test_a_consumer_books_each_message_its_latency_and_the_autopilots_choice() -> None:
    created = "2020-01-01T00:00:00.000000Z"
    messages = [{"transactionId": f"t{i}", "partitionId": "p", "leaseId": "l",
                 "createdAt": created} for i in range(3)]  # fmt: skip
    conn = FakeConnection(messages)
    got = Deliveries()
    asyncio.run(consume(conn, b"pop", True, got, lambda: len(got.tally.seen) >= 3))  # type: ignore[arg-type]
    assert len(got.tally.seen) == 3 and got.tally.acks == 1
    assert got.choice_dict() == {"p4_b1000": 1}
    (latency, *_) = got.latencies_ms()
    assert latency > 0  # the ack came after that createdAt
    assert got.since_ms(got.created_acked[0][1]) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("wait", [True, False])
def test_an_empty_pop_is_counted_and_the_consumer_stops_when_done(wait: bool) -> None:
    conn = FakeConnection([])
    got = Deliveries()
    asyncio.run(consume(conn, b"pop", wait, got, lambda: got.tally.pops >= 2))  # type: ignore[arg-type]
    assert (got.tally.pops, got.tally.empty_pops, got.tally.acks) == (2, 2, 0)
