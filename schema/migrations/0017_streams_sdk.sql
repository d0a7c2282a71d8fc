-- The streaming SDK's server side (/streams/v1/*, docs/streams.md "The SDK's API").
--
-- The official clients' `Stream` API runs its operators in the client: it pops the source
-- queue with an ordinary consumer group (`streams.<query name>`), reads the state of the
-- partition it holds, and commits each cycle (state changes, sink pushes, the source ack)
-- through queen.sdk_cycle_v1 in one transaction. The server keeps only what the client
-- cannot: the registered queries and their per-partition state.
--
-- queen.sdk_queries: one row per registered query name, with the fingerprint of its
--   operator chain (config_hash); a different fingerprint is refused unless the client
--   asks for a reset, which drops the query's state.
-- queen.sdk_shards: one row per (query, source partition) that committed a cycle. Its row
--   lock serialises the cycles of that shard; deleting the source partition (or its queue)
--   deletes the shard and, through it, its state.
-- queen.sdk_state: the state rows of a shard, by key (JSON values the client wrote).

CREATE TABLE queen.sdk_queries (
    id           UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    name         TEXT NOT NULL UNIQUE,
    source_queue TEXT NOT NULL,
    sink_queue   TEXT,
    config_hash  TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    reset_at     TIMESTAMPTZ
);

CREATE TABLE queen.sdk_shards (
    query_id       UUID NOT NULL REFERENCES queen.sdk_queries (id) ON DELETE CASCADE,
    partition_id   UUID NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group TEXT NOT NULL,
    cycles         BIGINT NOT NULL DEFAULT 0,  -- committed cycles
    acked          BIGINT NOT NULL DEFAULT 0,  -- source messages acknowledged by them
    pushed         BIGINT NOT NULL DEFAULT 0,  -- sink messages pushed by them
    last_cycle_at  TIMESTAMPTZ,
    PRIMARY KEY (query_id, partition_id)
);
CREATE INDEX sdk_shards_partition_idx ON queen.sdk_shards (partition_id);

CREATE TABLE queen.sdk_state (
    query_id     UUID NOT NULL,
    partition_id UUID NOT NULL,
    key          TEXT NOT NULL,
    value        JSONB NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (query_id, partition_id, key),
    FOREIGN KEY (query_id, partition_id)
        REFERENCES queen.sdk_shards (query_id, partition_id) ON DELETE CASCADE
);
