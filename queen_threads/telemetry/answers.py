"""What a messaging answer says, for its span: the messages a pop, a stream poll, an
ephemeral pop or a read by offset delivered, and how many acknowledgments an ack settled
and for which queue. Read only when the request is sampled (or OTLP metrics count it)."""

from __future__ import annotations

from typing import Any

import orjson


def delivered(body: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The messages of an answer that delivers some (pop, stream window, ephemeral pop,
    offset read) and the object they came in."""
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return [], {}
    if not isinstance(answer, dict):
        return [], {}
    if isinstance(answer.get("window"), dict):
        answer = answer["window"]
    if isinstance(answer.get("messages"), list):
        return [m for m in answer["messages"] if isinstance(m, dict)], answer
    if isinstance(answer.get("entries"), list):
        records = [r for e in answer["entries"] if isinstance(e, dict)
                   for r in e.get("records") or () if isinstance(r, dict)]  # fmt: skip
        return records, answer
    return [], answer


def settled(body: bytes) -> tuple[int | None, str | None]:
    """How many acknowledgments an ack's answer holds, and their one queue (or stream)."""
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, None
    where = None
    if isinstance(answer, dict):
        where = answer.get("queue") or answer.get("stream")
        answer = answer.get("results")
    if not isinstance(answer, list):
        return None, where if isinstance(where, str) else None
    queues = {r.get("queueName") for r in answer if isinstance(r, dict)} - {None}
    if where is None and len(queues) == 1:
        where = queues.pop()
    return len(answer), where if isinstance(where, str) else None
