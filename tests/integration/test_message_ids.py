"""Message ids have 15 digits (migration 0025), so their string order is their numeric
order: the official 0.15.0 client's streaming runner orders a popped batch by (createdAt in
whole milliseconds, id as a string), and one push's messages share a millisecond."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest

from queen_threads import migrate
from tests.integration.test_sql_queue_core import pop, push, sql

Conn = psycopg2.extensions.connection
FIRST = 10**14


def _connect(dsn: str) -> Conn:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    return conn


@pytest.fixture
def conn(migrated_dsn: str) -> Iterator[Conn]:
    c = _connect(migrated_dsn)
    try:
        yield c
    finally:
        c.close()


def _sdk_order(messages: list[dict[str, Any]]) -> list[str]:
    """The ids in the order the 0.15.0 runner processes them."""
    ordered = sorted(messages, key=lambda m: (m["createdAt"][:23], m["id"]))
    return [m["id"] for m in ordered]


def _next_id(conn: Conn) -> int:
    [(last, called)] = sql(conn, "SELECT last_value, is_called FROM queen.messages_id_seq")
    return int(last) + 1 if called else int(last)


def _migrate_before_0025(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = migrate.schema_files
    with monkeypatch.context() as m:
        m.setattr(migrate, "schema_files", lambda: [f for f in real() if f.version != "0025"])
        migrate.migrate(dsn)


def test_a_fresh_database_gives_15_digit_ids_from_10_to_the_14(conn: Conn) -> None:
    first, second = push(conn, "ids-fresh", [{"n": 0}, {"n": 1}])
    assert (first["message_id"], second["message_id"]) == (str(FIRST), str(FIRST + 1))
    assert len(first["message_id"]) == 15


def test_a_batch_over_an_old_power_of_ten_is_processed_in_delivery_order(conn: Conn) -> None:
    """Ids ...0998 to ...1002 in one push (998..1002 before migration 0025: the SDK took
    them as 1000, 1001, 1002, 998, 999)."""
    sql(conn, "SELECT nextval('queen.messages_id_seq') FROM generate_series(1, 998)")
    pushed = push(conn, "ids-cross", [{"n": n} for n in range(5)])
    assert [r["message_id"] for r in pushed] == [str(FIRST + 998 + n) for n in range(5)]
    res = pop(conn, "ids-cross", batch=10)
    delivered = [m["id"] for m in res["messages"]]
    assert [m["data"] for m in res["messages"]] == [{"n": n} for n in range(5)]
    assert delivered == [r["message_id"] for r in pushed]
    assert len({m["createdAt"][:23] for m in res["messages"]}) == 1  # one millisecond
    assert _sdk_order(res["messages"]) == delivered == sorted(delivered)


def test_migrating_a_database_with_messages_moves_its_ids_forward(
    fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database that stored messages before migration 0025 (ids 1 to 999) goes on from
    10^14: its old messages are delivered first, then the new ones, in push order."""
    _migrate_before_0025(fresh_db, monkeypatch)
    conn = _connect(fresh_db)
    try:
        old = push(conn, "ids-old", [{"n": n} for n in range(3)])
        assert [r["message_id"] for r in old] == ["1", "2", "3"]
        sql(conn, "SELECT nextval('queen.messages_id_seq') FROM generate_series(4, 998)")
        assert _next_id(conn) == 999
        assert migrate.migrate(fresh_db) == ["0025_message_ids_one_length"]
        assert _next_id(conn) == FIRST
        new = push(conn, "ids-old", [{"n": n} for n in range(3, 6)])
        assert [r["message_id"] for r in new] == [str(FIRST + n) for n in range(3)]
        res = pop(conn, "ids-old", batch=10)
        assert [m["data"] for m in res["messages"]] == [{"n": n} for n in range(6)]
        assert migrate.migrate(fresh_db) == []
        assert _next_id(conn) == FIRST + 3
    finally:
        conn.close()


def test_a_sequence_already_past_10_to_the_14_is_left_alone(
    fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The migration never moves the sequence backwards."""
    _migrate_before_0025(fresh_db, monkeypatch)
    conn = _connect(fresh_db)
    try:
        sql(conn, "SELECT setval('queen.messages_id_seq', %s)", FIRST + 41)
        migrate.migrate(fresh_db)
        assert _next_id(conn) == FIRST + 42
        [r] = push(conn, "ids-past", [{"n": 0}])
        assert r["message_id"] == str(FIRST + 42)
    finally:
        conn.close()
