"""Maintenance switches and the failover buffer's state.

- `GET|POST /api/v1/system/maintenance`: while on, every push goes to the file buffer
  (answered `buffered`) and the buffer's replay pauses; off resumes the replay.
- `GET|POST /api/v1/system/maintenance/pop`: while on, every pop answers 204 at once.
- `GET /api/v1/status/buffers`: events waiting in the buffer files of this host.

The switches live in `queen.system_state` (shared by every instance); a POST needs the
database (503 when it is down), a GET falls back to this process's cached view.
"""

from __future__ import annotations

from typing import Any

import falcon

from queen_threads.background.maintenance import POP_KEY, PUSH_KEY, Maintenance
from queen_threads.buffer import FileBuffer
from queen_threads.http.request import json_object, media
from queen_threads.http.routes import ADMIN, API, RO, Route, route
from queen_threads.operations.body import SWITCH_FIELDS, switch


def _enabled(req: falcon.Request, body_limit: int) -> bool:
    return switch(json_object(req, body_limit, allow_empty=True, known=SWITCH_FIELDS))


class PushMaintenance:
    def __init__(self, maintenance: Maintenance, buffer: FileBuffer, body_limit: int) -> None:
        self.maintenance = maintenance
        self.buffer = buffer
        self.body_limit = body_limit

    def _buffer(self) -> dict[str, Any]:
        status = self.buffer.status()
        return {
            "bufferedMessages": status["pending"],
            "bufferHealthy": status["writable"] and status["failed"] == 0,
            "bufferStats": status,
        }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        m = self.maintenance
        m.refresh()  # keeps the cached values if the database is down
        media(
            resp, {"maintenanceMode": m.push_on, "popMaintenanceMode": m.pop_on, **self._buffer()}
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        enabled = self.maintenance.set(PUSH_KEY, _enabled(req, self.body_limit))
        buffer = self._buffer()
        del buffer["bufferStats"]
        message = (
            "Maintenance mode ON: every push is written to the failover buffer; "
            "buffered messages are replayed when it is switched off"
            if enabled
            else "Maintenance mode OFF: pushes go to the database; the buffer is draining"
        )
        media(resp, {"maintenanceMode": enabled, **buffer, "message": message})


class PopMaintenance:
    def __init__(self, maintenance: Maintenance, body_limit: int) -> None:
        self.maintenance = maintenance
        self.body_limit = body_limit

    @staticmethod
    def _message(enabled: bool) -> str:
        return (
            "Pop maintenance mode ON: every pop answers 204 (no messages) at once"
            if enabled
            else "Pop maintenance mode OFF: pops deliver messages"
        )

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.maintenance.refresh()  # keeps the cached values if the database is down
        enabled = self.maintenance.pop_on
        media(resp, {"popMaintenanceMode": enabled, "message": self._message(enabled)})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        enabled = self.maintenance.set(POP_KEY, _enabled(req, self.body_limit))
        media(resp, {"popMaintenanceMode": enabled, "message": self._message(enabled)})


class BufferStatus:
    def __init__(self, buffer: FileBuffer) -> None:
        self.buffer = buffer

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, self.buffer.status())


def routes(maintenance: Maintenance, buffer: FileBuffer, body_limit: int) -> list[Route]:
    return [
        route(f"{API}/system/maintenance", PushMaintenance(maintenance, buffer, body_limit),
              GET=ADMIN, POST=ADMIN),
        route(f"{API}/system/maintenance/pop", PopMaintenance(maintenance, body_limit),
              GET=ADMIN, POST=ADMIN),
        route(f"{API}/status/buffers", BufferStatus(buffer), GET=RO),
    ]  # fmt: skip
