"""The one-partition entry points the store calls when a pop, an ack or a renewal concerns
one partition (queen.pop_partition_v1, ack_partition_v2, renew_partition_v1; on Citus each
one call on the partition's worker): on PostgreSQL they answer as the general calls do."""

from __future__ import annotations

from typing import Any

from queen_threads.db import Database
from queen_threads.queue.store import QueueStore
from queen_threads.wake.store import WakeStore


class Recording:
    """The names of the statements a Database ran."""

    def __init__(self, db: Database) -> None:
        self.names: list[str] = []
        run = db._run

        def _run(name: str, params: Any, fetch: Any) -> Any:
            self.names.append(name)
            return run(name, params, fetch)

        db._run = _run  # type: ignore[method-assign]


def _pop(store: QueueStore, queue: str, partition: str | None, batch: int) -> dict[str, Any]:
    return store.pop(
        [{"idx": 0, "queue": queue, "partition": partition, "batch": batch,
          "leaseId": None, "leaseSeconds": 30}]
    )[0]  # fmt: skip


def test_a_known_partition_is_popped_acked_and_renewed_through_its_entry_points(
    database: Database,
) -> None:
    wakes = WakeStore(database)
    store = QueueStore(database, saw_epoch=wakes.saw_epoch)
    wakes.want({"origin": "elsewhere", "ttlMs": 60_000, "selectors": [{"queue": "x"}]})
    calls = Recording(database)
    store.push([{"queue": "ep", "partition": "a", "payload": n, "transactionId": f"t{n}"}
                for n in range(5)])  # fmt: skip
    first = _pop(store, "ep", "a", 2)
    assert [m["data"] for m in first["messages"]] == [0, 1]
    pid = first["partitionId"]
    # the push taught the partition's id: the pop went to the partition's entry point
    assert "pop_partition" in calls.names

    renewed = store.renew(first["leaseId"], 120)
    assert renewed["success"] is True and renewed["renewed"] == 1
    assert calls.names[-1] == "renew_partition"

    acks = [
        {"transactionId": m["transactionId"], "partitionId": pid, "leaseId": m["leaseId"]}
        for m in first["messages"]
    ]
    results = store.ack(acks)
    assert [r["status"] for r in results] == ["completed", "completed"]
    assert calls.names[-1] == "ack_partition"
    assert wakes.epoch >= 1  # the epoch each write returned reached the wake store

    second = _pop(store, "ep", "a", 10)
    assert [m["data"] for m in second["messages"]] == [2, 3, 4]
    assert second["partitionId"] == pid
    # a renewal of a lease this process never handed out: the general call
    unknown = store.renew("00000000-0000-0000-0000-000000000000", 10)
    assert unknown["success"] is False and unknown["known"] is False
    assert calls.names[-1] == "renew_lease"


def test_acks_over_two_partitions_take_the_general_call(database: Database) -> None:
    store = QueueStore(database)
    calls = Recording(database)
    store.push([{"queue": "ep2", "partition": p, "payload": p} for p in ("a", "b")])
    got = store.pop([{"idx": 0, "queue": "ep2", "partition": None, "batch": 2, "partitions": 2,
                      "leaseId": None}])[0]  # fmt: skip
    assert sorted(m["data"] for m in got["messages"]) == ["a", "b"]
    results = store.ack([{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                          "leaseId": m["leaseId"], "status": "completed"}
                         for m in got["messages"]])  # fmt: skip
    assert all(r["success"] for r in results)
    assert calls.names[-1] == "ack_messages"
