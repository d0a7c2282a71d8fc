-- What the official client queen-mq 2.6.0 adds to the core tables (issue 24).

-- The lease a (partition, consumer group) held last, kept after an ack or a release frees
-- it, so that renewing a lease the server freed answers "released or expired" (200,
-- success false, renewed 0: what the 2.6.0 client reads) while a lease id the server never
-- handed out stays a 404 (what the 0.15.0 client needs to report a failed renewal, since
-- it reads any 2xx as success). Written in the same UPDATE that frees the lease; looked
-- up only when a renewal extended nothing (no index: that path is rare and one scan of
-- partition_consumers is its whole cost).
ALTER TABLE queen.partition_consumers ADD COLUMN last_lease_id UUID;

-- Consumer groups that conflate (a last-value consumer: each pop delivers only the newest
-- message of a partition since the group's cursor; the older ones are skipped). The policy
-- is the group's, declared by the first pop of the group in a scope (a queue, or a
-- namespace/task pair: the other columns '') that asks for it with `conflation=true`; a row
-- means "conflates". A group that already has cursors in the scope without a row was
-- declared without conflation: a later request for it gets `conflationConflict` and the
-- stored policy (the 2.6.0 client's contract). Deleting the group's cursors or the queue
-- deletes its rows (schema/queries.sql), so a recreated group declares again.
CREATE TABLE queen.conflation_groups (
    consumer_group TEXT NOT NULL,
    queue_name     TEXT NOT NULL DEFAULT '',
    namespace      TEXT NOT NULL DEFAULT '',
    task           TEXT NOT NULL DEFAULT '',
    declared_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, queue_name, namespace, task)
);
CREATE INDEX conflation_groups_queue_idx ON queen.conflation_groups (queue_name);
