-- Queue core: queues, partitions, messages, per-(partition, group) cursors and leases,
-- subscription metadata, dead-letter queue, wildcard candidate index, traces.
--
-- Ordering model: within a partition messages are consumed in strict (created_at, id)
-- order. `messages.id` is a bigint from a CACHE 1 sequence (identity), and
-- `queen.push_messages_v2` takes a row lock on every target partition before it draws ids
-- and its timestamp, so within a partition (created_at, id) order == push order == commit
-- order. A consumer cursor can therefore never be overtaken by a late commit.
--
-- Consumption state lives entirely in queen.partition_consumers (messages have no status):
--   cursor  = (last_consumed_created_at, last_consumed_id); NULL timestamp = "before
--             everything". A message is consumed for a group iff
--             (created_at, id) <= (coalesce(last_consumed_created_at,'-infinity'), last_consumed_id).
--   lease   = lease_id / lease_expires_at; live iff lease_expires_at > now().
--   batch   = batch_ids: ids delivered under the current lease that lie beyond the cursor,
--             in order; acked_ids: those of them already done (completed or dead-lettered)
--             but not yet passed by the cursor (out-of-order acks).
--   retry   = retry_message_id / retry_count: the message being retried and how many
--             times it was retried; retry_available_at: not redelivered before (retryDelay).

CREATE TABLE queen.queues (
    id                          UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    name                        TEXT NOT NULL UNIQUE,
    namespace                   TEXT NOT NULL DEFAULT '',
    task                        TEXT NOT NULL DEFAULT '',
    priority                    INTEGER NOT NULL DEFAULT 0,
    lease_time                  INTEGER NOT NULL DEFAULT 300,      -- seconds (0 => 60)
    retry_limit                 INTEGER NOT NULL DEFAULT 3,
    retry_delay                 INTEGER NOT NULL DEFAULT 0,        -- milliseconds
    ttl                         INTEGER NOT NULL DEFAULT 3600,     -- seconds (stored only)
    max_queue_size              INTEGER NOT NULL DEFAULT 0,        -- 0 = unlimited
    dead_letter_queue           BOOLEAN NOT NULL DEFAULT false,
    dlq_after_max_retries       BOOLEAN NOT NULL DEFAULT false,
    delayed_processing          INTEGER NOT NULL DEFAULT 0,        -- seconds
    window_buffer               INTEGER NOT NULL DEFAULT 0,        -- seconds
    retention_seconds           INTEGER NOT NULL DEFAULT 0,
    completed_retention_seconds INTEGER NOT NULL DEFAULT 0,
    retention_enabled           BOOLEAN NOT NULL DEFAULT false,
    encryption_enabled          BOOLEAN NOT NULL DEFAULT false,
    max_wait_time_seconds       INTEGER NOT NULL DEFAULT 0,
    created_at                  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at                  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX queues_namespace_task_idx ON queen.queues (namespace, task);
CREATE INDEX queues_task_idx ON queen.queues (task);

CREATE TABLE queen.partitions (
    id            UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    queue_id      UUID NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    name          TEXT NOT NULL DEFAULT 'Default',
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_activity TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (queue_id, name)
);
CREATE INDEX partitions_last_activity_idx ON queen.partitions (last_activity);

CREATE TABLE queen.messages (
    id             BIGINT GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
    transaction_id TEXT NOT NULL,
    partition_id   UUID NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    payload        JSONB NOT NULL DEFAULT 'null'::jsonb,
    trace_id       UUID,
    producer_sub   TEXT,
    is_encrypted   BOOLEAN NOT NULL DEFAULT false,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT messages_partition_transaction_unique UNIQUE (partition_id, transaction_id)
);
CREATE INDEX messages_partition_order_idx ON queen.messages (partition_id, created_at, id);

CREATE TABLE queen.partition_consumers (
    partition_id             UUID NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group           TEXT NOT NULL DEFAULT '__QUEUE_MODE__',
    -- cursor
    last_consumed_id         BIGINT NOT NULL DEFAULT 0,
    last_consumed_created_at TIMESTAMPTZ,
    -- lease
    lease_id                 UUID,
    lease_expires_at         TIMESTAMPTZ,
    lease_acquired_at        TIMESTAMPTZ,
    batch_ids                BIGINT[],
    acked_ids                BIGINT[],
    -- retry bookkeeping
    retry_message_id         BIGINT,
    retry_count              INTEGER NOT NULL DEFAULT 0,
    retry_available_at       TIMESTAMPTZ,
    -- counters
    total_messages_consumed  BIGINT NOT NULL DEFAULT 0,
    total_batches_consumed   BIGINT NOT NULL DEFAULT 0,
    last_consumed_at         TIMESTAMPTZ,
    created_at               TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, consumer_group)
);
CREATE INDEX partition_consumers_lease_idx ON queen.partition_consumers (lease_id)
    WHERE lease_id IS NOT NULL;
CREATE INDEX partition_consumers_group_idx ON queen.partition_consumers (consumer_group);

-- Subscription start per consumer group, keyed by what the pop named. Queue-route pops use
-- (group, queue, partition or '', '', ''); namespace/task pops use (group, '', '', ns, task).
-- subscription_timestamp NULL = from the beginning; otherwise a new cursor starts after it.
CREATE TABLE queen.consumer_groups_metadata (
    id                     UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    consumer_group         TEXT NOT NULL,
    queue_name             TEXT NOT NULL DEFAULT '',
    partition_name         TEXT NOT NULL DEFAULT '',
    namespace              TEXT NOT NULL DEFAULT '',
    task                   TEXT NOT NULL DEFAULT '',
    subscription_mode      TEXT NOT NULL DEFAULT 'all',
    subscription_timestamp TIMESTAMPTZ,
    created_at             TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT consumer_groups_metadata_key
        UNIQUE (consumer_group, queue_name, partition_name, namespace, task)
);
CREATE INDEX consumer_groups_metadata_queue_idx ON queen.consumer_groups_metadata (queue_name);

CREATE TABLE queen.dead_letter_queue (
    id                  UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    message_id          BIGINT NOT NULL REFERENCES queen.messages (id) ON DELETE CASCADE,
    partition_id        UUID NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group      TEXT NOT NULL,
    error_message       TEXT,
    retry_count         INTEGER NOT NULL DEFAULT 0,
    original_created_at TIMESTAMPTZ,
    failed_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT dead_letter_queue_message_group_unique UNIQUE (message_id, consumer_group)
);
CREATE INDEX dead_letter_queue_partition_idx ON queen.dead_letter_queue (partition_id, failed_at DESC);
CREATE INDEX dead_letter_queue_group_idx ON queen.dead_letter_queue (consumer_group);
CREATE INDEX dead_letter_queue_failed_at_idx ON queen.dead_letter_queue (failed_at DESC);

-- Wildcard-pop candidate index: newest message per partition (maintained by trigger).
CREATE TABLE queen.partition_lookup (
    partition_id            UUID PRIMARY KEY REFERENCES queen.partitions (id) ON DELETE CASCADE,
    queue_id                UUID NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    last_message_id         BIGINT NOT NULL,
    last_message_created_at TIMESTAMPTZ NOT NULL,
    updated_at              TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX partition_lookup_queue_idx ON queen.partition_lookup (queue_id);

CREATE FUNCTION queen.trg_messages_partition_lookup() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queen.partition_lookup AS pl
           (partition_id, queue_id, last_message_id, last_message_created_at, updated_at)
    SELECT DISTINCT ON (n.partition_id)
           n.partition_id, p.queue_id, n.id, n.created_at, now()
      FROM new_rows n
      JOIN queen.partitions p ON p.id = n.partition_id
     ORDER BY n.partition_id, n.created_at DESC, n.id DESC
    ON CONFLICT (partition_id) DO UPDATE
       SET last_message_id = EXCLUDED.last_message_id,
           last_message_created_at = EXCLUDED.last_message_created_at,
           updated_at = EXCLUDED.updated_at
     WHERE (pl.last_message_created_at, pl.last_message_id)
         < (EXCLUDED.last_message_created_at, EXCLUDED.last_message_id);
    RETURN NULL;
END;
$$;

CREATE TRIGGER messages_partition_lookup
    AFTER INSERT ON queen.messages
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION queen.trg_messages_partition_lookup();

-- Subscription metadata is keyed by queue name (no FK); drop it with the queue.
CREATE FUNCTION queen.trg_queues_drop_metadata() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queen.consumer_groups_metadata m
     USING old_rows o
     WHERE m.queue_name = o.name;
    RETURN NULL;
END;
$$;

CREATE TRIGGER queues_drop_metadata
    AFTER DELETE ON queen.queues
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION queen.trg_queues_drop_metadata();

CREATE TABLE queen.message_traces (
    id             UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    message_id     BIGINT REFERENCES queen.messages (id) ON DELETE CASCADE,
    partition_id   UUID NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    transaction_id TEXT NOT NULL,
    consumer_group TEXT,
    event_type     TEXT NOT NULL DEFAULT 'info',
    data           JSONB NOT NULL DEFAULT '{}'::jsonb,
    worker_id      TEXT,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX message_traces_message_idx ON queen.message_traces (partition_id, transaction_id);
CREATE INDEX message_traces_message_id_idx ON queen.message_traces (message_id);
CREATE INDEX message_traces_created_at_idx ON queen.message_traces (created_at DESC);

CREATE TABLE queen.message_trace_names (
    trace_id   UUID NOT NULL REFERENCES queen.message_traces (id) ON DELETE CASCADE,
    trace_name TEXT NOT NULL,
    PRIMARY KEY (trace_id, trace_name)
);
CREATE INDEX message_trace_names_name_idx ON queen.message_trace_names (trace_name);
