"""Reading one HTTP/1.1 response off a raw socket (for tests that own the connection)."""

from __future__ import annotations

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
