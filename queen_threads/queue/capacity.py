"""A queue's `maxSize` as the rest of the server sees it.

A push refuses the items of a queue whose depth (messages queue mode has not consumed)
would exceed its `maxSize` (schema/functions/20_push.sql): they come back
`{"status": "failed", "error": "...", "reason": "queue_full"}` and nothing of them is
stored. The push route then adds `Retry-After` (RETRY_AFTER_S); the failover buffer's
replay holds the queue's events back and tries again (buffer/commit.py), never dropping
them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

QUEUE_FULL = "queue_full"
# What a refused producer is told to wait. A full queue drains at its consumers' pace:
# a few seconds lets them make room without the producer spinning on refusals.
RETRY_AFTER_S = 5


def refused_for_size(result: dict[str, Any]) -> bool:
    """A push (or transaction push) result refused because its queue is full."""
    return result.get("reason") == QUEUE_FULL


def any_refused_for_size(results: Iterable[dict[str, Any]]) -> bool:
    return any(refused_for_size(r) for r in results)
