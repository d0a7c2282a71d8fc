"""The server's own routes: health, metrics, the peer notifications, the maintenance
switches and the dashboard. One module per route family; the rows of the first three are
here, the others' in their modules."""

from __future__ import annotations

from queen_threads.http.routes import PEER, RO, Route, route
from queen_threads.operations.routes.health import Health
from queen_threads.operations.routes.metrics import Metrics, PrometheusMetrics
from queen_threads.operations.routes.peers import Notify
from queen_threads.wake.peers import PeerService


def routes(
    health: Health, metrics: Metrics, prometheus: PrometheusMetrics, peers: PeerService
) -> list[Route]:
    """Read-only (and public through the default JWT_SKIP_PATHS); the peer route takes
    the peer secret, never a user's token."""
    return [
        route("/health", health, GET=RO),
        route("/metrics", metrics, GET=RO),
        route("/metrics/prometheus", prometheus, GET=RO),
        route("/internal/api/notify", Notify(peers), POST=PEER),
    ]
