"""An answer that carries leases and is not written to the end gives them back at once.

The WSGI server calls the response iterable's `close()` without asking for the next chunk
when a write fails (the client left mid-answer); here the app is called as a WSGI callable
and its answer closed unread, which is exactly that. The queue's lease time is 300 s, so
a lease left behind would hide the messages from the next consumer for minutes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import falcon
import falcon.testing

from queen_threads.app import create_app
from queen_threads.runtime import Runtime

API = "/api/v1"


def call(app: falcon.App, method: str, path: str, body: Any = None, read: bool = True) -> Any:
    """One request through the WSGI interface; returns (status, parsed body or None)."""
    raw = json.dumps(body).encode() if body is not None else b""
    environ = falcon.testing.create_environ(
        path=path.split("?")[0],
        query_string=path.partition("?")[2],
        method=method,
        body=raw,
        headers={"Content-Type": "application/json"} if body is not None else None,
    )
    seen: dict[str, str] = {}

    def start_response(status: str, headers: list[tuple[str, str]], *_: Any) -> None:
        seen["status"] = status

    answer = app(environ, start_response)
    try:
        data = b"".join(answer) if read else b""
    finally:
        close = getattr(answer, "close", None)
        if close is not None:
            close()
    return int(seen["status"].split()[0]), json.loads(data) if data else None


def test_a_pop_answer_not_written_gives_its_lease_back(
    make_runtime: Callable[..., Runtime],
) -> None:
    app = create_app(make_runtime())
    call(app, "POST", f"{API}/push", {"items": [{"queue": "uq", "payload": "m"}]})
    status, _ = call(app, "GET", f"{API}/pop/queue/uq", read=False)  # the client left
    assert status == 200
    status, body = call(app, "GET", f"{API}/pop/queue/uq")
    assert status == 200 and [m["data"] for m in body["messages"]] == ["m"]
    status, _ = call(app, "GET", f"{API}/pop/queue/uq")  # written: the lease holds it
    assert status == 204


def test_a_stream_window_not_written_goes_to_the_next_poll(
    make_runtime: Callable[..., Runtime],
) -> None:
    app = create_app(make_runtime())
    call(app, "POST", f"{API}/configure", {"queue": "usq", "options": {}})
    define = {
        "name": "us",
        "source_queue_names": ["usq"],
        "window_type": "count",
        "window_size_count": 1,
    }
    assert call(app, "POST", f"{API}/stream/define", define)[0] == 201
    call(app, "POST", f"{API}/push", {"items": [{"queue": "usq", "payload": "w"}]})
    poll = {"streamName": "us", "consumerGroup": "g", "timeout": 0}
    status, _ = call(app, "POST", f"{API}/stream/poll", poll, read=False)  # the client left
    assert status == 200
    status, body = call(app, "POST", f"{API}/stream/poll", poll)
    assert status == 200 and body["window"]["deliveryCount"] == 2
    assert [m["data"] for m in body["window"]["messages"]] == ["w"]
    assert call(app, "POST", f"{API}/stream/poll", poll)[0] == 204  # written: leased
