"""Timers on real PostgreSQL through the in-process application (falcon's test client,
with the runtime's firer running): encrypted queues, full capped queues, a reserved message
id older than a consumer's cursor, deleting a queue, and the fire log's retention."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any

import orjson
import psycopg2

from tests.integration.conftest import AdminApi

KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"


def b64(value: Any) -> str:
    return base64.b64encode(orjson.dumps(value)).decode()


def schedule(admin: AdminApi, queue: str, key: str, payload: Any, delay_ms: int) -> dict[str, Any]:
    op = {"op": "schedule", "queue": queue, "timerKey": key, "payload": b64(payload),
          "delayMs": delay_ms, "txn": f"txn-{queue}-{key}"}  # fmt: skip
    res = admin.post("/timers", {"operations": [op]})
    assert res.status_code == 200, res.text
    return dict(res.json["results"][0])


def pending(admin: AdminApi, queue: str) -> list[tuple[Any, ...]]:
    return admin.sql(
        "SELECT t.timer_key, t.attempts, t.last_error FROM queen.timers t"
        " JOIN queen.queues q ON q.id = t.queue_id WHERE q.name = %s", queue)  # fmt: skip


def eventually(check: Callable[[], Any], timeout_s: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.02)
    return check()


def test_a_timer_of_an_encrypted_queue_is_stored_and_delivered_encrypted(
    make_admin: Callable[..., AdminApi],
) -> None:
    admin = make_admin(QUEEN_ENCRYPTION_KEY=KEY)
    admin.configure("tm-enc", encryptionEnabled=True)
    schedule(admin, "tm-enc", "secret", {"card": "4111"}, 60_000)
    peek = admin.get("/timers/tm-enc/secret").json
    assert peek["encrypted"] is True
    assert b"4111" not in base64.b64decode(peek["payload"])

    schedule(admin, "tm-enc", "secret", {"card": "4111"}, 0)
    assert eventually(lambda: not pending(admin, "tm-enc"))
    [message] = admin.pop("tm-enc")
    assert message["data"] == {"card": "4111"}
    assert admin.sql("SELECT bool_and(is_encrypted) FROM queen.messages") == [(True,)]


def test_a_full_capped_queue_defers_the_fire_until_there_is_room(admin: AdminApi) -> None:
    admin.configure("tm-cap", maxSize=1)
    admin.push("tm-cap", [{"first": True}])
    schedule(admin, "tm-cap", "wait", {"second": True}, 0)
    [(key, attempts, error)] = eventually(lambda: [r for r in pending(admin, "tm-cap") if r[1] > 0])
    assert key == "wait" and attempts >= 1 and "full" in error
    peek = admin.get("/timers/tm-cap/wait").json
    assert peek["attempts"] >= 1 and peek["nextAttemptAt"] > peek["deliverAt"]

    [first] = admin.pop("tm-cap")
    admin.ack(first)
    # The next attempt comes after its backoff (1 s, then 2 s ...): the room is there now.
    assert eventually(lambda: not pending(admin, "tm-cap"), 8.0)
    assert [m["data"] for m in admin.pop("tm-cap")] == [{"second": True}]


def test_a_message_reserved_before_a_cursor_moved_on_is_still_delivered(
    admin: AdminApi,
) -> None:
    """The timer's message id is drawn at schedule time, before the pushed message's; the
    fire must still store it after the consumer's cursor, or the queue would skip it."""
    res = schedule(admin, "tm-order", "old-id", {"timer": True}, 60_000)
    [pushed] = admin.push("tm-order", [{"push": True}])
    assert int(res["messageId"]) < int(pushed["message_id"])
    [message] = admin.pop("tm-order")
    admin.ack(message)
    schedule(admin, "tm-order", "old-id", {"timer": True}, 0)  # same txn: same message id
    assert eventually(lambda: not pending(admin, "tm-order"))
    [fired] = admin.pop("tm-order")
    assert fired["data"] == {"timer": True} and str(fired["id"]) == res["messageId"]


def test_push_maintenance_pauses_the_firer(admin: AdminApi) -> None:
    assert admin.post("/system/maintenance", {"enabled": True}).status_code == 200
    schedule(admin, "tm-maint", "paused", 1, 0)
    time.sleep(1.5)  # more than a firer's sleep (TIMERS_MAX_SLEEP_MS 1 s): nothing fired
    assert pending(admin, "tm-maint") == [("paused", 0, None)]
    assert admin.post("/system/maintenance", {"enabled": False}).status_code == 200
    assert eventually(lambda: not pending(admin, "tm-maint"), 5.0)


def test_a_timer_whose_fire_fails_waits_and_does_not_hold_up_the_others(
    admin: AdminApi,
) -> None:
    """A batch that fails for an unexpected reason (here a constraint the test adds) is
    rolled back; its oldest timer waits with the error, and the timers behind it fire."""
    admin.sql("ALTER TABLE queen.messages ADD CONSTRAINT no_poison"
              " CHECK (payload <> '\"poison\"'::jsonb) NOT VALID")  # fmt: skip
    schedule(admin, "tm-poison", "bad", "poison", -1000)
    schedule(admin, "tm-poison", "good", "fine", 0)
    assert eventually(lambda: [r[0] for r in pending(admin, "tm-poison")] == ["bad"])
    [(_, attempts, error)] = pending(admin, "tm-poison")
    assert attempts >= 1 and "fire failed" in error and "no_poison" in error
    assert [m["data"] for m in admin.pop("tm-poison")] == ["fine"]
    stats = admin.client.simulate_get("/metrics").json["timers"]["firer"]
    assert stats["errors"] >= 1 and "no_poison" in stats["lastError"]


def test_a_timer_held_by_a_firer_that_dies_is_fired_once_by_the_next(
    make_admin: Callable[..., AdminApi], migrated_dsn: str
) -> None:
    """Another transaction holds the due timer's row (as a firer between its claim and its
    commit): the runtime's firer skips it, and fires it soon after that transaction is
    gone without committing (a firer that died). The firer's own sleep is long here, so
    only its look again 20 ms later (retryInMs) can find the timer in time."""
    admin = make_admin(TIMERS_MAX_SLEEP_MS="30000")
    schedule(admin, "tm-held", "k", {"once": True}, 400)
    other = psycopg2.connect(migrated_dsn)
    try:
        with other.cursor() as cur:
            cur.execute("SELECT 1 FROM queen.timers WHERE timer_key = 'k' FOR UPDATE")
        time.sleep(1.0)  # well past its time: skipped while held, so still pending
        assert [r[0] for r in pending(admin, "tm-held")] == ["k"]
        assert admin.pop("tm-held") == []
    finally:
        other.rollback()
        other.close()
    assert eventually(lambda: not pending(admin, "tm-held"), 2.0)
    assert [m["data"] for m in admin.pop("tm-held", batch=10)] == [{"once": True}]


def test_deleting_a_queue_deletes_its_timers(admin: AdminApi) -> None:
    schedule(admin, "tm-gone", "k", 1, 60_000)
    assert admin.delete("/resources/queues/tm-gone").status_code == 200
    assert admin.sql("SELECT count(*) FROM queen.timers") == [(0,)]


def test_the_fire_log_is_pruned_after_its_retention(
    make_runtime: Callable[..., Any], pg_conn: Any
) -> None:
    runtime = make_runtime(TIMERS_FIRED_RETENTION_HOURS="2")
    with pg_conn.cursor() as cur:
        cur.execute(
            "INSERT INTO queen.timer_fires (queue_name, timer_key, partition_name, txn,"
            " message_id, status, attempts, deliver_at, scheduled_at, fired_at)"
            " SELECT 'q', 'k' || n, 'Default', 't' || n, n, 'queued', 1, f, f, f"
            " FROM generate_series(1, 5) n,"
            " LATERAL (SELECT now() - make_interval(hours => CASE WHEN n <= 3 THEN 3 ELSE 1"
            " END)) AS x(f)"
        )  # fmt: skip
    outcome = runtime.timers_retention.run_once(force=True)
    assert outcome.status == "ran" and outcome.result["deleted"] == 3
    with pg_conn.cursor() as cur:
        cur.execute("SELECT array_agg(timer_key ORDER BY timer_key) FROM queen.timer_fires")
        assert cur.fetchone()[0] == ["k4", "k5"]
