"""The HTTP ceiling: a bare falcon app answering the push route without a database.

`scripts/bench` runs it on `python -m gunicorn -c config/gunicorn.conf.py bench.bare_app:app`,
the server's own configuration (worker class, worker count, keep-alive, worker_connections,
and whatever else that file sets), so the only difference from the real server is the work
behind the route: the body is read and parsed with orjson, and every item is answered
"queued" in the shape of the real answer, so that the bench's `check_pushed` accepts it.
Kept free of queen_threads and bench imports: gunicorn loads it in every worker.
"""

from __future__ import annotations

import itertools
import os
import uuid

import falcon
import orjson

PARTITION_ID = str(uuid.UUID(int=0))
_ids = itertools.count(1)


def answer(items: list[object]) -> list[dict[str, object]]:
    """Per-item results shaped like the real push answer (queen._push_items)."""
    out = []
    for index, item in enumerate(items):
        txn = item.get("transactionId") if isinstance(item, dict) else None
        queue = item.get("queue") if isinstance(item, dict) else None
        out.append(
            {"index": index, "transaction_id": txn, "transactionId": txn, "status": "queued",
             "message_id": str(next(_ids)), "partition_id": PARTITION_ID, "trace_id": None,
             "queueName": queue}
        )  # fmt: skip
    return out


class Push:
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = orjson.loads(req.bounded_stream.read() or b"{}")
        items = body.get("items") if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise falcon.HTTPBadRequest(description="items array is required")
        resp.status = 201
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps(answer(items))


class Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps({"status": "healthy", "worker_id": os.getpid()})


app = falcon.App()
app.add_route("/api/v1/push", Push())
app.add_route("/health", Health())
