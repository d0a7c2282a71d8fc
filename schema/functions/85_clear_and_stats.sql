-- CLEAR AND STATISTICS. The two administration operations that are not reads: emptying a
-- queue (or one partition of it) in place, and refreshing the planner statistics.

-- CLEAR: remove every message of a queue, or of one of its partitions, with what belongs to
-- them (dead-letter rows, traces), and keep the queue, its options, its partitions, its
-- consumer groups and their subscriptions.
-- Every cursor row on a cleared partition loses its lease, batch and retry state and goes
-- back to the (now empty) beginning of the partition: a consumer that held a lease is not
-- stranded until it expires, and everything pushed after the clear is delivered to every
-- group. The wildcard candidate rows (queen.partition_lookup) of the cleared partitions are
-- removed, as retention does for a partition it empties; the next push re-creates them.
--
-- Locks, in this order (the order acks and transactions take them, so they never deadlock
-- with a clear):
--   1. the cursor rows of the partitions (FOR UPDATE): waits for pops and acks in flight;
--   2. the partition rows (FOR UPDATE, in id order) and their counters rows (the lock
--      pushes take since migration 0020): waits for pushes in flight, and makes
--      every later push, first pop of a group (its new cursor row), ack into the DLQ and
--      trace of these partitions wait until the clear commits, because each needs a
--      key-share lock on the partition row. So no pop can lease a message the clear removes.
-- The cursor rows are reset after step 2, which also covers rows created between 1 and 2.
-- A deadlock with a concurrent requeue (which locks a partition, then cursors) is retried.
--
-- Input:  {queue, partition|null}
-- Output: {queueFound, partitionFound, deleted, deadLetters, traces, partitions}
--         (deleted = messages removed; partitions = partitions cleared)
CREATE OR REPLACE FUNCTION queen._clear_partitions(p_qid uuid, p_partition text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_pids   uuid[];
    v_msgs   bigint;
    v_dlq    bigint;
    v_traces bigint;
    v_pid    uuid;
BEGIN
    -- On Citus: one connection per node for the whole transaction (the deletes below span
    -- the nodes after rows of a reference table were locked); of no effect elsewhere.
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    SELECT coalesce(array_agg(p.id ORDER BY p.id), '{}') INTO v_pids
      FROM queen.partitions p
     WHERE p.queue_id = p_qid AND (p_partition IS NULL OR p.name = p_partition);

    -- 1. (partition by partition in id order: on Citus rows are locked only by a statement
    --    on one shard)
    FOREACH v_pid IN ARRAY v_pids LOOP
        PERFORM 1 FROM queen.partition_consumers pc
          WHERE pc.partition_id = v_pid
          ORDER BY pc.consumer_group
            FOR UPDATE;
    END LOOP;

    -- 2. The partition rows, and the lock pushes take (their counters row, migration 0020).
    SELECT coalesce(array_agg(x.id ORDER BY x.id), '{}') INTO v_pids
      FROM (SELECT p.id
              FROM queen.partitions p
             WHERE p.id = ANY (v_pids)
             ORDER BY p.id
               FOR UPDATE) x;
    FOREACH v_pid IN ARRAY v_pids LOOP
        PERFORM 1 FROM queen.partition_counters pc WHERE pc.partition_id = v_pid FOR UPDATE;
    END LOOP;

    DELETE FROM queen.message_traces t WHERE t.partition_id = ANY (v_pids);
    GET DIAGNOSTICS v_traces = ROW_COUNT;
    DELETE FROM queen.dead_letter_queue d WHERE d.partition_id = ANY (v_pids);
    GET DIAGNOSTICS v_dlq = ROW_COUNT;
    DELETE FROM queen.messages m WHERE m.partition_id = ANY (v_pids);
    GET DIAGNOSTICS v_msgs = ROW_COUNT;

    UPDATE queen.partition_consumers pc
       SET last_consumed_created_at = NULL, last_consumed_id = 0,
           lease_id = NULL, lease_expires_at = NULL, lease_acquired_at = NULL,
           batch_ids = NULL, acked_ids = NULL,
           retry_message_id = NULL, retry_count = 0, retry_available_at = NULL,
           head_created_at = NULL, head_id = NULL, not_before = NULL  -- nothing left
     WHERE pc.partition_id = ANY (v_pids);

    DELETE FROM queen.partition_lookup pl WHERE pl.partition_id = ANY (v_pids);

    RETURN jsonb_build_object('queueFound', true, 'partitionFound', cardinality(v_pids) > 0,
                              'deleted', v_msgs, 'deadLetters', v_dlq, 'traces', v_traces,
                              'partitions', cardinality(v_pids));
END;
$$;

CREATE OR REPLACE FUNCTION queen.clear_queue_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_qid  uuid;
    v_part text := nullif(p ->> 'partition', '');
BEGIN
    SELECT q.id INTO v_qid FROM queen.queues q WHERE q.name = p ->> 'queue';
    IF NOT FOUND THEN
        RETURN jsonb_build_object('queueFound', false, 'partitionFound', false, 'deleted', 0,
                                  'deadLetters', 0, 'traces', 0, 'partitions', 0);
    END IF;
    -- As in queen._push_retrying: a deadlock victim is rolled back to this block's savepoint
    -- (its locks released) and tries again.
    FOR attempt IN 1..3 LOOP
        BEGIN
            RETURN queen._clear_partitions(v_qid, v_part);
        EXCEPTION WHEN deadlock_detected THEN
            IF attempt = 3 THEN
                RAISE;
            END IF;
        END;
    END LOOP;
END;
$$;

-- STATISTICS: ANALYZE every table of the queen schema, so the planner's row estimates match
-- what the tables hold now (after a bulk load, a large clear or a retention sweep, before
-- autovacuum gets to them). The counts the API answers are computed live and need no
-- refresh. Output: {analyzedTables: [names], durationMs}.
CREATE OR REPLACE FUNCTION queen.refresh_stats_v1()
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_tables  text[] := '{}';
    r         record;
BEGIN
    -- On Citus: an ANALYZE of a distributed table runs on its shards over one connection
    -- per node, so that a reference table's after it is allowed in the same transaction;
    -- of no effect elsewhere.
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    FOR r IN
        SELECT c.oid::regclass AS rel
          FROM pg_class c
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'queen' AND c.relkind IN ('r', 'p')
         ORDER BY c.relname
    LOOP
        EXECUTE format('ANALYZE %s', r.rel);
        v_tables := v_tables || r.rel::text;
    END LOOP;
    RETURN jsonb_build_object(
        'analyzedTables', to_jsonb(v_tables),
        'durationMs', round(extract(epoch FROM clock_timestamp() - v_started) * 1000)::bigint);
END;
$$;
