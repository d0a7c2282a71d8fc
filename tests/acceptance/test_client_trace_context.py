"""The official clients hand a message's `traceContext` to user code unchanged (issue 34,
docs/observability.md): queen-mq 0.15.0 in this process (pop, consume), queen-mq 2.6.0 in
a subprocess (its package sits in .venv/client26/lib): its push carries the context as
a header set on the client, its pop and its ephemeral pop return it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
from queen import Queen

from tests.acceptance.conftest import ClientRun
from tests.client26.run import LIB
from tests.support.server import ServerProcess

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
CONTEXT = {"traceparent": PARENT, "tracestate": "vendor=1"}


def push(url: str, queue: str, n: int) -> None:
    items = [{"queue": queue, "payload": {"n": i}} for i in range(n)]
    r = httpx.post(f"{url}/api/v1/push", json={"items": items},
                   headers={"traceparent": PARENT, "tracestate": "vendor=1"})  # fmt: skip
    assert r.status_code == 201, r.text


def test_queen_mq_0_15_passes_it_through_pop_and_consume(
    server: ServerProcess, client_run: ClientRun, unique: Callable[[str], str]
) -> None:
    q, q2 = unique("tc015"), unique("tc015c")
    push(server.url, q, 1)
    push(server.url, q2, 2)

    async def body(client: Queen) -> tuple[Any, Any]:
        popped = await client.queue(q).batch(1).wait(False).pop()
        handled: list[Any] = []

        async def handler(message: Any) -> None:
            handled.append(message)

        await client.queue(q2).batch(2).limit(2).wait(False).consume(handler)
        return popped, handled

    popped, handled = client_run(body)
    assert [m["traceContext"] for m in popped] == [CONTEXT]
    messages = [m for batch in handled for m in (batch if isinstance(batch, list) else [batch])]
    assert [m["traceContext"] for m in messages] == [CONTEXT, CONTEXT]


SCRIPT_26 = """
import asyncio, json, sys
from queen import Queen

async def main(url, queue):
    client = Queen(url=url, headers={"traceparent": sys.argv[3]})  # the producer's context
    try:
        await client.queue(queue).push([{"data": {"n": 1}}])
        popped = await client.queue(queue).batch(10).wait(False).pop()
        await client.ephemeral.configure(queue + "-e")
        await client.ephemeral.push(queue + "-e", [{"payload": 1}])
        eph = await client.ephemeral.pop(queue + "-e", batch=10)
        print("RESULT", json.dumps({"pop": [m.get("traceContext") for m in popped],
                          "ephemeral": [m.get("traceContext") for m in eph["messages"]]}))
    finally:
        await client.close()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_queen_mq_2_6_sends_it_as_a_header_and_passes_it_through(
    server: ServerProcess, unique: Callable[[str], str]
) -> None:
    path = os.pathsep.join(filter(None, [str(LIB), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT_26, server.url, unique("tc26"), PARENT],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    found = json.loads(line.removeprefix("RESULT "))
    assert found == {"pop": [{"traceparent": PARENT}], "ephemeral": [{"traceparent": PARENT}]}
