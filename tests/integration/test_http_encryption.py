"""Encrypted queues when something is wrong with the key, through HTTP (in-process falcon
client) on real PostgreSQL: a payload that cannot be decrypted comes back as `data: null`
with a `decryptionError` marker (logged and counted), configuring encryption without
QUEEN_ENCRYPTION_KEY is a 400, and a keyless server never stores plain text in an
encrypted queue."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from queen_threads.crypto import NO_KEY, PayloadCipher
from queen_threads.db import Database
from queen_threads.queue.store import QueueStore
from tests.integration.conftest import AdminApi, uuid4

KEY_A = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
KEY_B = "ff" * 32
WRONG = "wrong key or damaged ciphertext"


def decryption_errors(admin: AdminApi, queue: str) -> tuple[int, float]:
    """(this process's JSON /metrics total, the Prometheus counter of `queue`)."""
    total = admin.client.simulate_get("/metrics").json["messages"]["decryptionErrors"]["total"]
    text = admin.client.simulate_get("/metrics/prometheus").text
    prom = sum(
        s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == "queen_decryption_errors_total" and s.labels.get("queue") == queue
    )
    return int(total), prom


def assert_marked(message: dict[str, Any], reason: str) -> None:
    assert message["data"] is None
    assert message["decryptionError"] == reason
    assert "isEncrypted" not in message


def test_message_encrypted_with_another_key_pops_with_the_marker_and_is_counted(
    make_admin: Callable[..., AdminApi], caplog: pytest.LogCaptureFixture
) -> None:
    writer = make_admin(QUEEN_ENCRYPTION_KEY=KEY_A)
    writer.configure("sec", encryptionEnabled=True)
    [pushed] = writer.push("sec", [{"pin": 1234}])
    reader = make_admin(QUEEN_ENCRYPTION_KEY=KEY_B)
    before = decryption_errors(reader, "sec")
    with caplog.at_level("WARNING", logger="queen_threads.crypto"):
        [message] = reader.pop("sec")
    assert_marked(message, WRONG)
    assert message["transactionId"] == pushed["transactionId"] and message["leaseId"]
    after = decryption_errors(reader, "sec")
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)
    assert "sec" in caplog.text and pushed["transactionId"] in caplog.text
    assert "1234" not in caplog.text and KEY_A not in caplog.text and KEY_B not in caplog.text
    # The consumer can still settle it: the marked message is leased like any other.
    assert reader.ack(message, "failed", "cannot decrypt")["status"] == "failed_retry"


def test_damaged_ciphertext_in_the_database_is_marked_on_pop_dlq_and_detail(
    make_admin: Callable[..., AdminApi],
) -> None:
    admin = make_admin(QUEEN_ENCRYPTION_KEY=KEY_A)
    [failed] = admin.dead_letter("dmg", [{"card": "4111"}], encryptionEnabled=True)
    admin.push("dmg", ["second"])
    # Replace the auth tag of every stored payload.
    admin.sql(
        "UPDATE queen.messages "
        "SET payload = jsonb_set(payload, '{authTag}', '\"AAAAAAAAAAAAAAAAAAAAAA==\"')"
    )
    before = decryption_errors(admin, "dmg")
    [popped] = admin.pop("dmg")
    assert_marked(popped, WRONG)
    [row] = admin.get("/dlq", queue="dmg").json["messages"]
    assert_marked(row, WRONG)
    detail = admin.get(f"/messages/{failed['partitionId']}/{failed['transactionId']}").json
    assert_marked(detail, WRONG)
    after = decryption_errors(admin, "dmg")
    assert (after[0] - before[0], after[1] - before[1]) == (3, 3)


def test_server_without_key_marks_encrypted_messages(make_admin: Callable[..., AdminApi]) -> None:
    writer = make_admin(QUEEN_ENCRYPTION_KEY=KEY_A)
    writer.configure("nokey", encryptionEnabled=True)
    writer.push("nokey", ["top secret"])
    keyless = make_admin()
    before = decryption_errors(keyless, "nokey")
    [message] = keyless.pop("nokey")
    assert_marked(message, NO_KEY)
    assert decryption_errors(keyless, "nokey")[0] - before[0] == 1
    # A plain queue on the same server is not affected.
    keyless.push("plain", [{"a": 1}])
    [plain] = keyless.pop("plain")
    assert plain["data"] == {"a": 1} and "decryptionError" not in plain


def test_configure_encryption_without_key_is_400_and_changes_nothing(
    make_admin: Callable[..., AdminApi],
) -> None:
    admin = make_admin()
    res = admin.post("/configure", {"queue": "enc", "options": {"encryptionEnabled": True}})
    assert res.status_code == 400
    assert "QUEEN_ENCRYPTION_KEY" in res.json["error"] and set(res.json) == {"error"}
    assert admin.sql("SELECT count(*) FROM queen.queues") == [(0,)]
    # An existing queue keeps its options.
    admin.configure("enc", leaseTime=42)
    before = admin.snapshot()
    res = admin.post("/configure", {"queue": "enc", "options": {"encryptionEnabled": True}})
    assert res.status_code == 400
    assert admin.snapshot() == before
    assert admin.sql("SELECT lease_time, encryption_enabled FROM queen.queues") == [(42, False)]
    # encryptionEnabled false (or left out) is fine without a key.
    res = admin.post("/configure", {"queue": "enc", "options": {"encryptionEnabled": False}})
    assert res.status_code == 200 and res.json["options"]["encryptionEnabled"] is False


def test_push_to_an_encrypted_queue_without_key_fails_the_item_and_stores_nothing(
    make_admin: Callable[..., AdminApi],
) -> None:
    make_admin(QUEEN_ENCRYPTION_KEY=KEY_A).configure("locked", encryptionEnabled=True)
    keyless = make_admin()
    items = [
        {"queue": "locked", "payload": {"pin": 1}, "transactionId": "t1"},
        {"queue": "open", "payload": {"n": 2}, "transactionId": "t2"},
        {"queue": "locked", "partition": "p2", "payload": 3, "transactionId": "t1"},
    ]
    res = keyless.post("/push", {"items": items})
    assert res.status_code == 201
    locked, opened, again = res.json
    for item in (locked, again):
        assert item["status"] == "failed" and item["message_id"] is None
        assert "encryptionEnabled" in item["error"] and "QUEEN_ENCRYPTION_KEY" in item["error"]
    assert opened["status"] == "queued"
    stored = keyless.sql(
        "SELECT q.name FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id "
        "JOIN queen.queues q ON q.id = p.queue_id"
    )
    assert stored == [("open",)]


def test_transaction_push_to_an_encrypted_queue_without_key_rolls_back(
    make_admin: Callable[..., AdminApi],
) -> None:
    make_admin(QUEEN_ENCRYPTION_KEY=KEY_A).configure("txenc", encryptionEnabled=True)
    keyless = make_admin()
    before = keyless.snapshot()
    ops = [
        {"type": "push", "items": [{"queue": "txplain", "payload": 1, "transactionId": uuid4()}]},
        {"type": "push", "items": [{"queue": "txenc", "payload": 2, "transactionId": uuid4()}]},
    ]
    res = keyless.post("/transaction", {"operations": ops})
    assert res.status_code == 409 and res.json["success"] is False
    assert "QUEEN_ENCRYPTION_KEY" in res.json["error"]
    assert keyless.snapshot() == before


def test_server_with_key_still_encrypts_and_decrypts(make_admin: Callable[..., AdminApi]) -> None:
    admin = make_admin(QUEEN_ENCRYPTION_KEY=KEY_A)
    admin.configure("ok", encryptionEnabled=True)
    admin.push("ok", [{"pin": 9}])
    [(stored, encrypted)] = admin.sql("SELECT payload, is_encrypted FROM queen.messages")
    assert encrypted is True and "pin" not in str(stored)
    [message] = admin.pop("ok")
    assert message["data"] == {"pin": 9} and "decryptionError" not in message


def test_the_store_encrypts_copies_and_leaves_the_callers_items_as_they_came(
    database: Database,
) -> None:
    """The failover buffer keeps the items it passed to the store, to replay them: they
    must still be plain text after the store sealed what it sent (push and transaction)."""
    store = QueueStore(database, PayloadCipher(KEY_A))
    options = {"encryptionEnabled": True}
    assert database.call("configure_queue", {"queue": "sealed", "options": options})
    items = [
        {"queue": "sealed", "partition": "Default", "payload": {"pin": 1}, "transactionId": "a"},
        {"queue": "open", "partition": "Default", "payload": {"pin": 2}, "transactionId": "b"},
    ]
    before = copy.deepcopy(items)
    assert [r["status"] for r in store.push(items)] == ["queued", "queued"]
    pushed = [
        {"queue": "sealed", "partition": "Default", "payload": {"pin": 3}, "transactionId": "c"}
    ]
    ops = [{"type": "push", "items": pushed}]
    ops_before = copy.deepcopy(ops)
    assert store.transaction(ops)["success"] is True
    assert items == before and ops == ops_before
    with database.connection() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT m.transaction_id, m.is_encrypted, m.payload::text FROM queen.messages m"
            " ORDER BY m.id"
        )
        stored = cur.fetchall()
    assert [(t, e) for t, e, _ in stored] == [("a", True), ("b", False), ("c", True)]
    assert "pin" not in stored[0][2] and "pin" not in stored[2][2]
