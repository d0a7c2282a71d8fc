"""Routes for administration and dashboards (DLQ, messages, consumer groups, traces,
resource listings, clearing a queue, refreshing statistics). Each route family lives in its
own module; they register here. Their shared parameter parsing is in
`queen_threads/http/params.py`."""

from __future__ import annotations

import falcon

from queen_threads.resources import clear, consumer_groups, dlq, listings, messages, stats, traces
from queen_threads.runtime import Runtime


def register(app: falcon.App, runtime: Runtime, api: str) -> None:
    """Add the administration routes under `api` (e.g. /api/v1)."""
    store = runtime.admin
    body_limit = runtime.settings.max_body_size
    seek = consumer_groups.Seek(store, body_limit)
    routes: list[tuple[str, object]] = [
        ("/dlq", dlq.DeadLetters(store)),
        ("/dlq/requeue", dlq.Requeue(store, body_limit)),
        ("/messages", messages.MessageList(store)),
        ("/messages/{partitionId}/{transactionId}", messages.Message(store)),
        ("/messages/{partitionId}/{transactionId}/retry", messages.Retry(store, body_limit)),
        ("/messages/{partitionId}/{transactionId}/dlq", messages.MoveToDeadLetter(runtime)),
        ("/consumer-groups", consumer_groups.ConsumerGroups(store)),
        ("/consumer-groups/lagging", consumer_groups.Lagging(store)),
        ("/consumer-groups/{group}", consumer_groups.ConsumerGroup(store)),
        ("/consumer-groups/{group}/subscription", consumer_groups.Subscription(store, body_limit)),
        ("/consumer-groups/{group}/queues/{queue}", consumer_groups.GroupQueue(store)),
        ("/consumer-groups/{group}/queues/{queue}/seek", seek),
        ("/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek", seek),
        ("/stats/refresh", stats.StatsRefresh(store, body_limit)),
        ("/traces", traces.Traces(store, body_limit)),
        ("/traces/names", traces.TraceNames(store)),
        ("/traces/by-name/{name}", traces.TracesByName(store)),
        ("/traces/{partitionId}/{transactionId}", traces.MessageTraces(store)),
        ("/resources/queues", listings.Queues(store)),
        ("/resources/queues/{queue}", listings.Queue(store, runtime)),
        ("/resources/partitions", listings.Partitions(store)),
        ("/resources/namespaces", listings.Namespaces(store)),
        ("/resources/tasks", listings.Tasks(store)),
        ("/queues/{queue}/clear", clear.ClearQueue(store)),
    ]
    for path, resource in routes:
        app.add_route(f"{api}{path}", resource)
