"""Maintenance routes and the buffer status route through HTTP (in-process falcon client,
real PostgreSQL, the Runtime's own background threads doing the replay)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import falcon.testing
import pytest

from queen_threads.app import create_app
from queen_threads.runtime import Runtime
from tests.support.sql import sql_value

API = "/api/v1"


class Client(falcon.testing.TestClient):
    def __init__(self, runtime: Runtime) -> None:
        super().__init__(create_app(runtime))
        self.runtime = runtime

    def push(self, *items: dict[str, Any]) -> list[dict[str, Any]]:
        r = self.simulate_post(f"{API}/push", json={"items": list(items)})
        assert r.status_code == 201, r.text
        return list(r.json)

    def pop(self, queue: str, **params: Any) -> falcon.testing.Result:
        return self.simulate_get(f"{API}/pop/queue/{queue}", params={"batch": 100, **params})

    def switch(self, path: str, enabled: bool) -> dict[str, Any]:
        r = self.simulate_post(f"{API}/system/{path}", json={"enabled": enabled})
        assert r.status_code == 200, r.text
        return dict(r.json)


def wait_for(check: Callable[[], Any], timeout: float = 10, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def make_client(make_runtime: Callable[..., Runtime], tmp_path: Path) -> Callable[[], Client]:
    def make() -> Client:
        rt = make_runtime(FILE_BUFFER_DIR=str(tmp_path / "buf"), FILE_BUFFER_FLUSH_MS="20")
        wait_for(rt.schema_ready.is_set, what="schema")
        return Client(rt)

    return make


@pytest.fixture
def api(make_client: Callable[[], Client]) -> Client:
    return make_client()


def msg(n: int, partition: str = "P") -> dict[str, Any]:
    return {"queue": "mq", "partition": partition, "payload": {"n": n}, "transactionId": f"m{n}"}


@pytest.mark.parametrize("path", ["maintenance", "maintenance/pop"])
@pytest.mark.parametrize("body", [None, {}, {"enabled": "yes"}, {"enabled": 1}])
def test_switch_requires_a_boolean(api: Client, path: str, body: Any) -> None:
    r = api.simulate_post(f"{API}/system/{path}", json=body)
    assert r.status_code == 400
    assert r.json == {"error": "enabled (boolean) is required"}


def test_maintenance_buffers_pushes_then_drains_in_order(api: Client) -> None:
    r = api.simulate_get(f"{API}/system/maintenance")
    assert r.status_code == 200
    assert r.json["maintenanceMode"] is False and r.json["popMaintenanceMode"] is False
    assert {"bufferedMessages", "bufferHealthy", "bufferStats"} <= set(r.json)

    on = api.switch("maintenance", True)
    assert on["maintenanceMode"] is True and "message" in on
    assert set(on) == {"maintenanceMode", "bufferedMessages", "bufferHealthy", "message"}
    row = sql_value(
        api.runtime.db, "SELECT value FROM queen.system_state WHERE key = 'maintenance_mode'"
    )
    assert row == {"enabled": True}

    out = api.push(*[msg(n) for n in range(5)]) + api.push(msg(5), msg(6, "Q"))
    assert [r["status"] for r in out] == ["buffered"] * 7
    assert out[0] == {"index": 0, "status": "buffered", "queue": "mq", "partition": "P",
                      "transactionId": "m0", "transaction_id": "m0"}  # fmt: skip
    assert api.pop("mq").status_code == 204  # pops see nothing new
    status = api.simulate_get(f"{API}/status/buffers").json
    assert status["pending"] == 7 and status["maintenanceMode"] is True
    assert api.simulate_get(f"{API}/system/maintenance").json["bufferedMessages"] == 7
    # the replay is paused: a few replay ticks later nothing has reached the database
    ticks = api.runtime.buffer.committer.replayed
    time.sleep(0.2)  # ~10 replay ticks at FILE_BUFFER_FLUSH_MS=20: proving an absence
    assert api.runtime.buffer.committer.replayed == ticks == 0
    assert sql_value(api.runtime.db, "SELECT count(*) FROM queen.messages") == 0

    off = api.switch("maintenance", False)
    assert off["maintenanceMode"] is False
    wait_for(lambda: api.simulate_get(f"{API}/status/buffers").json["pending"] == 0, what="drain")
    pops = [api.pop("mq").json["messages"] for _ in range(2)]  # one partition per pop
    by_partition = {ms[0]["partition"]: [m["data"]["n"] for m in ms] for ms in pops}
    assert by_partition == {"P": [0, 1, 2, 3, 4, 5], "Q": [6]}
    assert sql_value(api.runtime.db, "SELECT count(*) FROM queen.messages") == 7
    assert api.push(msg(7))[0]["status"] == "queued"  # off: straight to the database


def test_pop_maintenance_answers_204_at_once_even_for_long_polls(api: Client) -> None:
    assert api.push(msg(1))[0]["status"] == "queued"
    on = api.switch("maintenance/pop", True)
    assert on["popMaintenanceMode"] is True and on["message"]
    assert api.simulate_get(f"{API}/system/maintenance/pop").json["popMaintenanceMode"] is True
    assert api.pop("mq").status_code == 204
    started = time.monotonic()
    assert api.pop("mq", wait="true", timeout=5000).status_code == 204
    assert time.monotonic() - started < 1
    assert api.push(msg(2))[0]["status"] == "queued"  # pushes are not affected
    api.switch("maintenance/pop", False)
    got = api.pop("mq").json
    assert [m["data"]["n"] for m in got["messages"]] == [1, 2]


def test_switch_reaches_another_process_within_about_a_second(
    make_client: Callable[[], Client],
) -> None:
    first, second = make_client(), make_client()
    first.switch("maintenance", True)
    assert first.runtime.maintenance.push_on  # at once where the POST was handled
    wait_for(lambda: second.runtime.maintenance.push_on, timeout=3, what="refresh")
    assert second.push(msg(1))[0]["status"] == "buffered"
    first.switch("maintenance", False)
    wait_for(lambda: not second.runtime.maintenance.push_on, timeout=3, what="refresh")
    wait_for(
        lambda: sql_value(first.runtime.db, "SELECT count(*) FROM queen.messages") == 1,
        what="drain",
    )
