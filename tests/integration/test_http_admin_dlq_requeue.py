"""POST /api/v1/dlq/requeue through HTTP: filters, ids, dry run, limit, rate, races, 400s.

DLQ rows are made by acking with status `dlq`; copies are recognised by their
`<original>:retry:<hex>` transaction ids and read back from the messages table.
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from typing import Any

import pytest

from tests.integration.conftest import AdminApi

Row = tuple[Any, ...]


def dead_letter(
    admin: AdminApi,
    queue: str,
    payloads: list[Any],
    group: str | None = None,
    error: str = "boom",
    partition: str = "Default",
) -> list[dict[str, Any]]:
    """Push `payloads` (unless a group is dead-lettering what is already there: pass []
    and use `fail`) and dead-letter each for `group` by an ack with status dlq."""
    admin.push(queue, payloads, partition)
    return fail(admin, queue, len(payloads), group, error, partition)


def fail(
    admin: AdminApi,
    queue: str,
    count: int,
    group: str | None = None,
    error: str = "boom",
    partition: str = "Default",
) -> list[dict[str, Any]]:
    """Dead-letter the group's next `count` messages (ack status dlq), in order."""
    failed = []
    for _ in range(count):
        [message] = admin.pop(queue, group=group, partition=partition)
        assert admin.ack(message, "dlq", error)["status"] == "failed_dlq"
        failed.append(message)
    return failed


def requeue(admin: AdminApi, **body: Any) -> dict[str, Any]:
    res = admin.post("/dlq/requeue", body)
    assert res.status_code == 200, res.text
    return dict(res.json)


def copies(admin: AdminApi) -> list[Row]:
    """("queue/partition", original transactionId, created_at) of every copy, per
    partition in (created_at, id) order: the order consumers read them."""
    rows = admin.sql(
        """SELECT q.name || '/' || p.name, m.transaction_id, m.created_at FROM queen.messages m
             JOIN queen.partitions p ON p.id = m.partition_id
             JOIN queen.queues q ON q.id = p.queue_id
            WHERE m.transaction_id LIKE '%%:retry:%%'
            ORDER BY 1, m.created_at, m.id"""
    )
    return [(part, txn.split(":retry:")[0], at) for part, txn, at in rows]


def originals(admin: AdminApi) -> list[str]:
    return [txn for _, txn, _ in copies(admin)]


def dlq_data(admin: AdminApi, **params: Any) -> list[Any]:
    return sorted(str(r["data"]) for r in admin.get("/dlq", limit=1000, **params).json["messages"])


def tids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["transactionId"] for m in messages]


# --------------------------------------------------------------------------- selection


def test_queue_alone_requeues_everything_of_the_queue_in_order(admin: AdminApi) -> None:
    failed = dead_letter(admin, "qa", ["a", "b", "c"])
    dead_letter(admin, "qother", ["x"])
    answer = requeue(admin, queue="qa")
    assert set(answer) == {"dryRun", "matched", "requeued", "partitions", "limit", "perSecond",
                           "durationMs"}  # fmt: skip
    assert answer["dryRun"] is False
    assert (answer["matched"], answer["requeued"], answer["partitions"]) == (3, 3, 1)
    assert (answer["limit"], answer["perSecond"]) == (1000, None)
    assert originals(admin) == tids(failed)
    assert dlq_data(admin) == ["x"]
    # the copies are new messages for the group, in the original order
    popped = admin.pop("qa", batch=10)
    assert [m["data"] for m in popped] == ["a", "b", "c"]
    assert [m["transactionId"].split(":retry:")[0] for m in popped] == tids(failed)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"partition": "P2"}, ["a2", "b2"]),
        ({"queue": "fa", "partition": "P1"}, ["a1", "a1"]),
        ({"consumerGroup": "g1"}, ["a1"]),
        ({"queue": "fa", "consumerGroup": "__QUEUE_MODE__"}, ["a1", "a2"]),
        ({"error": "TIMEOUT"}, ["a2", "b2"]),  # case-insensitive substring
        ({"error": "time", "queue": "fb"}, ["b2"]),
        ({"from": "2025-02-01T00:00:00Z"}, ["a1", "a2", "b2"]),
        ({"to": "2025-01-15T00:00:00Z"}, ["a1"]),
        ({"from": "2025-01-15T00:00:00+00:00", "to": "2025-03-15", "queue": "fa"}, ["a1", "a2"]),
        ({"queue": "fa", "error": "nope"}, []),
    ],
)
def test_each_filter_alone_and_combined(
    admin: AdminApi, body: dict[str, Any], expected: list[str]
) -> None:
    dead_letter(admin, "fa", ["a1"], partition="P1", error="bad input")
    fail(admin, "fa", 1, group="g1", partition="P1", error="bad input")
    dead_letter(admin, "fa", ["a2"], partition="P2", error="upstream timeout")
    dead_letter(admin, "fb", ["b2"], partition="P2", error="Timeout again")
    failed_at = {"a1": "2025-01-01", "a2": "2025-03-01", "b2": "2025-04-01"}
    for data, moment in failed_at.items():
        admin.sql(
            """UPDATE queen.dead_letter_queue d SET failed_at = %s::timestamptz
                 FROM queen.messages m WHERE m.id = d.message_id AND m.payload = to_jsonb(%s::text)
                  AND d.consumer_group = '__QUEUE_MODE__'""",
            moment,
            data,
        )
    admin.sql(
        "UPDATE queen.dead_letter_queue SET failed_at = '2025-02-01' WHERE consumer_group = 'g1'"
    )
    before = dlq_data(admin)
    answer = requeue(admin, **body)
    assert answer["requeued"] == answer["matched"] == len(set(expected))
    assert answer["partitions"] == len({part for part, _, _ in copies(admin)})
    # one copy per message; the DLQ rows that matched are gone, the others stay
    copied = admin.sql(
        "SELECT payload #>> '{}' FROM queen.messages WHERE transaction_id LIKE '%%:retry:%%'"
    )
    assert sorted(d for (d,) in copied) == sorted(set(expected))
    remaining = list((Counter(before) - Counter(expected)).elements())
    assert dlq_data(admin) == sorted(remaining)


def test_a_message_of_two_groups_gets_one_copy_for_both(admin: AdminApi) -> None:
    [failed] = dead_letter(admin, "tg", ["x"], group="g1")
    fail(admin, "tg", 1, group="g2")
    answer = requeue(admin, queue="tg")
    assert (answer["matched"], answer["requeued"]) == (1, 1)
    assert originals(admin) == [failed["transactionId"]]
    assert [m["data"] for m in admin.pop("tg", group="g1")] == ["x"]
    assert [m["data"] for m in admin.pop("tg", group="g2")] == ["x"]


def test_explicit_ids(admin: AdminApi) -> None:
    failed = dead_letter(admin, "ids", ["a", "b", "c", "d"], partition="P1")
    other = dead_letter(admin, "ids", ["e"], partition="P2")
    [pushed] = admin.push("ids", ["not dead"])
    wanted = [failed[3], failed[1], other[0]]  # any order: copies follow the original order
    keys = [{"partitionId": m["partitionId"], "transactionId": m["transactionId"]} for m in wanted]
    keys.append({"partitionId": pushed["partition_id"], "transactionId": pushed["transactionId"]})
    answer = requeue(admin, ids=keys)
    assert (answer["matched"], answer["requeued"], answer["partitions"]) == (3, 3, 2)
    assert originals(admin) == tids([failed[1], failed[3], other[0]])
    assert dlq_data(admin) == ["a", "c"]
    # ids combine with the other filters (AND)
    rest = [{"partitionId": m["partitionId"], "transactionId": m["transactionId"]} for m in failed]
    assert requeue(admin, ids=rest, consumerGroup="other-group")["requeued"] == 0
    assert dlq_data(admin) == ["a", "c"]


# --------------------------------------------------------------------------- dry run, limit


def test_dry_run_counts_and_samples_and_changes_nothing(admin: AdminApi) -> None:
    failed = dead_letter(admin, "dr", [f"m{i}" for i in range(12)], error="kaput")
    fail(admin, "dr", 1, group="g1", error="other")
    before = admin.snapshot()
    answer = requeue(admin, queue="dr", dryRun=True, limit=3)
    assert admin.snapshot() == before
    assert answer["dryRun"] is True and answer["requeued"] == 0
    assert (answer["matched"], answer["partitions"], answer["limit"]) == (12, 1, 3)
    sample = answer["sample"]
    assert tids(sample) == tids(failed[:10])  # the order they would be requeued in
    first = sample[0]
    assert set(first) == {"partitionId", "transactionId", "queue", "partition", "createdAt",
                          "deadLetters"}  # fmt: skip
    assert (first["queue"], first["partition"]) == ("dr", "Default")
    groups = [(d["consumerGroup"], d["errorMessage"]) for d in first["deadLetters"]]
    assert groups == [("__QUEUE_MODE__", "kaput"), ("g1", "other")]
    assert "data" not in first
    narrowed = requeue(admin, queue="dr", error="OTHER", dryRun=True)
    assert (narrowed["matched"], tids(narrowed["sample"])) == (1, [failed[0]["transactionId"]])
    assert admin.snapshot() == before


def test_limit_takes_the_oldest_first_and_a_rerun_continues(admin: AdminApi) -> None:
    failed = dead_letter(admin, "lim", list(range(8)))
    first = requeue(admin, queue="lim", limit=5)
    assert (first["matched"], first["requeued"]) == (8, 5)
    assert originals(admin) == tids(failed[:5])
    second = requeue(admin, queue="lim", limit=5)
    assert (second["matched"], second["requeued"]) == (3, 3)
    assert originals(admin) == tids(failed)
    assert requeue(admin, queue="lim")["requeued"] == 0


def test_copies_are_popped_in_order_and_completed_groups_get_nothing(admin: AdminApi) -> None:
    admin.push("cg", ["a", "b", "c", "d"])
    done = admin.pop("cg", batch=4, group="finished")
    for m in done:
        admin.ack(m)
    fail(admin, "cg", 4, group="flaky")
    answer = requeue(admin, queue="cg", consumerGroup="flaky")
    assert answer["requeued"] == 4
    assert [m["data"] for m in admin.pop("cg", batch=10, group="flaky")] == ["a", "b", "c", "d"]
    assert admin.pop("cg", batch=10, group="finished") == []


def test_the_copy_starts_without_retry_state(admin: AdminApi) -> None:
    admin.configure("rs", retryLimit=1)
    admin.push("rs", ["x"])
    for expected in ("failed_retry", "failed_dlq"):
        [m] = admin.pop("rs")
        assert admin.ack(m, "failed", "bad")["status"] == expected
    assert admin.get("/dlq", queue="rs").json["messages"][0]["retryCount"] == 1
    assert requeue(admin, queue="rs")["requeued"] == 1
    [copy] = admin.pop("rs")
    assert ":retry:" in copy["transactionId"]
    assert admin.ack(copy, "failed", "bad")["status"] == "failed_retry"  # a first attempt


# --------------------------------------------------------------------------- rate


def test_per_second_paces_chunks_a_second_apart(admin: AdminApi) -> None:
    failed = dead_letter(admin, "rate", list(range(12)))
    answer = requeue(admin, queue="rate", perSecond=5)
    assert (answer["requeued"], answer["perSecond"]) == (12, 5)
    assert answer["durationMs"] >= 1900
    made = copies(admin)
    assert [t for _, t, _ in made] == tids(failed)
    start = made[0][2]
    offsets = [(at - start).total_seconds() for _, _, at in made]
    # chunks of 5, 5 and 2 messages, each chunk a transaction starting a second after the
    # first one's start (tolerance: how long the first chunk's own call took)
    assert max(offsets[:5]) < 0.5, offsets
    assert all(0.8 <= o < 1.6 for o in offsets[5:10]), offsets
    assert all(1.8 <= o < 2.6 for o in offsets[10:]), offsets


def test_a_departed_client_stops_the_run_after_the_current_chunk(admin: AdminApi) -> None:
    failed = dead_letter(admin, "gone", list(range(12)))
    ours, theirs = socket.socketpair()
    theirs.close()  # the client hung up
    try:
        res = admin.client.simulate_post(
            "/api/v1/dlq/requeue", json={"queue": "gone", "perSecond": 5},
            extras={"gunicorn.socket": ours},
        )  # fmt: skip
    finally:
        ours.close()
    assert res.status_code == 200 and res.json["requeued"] == 5
    assert originals(admin) == tids(failed[:5])
    assert requeue(admin, queue="gone")["requeued"] == 7  # a rerun continues
    assert originals(admin) == tids(failed)


# --------------------------------------------------------------------------- races


def run_together(count: int, work: Any) -> list[Any]:
    """Run `work()` in `count` threads released at once; their results."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            barrier.wait(10)
            results[i] = work()
        except BaseException as exc:  # re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return results


def assert_each_copied_once_in_order(admin: AdminApi, failed: dict[str, list[str]]) -> None:
    by_partition: dict[str, list[str]] = {}
    for part, txn, _ in copies(admin):
        by_partition.setdefault(part, []).append(txn)
    assert by_partition == failed
    assert admin.sql("SELECT count(*) FROM queen.dead_letter_queue") == [(0,)]


def test_two_paced_requests_at_once_requeue_each_message_once_in_order(admin: AdminApi) -> None:
    failed = {
        f"race/{p}": tids(dead_letter(admin, "race", list(range(6)), partition=p)) for p in "ABC"
    }
    client = admin.client

    def call() -> dict[str, Any]:
        res = client.simulate_post("/api/v1/dlq/requeue", json={"queue": "race", "perSecond": 4})
        assert res.status_code == 200, res.text
        return dict(res.json)

    answers = run_together(2, call)
    assert sum(a["requeued"] for a in answers) == 18
    assert_each_copied_once_in_order(admin, failed)


def test_many_racing_small_runs_requeue_each_message_once_in_order(admin: AdminApi) -> None:
    parts = [f"P{i}" for i in range(4)]
    failed = {
        f"storm/{p}": tids(dead_letter(admin, "storm", list(range(10)), partition=p)) for p in parts
    }
    client = admin.client

    def drain() -> int:
        total = 0
        while True:
            res = client.simulate_post("/api/v1/dlq/requeue", json={"queue": "storm", "limit": 3})
            assert res.status_code == 200, res.text
            if res.json["requeued"] == 0:
                return total
            total += res.json["requeued"]

    assert sum(run_together(6, drain)) == 40
    assert_each_copied_once_in_order(admin, failed)


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"", "Empty request body"),
        (b"{oops", "Invalid JSON"),
        (b"[]", "JSON object"),
        (b"{}", "At least one filter is required"),
        (b'{"dryRun": true, "limit": 5}', "At least one filter is required"),
        (b'{"queue": null}', "At least one filter is required"),
        (b'{"queue": 7}', "Queue must be a string"),
        (b'{"queue": "bad name!"}', "queue name"),
        (b'{"partition": "a/b"}', "partition name"),
        (b'{"consumerGroup": ["g"]}', "Consumer group must be a string"),
        (b'{"error": ""}', "error must not be empty"),
        (b'{"error": 5}', "error must be a string"),
        (b'{"from": "yesterday"}', "from must be an ISO-8601"),
        (b'{"to": 17}', "to must be an ISO-8601"),
        (b'{"from": "2025-02-01", "to": "2025-01-01"}', "from must not be after to"),
        (b'{"ids": []}', "ids must be a list of 1 to 10000"),
        (b'{"ids": "abc"}', "ids must be a list"),
        (b'{"ids": [{"partitionId": "nope", "transactionId": "t"}]}', "ids[0].partitionId"),
        (b'{"ids": [{"transactionId": "t"}]}', "ids[0] must be an object with exactly"),
        (b'{"ids": [{"partitionId": "00000000-0000-0000-0000-000000000000",'
         b' "transactionId": "t", "x": 1}]}', "ids[0] must be an object with exactly"),
        (b'{"ids": [{"partitionId": "00000000-0000-0000-0000-000000000000",'
         b' "transactionId": ""}]}', "ids[0].transactionId"),
        (b'{"queue": "bq", "dryRun": "yes"}', "dryRun must be true or false"),
        (b'{"queue": "bq", "limit": 0}', "limit must be an integer between 1 and 100000"),
        (b'{"queue": "bq", "limit": 100001}', "limit must be an integer between 1 and 100000"),
        (b'{"queue": "bq", "limit": "10"}', "limit must be an integer"),
        (b'{"queue": "bq", "limit": true}', "limit must be an integer"),
        (b'{"queue": "bq", "perSecond": 0}', "perSecond must be an integer between 1 and 10000"),
        (b'{"queue": "bq", "perSecond": 1.5}', "perSecond must be an integer"),
        (b'{"queue": "bq", "limit": 2000, "perSecond": 5}',
         "limit 2000 at perSecond 5 would run 400 s, longer than the 300 s"),
    ],
)  # fmt: skip
def test_bad_bodies_are_400_and_change_nothing(admin: AdminApi, raw: bytes, error: str) -> None:
    dead_letter(admin, "bq", ["x", "y"])
    before = admin.snapshot()
    res = admin.post("/dlq/requeue", raw=raw)
    assert res.status_code == 400, res.text
    assert error.lower() in res.json["error"].lower(), res.json
    assert admin.snapshot() == before


def test_misspelt_fields_are_named_so_a_dry_run_shows_them(admin: AdminApi) -> None:
    """Unknown fields are ignored, as on every route: the header and the answer name them,
    and a dry run shows the wider selection before anything changes."""
    dead_letter(admin, "bq", ["x", "y"])
    before = admin.snapshot()
    raw = b'{"queue": "bq", "qeue": "x", "consumergroup": "g", "dryRun": true}'
    res = admin.post("/dlq/requeue", raw=raw)
    assert res.status_code == 200, res.text
    assert res.json["ignoredFields"] == ["consumergroup", "qeue"] and res.json["matched"] == 2
    assert res.headers["Queen-Ignored-Parameters"] == "body:consumergroup, body:qeue"
    assert admin.snapshot() == before


def test_per_second_without_limit_stays_within_the_ceiling(admin: AdminApi) -> None:
    dead_letter(admin, "ceil", ["x"])
    answer = requeue(admin, queue="ceil", perSecond=2, dryRun=True)
    assert answer["limit"] == 600  # 2/s for at most 300 s
    assert requeue(admin, queue="ceil", perSecond=2, limit=600, dryRun=True)["limit"] == 600
