"""scripts/bench in-run ceilings: which are measured, which figure each bounds, the table."""

from __future__ import annotations

import pytest

from bench import ceiling_map
from bench.ceiling_map import CeilingResult, ceiling_key, combined_key, percent_of, planned
from bench.options import FULL, SCENARIOS
from bench.report import ceilings_table
from bench.scenarios import SCENARIOS as BY_LETTER


@pytest.mark.parametrize(
    ("letter", "figure", "key"),
    [("a", "clients_1", "insert_batch_1c"), ("a", "clients_4", "insert_batch_4c"),
     ("b", "connections_16", "http_16c"), ("b", "connections_64", "http_64c"),
     ("c", "msg_per_s", "skip_locked"), ("f", "deliveries_per_s", "skip_locked"),
     ("d", "p50", None), ("g", "p99_ms", None), ("e", "server_cpu", None),
     ("i", "on_16", None)],
)  # fmt: skip
def test_figure_to_ceiling(letter: str, figure: str, key: str | None) -> None:
    assert ceiling_key(letter, figure) == key


@pytest.mark.parametrize(
    ("letter", "figure", "key"),
    [("a", "clients_1", "http_db_batch_1c"), ("a", "clients_4", "http_db_batch_4c"),
     ("b", "connections_16", "http_db_16c"), ("b", "connections_64", "http_db_64c"),
     ("c", "msg_per_s", None), ("g", "p99_ms", None)],
)  # fmt: skip
def test_figure_to_combined_ceiling(letter: str, figure: str, key: str | None) -> None:
    assert combined_key(letter, figure) == key


def test_every_bounded_figure_has_its_ceiling_planned() -> None:
    for letter in SCENARIOS:
        keys = {c.key for c in planned([letter], FULL, 2)}
        for f in BY_LETTER[letter].figures(FULL):
            for key in (ceiling_key(letter, f.key), combined_key(letter, f.key)):
                assert key is None or key in keys, (letter, f.key)


def test_plan_follows_the_selection_http_first() -> None:
    assert planned(["d", "e", "g", "h"], FULL, 2) == []
    keys = [c.key for c in planned(["f", "b", "a", "c"], FULL, 2)]
    assert keys == ["http_batch_1c", "http_batch_4c", "http_16c", "http_64c", "insert_batch_1c",
                    "insert_batch_4c", "insert_single_16c", "skip_locked", "http_db_batch_1c",
                    "http_db_batch_4c", "http_db_16c", "http_db_64c"]  # fmt: skip
    (single,) = [c for c in planned(["b"], FULL, 3) if c.key == "http_16c"]
    assert single.kind == ceiling_map.HTTP_SINGLE and single.connections == 16
    assert "gunicorn 3 workers" in single.label and single.unit == "req/s"


def test_percent_of() -> None:
    assert percent_of(1500.0, 6000.0) == 25.0
    assert percent_of(1500.0, None) is None
    assert percent_of(1500.0, 0.0) is None


def test_ceilings_table() -> None:
    ok = CeilingResult(ceiling_map.insert_batch(4, 1000), 65_432.1)
    bad = CeilingResult(ceiling_map.skip_locked(100), None, "RuntimeError: no database URL")
    lines = ceilings_table([ok, bad]).splitlines()
    assert lines[0] == "| ceiling | what | measured | unit | bounds |"
    assert lines[2].startswith("| insert_batch_4c | psycopg2 INSERT ... SELECT FROM jsonb_array")
    assert lines[2].endswith("| 65,432 | msg/s | (a) 4 clients |")
    assert lines[3].endswith(
        "| FAILED | msg/s | (c), (f), (p) backlog (RuntimeError: no database URL) |"
    )


def test_result_as_dict_for_the_json() -> None:
    r = CeilingResult(ceiling_map.http_single(64, 2), 2500.0, extra={"requests": 25_000})
    d = r.as_dict()
    assert d["value"] == 2500.0 and d["unit"] == "req/s" and d["bounds"] == "(b) 64 connections"
    assert d["requests"] == 25_000 and d["error"] is None


def test_the_bare_app_answers_what_check_pushed_accepts() -> None:
    import orjson
    from falcon import testing

    from bench.bare_app import app
    from bench.common import check_pushed
    from bench.httpclient import Response

    items = [{"queue": "q", "partition": "Default", "payload": {"seq": i}, "transactionId": f"t{i}"}
             for i in range(3)]  # fmt: skip
    got = testing.TestClient(app).simulate_post("/api/v1/push", body=orjson.dumps({"items": items}))
    check_pushed(Response(got.status_code, {}, got.content), 3)
    assert [r["transactionId"] for r in got.json] == ["t0", "t1", "t2"]
    assert got.json[0]["index"] == 0 and got.json[0]["queueName"] == "q"


def test_outcome_rows_carry_the_ceiling_and_the_json_its_fraction() -> None:
    from types import SimpleNamespace
    from typing import Any

    from bench.common import RunResult
    from bench.runner import ScenarioOutcome, rows

    ctx: Any = SimpleNamespace(
        sizes=FULL, ceilings={"http_16c": CeilingResult(ceiling_map.http_single(16, 2), 4000.0)}
    )
    outcome = ScenarioOutcome("b", "single-message push", [RunResult({"connections_16": 1000.0})])
    by_figure = {r.figure: r for r in rows(ctx, [outcome])}
    assert by_figure["1 msg/request, 16 connections"].ceiling == 4000.0
    assert by_figure["1 msg/request, 64 connections"].ceiling is None  # not measured
    figures = outcome.as_dict(ctx)["figures"]
    assert figures["connections_16"]["pct_of_ceiling"] == 25.0
    assert figures["connections_64"]["ceiling"] == "http_64c"
    assert figures["connections_64"]["ceiling_value"] is None
