"""GET pop routes: specific partition, any partition of a queue, namespace/task.

`wait=false` pops once and answers 200 (messages) or 204 (none). `wait=true` hands the
request to the long-poll machinery (registry + poll workers) and answers when messages
arrive for it or at its deadline (`timeout`, clamped to MAX_TIMEOUT).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import falcon
import orjson

from queen_threads.background.maintenance import Maintenance
from queen_threads.errors import QueenError
from queen_threads.http import long_poll
from queen_threads.http.request import media
from queen_threads.queue.intention import PopRequest
from queen_threads.queue.polling import PollingService
from queen_threads.queue.pop_body import PARAMS, PopDefaults, PopQuery, pop_query
from queen_threads.queue.popper import auto_ack_answer, lease_ids_of
from queen_threads.queue.service import QueueService

__all__ = ["PARAMS", "Pop", "PopDefaults"]

log = logging.getLogger("queen_threads.pop")


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

    def on_get(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        queue: str | None = None,
        partition: str | None = None,
    ) -> None:
        query = pop_query(req, self.defaults, queue, partition)
        if self.maintenance.pop_on:  # pop maintenance mode: nothing, at once
            resp.status = 204
            return
        self.require_database()  # database down: 503 + Retry-After, long polls too
        if query.wait_ms:
            self._long_poll(req, resp, query)
        else:
            self._once(resp, query.request)

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

    def _long_poll(self, req: falcon.Request, resp: falcon.Response, query: PopQuery) -> None:
        polling, request = self.polling, query.request
        intention = polling.intention(request, query.wait_ms, uuid.uuid4().hex)
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
