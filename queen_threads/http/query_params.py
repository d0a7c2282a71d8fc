"""Which query parameters each route takes: the one table.

A parameter a route does not know is ignored, as the official clients require of a broker,
and reported (`http/ignored.py`: the `Queen-Ignored-Parameters` header, a counter, one log
line), so a misspelt filter (`?queu=orders`) shows in the answer instead of passing
silently for "no filter". Every (method, route template) the app serves has a row, as in
`http/access.py`; `tests/unit/test_query_params.py` walks falcon's router and fails on a
route without a row or a row without a route.

A row lists what the responder reads (its parsing lives in `http/params.py`,
`http/request.py` and the resource) and every parameter the official client sends to it.
Two are accepted without changing the answer, because the client sends them and the
route has nothing to apply them to (docs/api.md): `namespace`/`task` on the two queue pop
routes (the queue already fixes them) and `partitions` on the one-partition pop route.
"""

from __future__ import annotations

from typing import Any

from queen_threads.http.webapp import ASSETS_ROUTE, PAGES

API = "/api/v1"
NONE: frozenset[str] = frozenset()
PAGE = frozenset({"limit", "offset"})
TIME_RANGE = frozenset({"from", "to"})
CHART = TIME_RANGE | {"interval"}
POP = frozenset({
    "batch", "wait", "timeout", "consumerGroup", "autoAck", "partitions",
    "subscriptionMode", "subscriptionFrom", "namespace", "task",
    # queen-mq 2.6.0
    "autopilot", "leaseSeconds", "conflation",
})  # fmt: skip
GROUP_DELETE = frozenset({"deleteMetadata"})

PARAMS: dict[str, dict[str, frozenset[str]]] = {
    # operations
    "/health": {"GET": NONE},
    "/metrics": {"GET": NONE},
    "/metrics/prometheus": {"GET": NONE},
    # producing and consuming
    f"{API}/configure": {"POST": NONE},
    f"{API}/push": {"POST": NONE},
    f"{API}/pop": {"GET": POP},
    f"{API}/pop/queue/{{queue}}": {"GET": POP},
    f"{API}/pop/queue/{{queue}}/partition/{{partition}}": {"GET": POP},
    f"{API}/ack": {"POST": NONE},
    f"{API}/ack/batch": {"POST": NONE},
    f"{API}/transaction": {"POST": NONE},
    f"{API}/lease/{{leaseId}}/extend": {"POST": NONE},
    # key/value and locks
    f"{API}/kv": {"POST": NONE},
    f"{API}/kv/{{ns}}/{{key:path}}": {"GET": NONE, "PUT": NONE, "DELETE": frozenset({"expect"})},
    f"{API}/locks": {"POST": NONE},
    # streams
    f"{API}/stream/define": {"POST": NONE},
    f"{API}/stream/poll": {"POST": NONE},
    f"{API}/stream/ack": {"POST": NONE},
    f"{API}/stream/renew-lease": {"POST": NONE},
    f"{API}/stream/seek": {"POST": NONE},
    f"{API}/resources/streams": {"GET": frozenset({"namespace"})},
    f"{API}/resources/streams/stats": {"GET": NONE},
    f"{API}/resources/streams/{{name}}": {"GET": NONE, "DELETE": NONE},
    f"{API}/resources/streams/{{name}}/consumers": {"GET": NONE},
    # timers
    f"{API}/timers": {"POST": NONE},
    f"{API}/timers/{{queue}}": {"GET": frozenset({"after", "limit"})},
    f"{API}/timers/{{queue}}/{{key:path}}": {"GET": NONE, "DELETE": frozenset({"txn"})},
    # messages and dead letters
    f"{API}/dlq": {"GET": PAGE | TIME_RANGE | {"queue", "partition", "consumerGroup", "error"}},
    f"{API}/dlq/requeue": {"POST": NONE},
    f"{API}/messages": {
        "GET": PAGE | TIME_RANGE | {"queue", "partition", "ns", "namespace", "task", "status"}
    },
    f"{API}/messages/{{partitionId}}/{{transactionId}}": {"GET": NONE, "DELETE": NONE},
    f"{API}/messages/{{partitionId}}/{{transactionId}}/retry": {"POST": NONE},
    f"{API}/messages/{{partitionId}}/{{transactionId}}/dlq": {"POST": NONE},
    # consumer groups
    f"{API}/consumer-groups": {"GET": NONE},
    f"{API}/consumer-groups/lagging": {"GET": frozenset({"minLagSeconds"})},
    f"{API}/consumer-groups/{{group}}": {"GET": NONE, "DELETE": GROUP_DELETE},
    f"{API}/consumer-groups/{{group}}/subscription": {"POST": NONE},
    f"{API}/consumer-groups/{{group}}/queues/{{queue}}": {"DELETE": GROUP_DELETE},
    f"{API}/consumer-groups/{{group}}/queues/{{queue}}/seek": {"POST": NONE},
    f"{API}/consumer-groups/{{group}}/queues/{{queue}}/partitions/{{partition}}/seek": {
        "POST": NONE
    },
    f"{API}/stats/refresh": {"POST": NONE},
    # traces
    f"{API}/traces": {"POST": NONE},
    f"{API}/traces/names": {"GET": PAGE},
    f"{API}/traces/by-name/{{name}}": {"GET": PAGE},
    f"{API}/traces/{{partitionId}}/{{transactionId}}": {"GET": NONE},
    # resources and status
    f"{API}/resources/overview": {"GET": NONE},
    f"{API}/resources/queues": {"GET": NONE},
    f"{API}/resources/queues/{{queue}}": {"GET": NONE, "DELETE": NONE},
    f"{API}/resources/partitions": {"GET": PAGE | {"queue", "namespace", "task"}},
    f"{API}/resources/namespaces": {"GET": NONE},
    f"{API}/resources/tasks": {"GET": NONE},
    f"{API}/queues/{{queue}}/clear": {"DELETE": frozenset({"partition"})},
    f"{API}/status": {"GET": TIME_RANGE | {"queue", "namespace", "task"}},
    f"{API}/status/queues": {"GET": PAGE | TIME_RANGE | {"namespace", "task"}},
    f"{API}/status/queues/{{queue}}": {"GET": TIME_RANGE},
    f"{API}/status/buffers": {"GET": NONE},
    # analytics (the dashboard's charts)
    f"{API}/status/analytics": {"GET": CHART | {"queue", "namespace", "task"}},
    f"{API}/status/queues/{{queue}}/messages": {"GET": PAGE},
    f"{API}/analytics/queue-ops": {"GET": CHART | {"queue"}},
    f"{API}/analytics/queue-lag": {"GET": CHART | {"queue"}},
    f"{API}/analytics/queue-parked-replicas": {"GET": CHART | {"queue"}},
    f"{API}/analytics/retention": {"GET": CHART | {"queue"}},
    f"{API}/analytics/system-metrics": {"GET": CHART | {"hostname", "workerId"}},
    f"{API}/analytics/worker-metrics": {"GET": CHART | {"hostname", "workerId"}},
    f"{API}/analytics/postgres-stats": {"GET": NONE},
    # system
    f"{API}/system/maintenance": {"GET": NONE, "POST": NONE},
    f"{API}/system/maintenance/pop": {"GET": NONE, "POST": NONE},
    # between instances
    "/internal/api/notify": {"POST": NONE},
    # the dashboard: a page's URL carries its filters and selection
    **{page: {"GET": params} for page, params in PAGES.items()},
    ASSETS_ROUTE: {"GET": NONE},
}


def allowed(method: str, template: str, resource: Any) -> frozenset[str] | None:
    """The parameters `method` on `template` takes. None for a method its resource does not
    serve (falcon answers 405); a responder missing from the table (which the unit test
    forbids) takes none."""
    known = PARAMS.get(template, {}).get(method)
    if known is not None:
        return known
    return NONE if hasattr(resource, f"on_{method.lower()}") else None
