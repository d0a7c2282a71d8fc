"""What the official client queen-mq 2.6.0 adds to the core queue API, through the HTTP
application on a real database: pop autopilot, per-pop leases, the ack commit rules, renew
answers and lease fencing in transactions (the client's own suite runs against the real
server in tests/acceptance/test_client26.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import AdminApi, uuid4


def pop(admin: AdminApi, queue: str, **params: Any) -> dict[str, Any]:
    res = admin.get(f"/pop/queue/{queue}", wait="false", **params)
    assert res.status_code in (200, 204), res.text
    return dict(res.json) if res.status_code == 200 else {"messages": []}


def fill(admin: AdminApi, queue: str, partitions: int, per_partition: int) -> None:
    for n in range(partitions):
        admin.push(queue, list(range(per_partition)), partition=f"p{n}")


def ack(admin: AdminApi, message: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    body = {k: message[k] for k in ("transactionId", "partitionId", "leaseId", "consumerGroup")}
    res = admin.post("/ack", {**body, "status": status})
    assert res.status_code == 200, res.text
    return dict(res.json[0])


# -- pop autopilot ---------------------------------------------------------------------------
def test_autopilot_sizes_what_the_client_left_out_and_says_so(admin: AdminApi) -> None:
    fill(admin, "ap", partitions=4, per_partition=30)
    out = pop(admin, "ap", autopilot="true")
    # one consumer, 4 ready partitions, a backlog: all four, with the backlog budget
    assert out["autopilot"] == {"partitions": 4, "batch": 1000, "waitMs": 0}
    assert out["partitionsClaimed"] == 4 and len(out["messages"]) == 120


def test_autopilot_never_changes_a_dimension_the_client_set(admin: AdminApi) -> None:
    fill(admin, "pin", partitions=4, per_partition=30)
    out = pop(admin, "pin", autopilot="true", batch="5")
    assert len(out["messages"]) == 5 and out["autopilot"]["batch"] == 5
    assert out["autopilot"]["partitions"] == 4  # 4 ready, this consumer alone
    out = pop(admin, "pin", autopilot="true", partitions="1")
    assert out["partitionsClaimed"] == 1 and out["autopilot"]["partitions"] == 1
    assert len(out["messages"]) == 30
    plain = pop(admin, "pin", batch="2")
    assert "autopilot" not in plain and len(plain["messages"]) == 2


def test_autopilot_shares_the_ready_partitions_with_the_consumers_at_work(
    admin: AdminApi,
) -> None:
    fill(admin, "share", partitions=8, per_partition=2)
    first = pop(admin, "share", batch="10", partitions="2")  # holds 2 partitions, one lease
    assert first["partitionsClaimed"] == 2
    second = pop(admin, "share", autopilot="true")
    # 6 ready, 1 consumer at work: this pop takes ceil(6 / 2) = 3
    assert second["autopilot"]["partitions"] == 3 and second["partitionsClaimed"] == 3


@pytest.mark.parametrize(
    ("ready", "active", "lag_s", "partitions", "batch", "expected"),
    [
        (100, 0, 10, None, None, (16, 1000)),  # a lone consumer on a backlog: the cap
        (100, 3, 10, None, None, (16, 1000)),  # ceil(100 / 4) = 25, capped at 16
        (6, 1, 0.1, None, None, (6, 600)),  # keeping up: every ready one, 100 per partition
        (40, 3, 0.1, None, None, (16, 1000)),  # keeping up: every ready one up to 16
        (6, 1, 5, None, None, (3, 1000)),  # a backlog: the share of ceil(6 / 2)
        (0, 0, None, None, None, (1, 100)),  # nothing ready
        (40, 1, 0.2, 1, None, (1, 100)),  # a pinned sweep width stays
        (40, 1, 5, None, 7, (16, 7)),  # a pinned batch stays
    ],
)  # fmt: skip
def test_the_controller_rule(
    admin: AdminApi,
    ready: int,
    active: int,
    lag_s: float | None,
    partitions: int | None,
    batch: int | None,
    expected: tuple[int, int],
) -> None:
    lag = None if lag_s is None else f"{lag_s} seconds"
    row = admin.sql(
        "SELECT partitions, batch FROM queen._autopilot(%s, %s, %s::interval, %s, %s)",
        ready, active, lag, partitions, batch,
    )  # fmt: skip
    assert row == [expected]


# -- per-pop lease ---------------------------------------------------------------------------
def test_lease_seconds_sets_this_pops_lease(admin: AdminApi) -> None:
    admin.configure("ls", leaseTime=300)
    admin.push("ls", [1, 2])
    out = pop(admin, "ls", leaseSeconds="5")
    (secs,) = admin.sql(
        "SELECT extract(epoch FROM lease_expires_at - now()) FROM queen.partition_consumers"
    )[0]
    assert out["messages"] and 3 < secs <= 5


@pytest.mark.parametrize("value", ["0", "604801", "x", "-3"])
def test_a_bad_lease_seconds_is_400_and_changes_nothing(admin: AdminApi, value: str) -> None:
    admin.push("lsb", [1])
    before = admin.snapshot()
    res = admin.get("/pop/queue/lsb", wait="false", leaseSeconds=value)
    assert res.status_code == 400 and "leaseSeconds" in res.json["error"]
    assert admin.snapshot() == before


# -- acks below the committed cursor, unknown transactions, renewals ----------------------------
def test_acks_below_the_cursor_are_noops_and_nacks_there_are_refused(admin: AdminApi) -> None:
    admin.configure("bc", leaseTime=30)
    admin.push("bc", [1, 2, 3])
    m1, m2, m3 = pop(admin, "bc", batch="3")["messages"]
    assert "noop" not in ack(admin, m2)  # commits m1 too (the silent gap before it)
    refused = ack(admin, m1, "failed")
    assert refused["success"] is False and "committed" in refused["error"]
    late = ack(admin, m1)
    assert late["success"] is True and late["noop"] is True
    assert "noop" not in ack(admin, m3)
    assert admin.sql("SELECT count(*) FROM queen.dead_letter_queue") == [(0,)]


def test_an_ack_of_an_unknown_transaction_is_unresolvable_and_keeps_the_lease(
    admin: AdminApi,
) -> None:
    admin.push("ut", [1])
    [m] = pop(admin, "ut")["messages"]
    before = admin.snapshot()
    for status in ("completed", "failed"):
        out = ack(admin, {**m, "transactionId": "never-pushed"}, status)
        assert out["success"] is False and out["error"].startswith("Unresolvable transaction")
    assert admin.snapshot() == before
    assert ack(admin, m)["success"] is True


def test_a_nack_ends_the_lease_even_when_it_dead_letters(admin: AdminApi) -> None:
    admin.configure("dl", retryLimit=0)
    admin.push("dl", [1, 2, 3])
    m1, m2, _ = pop(admin, "dl", batch="3")["messages"]
    ack(admin, m1)
    assert ack(admin, m2, "failed")["status"] == "failed_dlq"
    # the rest of the batch is delivered again at once, not after the lease time
    assert [m["data"] for m in pop(admin, "dl", batch="5")["messages"]] == [3]


def test_renewing_a_freed_lease_is_200_with_nothing_renewed_and_an_unknown_one_404(
    admin: AdminApi,
) -> None:
    admin.push("rn", [1])
    [m] = pop(admin, "rn")["messages"]
    live = admin.post(f"/lease/{m['leaseId']}/extend", {})
    assert live.status_code == 200 and live.json["renewed"] == 1 and live.json["success"]
    ack(admin, m)
    gone = admin.post(f"/lease/{m['leaseId']}/extend", {})
    assert gone.status_code == 200
    assert gone.json["success"] is False and gone.json["renewed"] == 0
    assert gone.json["newExpiresAt"] is None and "known" not in gone.json
    unknown = admin.post(f"/lease/{uuid4()}/extend", {})
    assert unknown.status_code == 404 and unknown.json["renewed"] == 0


# -- lease fencing in transactions -----------------------------------------------------------
def test_a_bundle_with_an_ack_under_an_expired_lease_changes_nothing(admin: AdminApi) -> None:
    admin.push("fa", [1])
    admin.push("fb", [2])
    [a] = pop(admin, "fa", leaseSeconds="1")["messages"]
    [b] = pop(admin, "fb")["messages"]
    admin.sql("UPDATE queen.partition_consumers SET lease_expires_at = now() - interval '1s'"
              " WHERE lease_id = %s", a["leaseId"])  # fmt: skip
    [taken] = pop(admin, "fa")["messages"]  # another consumer holds it now
    before = admin.snapshot()
    bundle = {
        "operations": [
            {"type": "ack", **{k: m[k] for k in ("transactionId", "partitionId", "leaseId")},
             "status": "completed"} for m in (a, b)
        ] + [{"type": "push", "items": [{"queue": "fc", "payload": 3}]}],
        "requiredLeases": [a["leaseId"], b["leaseId"]],
    }  # fmt: skip
    res = admin.post("/transaction", bundle)
    assert res.status_code == 409 and res.json["success"] is False
    assert res.json["error"].startswith("Transaction rolled back: operation 0")
    assert "lease" in res.json["error"]
    assert admin.snapshot() == before
    assert ack(admin, taken)["success"] is True


def test_the_one_required_lease_fences_an_ack_without_its_own(admin: AdminApi) -> None:
    admin.push("rl", [1])
    [m] = pop(admin, "rl")["messages"]
    op = {"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"]}
    res = admin.post("/transaction", {"operations": [op], "requiredLeases": [uuid4()]})
    assert res.status_code == 409 and "lease" in res.json["error"]
    res = admin.post("/transaction", {"operations": [op], "requiredLeases": [m["leaseId"]]})
    assert res.status_code == 200 and res.json["success"] is True


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ({"requiredLeases": "x"}, "requiredLeases must be an array"),
        ({"requiredLeases": [5]}, "requiredLeases[] must be a string"),
        ({"timers": [{"op": "later"}]}, "timers[0]: op must be one of"),
    ],
)
def test_bad_bundles_are_400_and_change_nothing(
    admin: AdminApi, extra: dict[str, Any], error: str
) -> None:
    admin.push("bb", [1])
    before = admin.snapshot()
    body = {"operations": [{"type": "push", "items": [{"queue": "bb", "payload": 2}]}], **extra}
    res = admin.post("/transaction", body)
    assert res.status_code == 400 and error in res.json["error"], res.json
    assert admin.snapshot() == before


# -- conflation --------------------------------------------------------------------------------
def test_a_conflating_group_gets_the_newest_message_of_each_partition(admin: AdminApi) -> None:
    for partition in ("eu", "us"):
        admin.push("cf", [f"{partition}-{n}" for n in range(5)], partition=partition)
    out = pop(admin, "cf", conflation="true", batch="10", partitions="2")
    assert sorted(m["data"] for m in out["messages"]) == ["eu-4", "us-4"]
    assert out["conflation"] is True and out["conflated"] == 8
    for m in out["messages"]:
        ack(admin, m)
    admin.push("cf", ["eu-5", "eu-6"], partition="eu")
    # the stored policy applies to a pop that does not ask for it too
    again = pop(admin, "cf", batch="10")
    assert [m["data"] for m in again["messages"]] == ["eu-6"] and again["conflation"] is True


def test_an_empty_conflating_pop_answers_with_the_policy(admin: AdminApi) -> None:
    admin.configure("ce")
    res = admin.get("/pop/queue/ce", wait="false", conflation="true")
    assert res.status_code == 200 and res.json["messages"] == []
    assert res.json["conflation"] is True
    res = admin.get("/pop/queue/ce", wait="true", timeout="100", conflation="true")
    assert res.status_code == 200 and res.json["conflation"] is True  # at the deadline too


def test_a_group_declared_without_conflation_keeps_its_policy(admin: AdminApi) -> None:
    admin.push("cc", [1, 2, 3])
    [first] = pop(admin, "cc", consumerGroup="g")["messages"]
    ack(admin, first)
    out = pop(admin, "cc", consumerGroup="g", conflation="true", batch="10")
    assert out["conflationConflict"] is True and "conflation" not in out
    assert [m["data"] for m in out["messages"]] == [2, 3]  # not conflated: the stored policy
    # deleting the group lets it declare again
    assert admin.delete("/consumer-groups/g").status_code == 200
    admin.push("cc", [4, 5])
    out = pop(admin, "cc", consumerGroup="g", conflation="true", batch="10")
    assert out["conflation"] is True and [m["data"] for m in out["messages"]] == [5]


def test_a_binary_push_body_is_400_naming_json(admin: AdminApi) -> None:
    before = admin.snapshot()
    for path in ("/push", "/transaction"):
        res = admin.client.simulate_post(
            f"/api/v1{path}", body=b"QPB1\x00", headers={"Content-Type": "application/x-queen-push"}
        )
        assert res.status_code == 400 and "send JSON" in res.json["error"], res.text
    assert admin.snapshot() == before


def test_frames_is_ignored_and_named_so_the_client_reads_json(admin: AdminApi) -> None:
    admin.push("fr", [1])
    res = admin.get("/pop/queue/fr", wait="false", frames="true")
    assert res.status_code == 200 and res.json["messages"][0]["data"] == 1
    assert res.headers["Queen-Ignored-Parameters"] == "query:frames"
