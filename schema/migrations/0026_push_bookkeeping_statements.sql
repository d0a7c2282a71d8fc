-- A push's bookkeeping in fewer statements (issue 41): the same rows written, one statement
-- less in each of the two triggers every push fires.
--
-- 1. The newest message of each partition a statement stored (queen.partition_lookup):
--    one statement on plain PostgreSQL, the transition table read in the upsert itself,
--    where 0020/0024 first aggregated it into a jsonb array and then read that array back
--    (the two steps Citus needs: there a statement that reads the transition table
--    together with a distributed table cannot be planned, "unrecognized RTE kind: 7").
--    A function of its own, queen.trg_messages_partition_lookup_v2, for the trigger of a
--    plain PostgreSQL database; a Citus database keeps the two steps (its trigger,
--    schema/citus/30_push.sql, names queen.trg_messages_partition_lookup, unchanged).
CREATE OR REPLACE FUNCTION queen.trg_messages_partition_lookup_v2() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queen.partition_lookup AS pl
           (partition_id, queue_id, last_message_id, last_message_created_at, updated_at)
    SELECT x.partition_id, p.queue_id, x.id, x.created_at, now()
      FROM (SELECT DISTINCT ON (n.partition_id) n.partition_id, n.id, n.created_at
              FROM new_rows n
             ORDER BY n.partition_id, n.created_at DESC, n.id DESC) x
     -- (a key lookup per partition pushed, whatever the planner estimates: 0024)
     CROSS JOIN LATERAL (SELECT p0.queue_id FROM queen.partitions p0
                          WHERE p0.id = x.partition_id LIMIT 1) p
    ON CONFLICT (partition_id) DO UPDATE
       SET last_message_id = EXCLUDED.last_message_id,
           last_message_created_at = EXCLUDED.last_message_created_at,
           updated_at = EXCLUDED.updated_at
     WHERE (pl.last_message_created_at, pl.last_message_id)
         < (EXCLUDED.last_message_created_at, EXCLUDED.last_message_id);
    RETURN NULL;
END;
$$;

DO $plain$
BEGIN
    -- (a Citus database whose messages are distributed keeps its two-step trigger)
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                    WHERE logicalrelid = 'queen.messages'::regclass) THEN
            RETURN;
        END IF;
    END IF;
    DROP TRIGGER IF EXISTS messages_partition_lookup ON queen.messages;
    CREATE TRIGGER messages_partition_lookup
        AFTER INSERT ON queen.messages
        REFERENCING NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION queen.trg_messages_partition_lookup_v2();
END;
$plain$;

-- 2. The commit-time bookkeeping of a partition's newest message (0019): the queue's
--    registration lock (shared) is taken by the statement that reads the queue's options,
--    not one of its own; the UPDATE of the cursor rows still comes after it, in a statement
--    of its own, so that it sees every registration that committed before the lock was
--    granted (the reason for the lock, 0019).
CREATE OR REPLACE FUNCTION queen.trg_partition_lookup_heads() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := now();
    q record;
    v_wait_at timestamptz;
    v_delay_at timestamptz;
BEGIN
    -- Shared with every committing push of the queue; a group registering for the queue
    -- takes it exclusively (queen._register_group), so each sees the other's rows.
    SELECT qq.window_buffer AS wait, qq.delayed_processing AS delay,
           qq.max_wait_time_seconds AS max_wait, l.locked INTO q
      FROM (SELECT pg_advisory_xact_lock_shared(1364218452, hashtext(NEW.queue_id::text))
                   IS NULL AS locked) l
      LEFT JOIN queen.queues qq ON qq.id = NEW.queue_id;
    -- (instants computed here: Citus runs the UPDATE on a shard, where a CASE may hold
    -- only immutable expressions)
    v_wait_at := NEW.last_message_created_at + make_interval(secs => q.wait);
    v_delay_at := NEW.last_message_created_at + make_interval(secs => q.delay);
    UPDATE queen.partition_consumers pc
       SET head_created_at = NEW.last_message_created_at, head_id = NEW.last_message_id,
           not_before = CASE
               WHEN q.wait > 0 THEN v_wait_at
               WHEN q.delay > 0 AND q.max_wait > 0 AND q.delay >= q.max_wait
                   THEN 'infinity'  -- stale before its delay ends: never visible
               WHEN pc.available_at IS NULL THEN v_delay_at  -- it enters the ready set now
               WHEN pc.not_before = 'infinity' THEN v_now
               ELSE pc.not_before END
     WHERE pc.partition_id = NEW.partition_id
       AND (pc.head_id IS NULL
            OR (pc.head_created_at, pc.head_id)
               < (NEW.last_message_created_at, NEW.last_message_id));
    IF TG_OP = 'INSERT' THEN
        PERFORM queen._cursor_rows(ARRAY[NEW.partition_id], NULL);
    END IF;
    RETURN NULL;
END;
$$;
