"""Resource listings for dashboards: queues, one queue, namespaces, tasks.

GET    /api/v1/resources/queues
GET    /api/v1/resources/queues/{queue}     (and DELETE: the queue and everything in it)
GET    /api/v1/resources/partitions?queue=&namespace=&task=&limit=100&offset=0
GET    /api/v1/resources/namespaces
GET    /api/v1/resources/tasks
"""

from __future__ import annotations

import falcon

from queen_threads import validation as v
from queen_threads.admin.store import AdminStore
from queen_threads.http.params import page, scope_filters
from queen_threads.http.request import media
from queen_threads.queue.store import QueueStore


class Queues:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, self.store.queues())


class Queue:
    """GET: the queue's detail; DELETE: the queue and everything that belongs to it."""

    def __init__(self, store: AdminStore, queues: QueueStore) -> None:
        self.store = store
        self.queues = queues

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        media(resp, self.store.queue(v.name(queue, "Queue")))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        existed = self.queues.delete_queue(v.name(queue, "Queue"))
        media(resp, {"deleted": True, "queue": queue, "existed": existed})


class Partitions:
    """Partitions with their queue, message counts, DLQ rows and consumer groups (lag);
    an unknown queue, namespace or task is an empty page (as GET /dlq)."""

    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        limit, offset = page(req, resp, 100)
        media(resp, self.store.partitions(**scope_filters(req), limit=limit, offset=offset))


class Namespaces:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, {"namespaces": self.store.namespaces()})


class Tasks:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, {"tasks": self.store.tasks()})
