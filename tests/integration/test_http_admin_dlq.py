"""GET /api/v1/dlq, POST /api/v1/messages/{pid}/{tid}/retry and .../dlq through HTTP."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import pytest

from tests.integration.conftest import AdminApi

KEY = "ab" * 32
ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
DLQ_FIELDS = {
    "id", "transactionId", "partitionId", "queue", "partition", "consumerGroup", "errorMessage",
    "retryCount", "data", "traceId", "producerSub", "createdAt", "failedAt", "errorType",
    "attempts",
}  # fmt: skip


def set_failed_at(admin: AdminApi, transaction_id: str, moment: str) -> None:
    admin.sql(
        """UPDATE queen.dead_letter_queue d SET failed_at = %s::timestamptz
             FROM queen.messages m WHERE m.id = d.message_id AND m.transaction_id = %s""",
        moment,
        transaction_id,
    )


# --------------------------------------------------------------------------- listing


def test_dlq_lists_newest_failure_first_with_all_fields(admin: AdminApi) -> None:
    failed = admin.dead_letter("dq", [{"message": 1}, {"message": 2}], error="bad thing")
    res = admin.get("/dlq", queue="dq")
    assert res.status_code == 200
    body = res.json
    assert body["total"] == 2 and body["pagination"] == {"limit": 100, "offset": 0}
    rows = body["messages"]
    assert [r["transactionId"] for r in rows] == [m["transactionId"] for m in reversed(failed)]
    first = rows[0]
    assert set(first) == DLQ_FIELDS
    assert first["data"] == {"message": 2}
    assert first["errorMessage"] == "bad thing" and first["retryCount"] == 0
    assert (first["queue"], first["partition"], first["consumerGroup"]) == (
        "dq", "Default", "__QUEUE_MODE__",
    )  # fmt: skip
    assert first["partitionId"] == failed[1]["partitionId"] and first["id"] == failed[1]["id"]
    assert ISO_MS.match(first["createdAt"]) and ISO_MS.match(first["failedAt"])


def test_dlq_paging_is_real_and_total_counts_every_row(admin: AdminApi) -> None:
    failed = admin.dead_letter("pg", list(range(5)))
    for i, m in enumerate(failed):
        set_failed_at(admin, m["transactionId"], f"2025-01-01T00:00:0{i}Z")
    seen: list[str] = []
    for offset in (0, 2, 4):
        body = admin.get("/dlq", queue="pg", limit=2, offset=offset).json
        assert body["total"] == 5 and body["pagination"] == {"limit": 2, "offset": offset}
        seen += [r["transactionId"] for r in body["messages"]]
    assert seen == [m["transactionId"] for m in reversed(failed)]
    past_end = admin.get("/dlq", queue="pg", limit=2, offset=10).json
    assert past_end["messages"] == [] and past_end["total"] == 5


def test_dlq_filters_queue_partition_group_and_time(admin: AdminApi) -> None:
    admin.dead_letter("fa", ["a1"], partition="P1")
    admin.fail_next("fa", group="g1", partition="P1")
    admin.dead_letter("fa", ["a2"], partition="P2")
    admin.dead_letter("fb", ["b1"])

    def data(**params: object) -> list[object]:
        body = admin.get("/dlq", **params).json
        assert body["total"] == len(body["messages"])
        return sorted(str(r["data"]) for r in body["messages"])

    assert data() == ["a1", "a1", "a2", "b1"]
    assert data(queue="fa") == ["a1", "a1", "a2"]
    assert data(queue="fa", partition="P2") == ["a2"]
    assert data(queue="fa", consumerGroup="g1") == ["a1"]
    assert data(queue="fa", consumerGroup="__QUEUE_MODE__") == ["a1", "a2"]
    assert data(queue="nothing-here") == []

    rows = admin.sql("SELECT id FROM queen.dead_letter_queue ORDER BY id")
    moments = ["2025-01-01", "2025-02-01", "2025-03-01", "2025-04-01"]
    for (dlq_id,), moment in zip(rows, moments, strict=True):
        admin.sql("UPDATE queen.dead_letter_queue SET failed_at = %s WHERE id = %s", moment, dlq_id)
    assert len(data(**{"from": "2025-02-01T00:00:00Z"})) == 3
    assert len(data(**{"to": "2025-02-01T00:00:00.000Z"})) == 2
    assert len(data(**{"from": "2025-01-15T00:00:00+00:00", "to": "2025-03-15"})) == 2
    assert data(**{"from": "2030-01-01T00:00:00Z"}) == []


def test_dlq_filters_by_error_text_case_insensitively_with_a_true_total(admin: AdminApi) -> None:
    """`error` is applied by the server (a substring of the error text, any case), so the
    total and the pages count only what matches, as POST /dlq/requeue selects it."""
    admin.dead_letter("fe", ["t1", "t2"], error="Upstream TIMEOUT (payments:443)")
    admin.dead_letter("fe", ["c1"], error="card declined")
    body = admin.get("/dlq", queue="fe", error="timeout", limit="1").json
    assert body["total"] == 2 and len(body["messages"]) == 1
    assert "TIMEOUT" in body["messages"][0]["errorMessage"]
    assert admin.get("/dlq", queue="fe", error="100% off").json["total"] == 0
    assert admin.get("/dlq", queue="fe", error="").json["total"] == 3
    assert admin.get("/dlq", error="x" * 1001).status_code == 400


def test_dlq_decrypts_encrypted_payloads(make_admin: Callable[..., AdminApi]) -> None:
    admin = make_admin(QUEEN_ENCRYPTION_KEY=KEY)
    admin.dead_letter("secret", [{"card": "4111"}], encryptionEnabled=True)
    [(stored,)] = admin.sql("SELECT payload FROM queen.messages")
    assert "encrypted" in stored and "4111" not in str(stored)
    [row] = admin.get("/dlq", queue="secret").json["messages"]
    assert row["data"] == {"card": "4111"} and "isEncrypted" not in row


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"offset": "-1"}, "offset"),
        ({"offset": "1.5"}, "offset"),
        ({"from": "yesterday"}, "from"),
        ({"to": "2025-13-01T00:00:00Z"}, "to"),
        ({"from": "2025-02-01", "to": "2025-01-01"}, "from must not be after to"),
        ({"queue": "bad name!"}, "queue"),
        ({"partition": "a/b"}, "partition"),
        ({"consumerGroup": "x" * 300}, "consumer group"),
    ],
)
def test_dlq_bad_query_is_400(admin: AdminApi, params: dict[str, str], error: str) -> None:
    admin.dead_letter("bq", ["x"])
    before = admin.snapshot()
    res = admin.get("/dlq", **{"queue": "bq", **params})
    assert res.status_code == 400
    assert error.lower() in res.json["error"].lower()
    assert admin.snapshot() == before


# --------------------------------------------------------------------------- retry


def test_retry_requeues_a_copy_at_the_tail_for_queue_mode(admin: AdminApi) -> None:
    [failed] = admin.dead_letter("rq", [{"n": 1}])
    admin.push("rq", [{"n": 2}])
    pid, tid = failed["partitionId"], failed["transactionId"]
    res = admin.post(f"/messages/{pid}/{tid}/retry")  # empty body, as the official client
    assert res.status_code == 200
    body = res.json
    assert body["success"] is True and (body["partitionId"], body["transactionId"]) == (pid, tid)
    assert body["newTransactionId"].startswith(f"{tid}:retry:")
    assert body["requeuedFor"] == ["__QUEUE_MODE__"]
    assert (body["queue"], body["partition"]) == ("rq", "Default")
    assert admin.get("/dlq", queue="rq").json["total"] == 0
    # the message pushed before the retry comes first, then the copy
    [second] = admin.pop("rq")
    assert second["data"] == {"n": 2}
    admin.ack(second)
    [copy] = admin.pop("rq")
    assert copy["data"] == {"n": 1} and copy["transactionId"] == body["newTransactionId"]
    assert copy["id"] == body["messageId"]
    # the original row is kept (its DLQ history is gone)
    assert admin.get(f"/messages/{pid}/{tid}").status_code == 200


def test_retry_for_one_group_keeps_the_other_groups_rows(admin: AdminApi) -> None:
    [failed] = admin.dead_letter("rg", ["x"], group="g1")
    admin.fail_next("rg", group="g2")
    pid, tid = failed["partitionId"], failed["transactionId"]
    res = admin.post(f"/messages/{pid}/{tid}/retry", {"consumerGroup": "g1"})
    assert res.status_code == 200 and res.json["requeuedFor"] == ["g1"]
    groups = [r["consumerGroup"] for r in admin.get("/dlq", queue="rg").json["messages"]]
    assert groups == ["g2"]
    [copy] = admin.pop("rg", group="g1")
    assert copy["data"] == "x" and copy["transactionId"] == res.json["newTransactionId"]
    # g2 had read the whole partition: it is moved past the copy
    assert admin.pop("rg", group="g2") == []


def test_retry_without_group_requeues_for_every_group(admin: AdminApi) -> None:
    [failed] = admin.dead_letter("ra", ["x"], group="g1")
    admin.fail_next("ra", group="g2")
    res = admin.post(f"/messages/{failed['partitionId']}/{failed['transactionId']}/retry", {})
    assert res.status_code == 200 and res.json["requeuedFor"] == ["g1", "g2"]
    assert admin.get("/dlq", queue="ra").json["total"] == 0
    assert [m["data"] for m in admin.pop("ra", group="g1")] == ["x"]
    assert [m["data"] for m in admin.pop("ra", group="g2")] == ["x"]


def test_retry_copy_reaches_a_group_that_is_still_behind(admin: AdminApi) -> None:
    [failed] = admin.dead_letter("rb", ["a"], group="g1")
    admin.push("rb", ["b"])
    [a] = admin.pop("rb", group="g3")
    admin.ack(a)  # g3 has not read "b" yet
    admin.post(f"/messages/{failed['partitionId']}/{failed['transactionId']}/retry")
    later = admin.pop("rb", group="g3", batch=10)
    assert [m["data"] for m in later] == ["b", "a"]  # at-least-once for lagging groups


def test_retry_keeps_encrypted_payloads_encrypted(make_admin: Callable[..., AdminApi]) -> None:
    admin = make_admin(QUEEN_ENCRYPTION_KEY=KEY)
    [failed] = admin.dead_letter("re", [{"pin": 1234}], encryptionEnabled=True)
    res = admin.post(f"/messages/{failed['partitionId']}/{failed['transactionId']}/retry")
    assert res.status_code == 200
    rows = admin.sql("SELECT payload, is_encrypted FROM queen.messages ORDER BY id")
    assert len(rows) == 2 and all(enc and "1234" not in str(p) for p, enc in rows)
    [copy] = admin.pop("re")
    assert copy["data"] == {"pin": 1234}


def test_retry_unknown_or_not_dead_lettered_is_404_and_changes_nothing(admin: AdminApi) -> None:
    [failed] = admin.dead_letter("rn", ["x"], group="g1")
    [pushed] = admin.push("rn", ["y"])
    pid = failed["partitionId"]
    before = admin.snapshot()
    cases = [
        (f"/messages/{pid}/no-such-transaction/retry", None, "Message not found"),
        (f"/messages/{uuid.uuid4()}/{failed['transactionId']}/retry", None, "Message not found"),
        (f"/messages/{pid}/{pushed['transactionId']}/retry", None, "not in the dead-letter"),
        (f"/messages/{pid}/{failed['transactionId']}/retry", {"consumerGroup": "g9"}, "g9"),
    ]
    for path, body, error in cases:
        res = admin.post(path, body)
        assert res.status_code == 404, path
        assert error in res.json["error"]
        assert admin.snapshot() == before


@pytest.mark.parametrize(
    ("pid", "raw", "error"),
    [
        ("not-a-uuid", None, "partitionId"),
        (None, b"{not json", "Invalid JSON"),
        (None, b"[1, 2]", "JSON object"),
        (None, b'{"consumerGroup": 7}', "Consumer group"),
        (None, b'{"consumerGroup": "bad group"}', "consumer group"),
    ],
)
def test_retry_bad_input_is_400(
    admin: AdminApi, pid: str | None, raw: bytes | None, error: str
) -> None:
    [failed] = admin.dead_letter("rx", ["x"])
    before = admin.snapshot()
    path = f"/messages/{pid or failed['partitionId']}/{failed['transactionId']}/retry"
    res = admin.post(path, raw=raw) if raw is not None else admin.post(path)
    assert res.status_code == 400 and error.lower() in res.json["error"].lower()
    assert admin.snapshot() == before


# --------------------------------------------------------------------------- move to DLQ


def test_move_to_dlq_dead_letters_the_next_message(admin: AdminApi) -> None:
    first, _ = admin.push("md", ["a", "b"])
    res = admin.post(f"/messages/{first['partition_id']}/{first['transactionId']}/dlq")
    assert res.status_code == 200
    assert res.json == {
        "success": True, "partitionId": first["partition_id"],
        "transactionId": first["transactionId"], "consumerGroup": "__QUEUE_MODE__", "dlq": True,
    }  # fmt: skip
    [row] = admin.get("/dlq", queue="md").json["messages"]
    assert row["data"] == "a" and "administrator" in row["errorMessage"]
    assert [m["data"] for m in admin.pop("md")] == ["b"]


def test_move_to_dlq_for_a_group_with_an_error_text_inside_its_batch(admin: AdminApi) -> None:
    admin.push("mb", ["a", "b"])
    a, b = admin.pop("mb", batch=2, group="g1")
    res = admin.post(
        f"/messages/{a['partitionId']}/{a['transactionId']}/dlq",
        {"consumerGroup": "g1", "error": "poison"},
    )
    assert res.status_code == 200 and res.json["consumerGroup"] == "g1"
    assert admin.ack(b)["leaseReleased"] is True  # the batch is complete
    [row] = admin.get("/dlq", consumerGroup="g1").json["messages"]
    assert (row["data"], row["errorMessage"]) == ("a", "poison")
    assert admin.pop("mb", group="g1") == []


def test_move_to_dlq_refusals_change_nothing(admin: AdminApi) -> None:
    first, second = admin.push("mr", ["a", "b"])
    [done] = admin.push("mr2", ["c"])
    [m] = admin.pop("mr2")
    admin.ack(m)
    # A group's first ack on a partition creates its (empty) cursor, as its first pop would:
    # create it beforehand so that the refusals below are observably side-effect free.
    seek = admin.post("/consumer-groups/__QUEUE_MODE__/queues/mr/seek", {"timestamp": "2000-01-01"})
    assert seek.json["partitionsUpdated"] == 1
    before = admin.snapshot()
    cases = [
        (second, 409, "Earlier messages"),  # not the next one
        (done, 409, "already consumed"),
        ({**first, "transactionId": "missing"}, 404, "Message not found"),
        ({**first, "partition_id": "nope"}, 400, "partitionId"),
    ]
    for msg, status, error in cases:
        res = admin.post(f"/messages/{msg['partition_id']}/{msg['transactionId']}/dlq")
        assert res.status_code == status, res.json
        assert error in res.json["error"]
        assert admin.snapshot() == before
    res = admin.post(
        f"/messages/{first['partition_id']}/{first['transactionId']}/dlq", {"consumerGroup": 1}
    )
    assert res.status_code == 400 and admin.snapshot() == before
