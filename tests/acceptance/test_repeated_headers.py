"""Repeated request headers on the real gunicorn -k gevent server, over raw sockets
(queen_threads/http/folding.py): an identical repeated Content-Type is read as one (Queen's
C++ client sends it twice on every request with a body); differing Content-Types, two
Content-Lengths and Content-Length beside Transfer-Encoding are still refused with 400 and
change nothing. Over TLS: tests/acceptance/test_tls.py."""

from __future__ import annotations

import json
import re
import socket
import uuid
from typing import Any

import httpx
import pytest

from tests.support.rawhttp import read_answer
from tests.support.server import ServerProcess


def push(queue: str, *headers: str) -> bytes:
    """A push of one message to `queue` with exactly `headers` ('Name: value'; `{n}` is the
    body's length)."""
    body = json.dumps({"items": [{"queue": queue, "payload": {"n": 1}}]}).encode()
    lines = ["POST /api/v1/push HTTP/1.1", "Host: 127.0.0.1"]
    lines += [h.format(n=len(body)) for h in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def send(sock: Any, request: bytes) -> tuple[int, bytes]:
    """One request on `sock`: (status, body of the answer)."""
    sock.sendall(request)
    answer_head, answer_body = read_answer(sock)
    return int(answer_head.split(b" ", 2)[1]), answer_body


def depth(srv: ServerProcess, queue: str) -> int:
    r = httpx.get(f"{srv.url}/api/v1/pop/queue/{queue}?batch=10", verify=srv.verify)
    return len(r.json()["messages"]) if r.status_code == 200 else 0


def refused(answer: bytes) -> str:
    """The header gunicorn's 400 page names (`Invalid HTTP Header: 'NAME'`, HTML-escaped)."""
    found = re.search(rb"Invalid HTTP Header: &#x27;([A-Z-]+)&#x27;", answer)
    assert found, answer
    return found.group(1).decode()


def unique() -> str:
    return f"rh-{uuid.uuid4().hex[:10]}"


def test_an_identical_repeated_content_type_is_read_as_one(server: ServerProcess) -> None:
    queue = unique()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        # as Queen's C++ client sends it
        twice = ["Content-Type: application/json", "Content-Type: application/json"]
        status, answer = send(sock, push(queue, *twice, "Content-Length: {n}"))
        assert status == 201, answer
        # the same value in another spelling of the name, with other spacing, after the length;
        # the framing held: the same keep-alive connection serves it
        other = ["content-type:\tapplication/json ", "CONTENT-TYPE:application/json"]
        status, answer = send(sock, push(queue, other[0], "Content-Length: {n}", other[1]))
        assert status == 201, answer
    assert depth(server, queue) == 2


JSON = "Content-Type: application/json"
LENGTH = "Content-Length: {n}"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param([JSON, "Content-Type: text/plain", LENGTH], "CONTENT-TYPE", id="types"),
        pytest.param(
            [JSON, LENGTH, "Content-Type: application/json; charset=latin1"],
            "CONTENT-TYPE",
            id="type-and-parameters",
        ),
        pytest.param([JSON, LENGTH, "Content-Length: 3"], "CONTENT-LENGTH", id="lengths"),
        pytest.param([JSON, LENGTH, LENGTH], "CONTENT-LENGTH", id="equal-lengths"),
        pytest.param(
            [JSON, LENGTH, "Transfer-Encoding: chunked"], "CONTENT-LENGTH", id="length-chunked"
        ),
        pytest.param([JSON, JSON, LENGTH, "Host: elsewhere"], "HOST", id="hosts"),
    ],
)
def test_dangerous_repeats_are_still_refused_and_change_nothing(
    server: ServerProcess, headers: list[str], expected: str
) -> None:
    queue = unique()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        status, answer = send(sock, push(queue, *headers))
    assert status == 400
    assert refused(answer) == expected
    assert depth(server, queue) == 0
