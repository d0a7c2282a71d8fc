"""Analytics (docs/api-admin.md, "Analytics") on the whole application with a real
PostgreSQL: what the processes count and flush, what the metrics service samples and
prunes under its advisory lock, and what each chart route answers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import falcon.testing
import psycopg2
import psycopg2.extensions
import pytest

from queen_threads.app import create_app
from queen_threads.background.exclusive import ExclusiveService, lock_key
from queen_threads.background.metrics_job import MetricsJob
from queen_threads.runtime import Runtime
from tests.integration.conftest import AdminApi
from tests.integration.test_status import iso
from tests.support.exclusive import race_run_once

QUIET = {"METRICS_FLUSH_INTERVAL_S": "3600"}  # the tests flush and sample themselves


class World:
    """A runtime whose background analytics stay still, its HTTP API, and helpers."""

    def __init__(self, runtime: Runtime, conn: psycopg2.extensions.connection) -> None:
        runtime.metrics_service.stop()  # its loop ends before its first turn
        assert runtime.schema_ready.wait(10)  # flushes wait for the schema
        self.runtime = runtime
        self.api = AdminApi(falcon.testing.TestClient(create_app(runtime)), conn)

    def flush(self) -> None:
        assert self.runtime.collector.flush()

    def sample(self) -> dict[str, Any]:
        outcome = self.runtime.metrics_service.run_once(force=True)
        assert outcome.status == "ran", outcome
        return outcome.result

    def chart(self, path: str, **params: Any) -> dict[str, Any]:
        res = self.api.get(path, **params)
        assert res.status_code == 200, res.text
        return dict(res.json)

    def queue_rows(self, queue: str) -> tuple[int, ...]:
        [row] = self.api.sql(
            "SELECT sum(pushed), sum(popped), sum(acked), sum(failed), sum(dlq), "
            "sum(poll_waits) FROM queen.metrics_queue_minutes WHERE queue_name = %s",
            queue,
        )
        return tuple(int(v or 0) for v in row)


@pytest.fixture
def make_world(
    make_runtime: Callable[..., Runtime], pg_conn: psycopg2.extensions.connection
) -> Callable[[], World]:
    return lambda: World(make_runtime(**QUIET), pg_conn)


@pytest.fixture
def world(make_world: Callable[[], World]) -> World:
    return make_world()


def age(api: AdminApi, queue: str, seconds: int) -> None:
    """Move a queue's messages and its cursors `seconds` into the past (order unchanged)."""
    shift = f"{seconds} seconds"
    api.sql(
        """UPDATE queen.messages m SET created_at = m.created_at - %s::interval
             FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
            WHERE m.partition_id = p.id AND q.name = %s""",
        shift,
        queue,
    )
    api.sql(
        """UPDATE queen.partition_consumers pc
              SET last_consumed_created_at = pc.last_consumed_created_at - %s::interval
             FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
            WHERE pc.partition_id = p.id AND q.name = %s""",
        shift,
        queue,
    )


def flow(api: AdminApi, queue: str) -> None:
    """5 pushed; 5 delivered: 2 acked, 1 failed (retried) and acked, 1 dead-lettered."""
    api.configure(queue, retryLimit=3)
    api.push(queue, [1, 2, 3, 4, 5])
    for message in api.pop(queue, batch=2):
        api.ack(message)
    [failing] = api.pop(queue)
    assert api.ack(failing, "failed", "boom")["status"] == "failed_retry"
    [again] = api.pop(queue)
    assert again["transactionId"] == failing["transactionId"]
    api.ack(again)
    [poison] = api.pop(queue)
    res = api.post(f"/messages/{poison['partitionId']}/{poison['transactionId']}/dlq")
    assert res.status_code == 200 and res.json["dlq"], res.text


FLOW = {"pushed": 5, "popped": 5, "acked": 3, "failed": 1, "dlq": 1}


def test_counts_reach_the_minute_rows_and_every_route_after_a_flush(world: World) -> None:
    flow(world.api, "an.orders")
    world.api.push("an.other", [1])
    assert world.queue_rows("an.orders") == (0, 0, 0, 0, 0, 0)  # nothing before the flush
    world.flush()
    assert world.queue_rows("an.orders") == (5, 5, 3, 1, 1, 0)

    one = world.chart("/status/analytics", queue="an.orders")
    assert {k: one["totals"][k] for k in FLOW} == FLOW
    assert one["filters"] == {"queue": "an.orders", "namespace": None, "task": None}
    assert one["interval"] == "1m" and one["intervalSeconds"] == 60
    assert len(one["series"]) in (60, 61)  # every minute of the hour, empty ones included
    assert sum(p["pushed"] for p in one["series"]) == 5
    assert {p["depth"] for p in one["series"]} == {None}  # no level sampled yet
    everything = world.chart("/status/analytics")
    assert everything["totals"]["pushed"] == 6 and everything["totals"]["dlq"] == 1

    ops = world.chart("/analytics/queue-ops", queue="an.orders")
    assert {k: ops["totals"][k] for k in FLOW} == FLOW
    assert set(ops["series"][0]) == {"t", *FLOW, "longPollWaits"}


def test_namespace_and_task_filters_sum_the_matching_queues(world: World) -> None:
    for queue, n in (("ns1.a", 1), ("ns1.b", 2), ("ns2.a", 4)):
        world.api.push(queue, list(range(n)))
    world.flush()
    assert world.chart("/status/analytics", namespace="ns1")["totals"]["pushed"] == 3
    assert world.chart("/status/analytics", task="a")["totals"]["pushed"] == 5
    assert world.chart("/status/analytics", namespace="ns1", task="b")["totals"]["pushed"] == 2
    assert world.chart("/status/analytics", namespace="nope")["totals"]["pushed"] == 0


def test_long_poll_waits_are_counted_per_queue(world: World) -> None:
    world.api.configure("an.polled")
    res = world.api.get("/pop/queue/an.polled", wait="true", timeout=100)
    assert res.status_code == 204
    world.flush()
    assert world.queue_rows("an.polled")[5] == 1
    assert world.chart("/status/analytics", queue="an.polled")["totals"]["longPollWaits"] == 1


def test_flushes_of_several_processes_add_up(make_world: Callable[[], World]) -> None:
    a, b = make_world(), make_world()
    a.api.push("an.shared", [1, 2])
    b.api.push("an.shared", [3, 4, 5])
    a.flush()
    b.flush()
    a.api.push("an.shared", [6])
    a.flush()  # a second flush of one process adds too
    assert a.queue_rows("an.shared")[0] == 6
    assert a.chart("/status/analytics")["totals"]["pushed"] == 6
    [(rollup,)] = a.api.sql("SELECT sum(pushed) FROM queen.metrics_minutes")
    assert rollup == 6


def test_a_failed_flush_keeps_the_counts_for_the_next(world: World) -> None:
    world.api.push("an.kept", [1, 2])
    world.api.sql("ALTER TABLE queen.metrics_minutes RENAME TO metrics_minutes_away")
    try:
        assert not world.runtime.collector.flush()
    finally:
        world.api.sql("ALTER TABLE queen.metrics_minutes_away RENAME TO metrics_minutes")
    assert world.queue_rows("an.kept")[0] == 0  # the transaction was rolled back as a whole
    world.flush()
    assert world.queue_rows("an.kept")[0] == 2
    assert world.runtime.collector.stats()["failures"] == 1


def test_the_sample_writes_depth_and_lags(world: World) -> None:
    api = world.api
    api.push("an.lagging", [1, 2, 3, 4])
    api.ack(api.pop("an.lagging")[0])
    audit = api.pop("an.lagging", group="audit")[0]
    api.ack(audit)  # the audit group has a cursor and 3 messages to go
    age(api, "an.lagging", 3600)
    api.push("an.fresh", [1])
    result = world.sample()
    assert result["queues"] == 2 and result["depth"] == 4

    lag = world.chart("/analytics/queue-lag")
    latest = {q["queue"]: q for q in lag["queues"]}
    assert latest["an.lagging"]["depth"] == 3
    assert 3590 < latest["an.lagging"]["lagSeconds"] < 3700
    assert 3590 < latest["an.lagging"]["groupLagSeconds"] < 3700
    assert latest["an.fresh"]["depth"] == 1 and latest["an.fresh"]["groupLagSeconds"] == 0
    assert lag["queues"][0]["queue"] == "an.lagging"  # the most lagging first
    assert lag["totals"]["maxDepth"] == 4  # the rollup: depth summed over the queues
    one = world.chart("/status/analytics", queue="an.lagging")
    assert one["latest"]["depth"] == 3 and one["latest"]["lagSeconds"] > 3590
    sampled = [p for p in one["series"] if p["depth"] is not None]
    assert len(sampled) == 1 and sampled[0]["t"] == one["latest"]["t"]


def test_buckets_sum_counts_and_keep_the_largest_level(world: World) -> None:
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    minutes = world.runtime.instruments.minutes
    minutes.restore([
        {"queue": "an.hist", "minute": iso(start + timedelta(minutes=5)), "pushed": 2},
        {"queue": "an.hist", "minute": iso(start + timedelta(minutes=50)), "pushed": 3},
        {"queue": "an.hist", "minute": iso(start + timedelta(minutes=70)), "pushed": 7},
    ])  # fmt: skip
    world.flush()
    world.api.sql(
        "UPDATE queen.metrics_queue_minutes SET depth = 10 + extract(minute FROM minute) "
        "WHERE queue_name = 'an.hist'"
    )
    body = world.chart("/status/analytics", queue="an.hist", interval="hour",
                       **{"from": iso(start + timedelta(minutes=30)),
                          "to": iso(start + timedelta(hours=2))})  # fmt: skip
    assert body["interval"] == "1h"
    assert [p["t"] for p in body["series"]] == [
        (start + timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%S.000Z") for h in (0, 1)
    ]
    # The first bucket is whole: it starts at the hour that holds `from`.
    assert [p["pushed"] for p in body["series"]] == [5, 7]
    assert [p["depth"] for p in body["series"]] == [60, 20]


def test_retention_deletes_old_rows_and_keeps_recent_ones(world: World) -> None:
    world.api.push("an.recent", [1])
    world.flush()
    old = datetime.now(UTC) - timedelta(days=8)
    world.runtime.instruments.minutes.restore(
        [{"queue": "an.old", "minute": iso(old.replace(second=0, microsecond=0)), "pushed": 1}]
    )
    world.flush()
    world.api.sql(
        "INSERT INTO queen.metrics_process_minutes (minute, hostname, port, worker_id) "
        "VALUES (date_trunc('minute', now() - interval '8 days'), 'h', 1, 'w')"
    )
    result = world.sample()
    assert result["pruned"] == 3  # the old queue row, its rollup row, the process row
    queues = {r[0] for r in world.api.sql("SELECT queue_name FROM queen.metrics_queue_minutes")}
    assert "an.old" not in queues and "an.recent" in queues
    [(oldest,)] = world.api.sql("SELECT min(minute) FROM queen.metrics_minutes")
    assert oldest > datetime.now(UTC) - timedelta(days=7)
    assert world.api.sql("SELECT count(*) FROM queen.metrics_process_minutes "
                         "WHERE hostname = 'h'") == [(0,)]  # fmt: skip


def test_metrics_retention_days_decides_what_is_old(
    make_runtime: Callable[..., Runtime], pg_conn: psycopg2.extensions.connection
) -> None:
    world = World(make_runtime(METRICS_RETENTION_DAYS="10", **QUIET), pg_conn)
    eight_days = (datetime.now(UTC) - timedelta(days=8)).replace(second=0, microsecond=0)
    world.runtime.instruments.minutes.restore(
        [{"queue": "an.kept", "minute": iso(eight_days), "pushed": 1}]
    )
    world.flush()
    assert world.sample()["pruned"] == 0
    assert world.queue_rows("an.kept")[0] == 1


def test_only_one_process_runs_the_sample_at_a_time(world: World, migrated_dsn: str) -> None:
    world.api.push("an.locked", [1])
    services = [ExclusiveService(migrated_dsn, MetricsJob(7), 60.0, owner=f"p{i}")
                for i in range(4)]  # fmt: skip
    holder = psycopg2.connect(migrated_dsn)
    holder.autocommit = True
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(%s)", (lock_key("metrics"),))
        assert {s.run_once(force=True).status for s in services} == {"locked"}
    finally:
        holder.close()
    assert world.api.sql("SELECT count(*) FROM queen.metrics_queue_minutes") == [(0,)]

    outcomes = race_run_once(services)
    assert outcomes.count("ran") == 1
    assert set(outcomes) <= {"ran", "locked", "not_due"}
    assert world.api.sql("SELECT runs FROM queen.service_runs WHERE service = 'metrics'") == [(1,)]


def test_system_and_worker_metrics_after_a_flush(world: World) -> None:
    collector = world.runtime.collector
    collector.sample()
    world.api.push("an.proc", [1])
    world.api.get("/status")
    collector.sample()
    world.flush()
    system = world.chart("/analytics/system-metrics")
    assert system["totals"]["processes"] == 1 and system["totals"]["httpRequests"] >= 2
    reported = [p for p in system["series"] if p["processes"]]
    assert reported and all(p["processes"] == 1 for p in reported)
    assert reported[-1]["rssBytes"] > 10_000_000 and reported[-1]["dbPoolSize"] > 0
    assert any(p["cpuPercent"] is not None for p in reported)
    worker_id = str(world.runtime.worker_id)
    workers = world.chart("/analytics/worker-metrics", workerId=worker_id)
    assert workers["filters"] == {"hostname": None, "workerId": worker_id}
    [worker] = workers["workers"]
    assert worker["workerId"] == worker_id and worker["port"] == 6632
    assert world.chart("/analytics/worker-metrics", hostname="elsewhere")["workers"] == []


def test_queue_messages_page_with_status(world: World) -> None:
    world.api.push("an.page", [1, 2, 3])
    world.api.pop("an.page")
    body = world.chart("/status/queues/an.page/messages", limit=2)
    assert body["queue"] == "an.page" and body["total"] == 3
    assert body["pagination"] == {"limit": 2, "offset": 0}
    assert [m["status"] for m in body["messages"]] == ["pending", "pending"]  # newest first
    last = world.chart("/status/queues/an.page/messages", offset=2)["messages"]
    assert [m["status"] for m in last] == ["processing"]
    world.api.configure("an.empty")
    assert world.chart("/status/queues/an.empty/messages")["messages"] == []
    res = world.api.get("/status/queues/an.missing/messages")
    assert res.status_code == 404 and "an.missing" in res.json["error"]


def test_retention_chart_parked_replicas_and_postgres_stats(world: World) -> None:
    world.api.sql(
        "INSERT INTO queen.retention_history (partition_id, queue_name, partition_name, "
        "messages_deleted, retention_type) VALUES (gen_random_uuid(), 'an.r', 'Default', 40, "
        "'completed_retention'), (gen_random_uuid(), 'an.r', 'Default', 2, "
        "'max_wait_time_eviction'), (gen_random_uuid(), 'an.s', 'Default', 5, 'retention')"
    )
    retention = world.chart("/analytics/retention", queue="an.r")
    assert retention["totals"] == {"retention": 0, "completedRetention": 40, "eviction": 2,
                                   "partitionsDeleted": 0}  # fmt: skip
    assert world.chart("/analytics/retention")["totals"]["retention"] == 5

    parked = world.chart("/analytics/queue-parked-replicas", queue="an.r")
    assert parked["series"] == [] and parked["totals"] == {"parked": 0} and parked["note"]

    stats = world.chart("/analytics/postgres-stats")
    assert stats["database"]["connections"]["total"] >= 1
    assert stats["database"]["sizeBytes"] > 0
    tables = {t["table"] for t in stats["tables"]}
    assert {"queen.messages", "queen.metrics_queue_minutes"} <= tables


@pytest.mark.parametrize(
    ("path", "params", "error"),
    [
        ("/status/analytics", {"interval": "2m"}, "interval must be one of"),
        ("/status/analytics", {"from": "yesterday"}, "ISO-8601"),
        ("/status/analytics", {"from": "2025-01-02", "to": "2025-01-01"}, "from must not be"),
        ("/status/analytics", {"from": "2024-01-01", "to": "2025-06-01"}, "366 days"),
        ("/status/analytics", {"from": "2025-01-01", "to": "2025-01-31", "interval": "1m"},
         "10080 points"),
        ("/status/analytics", {"queue": "bad name"}, "Invalid queue name"),
        ("/analytics/system-metrics", {"workerId": "w" * 256}, "workerId is too long"),
        ("/status/queues/an.x/messages", {"limit": "0"}, "limit"),
    ],
)  # fmt: skip
def test_bad_parameters_are_a_400(
    world: World, path: str, params: dict[str, str], error: str
) -> None:
    res = world.api.get(path, **params)
    assert res.status_code == 400, res.text
    assert error in res.json["error"]
