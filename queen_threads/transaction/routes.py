"""POST /api/v1/transaction: pushes and acks in one PostgreSQL transaction (pushed
messages are stamped with the token's `sub` as producerSub, as on /push). Each ack is
fenced by its lease (its own leaseId, or the one lease `requiredLeases` names): an ack
under an expired or foreign lease rolls the whole bundle back. A transaction rolled back
because a push item found its queue full answers 409 with `Retry-After`, as a push does.

Riders commit in the same transaction: `kv` (docs/kv.md) carries key/value operations and
lock guards (a lost `required` precondition rolls everything back and answers 200
{success: false, reason: "kv_precondition", failedIndex, kvReason, version, value});
`timers` carries timer schedules and cancels (docs/timers.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import falcon

from queen_threads import validation as v
from queen_threads.http.auth import producer_sub
from queen_threads.http.request import json_object, media
from queen_threads.http.routes import API, RW, Route, route
from queen_threads.queue.routes.push import retry_after_when_full
from queen_threads.queue.service import QueueService
from queen_threads.telemetry import annotate
from queen_threads.telemetry.incoming import request_context
from queen_threads.telemetry.metrics import count_invalid
from queen_threads.transaction.body import TRANSACTION_FIELDS, operation, required_leases, riders


class Transaction:
    def __init__(
        self,
        queues: QueueService,
        scheduled: Callable[[list[dict[str, Any]], float], None],
        body_limit: int,
    ) -> None:
        self.queues = queues
        self.scheduled = scheduled  # the timers' lateness clock (TimerService.scheduled)
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req, self.body_limit, known=TRANSACTION_FIELDS)
        if "operations" not in body:
            raise v.ValidationError("operations array required")
        raw = v.items_list(body, "operations", "operations array required")
        leases = required_leases(body.get("requiredLeases"))
        sub = producer_sub(req)
        extra = riders(body, sub)
        if not raw and not extra:
            raise v.ValidationError("operations array cannot be empty")
        context = request_context(req)
        ops = [operation(op, sub, context, count_invalid) for op in raw]
        annotate.sent(req, (item for op in ops for item in op.get("items") or ()))
        sent = time.monotonic()
        result = self.queues.transaction(ops, leases, extra)
        if result.get("success") and extra.get("timers"):
            self.scheduled(extra["timers"], sent)
        retry_after_when_full(resp, result.get("results") or [])
        verdict = result.get("success") or result.get("reason") == "kv_precondition"
        media(resp, result, 200 if verdict else 409)


def routes(
    queues: QueueService, scheduled: Callable[[list[dict[str, Any]], float], None], body_limit: int
) -> list[Route]:
    return [route(f"{API}/transaction", Transaction(queues, scheduled, body_limit), POST=RW)]
