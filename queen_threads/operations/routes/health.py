"""GET /health: database state, 200 when connected, 503 when not; the maintenance switches
as this process holds them (`maintenance_mode`, `pop_maintenance_mode`, as the original
server names them)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import falcon

from queen_threads.background.maintenance import Maintenance
from queen_threads.db import Database
from queen_threads.http.request import media


class Health:
    """`schema_ready_now` asks the migration loop to try at once when the schema is not
    ready (Availability.schema_ready_now)."""

    def __init__(
        self,
        db: Database,
        port: int,
        worker_id: int,
        version: str,
        schema_ready: threading.Event,
        schema_ready_now: Callable[[], bool],
        maintenance: Maintenance,
    ) -> None:
        self.db = db
        self.port = port
        self.worker_id = worker_id
        self.version = version
        self.schema_ready = schema_ready
        self.schema_ready_now = schema_ready_now
        self.maintenance = maintenance

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        connected = self.db.ping()
        body = {
            "status": "healthy" if connected else "unhealthy",
            "database": "connected" if connected else "disconnected",
            "server": f"{socket.gethostname()}:{self.port}",
            "worker_id": self.worker_id,
            "version": self.version,
            "schema": "ready"
            if (self.schema_ready_now() if connected else self.schema_ready.is_set())
            else "pending",
            "maintenance_mode": self.maintenance.push_on,
            "pop_maintenance_mode": self.maintenance.pop_on,
        }
        if not connected:
            body["error"] = self.db.pool.last_error or "database unavailable"
        media(resp, body, 200 if connected else 503)
