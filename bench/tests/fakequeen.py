"""A tiny in-memory server speaking the part of Queen's public HTTP API the (n), (x) and (y)
scenarios use (configure, push, pop by queue or namespace/task with long polls, ack/batch),
so that their plumbing is tested end to end without a real server."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

from bench.httpclient import parse_head


@dataclass
class FakeQueen:
    """Queue -> partition -> messages; a (group, partition) is leased until acked."""

    messages: dict[str, dict[str, list[dict[str, Any]]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    namespaces: dict[str, str] = field(default_factory=dict)  # queue -> namespace
    cursors: dict[tuple[str, str, str], int] = field(default_factory=dict)
    leases: dict[str, tuple[tuple[str, str, str], int]] = field(default_factory=dict)
    ids: itertools.count[int] = field(default_factory=itertools.count)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    duplicate_every: int = 0  # deliver every n-th message twice (a faulty server)
    requests: int = 0

    async def serve(self) -> tuple[asyncio.Server, str]:
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        return server, f"http://127.0.0.1:{port}"

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, _, rest = head.decode("latin-1").partition("\r\n")
                method, target, _ = line.split(" ", 2)
                _, headers = parse_head(b"HTTP/1.1 200 OK\r\n" + rest[:-4].encode("latin-1"))
                size = int(headers.get("content-length", "0"))
                body = orjson.loads(await reader.readexactly(size)) if size else None
                self.requests += 1
                status, answer = await self._route(method, target, body)
                data = b"" if answer is None else orjson.dumps(answer)
                writer.write(
                    f"HTTP/1.1 {status} X\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data
                )
                await writer.drain()
        writer.close()

    async def _route(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        url = urlsplit(target)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/api/v1/configure":
            if body.get("namespace"):
                self.namespaces[body["queue"]] = body["namespace"]
            return 200, {"configured": True}
        if url.path == "/api/v1/push":
            return 201, [self._push(item) for item in body["items"]]
        if url.path == "/api/v1/ack/batch":
            return 200, [self._ack(a, body.get("consumerGroup")) for a in body["acknowledgments"]]
        if url.path.startswith("/api/v1/pop"):
            if url.path == "/api/v1/pop":
                queues = [q for q, ns in self.namespaces.items() if ns == query["namespace"]]
            else:
                queues = [unquote(url.path.rsplit("/", 1)[1])]
            return await self._pop(queues, query)
        return 404, {"error": "not found"}

    def _push(self, item: dict[str, Any]) -> dict[str, Any]:
        message = {"transactionId": item["transactionId"], "partition": item["partition"],
                   "partitionId": f"{item['queue']}/{item['partition']}",
                   "data": item["payload"]}  # fmt: skip
        self.messages[item["queue"]][item["partition"]].append(message)
        self.arrived.set()
        return {"status": "queued", "transactionId": item["transactionId"]}

    def _take(self, queues: list[str], group: str, batch: int) -> list[dict[str, Any]]:
        busy = {key for key, _ in self.leases.values()}
        for queue in queues:
            for partition, items in self.messages[queue].items():
                key = (queue, partition, group)
                cursor = self.cursors.get(key, 0)
                if key in busy or cursor >= len(items):
                    continue
                lease = f"lease-{next(self.ids)}"
                taken = [m | {"leaseId": lease} for m in items[cursor : cursor + batch]]
                self.leases[lease] = key, cursor + len(taken)
                if self.duplicate_every and next(self.ids) % self.duplicate_every == 0:
                    taken.append(taken[0])
                return taken
        return []

    async def _pop(self, queues: list[str], query: dict[str, str]) -> tuple[int, Any]:
        group, batch = query.get("consumerGroup", "__QUEUE_MODE__"), int(query.get("batch", 1))
        deadline = asyncio.get_running_loop().time() + int(query.get("timeout", 0)) / 1000
        while True:
            taken = self._take(queues, group, batch)
            if taken:
                return 200, {"messages": taken}
            left = deadline - asyncio.get_running_loop().time()
            if query.get("wait") != "true" or left <= 0:
                return 204, None
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), left)

    def _ack(self, ack: dict[str, Any], group: str | None) -> dict[str, Any]:
        """Move the cursor past the acked message; the lease ends with its last one."""
        if ack["leaseId"] not in self.leases:
            return {"success": True}  # the second ack of a message delivered twice
        key, end = self.leases[ack["leaseId"]]
        if (group or "__QUEUE_MODE__") != key[2]:
            return {"success": False, "error": "wrong group"}
        items = self.messages[key[0]][key[1]]
        done = next(i for i, m in enumerate(items) if m["transactionId"] == ack["transactionId"])
        self.cursors[key] = max(self.cursors.get(key, 0), done + 1)
        if self.cursors[key] >= end:
            del self.leases[ack["leaseId"]]
        return {"success": True}
