"""One method per queue operation, over the queue functions of `schema/functions/`: the store
is their only caller. A push, pop, ack or renewal is one stored-function call; it goes to
the entry point of its one partition when it concerns one (queue/placement.py: on Citus
that call runs on the partition's shard group, schema/citus/70_twins.sql), and on Citus a
pop of a whole queue goes to one node after the other, each serving it from its own shard
groups in one delegated call. A push to an encrypted queue first asks which queues are (one
more call, only with a key). The store adds what PostgreSQL cannot do itself: AES-GCM
encryption of payloads and their decryption (a payload that cannot be decrypted goes out as
`data: null` with a `decryptionError` marker, see crypto.open_message). The wake-interest
epoch each write returns goes to `saw_epoch` (wake/store.py).

What the database did is told to an observer when there is one (queue/metrics.py counts
it), one `if` per call; without one nothing is counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import orjson

from queen_threads.crypto import PayloadCipher, open_message
from queen_threads.db import Database
from queen_threads.db.citus import CitusProbe
from queen_threads.queue.body import encryption_key_present
from queen_threads.queue.placement import (
    NodeAnchors,
    PartitionIds,
    PartitionRoutes,
    ack_partition,
    candidate_key,
    merge_empty,
    one_partition,
)


def expand_push_results(
    items: Sequence[dict[str, Any]], rows: Sequence[Sequence[Any]]
) -> list[dict[str, Any]]:
    """The per-item results of a push, from the compact answer of queen.push_messages_v4
    (one `[status, message_id, partition_id, trace_id, error, reason, generated_txn]` per
    item, in input order): exactly the objects queen.push_messages_v2 answers. The item
    gives what the database does not repeat (its transactionId, unless the database
    generated one, and its queue); items come validated, with string transactionIds."""
    results = []
    for index, (item, row) in enumerate(zip(items, rows, strict=True)):
        status, message_id, partition_id, trace_id, error, reason, generated = row
        txn = item.get("transactionId") if generated is None else generated
        result = {
            "index": index,
            "transaction_id": txn,
            "transactionId": txn,
            "status": status,
            "message_id": message_id,
            "partition_id": partition_id,
            "trace_id": trace_id,
            "queueName": item.get("queue"),
        }
        if error is not None:  # failed
            result["error"] = error
            result["reason"] = reason
        results.append(result)
    return results


# The one-partition statements' Citus twins (schema/queries.sql), each named in full.
ON_SHARD = {
    "pop_partition": "pop_partition_on_shard",
    "ack_partition": "ack_partition_on_shard",
    "renew_partition": "renew_partition_on_shard",
}


class QueueObserver(Protocol):
    """Sees what the database did (queue/metrics.py counts it): each method hears one
    call's input and answer, after the call returned."""

    def pushed(self, items: list[dict[str, Any]], results: list[dict[str, Any]]) -> None: ...

    def popped(self, results: list[dict[str, Any]]) -> None: ...

    def acked(self, results: list[dict[str, Any]]) -> None: ...

    def transacted(self, result: dict[str, Any]) -> None: ...

    def decryption_failed(self, message: dict[str, Any], reason: str) -> None: ...


class QueueStore:
    """Queue operations over the database; values always travel as bind parameters."""

    def __init__(
        self,
        db: Database,
        cipher: PayloadCipher | None = None,
        observer: QueueObserver | None = None,
        saw_epoch: Callable[[int], None] = lambda _epoch: None,
    ) -> None:
        self.db = db
        self.cipher = cipher
        self.observer = observer
        # The wake-interest epoch each push and ack returns (wake/store.py keeps the newest).
        self._saw_wake_epoch = saw_epoch
        # The partitions of pops and leases, for the one-partition entry points
        # (queue/placement.py).
        self.routes = PartitionRoutes()
        # On Citus, the nodes a pop of a whole queue is sent to, one after the other.
        self.nodes = NodeAnchors(lambda: list(self.db.json("citus_node_anchors") or []))
        self.partition_ids = PartitionIds()
        self.citus = CitusProbe(db)

    # -- producers ------------------------------------------------------------------
    def push(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        sealed = self.seal(items)
        key = one_partition(items)
        rows = None
        pid = self.partition_ids.get(key) if key is not None else None
        if pid is None and key is not None:
            pid = self._partition_id(key)
        if pid is not None:
            rows = self._push_partition(pid, sealed)
            if rows is None:
                assert key is not None
                self.partition_ids.declined(key)
        if rows is None:
            rows, epoch = self.db.call_and("push_messages", sealed)
            self._saw_wake_epoch(epoch)
            if key is not None and rows and rows[0][2] is not None:
                self.partition_ids.learn(key, rows[0][2])
        results = expand_push_results(items, rows)
        if self.observer is not None:
            self.observer.pushed(items, results)
        return results

    def _partition_id(self, key: tuple[str, str]) -> str | None:
        """On Citus, the id of a partition this process has not pushed to (created when
        missing), so that its push is delegated too: the general push of one item costs the
        coordinator tens of ms there (a two-phase commit over every node), a lookup and a
        delegated call about 1.5 ms. On PostgreSQL None: the general push learns it. (The
        probe is not asked here: a process's first push takes the general path, as before;
        the placement is known from its second push on.)"""
        if self.partition_ids.paused(key) or not self.citus.known():
            return None
        pid = self.db.value("partition_id", key)
        if pid is not None:
            self.partition_ids.learn(key, pid)
        return pid if isinstance(pid, str) else None

    def _push_partition(self, pid: str, items: list[dict[str, Any]]) -> Any:
        """The compact answer of `queen.push_partition_v1`, None when it declined. On Citus
        the call is a statement of its own (so Citus delegates it) and the wake-interest
        epoch is read after its commit; on PostgreSQL both travel in one statement."""
        payload = orjson.dumps(items).decode()
        if self.citus():
            text = self.db.value("push_partition_delegated", (pid, payload))
            if text is None:
                return None
            self._saw_wake_epoch(self.db.value("wake_epoch"))
        else:
            row = self.db.row("push_partition", (pid, payload))
            assert row is not None
            self._saw_wake_epoch(row[0])
            text = row[1]
            if text is None:
                return None
        return orjson.loads(text)

    def seal(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`items` ready to store: the payloads bound for encrypted queues encrypted."""
        return self._sealed(items, self._encrypted_queues(items))

    def _encrypted_queues(self, items: list[dict[str, Any]]) -> set[str]:
        """The queues of `items` whose payloads are stored encrypted (none without a key)."""
        if self.cipher is None or not items:
            return set()
        names = sorted({item["queue"] for item in items})
        return {row[0] for row in self.db.rows("encrypted_queues", (names,))}

    def _sealed(self, items: list[dict[str, Any]], queues: set[str]) -> list[dict[str, Any]]:
        """The items with the payloads bound for `queues` encrypted: copies, so that the
        caller's items stay as they came (the failover buffer keeps them for a replay)."""
        if not queues:
            return items
        assert self.cipher is not None
        cipher = self.cipher
        return [
            {**item, "payload": cipher.encrypt(item["payload"]), "isEncrypted": True}
            if item["queue"] in queues and "payload" in item
            else item
            for item in items
        ]

    # -- consumers ------------------------------------------------------------------
    def pop(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """One call for several pops (each its own lease); results in request order. A
        single pop of a partition whose id is known goes to its partition's entry point."""
        pid = self._pop_partition(requests[0]) if len(requests) == 1 else None
        results: list[dict[str, Any]]
        if pid is not None:
            results = [self._pop_one_partition(pid, requests[0])]
        elif self.citus():
            results = self._pop_on_nodes(requests)
        else:
            results = self.db.call("pop_batch", list(requests))
        self.routes.learn(requests, results)
        for result in results:
            for message in result.get("messages") or ():
                self.open_message(message)
        if self.observer is not None:
            self.observer.popped(results)
        return results

    def _on_shard(self, name: str) -> str:
        """A one-partition statement's name; on Citus its entry point that runs on the
        partition's shard group (schema/citus/70_twins.sql)."""
        return ON_SHARD[name] if self.citus() else name

    def _pop_one_partition(self, pid: str, request: dict[str, Any]) -> dict[str, Any]:
        request_text = orjson.dumps(request).decode()
        return dict(self.db.json(self._on_shard("pop_partition"), (pid, request_text)))

    def _pop_on_nodes(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """On Citus: a pop of a whole queue goes to one node after the other, each serving it
        from its own shards (one round trip each, `NodeAnchors`); the others, and those a
        node could not answer, go to the general pop (which reads every shard)."""
        served = [self._pop_queue_on_nodes(r) for r in requests]
        rest = [r for r, got in zip(requests, served, strict=True) if got is None]
        if rest:
            answers = iter(self.db.call("pop_batch", rest))
            served = [got if got is not None else next(answers) for got in served]
        return [got for got in served if got is not None]

    def _pop_queue_on_nodes(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The first node's answer that delivers, else the nodes' empty answers as one; None
        when the request is not one a node serves, or a node could not answer it."""
        key = candidate_key(request)
        if key is None:
            return None
        text = orjson.dumps(request).decode()
        empty = None
        for anchor in self.nodes.order(key):
            answer = self.db.json("pop_queue_on_node", (anchor, text))
            if answer is None:
                return None
            if answer.get("messages"):
                return dict(answer)
            empty = merge_empty(empty, answer)
        return empty

    def _pop_partition(self, request: dict[str, Any]) -> str | None:
        """The id of the one partition `request` pops from, when this process knows it
        (from a pop's answer, else from a push's)."""
        pid = self.routes.of_pop(request)
        if pid is None and request.get("queue") and request.get("partition"):
            pid = self.partition_ids.get((request["queue"], request["partition"]))
        return pid

    def open_message(self, message: dict[str, Any]) -> None:
        """Decrypt an outgoing message in place (see crypto.open_message)."""
        reason = open_message(message, self.cipher)
        if reason is not None and self.observer is not None:
            self.observer.decryption_failed(message, reason)

    def ack(self, acks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        pid = ack_partition(acks)
        if pid is None:
            rows, epoch = self.db.call_and("ack_messages", {"acks": acks})
        else:  # one partition: its entry point
            body = orjson.dumps({"acks": acks}).decode()
            answer = self.db.json(self._on_shard("ack_partition"), (pid, body))
            rows, epoch = answer["results"], answer["wakeEpoch"]
            if epoch is None:  # it ran on a Citus worker: the epoch as of after its commit
                epoch = self.db.value("wake_epoch")
        self._saw_wake_epoch(epoch)
        results = list(rows)
        if self.observer is not None:
            self.observer.acked(results)
        return results

    def transaction(
        self,
        operations: list[dict[str, Any]],
        required_leases: list[str] | None = None,
        riders: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Pushes and acks in one database transaction; an ack without a leaseId of its own
        is fenced by the one lease of `required_leases` when it names exactly one. The
        riders go beside them (`kv`: the validated key/value operations; `timers`: the
        validated timer operations, their payloads sealed as the pushes' are; see
        50_transaction.sql)."""
        riders = dict(riders or {})
        timers = riders.get("timers") or []
        pushed = [i for op in operations if op.get("type") == "push" for i in op["items"]]
        queues = self._encrypted_queues(pushed + [t for t in timers if "payload" in t])
        sent = [
            {**op, "items": self._sealed(op["items"], queues)} if op.get("type") == "push" else op
            for op in operations
        ]
        if timers:
            riders["timers"] = self._sealed(timers, queues)
        body = {"operations": sent, "requiredLeases": required_leases or [], **riders}
        result = dict(self.db.call("execute_transaction", body))
        if self.observer is not None:
            self.observer.transacted(result)
        return result

    # -- for the timers room (timers/store.py, timers/service.py) ----------------------
    def encrypted_queues(self, items: list[dict[str, Any]]) -> set[str]:
        """The queues of `items` (anything with a "queue") whose payloads are stored
        encrypted: a timer's payload is sealed when it is scheduled."""
        return self._encrypted_queues(items)

    def renew(self, lease_id: str, seconds: int | None) -> dict[str, Any]:
        body = {"leaseId": lease_id, "seconds": seconds}
        pid = self.routes.of_lease(lease_id)
        if pid is None:
            return dict(self.db.call("renew_lease", body))
        text = orjson.dumps(body).decode()
        return dict(self.db.json(self._on_shard("renew_partition"), (pid, text)))

    def release_leases(self, lease_ids: Sequence[str]) -> int:
        """Give leases back (client gone): their messages go to the next consumer now."""
        if not lease_ids:
            return 0
        return int(self.db.call("release_leases", {"leaseIds": list(lease_ids)}))

    # -- administration -------------------------------------------------------------
    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create or update a queue; encryption without a key would store plain text: 400."""
        encryption_key_present(body, self.cipher is not None)
        return dict(self.db.call("configure_queue", body))

    def delete_queue(self, name: str) -> bool:
        if not self.citus():
            return bool(self.db.value("delete_queue", {"name": name}))
        # On Citus the messages go too, in the same transaction (no foreign key cascades
        # to them there: schema/citus/30_push.sql).
        with self.db.transaction() as tx:
            pids = tx.value("citus_queue_partitions", (name,)) or []
            existed = bool(tx.value("delete_queue", {"name": name}))
            if pids:
                tx.execute("delete_queue_messages", (pids,))
        return existed
