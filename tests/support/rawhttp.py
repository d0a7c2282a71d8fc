"""Reading one HTTP/1.1 response off a raw socket (for tests that own the connection)."""

from __future__ import annotations

import json
import socket
from typing import Any


def read_answer(sock: Any, timeout: float = 15.0) -> tuple[bytes, bytes]:
    """One response: (head without the blank line, body of its Content-Length)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += sock.recv(65536)
    return head, body


def exchange(sock: Any, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One keep-alive request on `sock`: (status, the answer's JSON or None when empty)."""
    data = b"" if body is None else json.dumps(body).encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len(data)}\r\n"
    if body is not None:
        head += "Content-Type: application/json\r\n"
    sock.sendall(head.encode() + b"\r\n" + data)
    answer_head, answer_body = read_answer(sock)
    return int(answer_head.split(b" ", 2)[1]), json.loads(answer_body) if answer_body else None


def one_per_worker(port: int, workers: int, tries: int = 200) -> dict[int, socket.socket]:
    """A keep-alive connection to each of a server's `workers` worker processes, by the
    pid its /health names (the kernel spreads new connections over them)."""
    found: dict[int, socket.socket] = {}
    for _ in range(tries):
        sock = socket.create_connection(("127.0.0.1", port))
        pid = exchange(sock, "GET", "/health")[1]["worker_id"]
        if pid in found:
            sock.close()
        else:
            found[pid] = sock
        if len(found) == workers:
            return found
    raise AssertionError(f"reached {len(found)} of {workers} worker processes")
