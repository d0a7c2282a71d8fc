-- Where a consumer group's registration takes the queue's registration lock (queen._register_group,
-- schema/functions/27_pop_ready.sql): once per row of this table. The lock orders the
-- registration with each push's commit-time bookkeeping (migration 0019), which takes it
-- where the partition is stored. On plain PostgreSQL that is the one database: one row.
-- On Citus every shard of the message path's co-location group gets a row
-- (schema/citus/30_shard_anchors.sql), so a statement keyed by each row runs on each node
-- that stores partitions, and the lock is taken there (advisory locks are per node).
CREATE TABLE queen.shard_anchors (
    partition_id UUID PRIMARY KEY
);
INSERT INTO queen.shard_anchors (partition_id) VALUES (gen_random_uuid());
