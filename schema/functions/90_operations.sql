-- OPERATIONS. The retention and eviction services (one bounded batch per call, so a large
-- cleanup never holds locks for long), and the counts behind the status routes and the
-- Prometheus backlog gauges. The services themselves run in one process per database at a
-- time (queen_threads/background/retention.py, advisory lock); these functions are also
-- safe when called concurrently: a message is deleted once, by whichever call gets it.
--
-- Rules shared by every cleanup kind:
--   * a message in the delivered batch of a live lease (any consumer group) is never
--     deleted; it is looked at again in the next cycle;
--   * a partition whose cursor rows are busy (a pop or ack holds one right now) is skipped
--     for this batch: its cursor rows are share-locked while its messages are deleted, so
--     no lease can be taken on them meanwhile;
--   * victims are row-locked with SKIP LOCKED before they are deleted, so concurrent
--     batches take disjoint sets and a batch that finds fewer than its limit has seen
--     everything that is not being deleted by someone else right now;
--   * every partition that lost messages gets a queen.retention_history row, and its
--     wildcard candidate row (queen.partition_lookup) is repaired: removed when the
--     partition is now empty, pointed at the newest remaining message otherwise.

-- The earliest cursor among the consumer groups that read a partition, as (ts, id): a
-- message at or before it has been consumed by every one of them. Groups counted:
--   * every group with a cursor on the partition;
--   * every group whose subscription (consumer_groups_metadata) covers the partition, by
--     queue (whole queue or this partition) or by namespace/task, even if it has not
--     visited the partition yet (its cursor would start at its subscription instant, or
--     at the beginning);
--   * queue mode, when it has a cursor on any partition of the queue.
-- No row when no group reads the partition (then nothing counts as completed).
CREATE OR REPLACE FUNCTION queen._ops_completed_floor(
    p_pid uuid, p_qid uuid, p_queue text, p_partition text, p_ns text, p_task text
) RETURNS TABLE (ts timestamptz, id bigint)
LANGUAGE sql STABLE AS $$
    WITH g AS (
        SELECT pc.consumer_group AS grp
          FROM queen.partition_consumers pc
         WHERE pc.partition_id = p_pid
        UNION
        SELECT '__QUEUE_MODE__'
         WHERE EXISTS (SELECT 1
                         FROM queen.partition_consumers pc
                         JOIN queen.partitions p ON p.id = pc.partition_id
                        WHERE p.queue_id = p_qid AND pc.consumer_group = '__QUEUE_MODE__')
        UNION
        SELECT m.consumer_group
          FROM queen.consumer_groups_metadata m
         WHERE (m.queue_name = p_queue AND m.partition_name IN (p_partition, ''))
            OR (m.queue_name = '' AND m.partition_name = ''
                AND (m.namespace <> '' OR m.task <> '')
                AND (m.namespace = '' OR m.namespace = p_ns)
                AND (m.task = '' OR m.task = p_task))
    )
    SELECT e.ts, e.id
      FROM g
      LEFT JOIN queen.partition_consumers pc
             ON pc.partition_id = p_pid AND pc.consumer_group = g.grp
     CROSS JOIN LATERAL (
            SELECT CASE WHEN pc.partition_id IS NOT NULL THEN pc.last_consumed_created_at
                        WHEN g.grp = '__QUEUE_MODE__' THEN NULL
                        ELSE queen._subscription_start(g.grp, p_queue, p_partition, p_ns, p_task)
                   END AS start_ts
           ) st
     CROSS JOIN LATERAL (
            SELECT coalesce(st.start_ts, '-infinity'::timestamptz) AS ts,
                   CASE WHEN pc.partition_id IS NOT NULL THEN pc.last_consumed_id
                        WHEN st.start_ts IS NOT NULL THEN 9223372036854775807
                        ELSE 0 END::bigint AS id
           ) e
     ORDER BY e.ts, e.id
     LIMIT 1
$$;

-- Repair the wildcard candidate row of a partition after messages were deleted. Runs under
-- the lock push takes on the partition row before it inserts (FOR NO KEY UPDATE), so no
-- push of this partition is in flight while we look and the next one waits for our
-- commit (its trigger then re-creates the row). A partition being pushed to right now is
-- left alone: that push makes the row right again.
CREATE OR REPLACE FUNCTION queen._ops_repair_lookup(p_pid uuid)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- (the lock pushes take: the partition's counters row, migration 0020)
    PERFORM 1 FROM queen.partition_counters WHERE partition_id = p_pid
        FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- New statements, new snapshots: every push committed before we got the lock is seen.
    IF NOT EXISTS (SELECT 1 FROM queen.messages m WHERE m.partition_id = p_pid) THEN
        DELETE FROM queen.partition_lookup WHERE partition_id = p_pid;
    ELSE
        UPDATE queen.partition_lookup pl
           SET last_message_id = t.id,
               last_message_created_at = t.created_at,
               updated_at = now()
          FROM (SELECT m.id, m.created_at
                  FROM queen.messages m
                 WHERE m.partition_id = p_pid
                 ORDER BY m.created_at DESC, m.id DESC
                 LIMIT 1) t
         WHERE pl.partition_id = p_pid
           AND NOT EXISTS (SELECT 1 FROM queen.messages m2 WHERE m2.id = pl.last_message_id);
    END IF;
END;
$$;

-- One bounded batch of message cleanup.
-- Input:  {kind: retention | completed_retention | max_wait_time_eviction,
--          limit (messages per batch, also partitions looked at per batch), after: uuid|null}
-- Output: {kind, deleted, partitions:[{partitionId, queue, partition, deleted}],
--          busyPartitions, next: uuid|null, more: bool}
-- Partitions are walked in id order from `after`; call again with {after: next} while
-- `more` is true. A call deletes at most `limit` messages.
--   retention               queues with retentionEnabled and retentionSeconds > 0: every
--                           message older than retentionSeconds (consumed or not, also
--                           dead-lettered ones).
--   completed_retention     queues with retentionEnabled and completedRetentionSeconds > 0:
--                           messages older than that which every consumer group reading the
--                           partition has consumed (_ops_completed_floor); dead-lettered
--                           messages are kept (only retentionSeconds removes them).
--   max_wait_time_eviction  queues with maxWaitTimeSeconds > 0: messages older than that
--                           which the queue-mode cursor has not consumed; pop already never
--                           delivers them. Deleted (not dead-lettered); dead-lettered
--                           messages are kept.
CREATE OR REPLACE FUNCTION queen.ops_cleanup_batch_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_kind   text := p ->> 'kind';
    v_limit  integer := greatest(coalesce(queen._jint(p -> 'limit', 1000), 1000), 1);
    v_after  uuid := queen._try_uuid(p ->> 'after');
    v_now    timestamptz := now();
    v_budget integer;
    v_prev   uuid;
    v_seen   integer := 0;
    v_busy   integer := 0;
    v_n      integer;
    v_locked integer;
    v_cut    timestamptz;
    v_lo_ts  timestamptz;
    v_lo_id  bigint;
    v_hi_ts  timestamptz;
    v_hi_id  bigint;
    v_leased bigint[];
    v_parts  jsonb := '[]'::jsonb;
    r        record;
BEGIN
    IF v_kind IS NULL OR v_kind NOT IN ('retention', 'completed_retention', 'max_wait_time_eviction') THEN
        RAISE EXCEPTION 'unknown cleanup kind: %', v_kind USING ERRCODE = '22023';
    END IF;
    v_budget := v_limit;
    v_prev := v_after;

    FOR r IN
        SELECT p.id AS pid, p.name AS pname, q.id AS qid, q.name AS qname,
               q.namespace AS ns, q.task AS tk,
               CASE v_kind WHEN 'retention' THEN q.retention_seconds
                           WHEN 'completed_retention' THEN q.completed_retention_seconds
                           ELSE q.max_wait_time_seconds END AS secs
          FROM queen.partitions p
          JOIN queen.queues q ON q.id = p.queue_id
         WHERE (v_after IS NULL OR p.id > v_after)
           AND CASE v_kind
                   WHEN 'retention' THEN q.retention_enabled AND q.retention_seconds > 0
                   WHEN 'completed_retention' THEN q.retention_enabled
                                                   AND q.completed_retention_seconds > 0
                   ELSE q.max_wait_time_seconds > 0 END
         ORDER BY p.id
         LIMIT v_limit
    LOOP
        v_seen := v_seen + 1;
        v_cut := v_now - make_interval(secs => r.secs);

        -- Nothing old enough here (one index probe): next partition.
        IF NOT EXISTS (SELECT 1 FROM queen.messages m
                        WHERE m.partition_id = r.pid AND m.created_at < v_cut) THEN
            v_prev := r.pid;
            CONTINUE;
        END IF;

        -- Share-lock every cursor row of the partition: pops and acks of it wait for (acks)
        -- or skip (pops) this partition until the batch commits. When a pop or an ack holds
        -- one of them right now, leave the partition for the next batch or cycle.
        SELECT count(*) INTO v_locked
          FROM (SELECT 1 FROM queen.partition_consumers pc
                 WHERE pc.partition_id = r.pid
                   FOR SHARE SKIP LOCKED) x;
        IF v_locked < (SELECT count(*) FROM queen.partition_consumers pc
                        WHERE pc.partition_id = r.pid) THEN
            v_busy := v_busy + 1;
            v_prev := r.pid;
            CONTINUE;
        END IF;

        SELECT coalesce(array_agg(b.id), '{}') INTO v_leased
          FROM queen.partition_consumers pc
         CROSS JOIN LATERAL unnest(pc.batch_ids) AS b(id)
         WHERE pc.partition_id = r.pid AND pc.lease_expires_at > v_now;

        IF v_kind = 'retention' THEN
            WITH v AS (
                SELECT m.id FROM queen.messages m
                 WHERE m.partition_id = r.pid
                   AND m.created_at < v_cut
                   AND m.id <> ALL (v_leased)
                 ORDER BY m.created_at, m.id
                 LIMIT v_budget
                   FOR UPDATE OF m SKIP LOCKED
            )
            DELETE FROM queen.messages m USING v WHERE m.id = v.id;
            GET DIAGNOSTICS v_n = ROW_COUNT;
        ELSIF v_kind = 'completed_retention' THEN
            SELECT f.ts, f.id INTO v_hi_ts, v_hi_id
              FROM queen._ops_completed_floor(r.pid, r.qid, r.qname, r.pname, r.ns, r.tk) f;
            IF NOT FOUND OR v_hi_ts = '-infinity'::timestamptz THEN
                v_prev := r.pid;
                CONTINUE;
            END IF;
            WITH v AS (
                SELECT m.id FROM queen.messages m
                 WHERE m.partition_id = r.pid
                   AND m.created_at < v_cut
                   AND (m.created_at, m.id) <= (v_hi_ts, v_hi_id)
                   AND m.id <> ALL (v_leased)
                   AND NOT EXISTS (SELECT 1 FROM queen.dead_letter_queue d WHERE d.message_id = m.id)
                 ORDER BY m.created_at, m.id
                 LIMIT v_budget
                   FOR UPDATE OF m SKIP LOCKED
            )
            DELETE FROM queen.messages m USING v WHERE m.id = v.id;
            GET DIAGNOSTICS v_n = ROW_COUNT;
        ELSE
            SELECT coalesce(pc.last_consumed_created_at, '-infinity'::timestamptz), pc.last_consumed_id
              INTO v_lo_ts, v_lo_id
              FROM queen.partition_consumers pc
             WHERE pc.partition_id = r.pid AND pc.consumer_group = '__QUEUE_MODE__';
            IF NOT FOUND THEN
                v_lo_ts := '-infinity'::timestamptz;
                v_lo_id := 0;
            END IF;
            WITH v AS (
                SELECT m.id FROM queen.messages m
                 WHERE m.partition_id = r.pid
                   AND m.created_at < v_cut
                   AND (m.created_at, m.id) > (v_lo_ts, v_lo_id)
                   AND m.id <> ALL (v_leased)
                   AND NOT EXISTS (SELECT 1 FROM queen.dead_letter_queue d WHERE d.message_id = m.id)
                 ORDER BY m.created_at, m.id
                 LIMIT v_budget
                   FOR UPDATE OF m SKIP LOCKED
            )
            DELETE FROM queen.messages m USING v WHERE m.id = v.id;
            GET DIAGNOSTICS v_n = ROW_COUNT;
        END IF;

        IF v_n > 0 THEN
            v_budget := v_budget - v_n;
            INSERT INTO queen.retention_history
                   (partition_id, queue_name, partition_name, messages_deleted, retention_type)
            VALUES (r.pid, r.qname, r.pname, v_n, v_kind);
            v_parts := v_parts || jsonb_build_object('partitionId', r.pid, 'queue', r.qname,
                                                     'partition', r.pname, 'deleted', v_n);
            PERFORM queen._ops_repair_lookup(r.pid);
        END IF;

        IF v_budget <= 0 THEN
            -- This partition may hold more: the next batch starts again at it.
            RETURN jsonb_build_object('kind', v_kind, 'deleted', v_limit - v_budget,
                                      'partitions', v_parts, 'busyPartitions', v_busy,
                                      'next', v_prev, 'more', true);
        END IF;
        v_prev := r.pid;
    END LOOP;

    RETURN jsonb_build_object('kind', v_kind, 'deleted', v_limit - v_budget,
                              'partitions', v_parts, 'busyPartitions', v_busy,
                              'next', v_prev, 'more', v_seen >= v_limit);
END;
$$;

-- One bounded batch of partition cleanup: delete partitions that have no message, no live
-- lease, and no activity (push) for p.days days, oldest activity first. Each one gets a
-- queen.retention_history row (partition_cleanup, 0 messages). Deleting a partition drops
-- its cursors; a later push to the same name re-creates it (queue mode and 'all' groups
-- start at its beginning, 'new'/timestamp subscriptions after their stored instant).
-- Input: {days, limit}. Output: {deleted, partitions:[{partitionId, queue, partition}], more}.
CREATE OR REPLACE FUNCTION queen.ops_cleanup_partitions_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_days  integer := greatest(coalesce(queen._jint(p -> 'days', 30), 30), 0);
    v_limit integer := greatest(coalesce(queen._jint(p -> 'limit', 1000), 1000), 1);
    v_cut   timestamptz := now() - make_interval(days => v_days);
    v_seen  integer := 0;
    v_n     integer := 0;
    v_parts jsonb := '[]'::jsonb;
    r       record;
BEGIN
    FOR r IN
        SELECT p.id AS pid, p.name AS pname, q.name AS qname
          FROM queen.partitions p
          JOIN queen.queues q ON q.id = p.queue_id
         WHERE p.last_activity < v_cut
           AND NOT EXISTS (SELECT 1 FROM queen.messages m WHERE m.partition_id = p.id)
         ORDER BY p.last_activity, p.id
         LIMIT v_limit
    LOOP
        v_seen := v_seen + 1;
        -- The lock push takes first (it waits for us, or we skip a partition being pushed to).
        PERFORM 1 FROM queen.partitions
          WHERE id = r.pid AND last_activity < v_cut
            FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        -- (a push holds the partition's counters row, migration 0020)
        PERFORM 1 FROM queen.partition_counters pc
          WHERE pc.partition_id = r.pid AND pc.last_activity >= v_cut;
        CONTINUE WHEN FOUND;
        PERFORM 1 FROM queen.partition_counters pc
          WHERE pc.partition_id = r.pid FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND AND EXISTS (SELECT 1 FROM queen.partition_counters pc
                                             WHERE pc.partition_id = r.pid);
        CONTINUE WHEN EXISTS (SELECT 1 FROM queen.messages m WHERE m.partition_id = r.pid);
        CONTINUE WHEN EXISTS (SELECT 1 FROM queen.partition_consumers pc
                               WHERE pc.partition_id = r.pid AND pc.lease_expires_at > now());
        DELETE FROM queen.partitions WHERE id = r.pid;
        INSERT INTO queen.retention_history
               (partition_id, queue_name, partition_name, messages_deleted, retention_type)
        VALUES (r.pid, r.qname, r.pname, 0, 'partition_cleanup');
        v_parts := v_parts || jsonb_build_object('partitionId', r.pid, 'queue', r.qname,
                                                 'partition', r.pname);
        v_n := v_n + 1;
    END LOOP;
    -- More only when this batch made progress (skipped partitions come back next cycle).
    RETURN jsonb_build_object('deleted', v_n, 'partitions', v_parts,
                              'more', v_seen >= v_limit AND v_n > 0);
END;
$$;

-- Partition counts come from queen._partition_stats (80_admin.sql).
DROP FUNCTION IF EXISTS queen._ops_partition_counts(uuid);
