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

from queen_threads.background.maintenance import POP_KEY, PUSH_KEY
from queen_threads.errors import ValidationError
from queen_threads.http.request import json_object, media
from queen_threads.http.routes import ADMIN, API, RO, Route, route
from queen_threads.runtime import Runtime


def _enabled(req: falcon.Request, runtime: Runtime) -> bool:
    body = json_object(req, runtime.settings.max_body_size, allow_empty=True)
    enabled = body.get("enabled")
    if not isinstance(enabled, bool):
        raise ValidationError("enabled (boolean) is required")
    return enabled


def _fresh(runtime: Runtime) -> None:
    """Re-read the switches for a GET (keeps the cached values if the database is down)."""
    runtime.maintenance.refresh()


class PushMaintenance:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def _buffer(self) -> dict[str, Any]:
        status = self.runtime.buffer.status()
        return {
            "bufferedMessages": status["pending"],
            "bufferHealthy": status["writable"] and status["failed"] == 0,
            "bufferStats": status,
        }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _fresh(self.runtime)
        m = self.runtime.maintenance
        media(
            resp, {"maintenanceMode": m.push_on, "popMaintenanceMode": m.pop_on, **self._buffer()}
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        enabled = self.runtime.maintenance.set(PUSH_KEY, _enabled(req, self.runtime))
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
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @staticmethod
    def _message(enabled: bool) -> str:
        return (
            "Pop maintenance mode ON: every pop answers 204 (no messages) at once"
            if enabled
            else "Pop maintenance mode OFF: pops deliver messages"
        )

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _fresh(self.runtime)
        enabled = self.runtime.maintenance.pop_on
        media(resp, {"popMaintenanceMode": enabled, "message": self._message(enabled)})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        enabled = self.runtime.maintenance.set(POP_KEY, _enabled(req, self.runtime))
        media(resp, {"popMaintenanceMode": enabled, "message": self._message(enabled)})


class BufferStatus:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, self.runtime.buffer.status())


def routes(runtime: Runtime) -> list[Route]:
    return [
        route(f"{API}/system/maintenance", PushMaintenance(runtime), GET=ADMIN, POST=ADMIN),
        route(f"{API}/system/maintenance/pop", PopMaintenance(runtime), GET=ADMIN, POST=ADMIN),
        route(f"{API}/status/buffers", BufferStatus(runtime), GET=RO),
    ]
