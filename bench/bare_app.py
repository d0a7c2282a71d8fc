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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import falcon
import orjson
import psycopg2
import psycopg2.extensions

from bench.ceiling_db import INSERT_BATCH, INSERT_ONE

PARTITION_ID = str(uuid.UUID(int=0))
_ids = itertools.count(1)


def _green_wait(conn: Any, timeout: float | None = None) -> None:
    """psycopg2's wait callback: wait for the connection's socket through gevent."""
    from gevent.socket import wait_read, wait_write

    while True:
        state = conn.poll()
        if state == psycopg2.extensions.POLL_OK:
            return
        if state == psycopg2.extensions.POLL_READ:
            wait_read(conn.fileno())
        elif state == psycopg2.extensions.POLL_WRITE:
            wait_write(conn.fileno())
        else:
            raise psycopg2.OperationalError(f"bad result from poll: {state!r}")


class Store:
    """Stores pushed items in `schema`'s messages table, one autocommit statement each."""

    def __init__(self, dsn: str, schema: str, size: int) -> None:
        from gevent.lock import BoundedSemaphore
        from gevent.monkey import is_module_patched

        if is_module_patched("socket"):  # in gunicorn's gevent worker, not in a test
            psycopg2.extensions.set_wait_callback(_green_wait)
        self.dsn = dsn
        self.one = INSERT_ONE.format(s=schema)
        self.batch = INSERT_BATCH.format(s=schema)
        self.slots = BoundedSemaphore(size)
        self.idle: list[Any] = []

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        with self.slots:
            conn = self.idle.pop() if self.idle else psycopg2.connect(self.dsn)
            conn.autocommit = True
            try:
                with conn.cursor() as cur:
                    yield cur
            except BaseException:
                conn.close()
                raise
            self.idle.append(conn)

    def store(self, items: list[Any]) -> None:
        with self._cursor() as cur:
            if len(items) == 1:
                item = items[0]
                cur.execute(self.one, (item.get("transactionId"), PARTITION_ID,
                                       orjson.dumps(item.get("payload")).decode()))  # fmt: skip
            else:
                cur.execute(self.batch, (PARTITION_ID, orjson.dumps(items).decode()))


def _store_from_env() -> Store | None:
    schema = os.environ.get("BARE_DB_SCHEMA")
    if not schema:
        return None
    workers = max(1, int(os.environ.get("NUM_WORKERS") or 1))
    size = max(1, int(os.environ.get("DB_POOL_SIZE") or 150) // workers)
    return Store(os.environ["DATABASE_URL"], schema, size)


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
    def __init__(self, store: Store | None = None) -> None:
        self.store = store

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = orjson.loads(req.bounded_stream.read() or b"{}")
        items = body.get("items") if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise falcon.HTTPBadRequest(description="items array is required")
        if self.store is not None and items:
            self.store.store(items)
        resp.status = 201
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps(answer(items))


class Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps({"status": "healthy", "worker_id": os.getpid()})


app = falcon.App()
app.add_route("/api/v1/push", Push(_store_from_env()))
app.add_route("/health", Health())
