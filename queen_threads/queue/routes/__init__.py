"""The queue core's routes: configure, push, pop, ack, lease extension. One
module per route family; their rows are here."""

from __future__ import annotations

from collections.abc import Callable

from queen_threads.background.maintenance import Maintenance
from queen_threads.http.routes import API, RW, Route, route
from queen_threads.queue.polling import PollingService
from queen_threads.queue.routes.ack import Ack, AckBatch
from queen_threads.queue.routes.configure import Configure
from queen_threads.queue.routes.lease import LeaseExtend
from queen_threads.queue.routes.pop import PARAMS, Pop, PopDefaults
from queen_threads.queue.routes.push import Push
from queen_threads.queue.service import QueueService
from queen_threads.queue.store import QueueStore


def routes(
    queues: QueueService,
    store: QueueStore,
    polling: PollingService,
    maintenance: Maintenance,
    require_database: Callable[[], None],
    defaults: PopDefaults,
    body_limit: int,
) -> list[Route]:
    """Producing and consuming: read-write (transactions: transaction/)."""
    pop = Pop(queues, polling, maintenance, require_database, defaults)
    return [
        route(f"{API}/configure", Configure(store, body_limit), POST=RW),
        route(f"{API}/push", Push(queues, body_limit), POST=RW),
        route(f"{API}/pop/queue/{{queue}}/partition/{{partition}}", pop, GET=(RW, PARAMS)),
        route(f"{API}/pop/queue/{{queue}}", pop, GET=(RW, PARAMS)),
        route(f"{API}/pop", pop, GET=(RW, PARAMS)),
        route(f"{API}/ack", Ack(queues, body_limit), POST=RW),
        route(f"{API}/ack/batch", AckBatch(queues, body_limit), POST=RW),
        route(f"{API}/lease/{{leaseId}}/extend", LeaseExtend(store, body_limit), POST=RW),
    ]
