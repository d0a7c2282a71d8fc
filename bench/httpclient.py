"""A tiny HTTP/1.1 client on asyncio streams: one keep-alive connection, one request at a time.

Light on purpose (the load generator shares 2 cores with the server and PostgreSQL):
requests are pre-rendered bytes, responses are a status line, headers and a
Content-Length (or chunked) body, nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

NO_BODY_STATUSES = frozenset({204, 304})
STREAM_LIMIT = 1 << 20


class HttpError(Exception):
    """The server answered something this client cannot read, or closed the connection."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    base_path: str = ""
    headers: str = ""  # extra header lines, each ending in CRLF (e.g. Authorization)

    @classmethod
    def parse(cls, url: str, headers: str = "") -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme != "http":
            raise ValueError(f"only http:// URLs are supported, got {url!r}")
        if not parts.hostname:
            raise ValueError(f"no host in {url!r}")
        return cls(parts.hostname, parts.port or 80, parts.path.rstrip("/"), headers)

    @property
    def host_header(self) -> str:
        return self.host if self.port == 80 else f"{self.host}:{self.port}"


@dataclass(slots=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


def render_request(
    method: str,
    target: str,
    host: str,
    body: bytes | None = None,
    content_type: str = "",
    headers: str = "",
) -> bytes:
    """The bytes of one keep-alive request (`headers`: extra lines, each ending in CRLF)."""
    head = f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n{headers}"
    if body is not None:
        head += f"Content-Type: {content_type or 'application/json'}\r\n"
        head += f"Content-Length: {len(body)}\r\n"
    head += "\r\n"
    return head.encode("latin-1") + (body or b"")


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """Status code and lower-cased headers of a response head (up to the blank line)."""
    text = head.decode("latin-1")
    lines = text.split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise HttpError(f"bad status line: {lines[0]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise HttpError(f"bad header line: {line!r}")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return b"".join(chunks)
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def read_response(reader: asyncio.StreamReader, method: str = "GET") -> Response:
    """One response from the stream (raises HttpError if the peer closed first)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        status, headers = parse_head(head[:-4])
        if status in NO_BODY_STATUSES or status < 200 or method == "HEAD":
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = await read_chunked(reader)
        elif "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        else:
            body = await reader.read()
    except asyncio.IncompleteReadError as exc:
        raise HttpError(f"connection closed mid-response ({len(exc.partial)} bytes read)") from exc
    except (asyncio.LimitOverrunError, ValueError) as exc:
        raise HttpError(f"unreadable response: {exc}") from exc
    return Response(status, headers, body)


class Connection:
    """One keep-alive connection; reconnects by itself when the server closed it."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.reconnects = -1

    async def connect(self) -> Connection:
        self.reader, self.writer = await asyncio.open_connection(
            self.endpoint.host, self.endpoint.port, limit=STREAM_LIMIT
        )
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reconnects += 1
        return self

    def _usable(self) -> bool:
        return (
            self.reader is not None
            and self.writer is not None
            and not self.writer.is_closing()
            and not self.reader.at_eof()
        )

    def path(self, path: str) -> str:
        return self.endpoint.base_path + path

    def render(self, method: str, path: str, body: bytes | None = None) -> bytes:
        endpoint = self.endpoint
        return render_request(
            method, self.path(path), endpoint.host_header, body, headers=endpoint.headers
        )

    async def send(self, raw: bytes) -> None:
        """Write a rendered request (no read): for callers that read the answer later."""
        if not self._usable():
            await self.connect()
        assert self.writer is not None
        self.writer.write(raw)

    async def receive(self, method: str = "GET") -> Response:
        assert self.reader is not None
        response = await read_response(self.reader, method)
        if response.headers.get("connection", "").lower() == "close":
            await self.close()
        return response

    async def request_raw(self, raw: bytes, method: str = "GET") -> Response:
        await self.send(raw)
        return await self.receive(method)

    async def request(self, method: str, path: str, body: Any = None) -> Response:
        data = None if body is None else orjson.dumps(body)
        return await self.request_raw(self.render(method, path, data), method)

    async def close(self) -> None:
        writer, self.writer, self.reader = self.writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()


async def open_connections(endpoint: Endpoint, count: int, parallel: int = 256) -> list[Connection]:
    """`count` connected connections, at most `parallel` handshakes at a time."""
    gate = asyncio.Semaphore(parallel)

    async def one() -> Connection:
        async with gate:
            return await Connection(endpoint).connect()

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def close_all(connections: list[Connection]) -> None:
    await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
