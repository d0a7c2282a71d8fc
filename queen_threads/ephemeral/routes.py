"""/api/v1/ephemeral/*: configure, reset, push, pop, ack, queues, depth, delete
(docs/ephemeral.md)."""

from __future__ import annotations

import falcon

from queen_threads import validation as v
from queen_threads.ephemeral import body
from queen_threads.ephemeral.service import EphemeralQueues
from queen_threads.http.long_poll import Timeouts
from queen_threads.http.request import bool_param, int_param, json_object, media, str_param
from queen_threads.http.routes import ADMIN, API, RO, RW, Route, route
from queen_threads.telemetry.incoming import request_context
from queen_threads.telemetry.metrics import count_invalid


class _Route:
    def __init__(self, queues: EphemeralQueues, body_limit: int) -> None:
        self.queues = queues
        self.body_limit = body_limit

    def _body(self, req: falcon.Request, fields: tuple[str, ...]) -> dict[str, object]:
        """The body; fields other than `fields` are ignored and named."""
        return json_object(req, self.body_limit, known=fields)


class Configure(_Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(
            resp, self.queues.configure(body.configure_body(self._body(req, body.CONFIGURE_FIELDS)))
        )


class Reset(_Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, self.queues.reset(body.queue_name(self._body(req, body.RESET_FIELDS))))


class Push(_Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        checked = body.push_body(
            self._body(req, body.PUSH_FIELDS), request_context(req), count_invalid
        )
        media(resp, self.queues.push(checked), 201)


class Pop(_Route):
    def __init__(self, queues: EphemeralQueues, body_limit: int, timeouts: Timeouts) -> None:
        super().__init__(queues, body_limit)
        self.timeouts = timeouts

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        t = self.timeouts
        wait = bool_param(req, "wait")
        timeout = int_param(req, "timeout", t.default_ms, 0)
        query = body.PopQuery(
            queue=v.name(str_param(req, "queue"), "queue"),
            partition=v.optional_name(str_param(req, "partition"), "Partition"),
            group=v.optional_name(str_param(req, "group"), "Group", body.GROUP_QUEUE_MODE)
            or body.GROUP_QUEUE_MODE,
            batch=int_param(req, "batch", 1, 1, body.MAX_BATCH),
            auto_ack=bool_param(req, "autoAck"),
            wait_ms=min(timeout, t.max_ms) if wait else 0,
        )
        media(resp, self.queues.pop(query))


class Ack(_Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, self.queues.ack(body.ack_body(self._body(req, body.ACK_FIELDS))))


class Queues(_Route):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, self.queues.queues())


class Depth(_Route):
    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        media(resp, self.queues.depth(v.name(queue, "queue")))


class Queue(_Route):
    def on_delete(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        media(resp, self.queues.delete(v.name(queue, "queue")))


POP_PARAMS = ("queue", "partition", "batch", "wait", "timeout", "group", "autoAck")


def routes(queues: EphemeralQueues, body_limit: int, timeouts: Timeouts) -> list[Route]:
    """Gauges read-only, deleting a queue (and its configuration) admin."""
    base = f"{API}/ephemeral"
    return [
        route(f"{base}/configure", Configure(queues, body_limit), POST=RW),
        route(f"{base}/reset", Reset(queues, body_limit), POST=RW),
        route(f"{base}/push", Push(queues, body_limit), POST=RW),
        route(f"{base}/pop", Pop(queues, body_limit, timeouts), GET=(RW, POP_PARAMS)),
        route(f"{base}/ack", Ack(queues, body_limit), POST=RW),
        route(f"{base}/queues", Queues(queues, body_limit), GET=RO),
        route(f"{base}/queues/{{queue}}/depth", Depth(queues, body_limit), GET=RO),
        route(f"{base}/queue/{{queue}}", Queue(queues, body_limit), DELETE=ADMIN),
    ]
