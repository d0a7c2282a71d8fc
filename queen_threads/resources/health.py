"""GET /health: database state, 200 when connected, 503 when not."""

from __future__ import annotations

import socket

import falcon

from queen_threads.http.request import media
from queen_threads.runtime import Runtime


class Health:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        connected = self.runtime.db.ping()
        body = {
            "status": "healthy" if connected else "unhealthy",
            "database": "connected" if connected else "disconnected",
            "server": f"{socket.gethostname()}:{self.runtime.settings.port}",
            "worker_id": self.runtime.worker_id,
            "version": self.runtime.version,
            "schema": "ready"
            if (
                self.runtime.schema_ready_now() if connected else self.runtime.schema_ready.is_set()
            )
            else "pending",
        }
        if not connected:
            body["error"] = self.runtime.db.pool.last_error or "database unavailable"
        media(resp, body, 200 if connected else 503)
