"""(n) partitions scaling, (x) mixed load and (y) its long run: the pieces, then each
scenario end to end on small sizes against an in-memory server (bench/tests/fakequeen.py)
that speaks only the public HTTP API."""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from typing import Any

import orjson
import pytest

from bench import mixed, mixed_long, partitions, procstat
from bench.common import Context, RunResult
from bench.e2e_flow import Books
from bench.options import FULL, QUICK, parse_args
from bench.scenarios import SCENARIOS
from bench.server import Target
from bench.tests.fakequeen import FakeQueen


def test_the_scenarios_are_registered_with_their_sizes() -> None:
    assert {"n", "x", "y"} <= set(SCENARIOS)
    o = parse_args(["--scenarios", "n,x,y", "--scaling-partitions", "50000,10,10",
                    "--mixed-rates", "600,1400", "--scaling-modes", "group"])  # fmt: skip
    assert o.scenarios == ("n", "x", "y")
    assert o.sizes.scaling_partitions == (10, 50_000)
    assert o.sizes.mixed_rates == (600.0, 1400.0) and o.sizes.scaling_modes == ("group",)
    assert FULL.scaling_partitions == (10, 1000, 5000, 50_000) and FULL.scaling_cycles == 300
    assert not o.sizes.scaling_analyze and parse_args(["--scaling-analyze"]).sizes.scaling_analyze
    assert FULL.mixed_rates == (600, 800, 1000, 1200, 1400) and FULL.mixed_long_s == 600
    for bad in (["--scaling-modes", "fifo"], ["--mixed-rates", "0"], ["--scaling-partitions", "0"]):
        with pytest.raises(SystemExit):
            parse_args(bad)
    keys = [f.key for f in SCENARIOS["n"].figures(replace(QUICK, scaling_modes=("queue",)))]
    assert keys == ["queue_10_p50", "queue_10_p99", "queue_10_cpu", "queue_1000_p50",
                    "queue_1000_p99", "queue_1000_cpu", "queue_ratio"]  # fmt: skip
    keys = [f.key for f in SCENARIOS["x"].figures(QUICK)]
    assert keys[0] == "best_rate" and "r300_p99" in keys and keys[-2:] == ["lost", "duplicated"]


def test_each_way_of_popping_has_its_route() -> None:
    q = partitions.Target("queue", "a q", None)
    assert q.pop_path() == "/api/v1/pop/queue/a%20q?batch=1" and q.group is None
    g = partitions.Target("group", "q", None)
    assert g.pop_path().endswith("&consumerGroup=bench-group") and g.group == "bench-group"
    n = partitions.Target("namespace", "q", "ns")
    assert n.pop_path() == "/api/v1/pop?namespace=ns&task=work&batch=1"
    assert n.configure_body() == {"queue": "q", "options": {}, "namespace": "ns", "task": "work"}
    assert "namespace" not in q.configure_body()


def test_cycles_stop_at_the_count_or_after_the_budget_with_a_minimum() -> None:
    first = partitions.WARMUP_CYCLES + partitions.MIN_CYCLES
    assert partitions.cycle_budget(0, 303, late=False)
    assert not partitions.cycle_budget(303, 303, late=False)
    assert partitions.cycle_budget(first - 1, 303, late=True)
    assert not partitions.cycle_budget(first, 303, late=True)


def test_cpu_per_cycle_adds_the_server_and_postgresql() -> None:
    cpu: dict[str, float | None] = {"server": 10.0, "postgres": 30.0, "seconds": 5.0}
    assert partitions.cpu_per_cycle(cpu, 100) == 20.0  # 2 CPU s over 100 cycles
    assert partitions.cpu_per_cycle({"seconds": 5.0}, 100) is None
    assert partitions.cpu_per_cycle(cpu, 0) is None


def test_ratio_of_the_largest_to_the_smallest_size() -> None:
    sizes = replace(QUICK, scaling_partitions=(10, 1000))
    assert partitions.ratio({"queue_10_p50": 2.0, "queue_1000_p50": 5.0}, "queue", sizes) == 2.5
    assert partitions.ratio({"queue_10_p50": 2.0}, "queue", sizes) is None


def test_per_message_cpu_and_carried_rate() -> None:
    cpu: dict[str, float | None] = {"server": 50.0, "loadgen": 10.0, "pg_sampler": 10.0,
                                    "seconds": 2.0, "postgres": None}  # fmt: skip
    assert mixed.per_message_ms(cpu, "server", 1000) == 1.0  # 1 CPU s over 1000 messages
    assert mixed.per_message_ms(cpu, "loadgen", 1000) == 0.4  # with the bench's backend
    assert mixed.per_message_ms(cpu, "postgres", 1000) is None
    books = Books(acked={"a": 1.0, "b": 1.0, "lost": 1.0}, received={"a": 1.5, "b": 13.0})
    assert mixed.carried_rate(books, 1.0, 10.0) == round(2 / 12.0, 1)  # the last came late
    assert mixed.carried_rate(Books(), 1.0, 10.0) == 0.0


def test_the_headline_takes_the_best_clean_step_within_the_limit() -> None:
    steps = [
        {"carried": 600.0, "p99_ms": 20.0, "lost": 0, "duplicated": 0},
        {"carried": 800.0, "p99_ms": 45.0, "lost": 0, "duplicated": 0},
        {"carried": 900.0, "p99_ms": 45.0, "lost": 1, "duplicated": 0},
        {"carried": 950.0, "p99_ms": 80.0, "lost": 0, "duplicated": 0},
    ]
    assert mixed.best_rate(steps, 50.0) == 800.0
    assert mixed.best_rate(steps[3:], 50.0) == 0.0


def test_memory_means_over_a_span_and_the_pss_of_this_process() -> None:
    track = mixed_long.MemoryTrack(None)
    track.samples = [(0.0, 1024), (5.0, 3072), (60.0, 4096)]
    assert track.mean_mb(0.0, 10.0) == 2.0 and track.mean_mb(50.0, 60.0) == 4.0
    assert track.mean_mb(100.0, 110.0) is None
    assert 0 < procstat.pss_kb(os.getpid()) <= procstat.rss_kb(os.getpid())
    own, tree = procstat.pss_kb(os.getpid()), procstat.tree_pss_kb(os.getpid())
    assert 0.8 * own <= tree  # the tree holds this process (its memory moves a little)


def _run(letter: str, fake: FakeQueen, **sizes: Any) -> RunResult:
    async def go() -> RunResult:
        server, url = await fake.serve()
        async with server:
            options = parse_args(["--quick", "--url", url])
            options = replace(options, sizes=replace(options.sizes, **sizes))
            ctx = Context(options, Target(url, None, None, None, False, {}))
            return await SCENARIOS[letter].run(ctx, 0)

    return asyncio.run(go())


def test_partitions_scaling_end_to_end_on_the_public_api() -> None:
    fake = FakeQueen()
    result = _run("n", fake, scaling_partitions=(3, 40), scaling_cycles=12, scaling_fill_batch=16)
    for mode in ("queue", "group", "namespace"):
        assert result.extra[f"{mode}_3"]["cycles"] == 12
        assert result.extra[f"{mode}_3"]["refills"] == 4  # 15 cycles (3 warm-up) over 3
        assert result.extra[f"{mode}_40"]["refills"] == 0
        assert result.extra[f"{mode}_40"]["seq_scans"] == {}  # no database known
        assert result.figures[f"{mode}_ratio"] > 0
    namespaced = [q for q in fake.messages if q in fake.namespaces]
    assert len(namespaced) == 2  # one queue per size
    assert len(fake.messages[namespaced[-1]]) == 40  # 1 message in each partition


def test_analyze_needs_the_database() -> None:
    from bench.common import BenchError

    ctx = Context(parse_args(["--quick"]), Target("http://h:1", None, None, None, False, {}))
    with pytest.raises(BenchError, match="database"):
        partitions.analyze(ctx)


def test_fill_puts_many_partitions_in_each_request() -> None:
    ctx = Context(parse_args(["--quick"]), Target("http://h:1", None, None, None, False, {}))
    bodies = partitions.fill_bodies(ctx, "q", 2500, 1000)
    items = [orjson.loads(b)["items"] for b in bodies]
    assert [len(i) for i in items] == [1000, 1000, 500]
    assert [i["partition"] for i in items[2][-2:]] == ["p2498", "p2499"]


def test_mixed_load_end_to_end_counts_every_message() -> None:
    result = _run("x", FakeQueen(), mixed_rates=(200.0,), mixed_step_s=1.0)
    (step,) = result.extra["steps"]
    assert step["pushed"] == 200 and step["received"] == 200
    assert step["lost"] == 0 and step["duplicated"] == 0
    assert result.figures["r200_carried"] > 100 and result.figures["best_rate"] > 0
    assert step["server_cpu_ms_per_msg"] is None  # no server process known at a bare URL


def test_mixed_load_reports_duplicates_instead_of_failing() -> None:
    result = _run("x", FakeQueen(duplicate_every=7), mixed_rates=(200.0,), mixed_step_s=1.0)
    assert result.figures["duplicated"] > 0 and result.figures["best_rate"] == 0.0


def test_long_run_samples_the_servers_memory() -> None:
    async def go() -> RunResult:
        fake = FakeQueen()
        server, url = await fake.serve()
        async with server:
            options = parse_args(["--quick", "--url", url])
            sizes = replace(options.sizes, mixed_long_rate=100.0, mixed_long_s=1.0,
                            mixed_long_edge_s=1.0)  # fmt: skip
            ctx = Context(replace(options, sizes=sizes),
                          Target(url, os.getpid(), None, None, False, {}))  # fmt: skip
            return await SCENARIOS["y"].run(ctx, 0)

    result = asyncio.run(go())
    assert result.figures["lost"] == 0 and result.figures["carried"] > 50
    assert result.figures["pss_first_mb"] > 0 and "pss_growth_mb" in result.figures
    assert result.extra["pss_mb"][0][0] == 0.0


def test_server_counters_per_message_from_the_prometheus_text() -> None:
    from bench import servermetrics

    text = "\n".join([
        "# HELP queen_db_query_duration_seconds x",
        'queen_db_query_duration_seconds_count{query="push_messages"} 10.0',
        'queen_db_query_duration_seconds_sum{query="push_messages"} 0.02',
        'queen_db_query_duration_seconds_bucket{le="0.1",query="push_messages"} 10.0',
        'queen_poll_worker_events_total{event="pops"} 4.0',
        'queen_poll_worker_wakeups_total{source="notify"} 2.0',
        'queen_http_requests_total{code="201",method="POST"} 3.0',
        'queen_http_requests_total{code="201",method="GET"} 1.0',
    ])  # fmt: skip
    before = servermetrics.parse(text)
    assert before["db_calls:push_messages"] == 10 and before["http:201"] == 4
    assert "db_calls:push_messages_bucket" not in before
    after = before.copy()
    after["db_calls:push_messages"] += 20
    after["db_ms:push_messages"] += 0.04
    assert servermetrics.per_message(before, after, 10) == {
        "db_calls:push_messages": 2.0, "db_ms:push_messages": 4.0,
    }  # fmt: skip
    assert servermetrics.per_message(None, after, 10) == {}


def test_mixed_load_measures_another_server_step_by_step_in_the_same_run() -> None:
    async def go() -> tuple[RunResult, FakeQueen, FakeQueen]:
        ours, theirs = FakeQueen(), FakeQueen(duplicate_every=5)
        server, url = await ours.serve()
        other, other_url = await theirs.serve()
        async with server, other:
            options = parse_args(["--quick", "--url", url, "--mixed-other-url", other_url])
            sizes = replace(options.sizes, mixed_rates=(100.0, 200.0), mixed_step_s=1.0)
            ctx = Context(replace(options, sizes=sizes), Target(url, None, None, None, False, {}))
            result = await SCENARIOS["x"].run(ctx, 0)
            assert ctx.target.url == url  # back on the server under test
            return result, ours, theirs

    result, ours, theirs = asyncio.run(go())
    assert ours.requests > 300 and theirs.requests > 300
    assert [s["asked"] for s in result.extra["other_steps"]] == [100.0, 200.0]
    assert result.figures["duplicated"] == 0 and result.figures["other_duplicated"] > 0
    assert result.figures["best_rate"] > 0 and result.figures["other_best_rate"] == 0.0
    sizes = replace(QUICK, mixed_rates=(100.0, 200.0), mixed_other_url="http://other")
    assert set(result.figures) <= {f.key for f in SCENARIOS["x"].figures(sizes)}


def test_the_database_port_of_a_url_or_of_its_socket_form() -> None:
    from bench.server import dsn_port

    assert dsn_port("postgresql://u@h:6543/db") == 6543
    assert dsn_port("postgresql://postgres@/postgres?host=/tmp/x/run&port=40709") == 40709
    assert dsn_port("postgresql://u@h/db") == 5432


def test_mixed_load_counts_pops_and_requests_per_message() -> None:
    result = _run("x", FakeQueen(), mixed_rates=(200.0,), mixed_step_s=1.0)
    (step,) = result.extra["steps"]
    assert step["msgs_per_carrying_pop"] >= step["msgs_per_pop"] > 0
    # every message is one push, plus its share of the pops and of their acks
    assert step["requests_per_msg"] > 1.0
    assert result.figures["r200_per_pop"] == step["msgs_per_pop"]


def test_the_original_server_gets_its_database_by_the_same_route() -> None:
    from bench.original import DEFAULT_RUN, database_dsn, libpq_env

    socket_url = "postgresql://postgres@/postgres?host=/tmp/x/run&port=40709"
    assert libpq_env(socket_url, "orig") == {
        "PG_HOST": "/tmp/x/run", "PG_PORT": "40709", "PG_USER": "postgres",
        "PG_PASSWORD": "postgres", "PG_DB": "orig",
    }  # fmt: skip
    assert libpq_env("postgresql://u:p@h:6543/db", "o")["PG_HOST"] == "h"
    assert database_dsn(socket_url, "orig").startswith("postgresql://postgres@/orig?host=")
    assert parse_args(["--scenarios", "x", "--original"]).original_run == ""
    assert parse_args(["--scenarios", "x"]).original_run is None
    assert DEFAULT_RUN.name == "run" and DEFAULT_RUN.parent.name == "original"


def test_a_baseline_checkout_is_measured_beside_this_one_turn_about() -> None:
    from bench.runner import OWN_BASELINE, sides

    options = parse_args(["--quick", "--baseline", "/somewhere"])
    assert options.baseline == "/somewhere"
    with pytest.raises(SystemExit):
        parse_args(["--url", "http://x", "--baseline", "/somewhere"])
    ctx = Context(options, Target("http://a", None, None, None, True, {}))
    assert sides(ctx, "b", 0) == [("", None)]  # no baseline started: this server only
    ctx.baseline = Target("http://b", None, None, None, True, {})
    assert [side for side, _ in sides(ctx, "b", 0)] == ["", "baseline"]
    assert [side for side, _ in sides(ctx, "b", 1)] == ["baseline", ""]
    assert "x" in OWN_BASELINE and sides(ctx, "x", 1) == [("", None)]  # (x): step by step
    sizes = replace(QUICK, mixed_rates=(100.0,), mixed_baseline=True)
    keys = {f.key for f in SCENARIOS["x"].figures(sizes)}
    assert {"r100_carried", "baseline_r100_carried", "baseline_best_rate"} <= keys
