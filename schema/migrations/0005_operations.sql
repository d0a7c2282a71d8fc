-- Operations: what the retention and eviction services delete (history), when each
-- background service last ran (so several processes and instances share one schedule),
-- and the index their scans use.

-- One row per (cycle, partition, kind) that removed something. partition_id is kept as a
-- plain value (no foreign key): the history must outlive a deleted partition, so the queue
-- and partition names are copied in. retention_type is one of
--   retention               messages older than retentionSeconds
--   completed_retention     consumed messages older than completedRetentionSeconds
--   max_wait_time_eviction  unconsumed messages older than maxWaitTimeSeconds
--   partition_cleanup       an empty partition idle for PARTITION_CLEANUP_DAYS (0 messages)
CREATE TABLE queen.retention_history (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    partition_id     UUID NOT NULL,
    queue_name       TEXT NOT NULL,
    partition_name   TEXT NOT NULL,
    messages_deleted INTEGER NOT NULL,
    retention_type   TEXT NOT NULL,
    executed_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX retention_history_executed_at_idx ON queen.retention_history (executed_at DESC);
CREATE INDEX retention_history_partition_idx
    ON queen.retention_history (partition_id, executed_at DESC);
CREATE INDEX retention_history_queue_idx ON queen.retention_history (queue_name, executed_at DESC);

-- Shared schedule of the background services: the process that wins the advisory lock
-- reads started_at to decide whether the interval has elapsed, and records its run here.
CREATE TABLE queen.service_runs (
    service     TEXT PRIMARY KEY,
    started_at  TIMESTAMPTZ,
    finished_at TIMESTAMPTZ,
    owner       TEXT,
    result      JSONB,
    error       TEXT,
    runs        BIGINT NOT NULL DEFAULT 0
);

-- The scans need no new index: messages are reached per partition through
-- messages_partition_order_idx (partition_id, created_at, id), dead-letter rows through
-- dead_letter_queue_message_group_unique (message_id, ...), idle partitions through
-- partitions_last_activity_idx.
