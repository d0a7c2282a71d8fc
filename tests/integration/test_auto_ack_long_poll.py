"""An autoAck long poll takes its messages with a lease and acknowledges them only once the
answer was written: a client that is gone by then loses nothing."""

from __future__ import annotations

import io
import threading
import time
import uuid
from typing import Any

from tests.integration.conftest import AdminApi


def long_poll_environ(queue: str) -> dict[str, Any]:
    return {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": f"/api/v1/pop/queue/{queue}",
        "QUERY_STRING": "wait=true&timeout=10000&autoAck=true",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": io.StringIO(),
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }


def leased(admin: AdminApi, queue: str) -> list[tuple[Any, ...]]:
    return admin.sql(
        "SELECT pc.lease_id IS NOT NULL "
        "FROM queen.partition_consumers pc JOIN queen.partitions p ON p.id = pc.partition_id "
        "JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = %s",
        queue,
    )


def test_a_written_auto_ack_answer_is_acknowledged_and_carries_no_lease(admin: AdminApi) -> None:
    q = f"aa-{uuid.uuid4().hex[:8]}"
    admin.push(q, ["one"])
    res = admin.get(f"/pop/queue/{q}", wait="true", timeout=5000, autoAck="true")
    assert res.status_code == 200
    assert res.json["leaseId"] == "" and res.json["messages"][0]["leaseId"] == ""
    assert res.json["messages"][0]["data"] == "one"
    assert leased(admin, q) == [(False,)]  # acknowledged: no lease left ...
    assert admin.pop(q) == []  # ... and nothing to redeliver


def test_an_auto_ack_answer_never_written_gives_its_messages_to_the_next_consumer(
    admin: AdminApi,
) -> None:
    q = f"aa-{uuid.uuid4().hex[:8]}"
    app = admin.client.app
    statuses: list[str] = []
    result: list[Any] = []
    waiter = threading.Thread(
        target=lambda: result.append(
            app(long_poll_environ(q), lambda status, headers: statuses.append(status))
        )
    )
    waiter.start()
    deadline = time.monotonic() + 10
    while not admin.sql("SELECT 1 FROM queen.queues WHERE name = %s", q) and not statuses:
        admin.push(q, ["kept"])  # the first push creates the queue; the poll is woken by it
        assert time.monotonic() < deadline
    waiter.join(10)
    assert statuses == ["200 OK"]
    body = result[0]
    assert leased(admin, q) == [(True,)]  # held by the answer's lease, not acknowledged
    assert admin.pop(q) == []
    body.close()  # the client is gone: the server never got to write the answer
    assert leased(admin, q) == [(False,)]
    [again] = admin.pop(q)
    assert again["data"] == "kept"
