"""DELETE /api/v1/queues/{queue}/clear[?partition=]: empty a queue (or one partition) in
place. The queue keeps its options, partitions, consumer groups and subscriptions; the
messages go with their DLQ rows and traces, and the cursors on the cleared partitions
lose their leases and batches (queen.clear_queue_v1), so no consumer is left waiting for
a lease on messages that are gone. Admin only (its row)."""

from __future__ import annotations

import falcon

from queen_threads import validation as v
from queen_threads.admin.store import AdminStore
from queen_threads.http.params import name_param
from queen_threads.http.request import media


class ClearQueue:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_delete(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        name = v.name(queue, "Queue")
        partition = name_param(req, "partition", "Partition")
        result = self.store.clear_queue(name, partition)
        media(resp, {
            "cleared": True, "queue": name, "partition": partition,
            "deleted": result["deleted"], "deadLetters": result["deadLetters"],
            "traces": result["traces"], "partitions": result["partitions"],
        })  # fmt: skip
