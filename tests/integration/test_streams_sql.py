"""The stream stored functions (schema/functions/97_streams.sql) against a real PostgreSQL.

Every call is `SELECT queen.stream_*_v1(%s::jsonb)::text` on an autocommit connection, as
the server makes it. Messages are inserted with explicit created_at values (event time) a
couple of hours in the past, relative to a base aligned to a whole minute, so every window
boundary and watermark is exact; the partition_lookup trigger keeps the watermark.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest

from queen_threads.background.exclusive import Session, session
from queen_threads.background.retention import cleanup_messages
from queen_threads.db import Database
from queen_threads.streams.body import define_body

Conn = psycopg2.extensions.connection
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
G = "__GLOBAL__"


# --------------------------------------------------------------------------- helpers


def call(conn: Conn, fn: str, payload: Any) -> Any:
    with conn.cursor() as cur:
        cur.execute(f"SELECT queen.{fn}(%s::jsonb)::text", (json.dumps(payload),))
        row = cur.fetchone()
        assert row is not None
        return None if row[0] is None else json.loads(row[0])


def sql(conn: Conn, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(query, args)
        return cur.fetchall() if cur.description else []


def now_ms() -> int:
    return int(time.time() * 1000)


def base() -> int:
    """A whole minute two hours ago (epoch ms): windows of D | 60000 ms start on it."""
    return (now_ms() // 60_000) * 60_000 - 2 * 3_600_000


def ts(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


def ms_of(iso: str) -> int:
    delta = datetime.fromisoformat(iso) - EPOCH
    assert delta % timedelta(milliseconds=1) == timedelta(0), iso
    return delta // timedelta(milliseconds=1)


def queue(conn: Conn, name: str, *partitions: str) -> dict[str, str]:
    """Create a queue with its partitions (no message); partition name -> id."""
    res = call(conn, "configure_queue_v1", {"queue": name, "options": {}})
    assert res["configured"] is True
    ids = {}
    for p in partitions or ("Default",):
        [(pid,)] = sql(
            conn,
            """INSERT INTO queen.partitions (queue_id, name)
               SELECT id, %s FROM queen.queues WHERE name = %s
               ON CONFLICT (queue_id, name) DO UPDATE SET name = EXCLUDED.name
               RETURNING id::text""",
            p,
            name,
        )
        ids[p] = pid
    if partitions and "Default" not in partitions:  # configure made one: not a key here
        sql(conn, "DELETE FROM queen.partitions WHERE name = 'Default' AND queue_id = "
            "(SELECT id FROM queen.queues WHERE name = %s)", name)  # fmt: skip
    return ids


def put(conn: Conn, q: str, at: int, data: Any = None, partition: str = "Default") -> int:
    """Insert one message created at epoch ms `at`; its id."""
    [(mid,)] = sql(
        conn,
        """INSERT INTO queen.messages (transaction_id, partition_id, payload, created_at)
           SELECT %s, p.id, %s::jsonb, %s FROM queen.partitions p
             JOIN queen.queues qq ON qq.id = p.queue_id
            WHERE qq.name = %s AND p.name = %s
           RETURNING id""",
        str(uuid.uuid4()),
        json.dumps(data),
        ts(at),
        q,
        partition,
    )
    return int(mid)


def define(conn: Conn, name: str, sources: list[str], **opts: Any) -> dict[str, Any]:
    body = {"name": name, "source_queue_names": sources, "window_grace_period_ms": 0, **opts}
    return dict(call(conn, "stream_define_v1", define_body(body)))


def poll(conn: Conn, stream: str, group: str = "g") -> dict[str, Any]:
    """One stream poll; its result ({idx, window?, wakeInMs?, notFound?})."""
    req = {"idx": 0, "stream": stream, "consumerGroup": group, "leaseId": str(uuid.uuid4())}
    [res] = call(conn, "stream_poll_v1", {"requests": [req], "stopOnEmpty": True})
    assert res["idx"] == 0
    return dict(res)


def window(conn: Conn, stream: str, group: str = "g") -> dict[str, Any] | None:
    w = poll(conn, stream, group).get("window")
    return dict(w) if w else None


def got(conn: Conn, stream: str, group: str = "g") -> dict[str, Any]:
    w = window(conn, stream, group)
    assert w is not None, "expected a ready window"
    return w


def ack(conn: Conn, lease: str, success: bool = True) -> dict[str, Any]:
    return dict(call(conn, "stream_ack_v1", {"leaseId": lease, "success": success}))


def seek(conn: Conn, stream: str, at: int, group: str = "g") -> dict[str, Any] | None:
    body = {"stream": stream, "consumerGroup": group, "timestamp": ts(at).isoformat()}
    return call(conn, "stream_seek_v1", body)


def span(w: dict[str, Any], b: int) -> tuple[int, int]:
    """A window's [start, end) relative to the base."""
    return ms_of(w["start"]) - b, ms_of(w["end"]) - b


def datas(w: dict[str, Any]) -> list[Any]:
    return [m["data"] for m in w["messages"]]


def counts(conn: Conn) -> dict[str, int]:
    tables = ("streams", "stream_sources", "stream_consumer_offsets", "stream_leases")
    return {t: sql(conn, f"SELECT count(*) FROM queen.{t}")[0][0] for t in tables}


# --------------------------------------------------------------------------- time windows


def test_tumbling_windows_have_inclusive_starts_exclusive_ends_and_skip_empty_ones(
    pg_conn: Conn,
) -> None:
    b = base()
    queue(pg_conn, "tq")
    for at in (0, 999, 1000, 4200, 9000):
        put(pg_conn, "tq", b + at, at)
    define(pg_conn, "ts", ["tq"], window_duration_ms=1000)

    w = got(pg_conn, "ts")
    assert span(w, b) == (0, 1000) and datas(w) == [0, 999]
    assert w["key"] == G and w["deliveryCount"] == 1 and w["consumerGroup"] == "g"
    assert w["stream"] == "ts" and w["messages"][0]["queue"] == "tq"
    assert w["messages"][0]["partition"] == "Default"
    done = ack(pg_conn, w["leaseId"])
    assert done["success"] is True and done["messages"] == 2 and done["windowId"] == w["id"]

    w = got(pg_conn, "ts")
    assert span(w, b) == (1000, 2000) and datas(w) == [1000]  # exactly at end: the next
    ack(pg_conn, w["leaseId"])
    w = got(pg_conn, "ts")
    assert span(w, b) == (4000, 5000) and datas(w) == [4200]  # [2000, 4000) empty: skipped
    ack(pg_conn, w["leaseId"])
    # [9000, 10000) holds the newest message: the watermark (9000) has not reached its end.
    res = poll(pg_conn, "ts")
    assert "window" not in res and res["wakeInMs"] == 0  # event time is past: any push
    [(cursor, acked, msgs)] = sql(
        pg_conn,
        "SELECT cursor_at, windows_acked, messages_acked FROM queen.stream_consumer_offsets",
    )
    assert cursor == ts(b + 5000) and acked == 3 and msgs == 4
    put(pg_conn, "tq", b + 10_000, "late")
    w = got(pg_conn, "ts")
    assert span(w, b) == (9000, 10_000) and datas(w) == [9000]


def test_grace_holds_a_window_until_the_watermark_reaches_end_plus_grace(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "gq")
    put(pg_conn, "gq", b + 100, "a")
    define(pg_conn, "gs", ["gq"], window_duration_ms=1000, window_grace_period_ms=500)
    put(pg_conn, "gq", b + 1000, "b")
    assert window(pg_conn, "gs") is None
    put(pg_conn, "gq", b + 1499, "c")  # end + grace - 1 ms
    assert window(pg_conn, "gs") is None
    put(pg_conn, "gq", b + 1500, "d")  # end + grace
    w = got(pg_conn, "gs")
    assert span(w, b) == (0, 1000) and datas(w) == ["a"]


def test_wake_hint_is_the_time_until_end_plus_grace(pg_conn: Conn) -> None:
    queue(pg_conn, "wq")
    at = now_ms()
    put(pg_conn, "wq", at, "now")
    define(pg_conn, "ws", ["wq"], window_duration_ms=60_000, window_grace_period_ms=30_000)
    ready = (at // 60_000 + 1) * 60_000 + 30_000
    before = now_ms()
    res = poll(pg_conn, "ws")
    after = now_ms()
    assert "window" not in res
    assert ready - after - 1 <= res["wakeInMs"] <= ready - before + 1
    assert 30_000 - 1000 <= res["wakeInMs"] <= 90_000


def test_sliding_windows_overlap_and_acks_advance_by_the_slide(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "sq")
    put(pg_conn, "sq", b + 2500, 2500)
    put(pg_conn, "sq", b + 3500, 3500)
    put(pg_conn, "sq", b + 20_000, "mark")
    made = define(pg_conn, "ss", ["sq"], window_type="sliding", window_duration_ms=3000,
                  window_slide_ms=1000)  # fmt: skip
    assert made["stream"]["window_slide_ms"] == 1000
    seen = []
    while (w := window(pg_conn, "ss")) is not None:
        seen.append((span(w, b), datas(w)))
        ack(pg_conn, w["leaseId"])
    # 2500 is in D/S = 3 windows, and so is 3500; the offset moves one slide per ack.
    assert seen == [
        ((0, 3000), [2500]),
        ((1000, 4000), [2500, 3500]),
        ((2000, 5000), [2500, 3500]),
        ((3000, 6000), [3500]),
    ]
    [(cursor,)] = sql(pg_conn, "SELECT cursor_at FROM queen.stream_consumer_offsets")
    assert cursor == ts(b + 4000)
    res = poll(pg_conn, "ss")  # [18000, 21000) holds 20000, watermark 20000 < 21000
    assert "window" not in res and "wakeInMs" in res


# --------------------------------------------------------------------------- count windows


def test_count_windows_take_exactly_n_in_created_at_id_order(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "cq", "p1", "p2")
    same = b + 1000
    ids = [
        put(pg_conn, "cq", same, "s1", "p1"),
        put(pg_conn, "cq", same, "s2", "p2"),
        put(pg_conn, "cq", same, "s3", "p1"),
        put(pg_conn, "cq", same, "s4", "p2"),
        put(pg_conn, "cq", same, "s5", "p1"),
    ]
    put(pg_conn, "cq", b + 500, "early", "p2")  # older although inserted last
    define(pg_conn, "cs", ["cq"], window_type="count", window_size_count=3)

    w = got(pg_conn, "cs")
    assert datas(w) == ["early", "s1", "s2"]
    assert ms_of(w["start"]) == b + 500 and ms_of(w["end"]) == same
    assert ack(pg_conn, w["leaseId"])["messages"] == 3
    w = got(pg_conn, "cs")
    assert datas(w) == ["s3", "s4", "s5"]  # the same created_at split by id
    assert [int(m["id"]) for m in w["messages"]] == ids[2:]
    ack(pg_conn, w["leaseId"])
    [(cursor_at, cursor_id)] = sql(
        pg_conn, "SELECT cursor_at, cursor_id FROM queen.stream_consumer_offsets"
    )
    assert (cursor_at, cursor_id) == (ts(same), ids[4])

    put(pg_conn, "cq", b + 2000, "n1", "p1")
    put(pg_conn, "cq", b + 2000, "n2", "p2")
    res = poll(pg_conn, "cs")  # N - 1: not ready, and any push may complete it
    assert "window" not in res and "wakeInMs" not in res
    put(pg_conn, "cq", b + 1000, "n3-same-as-before", "p2")  # after the offset by id
    w = got(pg_conn, "cs")
    assert datas(w) == ["n3-same-as-before", "n1", "n2"]
    ack(pg_conn, w["leaseId"])
    assert window(pg_conn, "cs") is None


# --------------------------------------------------------------------------- keys and leases


def test_partitioned_keys_go_to_two_consumers_at_once(pg_conn: Conn) -> None:
    b = base()
    pids = queue(pg_conn, "pq", "p1", "p2")
    put(pg_conn, "pq", b + 100, "one", "p1")
    put(pg_conn, "pq", b + 1100, "one-next", "p1")
    put(pg_conn, "pq", b + 200, "two", "p2")
    put(pg_conn, "pq", b + 5000, "mark", "p1")  # the queue's watermark serves both keys
    define(pg_conn, "ps", ["pq"], partitioned=True, window_duration_ms=1000)

    first = got(pg_conn, "ps")
    second = got(pg_conn, "ps")
    assert {first["key"], second["key"]} == set(pids.values())
    by_key = {w["key"]: datas(w) for w in (first, second)}
    assert by_key == {pids["p1"]: ["one"], pids["p2"]: ["two"]}
    third = poll(pg_conn, "ps")  # both keys are out: nothing until an ack or an expiry
    assert "window" not in third and 55_000 < third["wakeInMs"] <= 60_000
    p1 = first if first["key"] == pids["p1"] else second
    ack(pg_conn, p1["leaseId"])
    w = got(pg_conn, "ps")  # p1's next window while p2's is still out
    assert w["key"] == pids["p1"] and span(w, b) == (1000, 2000) and datas(w) == ["one-next"]


def test_non_partitioned_stream_has_one_window_out_at_a_time(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "nq", "p1", "p2")
    put(pg_conn, "nq", b + 100, "a", "p1")
    put(pg_conn, "nq", b + 1100, "b", "p2")
    put(pg_conn, "nq", b + 5000, "mark", "p1")
    define(pg_conn, "ns", ["nq"], window_duration_ms=1000)
    w = got(pg_conn, "ns")
    assert span(w, b) == (0, 1000)
    assert window(pg_conn, "ns") is None  # the second consumer gets nothing
    ack(pg_conn, w["leaseId"])
    w = got(pg_conn, "ns")
    assert span(w, b) == (1000, 2000) and datas(w) == ["b"]


def test_global_watermark_is_the_oldest_of_the_sources_newest(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "qa")
    queue(pg_conn, "qb")
    put(pg_conn, "qa", b + 100, "a")
    put(pg_conn, "qa", b + 5000, "a-mark")
    queue(pg_conn, "qc")
    define(pg_conn, "gw", ["qa", "qb"], window_duration_ms=1000)
    define(pg_conn, "gw-empty", ["qa", "qc"], window_duration_ms=1000)
    # A source without messages holds nothing back: its next message is stamped later
    # than any closed window.
    assert datas(got(pg_conn, "gw-empty")) == ["a"]
    put(pg_conn, "qb", b + 500, "b")
    assert window(pg_conn, "gw") is None  # min(5000, 500) < 1000
    put(pg_conn, "qb", b + 1000, "b-mark")
    w = got(pg_conn, "gw")
    assert span(w, b) == (0, 1000) and datas(w) == ["a", "b"]
    assert [m["queue"] for m in w["messages"]] == ["qa", "qb"]


def test_seek_moves_forward_and_back_and_ends_the_leases(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "kq")
    for at in (100, 1100, 2100, 3100, 9000):
        put(pg_conn, "kq", b + at, at)
    define(pg_conn, "ks", ["kq"], window_duration_ms=1000)
    w = got(pg_conn, "ks")
    assert span(w, b) == (0, 1000)

    res = seek(pg_conn, "ks", b + 2000)
    assert res["stream"] == "ks" and res["keys"] == 2  # the partition's key and __GLOBAL__
    assert ack(pg_conn, w["leaseId"]) == {"error": "invalid_lease"}
    w = got(pg_conn, "ks")
    assert span(w, b) == (2000, 3000) and datas(w) == [2100]  # forward: skipped [1000, 2000)
    ack(pg_conn, w["leaseId"])

    seek(pg_conn, "ks", b + 500)
    w = got(pg_conn, "ks")
    assert span(w, b) == (1000, 2000) and datas(w) == [1100]  # back, aligned up
    assert seek(pg_conn, "nope", b) is None


def test_seek_on_count_windows_starts_at_the_first_message_at_or_after(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "kc")
    for at in (100, 200, 300, 400):
        put(pg_conn, "kc", b + at, at)
    define(pg_conn, "kcs", ["kc"], window_type="count", window_size_count=2)
    seek(pg_conn, "kcs", b + 200)
    assert datas(got(pg_conn, "kcs")) == [200, 300]


def test_expired_lease_gives_the_same_window_again_with_a_new_lease(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "eq")
    put(pg_conn, "eq", b + 100, "a")
    put(pg_conn, "eq", b + 1100, "b")
    put(pg_conn, "eq", b + 5000, "mark")
    define(pg_conn, "es", ["eq"], window_duration_ms=1000, window_lease_timeout_ms=1000)
    first = got(pg_conn, "es")
    sql(pg_conn, "UPDATE queen.stream_leases SET lease_expires_at = now() - interval '1 s'")
    assert ack(pg_conn, first["leaseId"]) == {"error": "invalid_lease", "expired": True}
    assert call(pg_conn, "stream_renew_v1", {"leaseId": first["leaseId"], "extendMs": 5000}) is None

    again = got(pg_conn, "es")
    assert again["id"] == first["id"] and again["deliveryCount"] == 2
    assert again["leaseId"] != first["leaseId"] and datas(again) == ["a"]
    assert ack(pg_conn, first["leaseId"]) == {"error": "invalid_lease"}
    assert ack(pg_conn, again["leaseId"])["acknowledged"] is True
    w = got(pg_conn, "es")
    assert span(w, b) == (1000, 2000) and datas(w) == ["b"]
    assert w["deliveryCount"] == 1 and w["id"] != first["id"]


def test_a_short_lease_expires_by_itself(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "xq")
    put(pg_conn, "xq", b + 100, "a")
    put(pg_conn, "xq", b + 5000, "mark")
    define(pg_conn, "xs", ["xq"], window_duration_ms=1000, window_lease_timeout_ms=1000)
    first = got(pg_conn, "xs")
    deadline = time.monotonic() + 10
    again = None
    while again is None and time.monotonic() < deadline:
        res = poll(pg_conn, "xs")
        again = res.get("window")
        if again is None:
            assert 0 <= res["wakeInMs"] <= 1000
            time.sleep(res["wakeInMs"] / 1000 + 0.01)  # the server's own hint
    assert again is not None and again["id"] == first["id"] and again["deliveryCount"] == 2


def test_nack_gives_the_same_window_back_at_once(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "aq")
    put(pg_conn, "aq", b + 100, "a")
    put(pg_conn, "aq", b + 5000, "mark")
    define(pg_conn, "as", ["aq"], window_duration_ms=1000)
    first = got(pg_conn, "as")
    res = ack(pg_conn, first["leaseId"], success=False)
    assert res["acknowledged"] is True and res["success"] is False
    again = got(pg_conn, "as")
    assert span(again, b) == (0, 1000) and datas(again) == ["a"]
    assert again["id"] == first["id"] and again["deliveryCount"] == 2
    assert again["leaseId"] != first["leaseId"]
    assert ack(pg_conn, first["leaseId"]).get("error") == "invalid_lease"
    assert call(pg_conn, "stream_renew_v1", {"leaseId": first["leaseId"], "extendMs": 1000}) is None
    [(acked,)] = sql(pg_conn, "SELECT windows_acked FROM queen.stream_consumer_offsets")
    assert acked == 0
    assert ack(pg_conn, again["leaseId"])["success"] is True
    assert window(pg_conn, "as") is None  # [5000, 6000) is not ready yet


def test_renew_extends_a_live_lease_only(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "rq")
    put(pg_conn, "rq", b + 100, "a")
    put(pg_conn, "rq", b + 5000, "mark")
    define(pg_conn, "rs", ["rq"], window_duration_ms=1000, window_lease_timeout_ms=1000)
    w = got(pg_conn, "rs")
    before = now_ms()
    res = call(pg_conn, "stream_renew_v1", {"leaseId": w["leaseId"], "extendMs": 600_000})
    after = now_ms()
    assert res["leaseId"] == w["leaseId"] and res["windowId"] == w["id"]
    assert before + 600_000 - 1 <= ms_of_us(res["leaseExpiresAt"]) <= after + 600_000 + 1
    [(expires,)] = sql(pg_conn, "SELECT lease_expires_at FROM queen.stream_leases")
    assert expires > datetime.now(UTC) + timedelta(seconds=590)
    unknown = {"leaseId": str(uuid.uuid4()), "extendMs": 1000}
    assert call(pg_conn, "stream_renew_v1", unknown) is None
    sql(pg_conn, "UPDATE queen.stream_leases SET lease_expires_at = now() - interval '1 s'")
    assert call(pg_conn, "stream_renew_v1", {"leaseId": w["leaseId"], "extendMs": 1000}) is None


def test_a_lease_id_carries_its_stream(pg_conn: Conn) -> None:
    """The stream's offsets and leases are keyed by the stream first (on Citus distributed
    by it): a lease id starts with its stream id's first 8 bytes, and an ack, renewal or
    release finds the stream by them."""
    b = base()
    queue(pg_conn, "cq")
    put(pg_conn, "cq", b + 100, "a")
    put(pg_conn, "cq", b + 5000, "mark")
    one = define(pg_conn, "cs1", ["cq"], window_duration_ms=1000)["stream"]["id"]
    other = define(pg_conn, "cs2", ["cq"], window_duration_ms=1000)["stream"]["id"]
    proposed = str(uuid.uuid4())
    req = {"idx": 0, "stream": "cs1", "consumerGroup": "g", "leaseId": proposed}
    [res] = call(pg_conn, "stream_poll_v1", {"requests": [req], "stopOnEmpty": True})
    lease = res["window"]["leaseId"]
    assert lease == one[:19] + proposed[19:]
    assert uuid.UUID(lease).version == 4
    elsewhere = other[:19] + proposed[19:]  # the same random part under another stream
    assert ack(pg_conn, elsewhere).get("error") == "invalid_lease"
    assert call(pg_conn, "stream_renew_v1", {"leaseId": elsewhere, "extendMs": 1000}) is None
    assert call(pg_conn, "stream_release_v1", {"leaseIds": [elsewhere, proposed]}) == 0
    assert ack(pg_conn, lease)["success"] is True


def test_a_lease_handed_out_before_its_id_carried_its_stream_is_still_acked(
    pg_conn: Conn,
) -> None:
    """A lease whose id does not start with its stream's (handed out before migration 0023)
    is found among the leases: it can still be renewed and acked."""
    b = base()
    queue(pg_conn, "oq")
    put(pg_conn, "oq", b + 100, "a")
    put(pg_conn, "oq", b + 5000, "mark")
    define(pg_conn, "os1", ["oq"], window_duration_ms=1000)
    req = {"idx": 0, "stream": "os1", "consumerGroup": "g", "leaseId": str(uuid.uuid4())}
    [res] = call(pg_conn, "stream_poll_v1", {"requests": [req], "stopOnEmpty": True})
    old = str(uuid.uuid4())
    with pg_conn.cursor() as cur:
        cur.execute(
            "UPDATE queen.stream_leases SET lease_id = %s WHERE lease_id = %s",
            (old, res["window"]["leaseId"]),
        )
    assert call(pg_conn, "stream_renew_v1", {"leaseId": old, "extendMs": 1000}) is not None
    assert ack(pg_conn, old)["success"] is True
    assert ack(pg_conn, str(uuid.uuid4())).get("error") == "invalid_lease"


def ms_of_us(iso: str) -> float:
    return (datetime.fromisoformat(iso) - EPOCH) / timedelta(milliseconds=1)


def test_release_gives_windows_back(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "lq")
    put(pg_conn, "lq", b + 100, "a")
    put(pg_conn, "lq", b + 5000, "mark")
    define(pg_conn, "ls", ["lq"], window_duration_ms=1000)
    w = got(pg_conn, "ls")
    assert window(pg_conn, "ls") is None
    assert call(pg_conn, "stream_release_v1", {"leaseIds": [w["leaseId"], str(uuid.uuid4())]}) == 1
    again = got(pg_conn, "ls")
    assert span(again, b) == (0, 1000) and datas(again) == ["a"]
    assert again["id"] == w["id"] and again["deliveryCount"] == 2  # the same window, again
    assert ack(pg_conn, w["leaseId"]).get("error") == "invalid_lease"
    assert call(pg_conn, "stream_release_v1", {"leaseIds": [w["leaseId"]]}) == 0


def test_a_partition_created_after_a_seek_starts_at_the_seek(pg_conn: Conn) -> None:
    b = base()
    ids = queue(pg_conn, "nq", "p1")
    put(pg_conn, "nq", b + 100, "old-p1", partition="p1")
    define(pg_conn, "ns", ["nq"], window_duration_ms=1000, partitioned=True)
    seek(pg_conn, "ns", b + 2000)
    ids.update(queue(pg_conn, "nq", "p1", "p2"))
    put(pg_conn, "nq", b + 200, "old-p2", partition="p2")
    put(pg_conn, "nq", b + 2100, "new-p2", partition="p2")
    put(pg_conn, "nq", b + 9000, "mark", partition="p1")
    w = got(pg_conn, "ns")
    assert w["key"] == ids["p2"] and datas(w) == ["new-p2"]  # not [0, 1000) of p2
    assert window(pg_conn, "ns") is None  # p1's only message is before the seek


def test_groups_are_independent(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "iq")
    for at in (100, 1100, 5000):
        put(pg_conn, "iq", b + at, at)
    define(pg_conn, "is", ["iq"], window_duration_ms=1000)
    one = got(pg_conn, "is", "g1")
    two = got(pg_conn, "is", "g2")  # the same window, out to both groups at once
    assert span(one, b) == span(two, b) == (0, 1000) and one["id"] != two["id"]
    ack(pg_conn, one["leaseId"])
    assert span(got(pg_conn, "is", "g1"), b) == (1000, 2000)
    assert window(pg_conn, "is", "g2") is None  # g2 still has [0, 1000) out
    ack(pg_conn, two["leaseId"])
    assert span(got(pg_conn, "is", "g2"), b) == (1000, 2000)


def test_unknown_stream_is_reported_per_request(pg_conn: Conn) -> None:
    reqs = [{"idx": 7, "stream": "missing", "consumerGroup": "g", "leaseId": str(uuid.uuid4())}]
    assert call(pg_conn, "stream_poll_v1", {"requests": reqs}) == [{"idx": 7, "notFound": True}]


# --------------------------------------------------------------------------- concurrency


def run_consumers(dsn: str, stream: str, expected: int, threads: int = 4) -> Counter:
    """`threads` connections poll and ack at once until `expected` windows were acked;
    how often each (key, start) was delivered."""
    delivered: Counter = Counter()
    lock = threading.Lock()
    errors: list[BaseException] = []
    deadline = time.monotonic() + 60

    def consumer() -> None:
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        try:
            while time.monotonic() < deadline:
                with lock:
                    if sum(delivered.values()) >= expected:
                        return
                w = window(conn, stream)
                if w is None:
                    continue
                with lock:
                    delivered[(w["key"], w["start"])] += 1
                assert ack(conn, w["leaseId"])["acknowledged"] is True
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            conn.close()

    workers = [threading.Thread(target=consumer) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(90)
    assert not errors, errors
    return delivered


def test_concurrent_consumers_of_a_partitioned_stream_never_share_a_window(
    pg_conn: Conn, migrated_dsn: str
) -> None:
    b = base()
    parts = [f"p{i}" for i in range(4)]
    queue(pg_conn, "cpq", *parts)
    for p in parts:
        for k in range(6):
            put(pg_conn, "cpq", b + k * 1000 + 10, f"{p}-{k}", p)
    put(pg_conn, "cpq", b + 50_000, "mark", "p0")
    define(pg_conn, "cps", ["cpq"], partitioned=True, window_duration_ms=1000)
    expected = 4 * 6  # [0, 1000) .. [5000, 6000) of each partition; not the mark's
    delivered = run_consumers(migrated_dsn, "cps", expected)
    assert sum(delivered.values()) == expected and set(delivered.values()) == {1}
    assert len(delivered) == expected
    [(acked,)] = sql(pg_conn, "SELECT sum(windows_acked) FROM queen.stream_consumer_offsets")
    assert acked == expected
    assert window(pg_conn, "cps") is None


def test_concurrent_consumers_of_a_global_stream_never_share_a_window(
    pg_conn: Conn, migrated_dsn: str
) -> None:
    b = base()
    queue(pg_conn, "cgq", "p0", "p1")
    for k in range(20):
        put(pg_conn, "cgq", b + k * 1000 + 10, k, f"p{k % 2}")
    put(pg_conn, "cgq", b + 50_000, "mark", "p0")
    define(pg_conn, "cgs", ["cgq"], window_duration_ms=1000)
    delivered = run_consumers(migrated_dsn, "cgs", 20)
    assert len(delivered) == 20 and set(delivered.values()) == {1}
    [(acked, msgs)] = sql(
        pg_conn, "SELECT windows_acked, messages_acked FROM queen.stream_consumer_offsets"
    )
    assert (acked, msgs) == (20, 20)


# --------------------------------------------------------------------------- definitions


def test_define_same_again_is_a_no_op_change_replaces_until_consumed(pg_conn: Conn) -> None:
    b = base()
    queue(pg_conn, "d1")
    queue(pg_conn, "d2")
    made = define(pg_conn, "ds", ["d1"], window_duration_ms=1000)
    assert made["created"] is True and made["changed"] is True
    stream = made["stream"]
    assert stream["source_queue_names"] == ["d1"] and stream["window_type"] == "tumbling"
    assert stream["window_slide_ms"] is None and stream["partitioned"] is False

    same = define(pg_conn, "ds", ["d1"], window_duration_ms=1000)
    assert same == {"created": False, "changed": False, "stream": stream}

    changed = define(pg_conn, "ds", ["d2"], window_duration_ms=2000, partitioned=True)
    assert changed["created"] is False and changed["changed"] is True
    assert changed["stream"]["id"] == stream["id"]
    assert changed["stream"]["source_queue_names"] == ["d2"]
    assert changed["stream"]["window_duration_ms"] == 2000
    assert changed["stream"]["partitioned"] is True
    assert sql(pg_conn, "SELECT count(*) FROM queen.stream_sources") == [(1,)]

    put(pg_conn, "d2", b + 100, "a")
    put(pg_conn, "d2", b + 5000, "mark")
    assert window(pg_conn, "ds") is not None  # now a group has an offset
    conflict = define(pg_conn, "ds", ["d2"], window_duration_ms=4000, partitioned=True)
    assert conflict["error"] == "conflict"
    [(dur,)] = sql(pg_conn, "SELECT window_duration_ms FROM queen.streams WHERE name = 'ds'")
    assert dur == 2000
    # The same definition is still fine with consumers.
    assert (
        define(pg_conn, "ds", ["d2"], window_duration_ms=2000, partitioned=True)["changed"] is False
    )


def test_define_lists_missing_sources_and_creates_nothing(pg_conn: Conn) -> None:
    queue(pg_conn, "here")
    res = define(pg_conn, "ms", ["here", "zz", "aa"])
    assert res == {"error": "sources_not_found", "missing": ["aa", "zz"]}
    assert counts(pg_conn)["streams"] == 0


# --------------------------------------------------------------------------- deletion


def test_deleting_sources_and_streams_leaves_no_orphans(pg_conn: Conn, database: Database) -> None:
    b = base()
    q1 = queue(pg_conn, "del1", "a", "b")
    q2 = queue(pg_conn, "del2")
    for p in ("a", "b"):
        put(pg_conn, "del1", b + 100, p, p)
    put(pg_conn, "del1", b + 5000, "mark", "a")
    put(pg_conn, "del2", b + 100, "x")
    put(pg_conn, "del2", b + 5000, "mark")
    define(pg_conn, "both", ["del1", "del2"], partitioned=True, window_duration_ms=1000)
    define(pg_conn, "only1", ["del1"], window_duration_ms=1000)
    for _ in range(3):
        got(pg_conn, "both")  # a lease on every key: a, b and del2's Default
    got(pg_conn, "only1")
    assert counts(pg_conn) == {
        "streams": 2, "stream_sources": 3, "stream_consumer_offsets": 4, "stream_leases": 4,
    }  # fmt: skip

    assert database.value("delete_queue", {"name": "del1"}) is True
    assert sql(pg_conn, "SELECT name FROM queen.streams") == [("both",)]
    assert counts(pg_conn) == {
        "streams": 1, "stream_sources": 1, "stream_consumer_offsets": 1, "stream_leases": 1,
    }  # fmt: skip
    [(key,)] = sql(pg_conn, "SELECT stream_key FROM queen.stream_leases")
    assert key == q2["Default"] and q1["a"] != key

    assert database.value("stream_delete", {"name": "both"}) is True
    assert database.value("stream_delete", {"name": "both"}) is False
    assert counts(pg_conn) == dict.fromkeys(counts(pg_conn), 0)


def test_deleting_a_source_partition_removes_its_keys(pg_conn: Conn) -> None:
    b = base()
    pids = queue(pg_conn, "dp", "a", "b")
    put(pg_conn, "dp", b + 100, "a", "a")
    put(pg_conn, "dp", b + 100, "b", "b")
    put(pg_conn, "dp", b + 5000, "mark", "b")
    define(pg_conn, "dps", ["dp"], partitioned=True, window_duration_ms=1000)
    got(pg_conn, "dps")
    got(pg_conn, "dps")
    sql(pg_conn, "DELETE FROM queen.partitions WHERE id = %s", pids["a"])
    keys = sql(pg_conn, "SELECT stream_key FROM queen.stream_consumer_offsets")
    leases = sql(pg_conn, "SELECT stream_key FROM queen.stream_leases")
    assert keys == leases == [(pids["b"],)]
    assert counts(pg_conn)["streams"] == 1


# --------------------------------------------------------------------------- retention


@pytest.fixture
def ses(migrated_dsn: str) -> Iterator[Session]:
    with session(migrated_dsn, 30000, 5000) as s:
        yield s


def test_retention_deleting_messages_does_not_break_polling(pg_conn: Conn, ses: Session) -> None:
    b = base()
    queue(pg_conn, "rt")
    options = {"retentionEnabled": True, "retentionSeconds": 60}
    call(pg_conn, "configure_queue_v1", {"queue": "rt", "options": options})
    for at in (100, 1100, 2100):
        put(pg_conn, "rt", b + at, at)
    recent = (now_ms() // 1000) * 1000 - 30_000
    put(pg_conn, "rt", recent + 100, "recent")
    put(pg_conn, "rt", recent + 20_000, "mark")
    define(pg_conn, "rts", ["rt"], window_duration_ms=1000)
    w = got(pg_conn, "rts")
    assert span(w, b) == (0, 1000)

    assert cleanup_messages(ses, "retention", batch_size=100).deleted == 3
    # The leased window's messages are gone; its ack still moves the offset.
    assert ack(pg_conn, w["leaseId"])["messages"] == 1
    w = got(pg_conn, "rts")  # [1000, 3000) lost their messages: skipped
    assert datas(w) == ["recent"] and ms_of(w["start"]) == recent
    ack(pg_conn, w["leaseId"])
    assert window(pg_conn, "rts") is None
