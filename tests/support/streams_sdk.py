"""Helpers for the tests that drive the official 0.15.0 client's streaming SDK
(`queen.Stream`) against the real server: run a pipeline until its sink holds what the
test waits for, read the sink through long polls, and read the SDK's tables."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg2
from queen import Queen, Stream

# How long a test waits for the pipeline's output before it fails.
OUTPUT_TIMEOUT_S = 20


async def drain(
    client: Queen,
    queue: str,
    want: int,
    timeout_s: float = OUTPUT_TIMEOUT_S,
    group: str = "sdk-check",
) -> list[Any]:
    """The payloads of the first `want` messages of `queue`, read with long polls of a
    consumer group of the test's own (each batch acked): returns as soon as they are there,
    or what arrived when `timeout_s` ran out."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        left_ms = max(100, int((deadline - time.monotonic()) * 1000))
        messages = await (
            client.queue(queue)
            .group(group)
            .batch(want - len(got))
            .wait(True)
            .timeout_millis(min(left_ms, 2000))
            .pop()
        )
        got.extend(await _taken(client, messages, group))
    return got


async def _taken(client: Queen, messages: list[Any] | None, group: str) -> list[Any]:
    """Ack a popped batch; its payloads. (The client's pop sends autoAck only when
    auto_ack differs from its consume default, so the tests ack themselves.)"""
    if not messages:
        return []
    await client.ack(list(messages), True, {"group": group})
    return [m["data"] if isinstance(m, dict) else m.data for m in messages]


async def nothing_more(
    client: Queen, queue: str, wait_ms: int = 300, group: str = "sdk-check"
) -> list[Any]:
    """What `queue` still delivers to the check group within `wait_ms` (expected: none)."""
    messages = await (
        client.queue(queue).group(group).batch(100).wait(True).timeout_millis(wait_ms).pop()
    )
    return await _taken(client, messages, group)


async def running(
    stream: Stream, query: str, url: str, body: Callable[[], Awaitable[Any]], **opts: Any
) -> Any:
    """Run `stream` as query `query` while `body()` runs; stop it afterwards. A cycle the
    runner reports as failed fails the test (none is expected without faults)."""
    errors: list[str] = []
    opts.setdefault("max_wait_millis", 200)  # its source long polls: stop() waits for one
    runner = await stream.run(
        query_id=query, url=url, on_error=lambda err, ctx: errors.append(f"{ctx}: {err}"), **opts
    )
    try:
        result = await body()
    except AssertionError as exc:
        raise AssertionError(f"{exc} (cycle errors: {errors})") from exc
    finally:
        await runner.stop()
    assert errors == [], errors
    return result


def sql(dsn: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(statement, params)
            return cur.fetchall() if cur.description else []
    finally:
        conn.close()


def state_keys(dsn: str, query: str) -> list[str]:
    rows = sql(
        dsn,
        "SELECT s.key FROM queen.sdk_state s JOIN queen.sdk_queries q ON q.id = s.query_id"
        " WHERE q.name = %s ORDER BY s.key",
        query,
    )
    return [r[0] for r in rows]
