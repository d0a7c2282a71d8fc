"""Who may call which route when JWT_ENABLED is on: the one table that decides it.

Every (method, route template) the app serves has a row; `tests/unit/test_access.py`
walks falcon's router and fails on a route without one (and on a row without a route).
The levels follow the original server (docs/security.md): admin > read-write > read-only.
`/health` and the metrics are read-only here and public through the default
JWT_SKIP_PATHS, so a deployment can close them by leaving them out of that list.
`/internal/api/*` takes the peer secret (QUEEN_PEER_SECRET) and never a user's token.
The dashboard's page paths and files (`http/webapp.py`) are public whatever
JWT_SKIP_PATHS says: they hold no data, and the page asks for a token itself when one of
its API calls answers 401.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from queen_threads.auth import Role
from queen_threads.http.webapp import ASSETS_ROUTE, PAGES


class Rule(Enum):
    PEER = "peer"  # the route checks QUEEN_PEER_SECRET itself; a user token never opens it
    PUBLIC = "public"  # the dashboard's files: no token needed, none looked at


Access = Role | Rule

RO, RW, ADMIN = Role.READ_ONLY, Role.READ_WRITE, Role.ADMIN
API = "/api/v1"

ROUTES: dict[str, dict[str, Access]] = {
    # operations (public through the default JWT_SKIP_PATHS)
    "/health": {"GET": RO},
    "/metrics": {"GET": RO},
    "/metrics/prometheus": {"GET": RO},
    # producing and consuming
    f"{API}/configure": {"POST": RW},
    f"{API}/push": {"POST": RW},
    f"{API}/pop": {"GET": RW},
    f"{API}/pop/queue/{{queue}}": {"GET": RW},
    f"{API}/pop/queue/{{queue}}/partition/{{partition}}": {"GET": RW},
    f"{API}/ack": {"POST": RW},
    f"{API}/ack/batch": {"POST": RW},
    f"{API}/transaction": {"POST": RW},
    f"{API}/lease/{{leaseId}}/extend": {"POST": RW},
    # key/value and locks: the batch routes write (reads go through them too)
    f"{API}/kv": {"POST": RW},
    f"{API}/kv/{{ns}}/{{key:path}}": {"GET": RO, "PUT": RW, "DELETE": RW},
    f"{API}/locks": {"POST": RW},
    # streams: consuming is read-write, reading read-only, deleting admin
    f"{API}/stream/define": {"POST": RW},
    f"{API}/stream/poll": {"POST": RW},
    f"{API}/stream/ack": {"POST": RW},
    f"{API}/stream/renew-lease": {"POST": RW},
    f"{API}/stream/seek": {"POST": RW},
    f"{API}/resources/streams": {"GET": RO},
    f"{API}/resources/streams/stats": {"GET": RO},
    f"{API}/resources/streams/{{name}}": {"GET": RO, "DELETE": ADMIN},
    f"{API}/resources/streams/{{name}}/consumers": {"GET": RO},
    # timers: scheduling and cancelling are read-write, reading read-only
    f"{API}/timers": {"POST": RW},
    f"{API}/timers/{{queue}}": {"GET": RO},
    f"{API}/timers/{{queue}}/{{key:path}}": {"GET": RO, "DELETE": RW},
    # messages and dead letters
    f"{API}/dlq": {"GET": RO},
    f"{API}/dlq/requeue": {"POST": RW},
    f"{API}/messages": {"GET": RO},
    f"{API}/messages/{{partitionId}}/{{transactionId}}": {"GET": RO, "DELETE": RW},
    f"{API}/messages/{{partitionId}}/{{transactionId}}/retry": {"POST": RW},
    f"{API}/messages/{{partitionId}}/{{transactionId}}/dlq": {"POST": RW},
    # consumer groups: reading is read-only, deleting is admin, the rest read-write
    f"{API}/consumer-groups": {"GET": RO},
    f"{API}/consumer-groups/lagging": {"GET": RO},
    f"{API}/consumer-groups/{{group}}": {"GET": RO, "DELETE": ADMIN},
    f"{API}/consumer-groups/{{group}}/subscription": {"POST": RW},
    f"{API}/consumer-groups/{{group}}/queues/{{queue}}": {"DELETE": ADMIN},
    f"{API}/consumer-groups/{{group}}/queues/{{queue}}/seek": {"POST": RW},
    f"{API}/consumer-groups/{{group}}/queues/{{queue}}/partitions/{{partition}}/seek": {"POST": RW},
    f"{API}/stats/refresh": {"POST": ADMIN},
    # traces
    f"{API}/traces": {"POST": RW},
    f"{API}/traces/names": {"GET": RO},
    f"{API}/traces/by-name/{{name}}": {"GET": RO},
    f"{API}/traces/{{partitionId}}/{{transactionId}}": {"GET": RO},
    # resources and status
    f"{API}/resources/overview": {"GET": RO},
    f"{API}/resources/queues": {"GET": RO},
    f"{API}/resources/queues/{{queue}}": {"GET": RO, "DELETE": ADMIN},
    f"{API}/resources/partitions": {"GET": RO},
    f"{API}/queues/{{queue}}/clear": {"DELETE": ADMIN},
    f"{API}/resources/namespaces": {"GET": RO},
    f"{API}/resources/tasks": {"GET": RO},
    f"{API}/status": {"GET": RO},
    f"{API}/status/queues": {"GET": RO},
    f"{API}/status/queues/{{queue}}": {"GET": RO},
    f"{API}/status/buffers": {"GET": RO},
    # analytics (the dashboard's charts)
    f"{API}/status/analytics": {"GET": RO},
    f"{API}/status/queues/{{queue}}/messages": {"GET": RO},
    f"{API}/analytics/queue-ops": {"GET": RO},
    f"{API}/analytics/queue-lag": {"GET": RO},
    f"{API}/analytics/queue-parked-replicas": {"GET": RO},
    f"{API}/analytics/retention": {"GET": RO},
    f"{API}/analytics/system-metrics": {"GET": RO},
    f"{API}/analytics/worker-metrics": {"GET": RO},
    f"{API}/analytics/postgres-stats": {"GET": RO},
    # system
    f"{API}/system/maintenance": {"GET": ADMIN, "POST": ADMIN},
    f"{API}/system/maintenance/pop": {"GET": ADMIN, "POST": ADMIN},
    # between instances
    "/internal/api/notify": {"POST": Rule.PEER},
    # the dashboard (its API calls carry the token like any client's)
    **{page: {"GET": Rule.PUBLIC} for page in PAGES},
    ASSETS_ROUTE: {"GET": Rule.PUBLIC},
}


def required(method: str, template: str, resource: Any) -> Access:
    """The access `method` on the route `template` needs. A method its resource does not
    serve (405) needs any valid token; a responder missing from the table (which the unit
    test forbids) is admin-only. (A path with no route is answered 404 before this.)"""
    access = ROUTES.get(template, {}).get(method)
    if access is not None:
        return access
    return Role.ADMIN if hasattr(resource, f"on_{method.lower()}") else Role.READ_ONLY
