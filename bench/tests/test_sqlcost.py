"""scripts/bench (q) SQL cost per call: registration and options, the figures it names, and
one small run end to end on a real PostgreSQL of its own (the system's PostgreSQL 15 with
pg_stat_statements when it is there, else the embedded one), this checkout on both sides."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.options import FULL, QUICK, parse_args
from bench.scenarios import SCENARIOS
from bench.sqlcost import figure_key, run_sizes, sqlcost_figures
from bench.sqlcost_calls import KINDS, backend_cpu_ns
from bench.sqlcost_db import Databases, autocommit, migrate_with, named_statements
from queen_threads.paths import ROOT


def test_the_scenario_is_registered_on_request_only_with_its_options() -> None:
    assert SCENARIOS["q"].run.__name__ == "sql_cost"
    assert "q" not in parse_args([]).scenarios
    o = parse_args(["--scenarios", "q", "--sqlcost-baseline", "/tmp/base", "--sqlcost-calls",
                    "50", "--sqlcost-partitions", "20000"])  # fmt: skip
    assert o.scenarios == ("q",) and o.sizes.sqlcost_baseline == "/tmp/base"
    assert (o.sizes.sqlcost_calls, o.sizes.sqlcost_partitions) == (50, 20_000)
    assert FULL.sqlcost_partitions == 10_000 and QUICK.sqlcost_calls < FULL.sqlcost_calls
    with pytest.raises(SystemExit):
        parse_args(["--sqlcost-calls", "0"])


def test_figures_per_size_kind_and_metric_and_the_baselines_beside_them() -> None:
    keys = [f.key for f in sqlcost_figures(FULL)]
    assert len(keys) == 2 * len(KINDS) * 3
    assert {"small_push_partition_cpu", "large_ack_partition_stmts", "small_pop_batch_wall"} <= set(
        keys
    )
    with_base = [f.key for f in sqlcost_figures(replace(FULL, sqlcost_baseline="/x"))]
    assert len(with_base) == 2 * len(keys)
    assert figure_key("base", "large", "pop_batch", "cpu") in with_base
    labels = [f.label for f in sqlcost_figures(replace(FULL, sqlcost_baseline="/x"))]
    assert sum(label.startswith("before: ") for label in labels) == len(keys)


def test_the_named_statements_of_a_checkout_are_the_servers() -> None:
    statements = named_statements(ROOT)
    for name in ("push_partition", "push_messages", "pop_batch", "pop_partition",
                 "ack_partition", "ack_messages"):  # fmt: skip
        assert name in statements and "%s" in statements[name]


def test_a_small_run_end_to_end_on_both_sides() -> None:
    sizes = replace(QUICK, sqlcost_calls=24, sqlcost_count_calls=2, sqlcost_partitions=50,
                    sqlcost_rounds=2, sqlcost_baseline=str(ROOT))  # fmt: skip
    dbs = Databases().start()
    try:
        sides = [dbs.side("new", None), dbs.side("base", ROOT)]
        said: list[str] = []
        figures, extra = run_sizes(sizes, dbs, sides, 0, said.append)
        # another checkout's migrate, in a process of its own (here: this one's)
        other = dbs.side("other", None)
        migrate_with(ROOT, other.dsn)
        conn = autocommit(other.dsn)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM queen.schema_migrations")
                row = cur.fetchone()
                assert row is not None and row[0] > 20
                cur.execute("SELECT pg_backend_pid()")
                pid = cur.fetchone()
                assert pid is not None and backend_cpu_ns(int(pid[0])) > 0
        finally:
            conn.close()
    finally:
        dbs.stop()
    assert len(said) == 4  # two sizes x two sides
    for side in ("new", "base"):
        for size in ("small", "large"):
            for kind in KINDS:
                assert figures[figure_key(side, size, kind, "cpu")] > 0
                assert figures[figure_key(side, size, kind, "wall")] > 0
                if dbs.counting:
                    assert figures[figure_key(side, size, kind, "stmts")] >= 1
    if dbs.counting:
        # the one-item push of a known partition runs fewer statements than the general one
        assert figures["small_push_partition_stmts"] < figures["small_push_messages_stmts"]
        texts = extra["statements"]["new/small/push_partition"]
        assert any("push_partition" in str(t[1]) for t in texts)
    else:
        assert extra["not_counted_because"]
