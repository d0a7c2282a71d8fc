-- Analytics: per-minute aggregates behind the dashboard's charts (docs/api-admin.md,
-- "Analytics"). Written by two kinds of writers, both through schema/functions/95_analytics.sql:
--   * every worker process flushes its own event counts (additive upserts, so any number of
--     processes and instances add up) and its process row, every METRICS_FLUSH_INTERVAL_S;
--   * one `metrics` background service per database (advisory lock) samples the levels
--     (depth, lags) into the same rows and deletes rows older than METRICS_RETENTION_DAYS.
-- `minute` is always the start of a UTC minute.

-- One row per (queue, minute). Keyed by the queue's name, not its id: the history is
-- meant to outlive a deleted queue until retention, and the writers know names. The
-- primary key carries every value (INCLUDE), so a chart of one queue is an index-only
-- range scan: the rows of a queue are spread one per page over the heap (every flush
-- writes all queues' rows of a minute together), and 7 days of one queue would otherwise
-- read 10,080 heap pages; through the key it reads about 100 index pages. Index-only scans
-- need the visibility map, hence the low insert threshold of autovacuum (a vacuum about
-- every 1% of new rows, not the default 20%). The minute index serves the pruning and the
-- scans of namespace/task filters.
CREATE TABLE queen.metrics_queue_minutes (
    queue_name  TEXT        NOT NULL,
    minute      TIMESTAMPTZ NOT NULL,
    pushed      INTEGER     NOT NULL DEFAULT 0,  -- messages stored by pushes
    popped      INTEGER     NOT NULL DEFAULT 0,  -- messages delivered by pops
    acked       INTEGER     NOT NULL DEFAULT 0,  -- acks with status completed
    failed      INTEGER     NOT NULL DEFAULT 0,  -- failed acks given back for a retry
    dlq         INTEGER     NOT NULL DEFAULT 0,  -- messages dead-lettered
    poll_waits  INTEGER     NOT NULL DEFAULT 0,  -- wait=true pops that ended
    depth       BIGINT,                          -- queue mode's unconsumed messages (sampled)
    lag_s       REAL,                            -- age of queue mode's oldest unconsumed one
    group_lag_s REAL,                            -- largest time lag of a named group
    PRIMARY KEY (queue_name, minute)
        INCLUDE (pushed, popped, acked, failed, dlq, poll_waits, depth, lag_s, group_lag_s)
) WITH (autovacuum_vacuum_insert_scale_factor = 0.01);
CREATE INDEX metrics_queue_minutes_minute_idx ON queen.metrics_queue_minutes (minute);

-- The same per minute over every queue (counts summed, depth summed, lags the largest), so
-- the overview chart reads one row per minute instead of one per queue and minute. Counts
-- are integers as above (2^31 a minute is out of reach; sums of integers stay bigint,
-- sums of bigints would be numeric, several times slower to add up over 10,080 rows).
CREATE TABLE queen.metrics_minutes (
    minute      TIMESTAMPTZ PRIMARY KEY,
    pushed      INTEGER NOT NULL DEFAULT 0,
    popped      INTEGER NOT NULL DEFAULT 0,
    acked       INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0,
    dlq         INTEGER NOT NULL DEFAULT 0,
    poll_waits  INTEGER NOT NULL DEFAULT 0,
    depth       BIGINT,
    lag_s       REAL,
    group_lag_s REAL
);

-- One row per (minute, server process). CPU is kept as CPU seconds over wall seconds (both
-- added at each flush), so several flushes within a minute stay exact; the levels are the
-- largest sampled (once a second) in the minute.
CREATE TABLE queen.metrics_process_minutes (
    minute        TIMESTAMPTZ      NOT NULL,
    hostname      TEXT             NOT NULL,
    port          INTEGER          NOT NULL,
    worker_id     TEXT             NOT NULL,
    cpu_seconds   DOUBLE PRECISION NOT NULL DEFAULT 0,
    wall_seconds  DOUBLE PRECISION NOT NULL DEFAULT 0,
    rss_bytes     BIGINT           NOT NULL DEFAULT 0,
    http_requests BIGINT           NOT NULL DEFAULT 0,
    http_active   INTEGER          NOT NULL DEFAULT 0,
    pool_in_use   INTEGER          NOT NULL DEFAULT 0,
    pool_size     INTEGER          NOT NULL DEFAULT 0,
    pool_waiting  INTEGER          NOT NULL DEFAULT 0,
    long_polls    INTEGER          NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, hostname, port, worker_id)
);
