"""Queen's SQL API with real roles (docs/sql.md, "Rights"): a role granted the produce
functions produces (its wake-ups at commit included) but can neither consume nor read a
payload; a consuming role consumes and commits; PUBLIC may call none of them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import psycopg2
import psycopg2.extensions
import pytest

from tests.support.sql_api import Listener, SqlFace

PRODUCE = (
    "queen.produce(jsonb)",
    "queen.produce_one(text, jsonb, text, text, boolean)",
    "queen.produce_full(text, jsonb, text, text, text, text, timestamptz, boolean)",
    "queen.produce_notify(text, jsonb, text, text)",
)
CONSUME = (
    "queen.consume(jsonb)",
    "queen.consume_one(text, text, integer, text, integer, boolean, text)",
    "queen.commit(jsonb)",
    "queen.commit_one(text, uuid, text, text, text, text)",
    "queen.nack(text, uuid, text, text, text)",
    "queen.reject(text, uuid, text, text, text)",
    "queen.renew(jsonb)",
    "queen.renew_one(text, integer)",
    "queen.lag(text, text)",
    "queen.depth(text, text)",
    "queen.has_messages(text, text)",
)


@pytest.fixture
def roles(migrated_dsn: str) -> Iterator[tuple[str, str]]:
    """A producing and a consuming role, granted as docs/sql.md says (roles are the
    cluster's: unique names, dropped afterwards)."""
    tag = uuid.uuid4().hex[:8]
    producer, consumer = f"producer_{tag}", f"consumer_{tag}"
    admin = psycopg2.connect(migrated_dsn)
    admin.autocommit = True
    with admin.cursor() as cur:
        for role, functions in ((producer, PRODUCE), (consumer, CONSUME)):
            cur.execute(f"CREATE ROLE {role} LOGIN")
            cur.execute(f"GRANT USAGE ON SCHEMA queen TO {role}")
            cur.execute(f"GRANT EXECUTE ON FUNCTION {', '.join(functions)} TO {role}")
    yield producer, consumer
    with admin.cursor() as cur:
        for role in (producer, consumer):
            cur.execute(f"DROP OWNED BY {role}")
            cur.execute(f"DROP ROLE {role}")
    admin.close()


def as_role(dsn: str, role: str) -> SqlFace:
    return SqlFace(psycopg2.extensions.make_dsn(dsn, user=role))


def test_a_producing_role_produces_and_wakes_but_cannot_consume_or_read(
    migrated_dsn: str, roles: tuple[str, str]
) -> None:
    producer_role, _ = roles
    q = f"rq-{uuid.uuid4().hex[:6]}"
    admin = SqlFace(migrated_dsn, autocommit=True)
    admin.one("SELECT queen.wake_interest_v1(%s::jsonb)", json.dumps(
        {"origin": "elsewhere", "ttlMs": 60_000, "selectors": [{"queue": q}]}))  # fmt: skip
    listener = Listener(migrated_dsn)
    producer = as_role(migrated_dsn, producer_role)
    try:
        mid = producer.produce_one(q, {"secret": 1}, "P")
        producer.call("produce", [{"queue": q, "payload": 2}])
        producer.commit()  # the commit-time wake-ups run as their owner
        assert {e["partition"] for e in listener.events()} == {"P", "Default"}
        denied = [
            ("SELECT * FROM queen.consume_one(%s)", (q,)),
            ("SELECT queen.consume(%s::jsonb)", (json.dumps([{"queueName": q}]),)),
            ("SELECT queen.commit_one('t', gen_random_uuid(), 'l')", ()),
            ("SELECT payload FROM queen.messages", ()),
            ("SELECT queen.pop_unified_batch(%s::jsonb)", (json.dumps([{"queue": q}]),)),
            ("SELECT queen._sql_pop(%s::jsonb)", (json.dumps({"queue": q}),)),
            ("SELECT queen.lag(%s)", (q,)),
        ]
        for sql, args in denied:
            with pytest.raises(psycopg2.errors.InsufficientPrivilege):
                producer.one(sql, *args)
            producer.rollback()
        assert admin.one("SELECT count(*) FROM queen.messages WHERE id = %s", mid) == 1
    finally:
        producer.close()
        listener.close()
        admin.close()


def test_a_consuming_role_consumes_and_commits_but_cannot_produce(
    migrated_dsn: str, roles: tuple[str, str]
) -> None:
    _, consumer_role = roles
    q = f"rq-{uuid.uuid4().hex[:6]}"
    admin = SqlFace(migrated_dsn, autocommit=True)
    admin.produce_one(q, "work")
    consumer = as_role(migrated_dsn, consumer_role)
    try:
        [row] = consumer.consume_one(q)
        assert row["payload"] == "work" and consumer.commit_one(row)
        assert consumer.one("SELECT queen.lag(%s)", q) == 0
        consumer.commit()
        with pytest.raises(psycopg2.errors.InsufficientPrivilege):
            consumer.produce_one(q, "nope")
        consumer.rollback()
    finally:
        consumer.close()
        admin.close()


def test_public_may_call_no_function_that_reads_or_writes_the_queue(migrated_dsn: str) -> None:
    """Every SECURITY DEFINER function of schema queen pins its search_path and is not
    PUBLIC's; the pure helpers (channel_name, notify, uuid v7) are."""
    admin = SqlFace(migrated_dsn, autocommit=True)
    rows = admin.rows(
        "SELECT p.proname, p.proconfig, has_function_privilege('public', p.oid, 'EXECUTE')"
        " FROM pg_proc p WHERE p.pronamespace = 'queen'::regnamespace AND p.prosecdef"
    )
    admin.close()
    names = {name for name, _, _ in rows}
    assert {f.split("(")[0].removeprefix("queen.") for f in PRODUCE + CONSUME} <= names
    for name, config, public in rows:
        assert any(c.startswith("search_path=") for c in config or ()), name
        assert public is False, name
