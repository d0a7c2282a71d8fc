-- A partition's write counters leave queen.partitions (issue 33, docs/scaling.md "Citus").
--
-- Every push reserved its offsets and stamped its write time on the partition's definition
-- row (queen.partitions.next_offset, .last_activity; 0015), and that row's lock ordered the
-- pushes of a partition. On Citus queen.partitions is a reference table (a copy on every
-- node): a write to it is a write to every node, under two-phase commit, on every push. The
-- counters and the lock move to a row of their own per partition, queen.partition_counters,
-- distributed with the partition's messages (schema/citus/30_push.sql), so a push to a
-- partition writes on the one node that holds it. On plain PostgreSQL the row is narrower
-- than the definition and has no index on what a push changes (a HOT update, where the
-- definition row's last_activity index made every push write three index entries).
--
--   next_offset    the next offset the partition assigns (the high watermark, 0015)
--   last_activity  the partition's last write (POST /api/v1/partitions/changed, retention)
--
-- "The partition's lock" (what a push holds from its reservation to its commit, and what
-- retention, lookup repairs and DLQ requeues take to keep pushes out) is this row's lock.
-- The row exists for every partition that ever had a message (every writer of
-- queen.messages creates it: the push, the offset trigger below); a partition without one
-- has next_offset 0 and its definition's last_activity (its creation).
-- queen.partitions keeps its two columns for the writers of other placements and older
-- readers; the server reads the counters (greatest of both for last_activity).

CREATE TABLE queen.partition_counters (
    partition_id  UUID PRIMARY KEY REFERENCES queen.partitions (id) ON DELETE CASCADE,
    next_offset   BIGINT NOT NULL DEFAULT 0,
    last_activity TIMESTAMPTZ NOT NULL DEFAULT now()
);

INSERT INTO queen.partition_counters (partition_id, next_offset, last_activity)
SELECT p.id, p.next_offset, p.last_activity
  FROM queen.partitions p
 WHERE p.next_offset > 0;

-- A writer that stores a message without an offset (plain SQL) takes the next one from the
-- counters row (created at the partition's first message), under its lock.
CREATE OR REPLACE FUNCTION queen.trg_messages_assign_offset() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    INSERT INTO queen.partition_counters AS pc (partition_id, next_offset, last_activity)
    SELECT p.id, 1, v_now FROM queen.partitions p WHERE p.id = NEW.partition_id
    ON CONFLICT (partition_id) DO UPDATE
       SET next_offset = pc.next_offset + 1, last_activity = EXCLUDED.last_activity
    RETURNING pc.next_offset - 1 INTO NEW.partition_offset;
    IF NEW.partition_offset IS NULL THEN
        RAISE EXCEPTION 'partition % does not exist', NEW.partition_id
              USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NEW;
END;
$$;

-- The newest message of each partition a statement stored (queen.partition_lookup), per
-- statement as in 0002, in two steps: first what the statement stored (its transition
-- table alone), then the upsert from that. The same function serves both placements: on
-- Citus the trigger fires on the shard, where a statement that reads the transition table
-- together with a distributed table cannot be planned ("unrecognized RTE kind: 7"), and a
-- trigger per row (what schema/citus used instead) made a 1000-message push of one
-- partition 1000 upserts and 1000 commit-time head updates (seconds instead of
-- milliseconds); schema/citus/30_push.sql puts this statement trigger back there.
CREATE OR REPLACE FUNCTION queen.trg_messages_partition_lookup() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_newest jsonb;
BEGIN
    SELECT jsonb_agg(jsonb_build_array(x.partition_id, x.id, x.created_at)) INTO v_newest
      FROM (SELECT DISTINCT ON (n.partition_id) n.partition_id, n.id, n.created_at
              FROM new_rows n
             ORDER BY n.partition_id, n.created_at DESC, n.id DESC) x;
    INSERT INTO queen.partition_lookup AS pl
           (partition_id, queue_id, last_message_id, last_message_created_at, updated_at)
    SELECT p.id, p.queue_id, (e ->> 1)::bigint, (e ->> 2)::timestamptz, now()
      FROM jsonb_array_elements(v_newest) e
      JOIN queen.partitions p ON p.id = (e ->> 0)::uuid
    ON CONFLICT (partition_id) DO UPDATE
       SET last_message_id = EXCLUDED.last_message_id,
           last_message_created_at = EXCLUDED.last_message_created_at,
           updated_at = EXCLUDED.updated_at
     WHERE (pl.last_message_created_at, pl.last_message_id)
         < (EXCLUDED.last_message_created_at, EXCLUDED.last_message_id);
    RETURN NULL;
END;
$$;
