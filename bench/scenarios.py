"""The scenarios of issue 6, by letter, with (g) (issue 16), (h) and (i) (issue 12), and
(j) the dashboard's chart queries (issue 13), (k) and (l) streams (docs/streams.md), (m)
key/value and locks (docs/kv.md), (p) the pop autopilot against fixed settings (issue 24),
(r) reads by offset (docs/reads.md), (s) the official client's streaming SDK
(docs/streams.md), (t) timers (docs/timers.md), (u) ephemeral against durable queues
(docs/ephemeral.md), (w) retry redelivery lateness (docs/architecture.md, "Due times"), and
issue 31's (n) partitions scaling, (x) mixed load and (y) its ten-minute memory run, and
issue 33's (z) queen-threads on Citus against plain PostgreSQL 15 (docs/scaling.md), issue
44's (v) what a Citus cluster carries with 1 and 2 workers under the same CPU quota,
issue 41's (q) SQL cost per call of push, pop and ack, and issue 43's (o) Queen's SQL API
against the HTTP push (docs/sql.md)."""

from __future__ import annotations

from bench import (
    analytics,
    autopilot,
    autopilot_run,
    citus_capacity,
    citus_scale,
    consume,
    due,
    e2e,
    ephemeral,
    kv,
    longpoll,
    mixed,
    mixed_long,
    partitions,
    push,
    reads,
    sdk,
    sqlapi,
    sqlcost,
    streams,
    timers,
)
from bench.common import Scenario

SCENARIOS: dict[str, Scenario] = {
    s.letter: s
    for s in (
        Scenario("a", "batched push", push.batched_figures, push.batched),
        Scenario("b", "single-message push", push.single_figures, push.single),
        Scenario("c", "pop + ack/batch", consume.consume_figures, consume.competing),
        Scenario("d", "long-poll wake latency", longpoll.latency_figures, longpoll.wake_latency),
        Scenario("e", "idle long polls", longpoll.idle_figures, longpoll.idle_polls),
        Scenario("f", "fan-out to consumer groups", consume.fanout_figures, consume.fanout),
        Scenario("g", "end-to-end latency", e2e.e2e_figures, e2e.end_to_end),
        Scenario("i", "single-message push, auth off/on", push.auth_figures, push.auth_cost),
        Scenario(
            "h",
            "idle long polls on one queue",
            longpoll.hot_queue_figures,
            longpoll.hot_queue_polls,
        ),
        Scenario(
            "j",
            "chart queries, 7 days x 100 queues",
            analytics.analytics_figures,
            analytics.chart_queries,
        ),
        Scenario(
            "k",
            "stream window latency, 1 s tumbling",
            streams.window_figures,
            streams.window_latency,
        ),
        Scenario("l", "idle stream polls", streams.idle_figures, streams.idle_stream_polls),
        Scenario("m", "key/value and locks", kv.kv_figures, kv.key_value),
        Scenario("s", "streaming SDK pipeline vs raw pop + ack", sdk.sdk_figures, sdk.sdk_pipeline),
        Scenario("w", "retry redelivery lateness", due.due_figures, due.retry_lateness),
        Scenario(
            "p",
            "pop autopilot against fixed settings",
            autopilot.autopilot_figures,
            autopilot_run.autopilot_vs_fixed,
        ),
        Scenario("t", "timer fire lateness", timers.timer_figures, timers.fire_lateness),
        Scenario("r", "offset fetch of 1,000 partitions", reads.fetch_figures, reads.offset_fetch),
        Scenario(
            "n",
            "partitions scaling, 1 message per partition",
            partitions.scaling_figures,
            partitions.partitions_scaling,
        ),
        Scenario("x", "mixed load", mixed.mixed_figures, mixed.mixed_load),
        Scenario(
            "o",
            "Queen's SQL API against the HTTP push: PG CPU per call, wake at commit",
            sqlapi.sqlapi_figures,
            sqlapi.sql_api,
        ),
        Scenario("y", "mixed load, long run", mixed_long.long_figures, mixed_long.mixed_long),
        Scenario(
            "u",
            "ephemeral against durable push/pop",
            ephemeral.ephemeral_figures,
            ephemeral.ephemeral_vs_durable,
        ),
        Scenario(
            "q", "SQL cost per call: push, pop, ack", sqlcost.sqlcost_figures, sqlcost.sql_cost
        ),
        Scenario(
            "z",
            "Citus against plain PostgreSQL 15: CPU and round trips per operation",
            citus_scale.scale_figures,
            citus_scale.citus_scale,
        ),
        Scenario(
            "v",
            "Citus with 1 and 2 workers, every node held to the same CPU",
            citus_capacity.capacity_figures,
            citus_capacity.citus_capacity,
        ),
    )
}
