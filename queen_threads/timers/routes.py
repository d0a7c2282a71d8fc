"""Timer routes (docs/timers.md): POST /api/v1/timers (schedule, reschedule, cancel; a
batch, index-aligned), GET /api/v1/timers/{queue} (a keyset page of the queue's pending
timers), GET and DELETE /api/v1/timers/{queue}/{key} (peek, cancel). The key is the rest
of the path, so it may contain `/`. Every refusal is a 400 with code `timers_bad_request`
and changes nothing."""

from __future__ import annotations

import falcon

from queen_threads.http.auth import producer_sub
from queen_threads.http.request import json_object, media
from queen_threads.http.routes import API, RO, RW, Route, route
from queen_threads.timers import body as ops
from queen_threads.timers.body import TimerRequestInvalid
from queen_threads.timers.service import TimerService

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def _limit(req: falcon.Request) -> int:
    """`limit`, clamped to 1..MAX_LIMIT (never refused for its size: `truncated` tells)."""
    raw = req.get_param("limit")
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    try:
        value = int(raw)
    except ValueError:
        raise TimerRequestInvalid(f"limit must be an integer, got {raw!r}") from None
    return min(max(value, 1), MAX_LIMIT)


class Batch:
    def __init__(self, timers: TimerService, body_limit: int) -> None:
        self.timers = timers
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(
            req, self.body_limit, known=ops.BATCH_FIELDS, not_object=ops.not_an_object
        )
        clean = ops.operations(body.get("operations"), producer_sub(req))
        media(resp, {"results": self.timers.apply(clean)})


class Listing:
    def __init__(self, timers: TimerService, body_limit: int) -> None:
        self.timers = timers
        self.body_limit = body_limit

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        after = req.get_param("after") or None
        if after is not None:
            after = ops.timer_key(after)
        page = self.timers.page(ops.queue_name(queue), after, _limit(req))
        media(resp, page)


class Timer:
    def __init__(self, timers: TimerService, body_limit: int) -> None:
        self.timers = timers
        self.body_limit = body_limit

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str, key: str) -> None:
        media(resp, self.timers.peek(ops.queue_name(queue), ops.timer_key(key)))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, queue: str, key: str) -> None:
        txn = ops.txn_of(req.get_param("txn") or None, required=False)
        result = self.timers.cancel(ops.queue_name(queue), ops.timer_key(key), txn)
        media(resp, result)


def routes(timers: TimerService, body_limit: int) -> list[Route]:
    """Scheduling and cancelling are read-write, reading read-only."""
    return [
        route(f"{API}/timers", Batch(timers, body_limit), POST=RW),
        route(f"{API}/timers/{{queue}}", Listing(timers, body_limit), GET=(RO, {"after", "limit"})),
        route(f"{API}/timers/{{queue}}/{{key:path}}", Timer(timers, body_limit),
              GET=RO, DELETE=(RW, {"txn"})),
    ]  # fmt: skip
