"""Routes for administration and dashboards (messages, consumer groups, traces,
resource listings, clearing a queue, refreshing statistics). Each route family lives in its
own module; their rows are here. Their shared parameter parsing is in
`queen_threads/http/params.py`."""

from __future__ import annotations

from queen_threads.admin.routes import clear, consumer_groups, listings, messages, stats, traces
from queen_threads.admin.store import AdminStore
from queen_threads.http.params import PAGE
from queen_threads.http.routes import ADMIN, API, RO, RW, Route, route
from queen_threads.queue.service import QueueService
from queen_threads.queue.store import QueueStore


def routes(
    store: AdminStore, queue_store: QueueStore, queues: QueueService, body_limit: int
) -> list[Route]:
    """The administration routes: most read and write through `store`; deleting a queue
    goes through the queue store, moving a message to the DLQ is an ack (`queues`)."""
    seek = consumer_groups.Seek(store, body_limit)
    group_delete = {"deleteMetadata"}
    return [
        route(f"{API}/messages", messages.MessageList(store), GET=(RO, messages.PARAMS)),
        route(f"{API}/messages/{{partitionId}}/{{transactionId}}", messages.Message(store),
              GET=RO, DELETE=RW),
        route(f"{API}/messages/{{partitionId}}/{{transactionId}}/dlq",
              messages.MoveToDeadLetter(queues, body_limit), POST=RW),
        # consumer groups: reading is read-only, deleting is admin, the rest read-write
        route(f"{API}/consumer-groups", consumer_groups.ConsumerGroups(store), GET=RO),
        route(f"{API}/consumer-groups/lagging", consumer_groups.Lagging(store),
              GET=(RO, {"minLagSeconds"})),
        route(f"{API}/consumer-groups/{{group}}", consumer_groups.ConsumerGroup(store),
              GET=RO, DELETE=(ADMIN, group_delete)),
        route(f"{API}/consumer-groups/{{group}}/subscription",
              consumer_groups.Subscription(store, body_limit), POST=RW),
        route(f"{API}/consumer-groups/{{group}}/queues/{{queue}}",
              consumer_groups.GroupQueue(store), DELETE=(ADMIN, group_delete)),
        route(f"{API}/consumer-groups/{{group}}/queues/{{queue}}/seek", seek, POST=RW),
        route(f"{API}/consumer-groups/{{group}}/queues/{{queue}}/partitions/{{partition}}/seek",
              seek, POST=RW),
        route(f"{API}/stats/refresh", stats.StatsRefresh(store, body_limit), POST=ADMIN),
        # traces
        route(f"{API}/traces", traces.Traces(store, body_limit), POST=RW),
        route(f"{API}/traces/names", traces.TraceNames(store), GET=(RO, PAGE)),
        route(f"{API}/traces/by-name/{{name}}", traces.TracesByName(store), GET=(RO, PAGE)),
        route(f"{API}/traces/{{partitionId}}/{{transactionId}}", traces.MessageTraces(store),
              GET=RO),
        # resource listings
        route(f"{API}/resources/queues", listings.Queues(store), GET=RO),
        route(f"{API}/resources/queues/{{queue}}", listings.Queue(store, queue_store),
              GET=RO, DELETE=ADMIN),
        route(f"{API}/resources/partitions", listings.Partitions(store),
              GET=(RO, PAGE | {"queue", "namespace", "task"})),
        route(f"{API}/resources/namespaces", listings.Namespaces(store), GET=RO),
        route(f"{API}/resources/tasks", listings.Tasks(store), GET=RO),
        route(f"{API}/queues/{{queue}}/clear", clear.ClearQueue(store),
              DELETE=(ADMIN, {"partition"})),
    ]  # fmt: skip
