"""What a pop may ask in its query string, checked once into a `PopQuery`: the pop itself
(`PopRequest`, queue/intention.py) and how long to wait for it."""

from __future__ import annotations

from dataclasses import dataclass

import falcon

from queen_threads import validation as v
from queen_threads.http.long_poll import Timeouts
from queen_threads.http.request import bool_param, int_param, optional_int_param, str_param
from queen_threads.queue.body import subscription
from queen_threads.queue.intention import QUEUE_MODE, PopRequest
from queen_threads.queue.routes.lease import MAX_EXTEND_SECONDS

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


@dataclass(frozen=True)
class PopDefaults:
    """What a pop that names none gets (DEFAULT_BATCH_SIZE, DEFAULT_SUBSCRIPTION_MODE,
    DEFAULT_TIMEOUT / MAX_TIMEOUT)."""

    batch: int
    subscription_mode: str | None
    timeouts: Timeouts


@dataclass(frozen=True)
class PopQuery:
    """One pop as asked: `request`, and `wait_ms` (0: answer at once; else a long poll of
    that many ms, already clamped to MAX_TIMEOUT)."""

    request: PopRequest
    wait_ms: int


def absent(req: falcon.Request, name: str) -> bool:
    return req.get_param(name) in (None, "")


def pop_query(
    req: falcon.Request,
    defaults: PopDefaults,
    queue: str | None = None,
    partition: str | None = None,
) -> PopQuery:
    """The pop the query string asks for, every parameter checked here, once (a bad value
    is a ValidationError: 400, nothing popped)."""
    request = pop_request(req, defaults, queue, partition)
    t = defaults.timeouts
    timeout = int_param(req, "timeout", t.default_ms, 0)
    wait = bool_param(req, "wait") and timeout > 0
    return PopQuery(request, min(timeout, t.max_ms) if wait else 0)


def pop_request(
    req: falcon.Request,
    defaults: PopDefaults,
    queue: str | None = None,
    partition: str | None = None,
) -> PopRequest:
    """The `PopRequest` of the query string."""
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
            str_param(req, "consumerGroup"), "Consumer group", QUEUE_MODE
        )
        or QUEUE_MODE,
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
