"""GET pop routes: specific partition, any partition of a queue, namespace/task.

`wait=false` pops once and answers 200 (messages) or 204 (none). `wait=true` hands the
request to the long-poll machinery (registry + poll workers) and answers when messages
arrive for it or at its deadline (`timeout`, clamped to MAX_TIMEOUT).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import falcon
import orjson

from queen_threads import validation as v
from queen_threads.background.maintenance import Maintenance
from queen_threads.errors import QueenError
from queen_threads.http import long_poll
from queen_threads.http.long_poll import Timeouts
from queen_threads.http.request import (
    bool_param,
    int_param,
    media,
    optional_int_param,
    str_param,
)
from queen_threads.queue.body import subscription
from queen_threads.queue.intention import PopRequest
from queen_threads.queue.polling import PollingService
from queen_threads.queue.popper import auto_ack_answer, lease_ids_of
from queen_threads.queue.routes.lease import MAX_EXTEND_SECONDS
from queen_threads.queue.service import QueueService

log = logging.getLogger("queen_threads.pop")

MAX_BATCH = 10_000
MAX_PARTITIONS = 100
MAX_LEASE_SECONDS = MAX_EXTEND_SECONDS  # a week, as a lease extension
# Every option the official client has. Two are accepted without changing the answer, as
# the client sends them and the route has nothing to apply them to (docs/api.md):
# `namespace`/`task` on the two queue routes (the queue fixes them) and `partitions` on
# the one-partition route.
PARAMS = frozenset({
    "batch", "wait", "timeout", "consumerGroup", "autoAck", "partitions",
    "subscriptionMode", "subscriptionFrom", "namespace", "task",
    # queen-mq 2.6.0
    "autopilot", "leaseSeconds", "conflation",
})  # fmt: skip


def absent(req: falcon.Request, name: str) -> bool:
    return req.get_param(name) in (None, "")


@dataclass(frozen=True)
class PopDefaults:
    """What a pop that names none gets (DEFAULT_BATCH_SIZE, DEFAULT_SUBSCRIPTION_MODE,
    DEFAULT_TIMEOUT / MAX_TIMEOUT)."""

    batch: int
    subscription_mode: str | None
    timeouts: Timeouts


def pop_request(
    req: falcon.Request,
    defaults: PopDefaults,
    queue: str | None = None,
    partition: str | None = None,
) -> PopRequest:
    """The pop the query string asks for (every parameter validated here, once)."""
    mode, start = subscription(
        str_param(req, "subscriptionMode") or defaults.subscription_mode or None,
        str_param(req, "subscriptionFrom"),
    )
    autopilot = bool_param(req, "autopilot")
    namespace = task = None
    if queue is None:
        namespace = v.optional_name(str_param(req, "namespace"), "Namespace")
        task = v.optional_name(str_param(req, "task"), "Task")
        if namespace is None and task is None:
            raise v.ValidationError("namespace or task is required")
    return PopRequest(
        queue=v.name(queue, "Queue") if queue is not None else None,
        partition=v.name(partition, "Partition") if partition is not None else None,
        namespace=namespace,
        task=task,
        consumer_group=v.optional_name(
            str_param(req, "consumerGroup"), "Consumer group", v.QUEUE_MODE
        )
        or v.QUEUE_MODE,
        batch=int_param(req, "batch", defaults.batch, 1, MAX_BATCH),
        partitions=1
        if partition is not None
        else int_param(req, "partitions", 1, 1, MAX_PARTITIONS),
        auto_ack=bool_param(req, "autoAck"),
        lease_seconds=optional_int_param(req, "leaseSeconds", 1, MAX_LEASE_SECONDS),
        # autopilot sizes only what the client left out, never a value it set
        autopilot_batch=autopilot and absent(req, "batch"),
        autopilot_partitions=autopilot and partition is None and absent(req, "partitions"),
        conflation=bool_param(req, "conflation"),
        subscription_mode=mode,
        subscription_from=start,
    )


class Pop:
    """One resource class serves the three routes (they differ only in the selector)."""

    def __init__(
        self,
        queues: QueueService,
        polling: PollingService,
        maintenance: Maintenance,
        require_database: Callable[[], None],
        defaults: PopDefaults,
    ) -> None:
        self.queues = queues
        self.polling = polling
        self.maintenance = maintenance
        self.require_database = require_database  # 503 + Retry-After while it is down
        self.defaults = defaults

    def _answer(self, req: falcon.Request, resp: falcon.Response, request: PopRequest) -> None:
        if self.maintenance.pop_on:  # pop maintenance mode: nothing, at once
            resp.status = 204
            return
        self.require_database()  # database down: 503 + Retry-After, long polls too
        t = self.defaults.timeouts
        timeout = int_param(req, "timeout", t.default_ms, 0)
        if bool_param(req, "wait") and timeout > 0:
            self._long_poll(req, resp, request, min(timeout, t.max_ms))
            return
        self._once(resp, request)

    def _once(self, resp: falcon.Response, request: PopRequest) -> None:
        """One pop now. Empty: 204, except for a pop that asked for conflation, which
        always gets the body with the group's policy (`conflation` or
        `conflationConflict`): the 2.6.0 client takes a bare 204 for a broker that
        ignored the request."""
        result = self.queues.pop(request)
        if not result.get("messages"):
            if request.conflation:
                media(resp, result)
            else:
                resp.status = 204
            return
        leases = lease_ids_of(result)  # none when autoAck consumed them already
        long_poll.write_leased(
            resp, orjson.dumps(result), lambda: self.polling.longpoll.release(leases)
        )

    def _long_poll(
        self, req: falcon.Request, resp: falcon.Response, request: PopRequest, timeout: int
    ) -> None:
        polling = self.polling
        intention = polling.intention(request, timeout, uuid.uuid4().hex)
        long_poll.answer(
            req,
            resp,
            lambda gone, watch: polling.wait(intention, gone, watch),
            polling.longpoll.release,
            paused=lambda: self.maintenance.pop_on,
            what="long polls",
            prepare=self._auto_ack if request.auto_ack else None,
            # at the deadline, a last look answers with the group's conflation policy
            empty=partial(self._once, request=request) if request.conflation else None,
        )

    def _auto_ack(self, body: bytes) -> tuple[bytes, Callable[[], None]]:
        """The answer without leases; its messages are acknowledged once it was written
        (only then does the client have them)."""
        plain, acks = auto_ack_answer(body)
        return plain, partial(self._acknowledge, acks)

    def _acknowledge(self, acks: list[dict[str, Any]]) -> None:
        try:
            self.queues.ack(acks)
        except QueenError:  # the lease expires and the messages come again: none is lost
            log.warning("auto-acknowledging %d delivered messages failed", len(acks), exc_info=True)

    def on_get(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        queue: str | None = None,
        partition: str | None = None,
    ) -> None:
        self._answer(req, resp, pop_request(req, self.defaults, queue, partition))
