"""POST /internal/api/notify: a peer instance says messages or a partition became free."""

from __future__ import annotations

import falcon

from queen_threads.http.request import json_body, media
from queen_threads.runtime import Runtime
from queen_threads.services.peers import from_wire


class Notify:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        event = from_wire(json_body(req, 64 * 1024))
        if event is not None:
            self.runtime.peers.receive(event)
        media(resp, {"status": "ok"})
