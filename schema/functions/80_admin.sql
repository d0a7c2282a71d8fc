-- ADMIN. Stored functions behind the administration routes, for the work that is either
-- concurrency-sensitive (seek: it locks rows in the same order as push and pop do) or
-- shared by several statements in queries.sql (per-partition lag of consumer groups, the
-- states of a message). Everything else the admin routes run is a plain statement; the
-- DLQ's functions are in 85_dlq.sql.

-- How many messages of a partition come after a cursor position, and the oldest of them
-- (one partition's index range; on Citus run nested in queries on the definitions,
-- schema/citus/50_nested_reads.sql).
CREATE OR REPLACE FUNCTION queen._messages_after(p_pid uuid, p_ts timestamptz, p_id bigint)
RETURNS TABLE (n bigint, oldest timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT count(*), min(m.created_at)
      FROM queen.messages m
     WHERE m.partition_id = p_pid AND (m.created_at, m.id) > (p_ts, p_id);
END;
$$;

-- Per-(group, partition) consumption state, for the consumer-group routes.
-- Scope: every (group, queue) pair where the group has a cursor on some partition of the
-- queue or stored subscription metadata naming the queue (directly or by namespace/task),
-- times every partition of that queue. A partition the group has not visited yet is
-- measured from where its cursor would start (queue mode and 'all': the beginning; 'new' or
-- timestamp subscriptions: after the stored instant), exactly as pop would create it.
-- lag = messages beyond the cursor not yet acked out of order; oldest_unconsumed_at = the
-- creation time of the first message beyond the cursor.
CREATE OR REPLACE FUNCTION queen._group_partitions(p_group text)
RETURNS TABLE (
    consumer_group       text,
    queue_id             uuid,
    queue_name           text,
    partition_id         uuid,
    partition_name       text,
    has_cursor           boolean,
    lease_active         boolean,
    lease_expires_at     timestamptz,
    lag                  bigint,
    oldest_unconsumed_at timestamptz,
    last_consumed_at     timestamptz,
    last_activity_at     timestamptz
)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    -- the group's cursors, read on their own (on Citus a distributed table, which the
    -- definitions below, reference tables, may not be joined to through LATERAL)
    v_cursors jsonb;
BEGIN
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'grp', pc.consumer_group, 'pid', pc.partition_id,
               'lease_expires_at', pc.lease_expires_at,
               'acked', coalesce(cardinality(pc.acked_ids), 0),
               'cur_ts', pc.last_consumed_created_at, 'cur_id', pc.last_consumed_id,
               'last_consumed_at', pc.last_consumed_at,
               'activity', greatest(pc.last_consumed_at, pc.lease_acquired_at, pc.created_at))),
               '[]'::jsonb)
      INTO v_cursors
      FROM queen.partition_consumers pc
     WHERE p_group IS NULL OR pc.consumer_group = p_group;
    RETURN QUERY
    WITH cur AS MATERIALIZED (
        SELECT * FROM jsonb_to_recordset(v_cursors) AS x(
            grp text, pid uuid, lease_expires_at timestamptz, acked integer,
            cur_ts timestamptz, cur_id bigint, last_consumed_at timestamptz,
            activity timestamptz)
    ), gq AS (
        SELECT cur.grp, p.queue_id AS qid
          FROM cur
          JOIN queen.partitions p ON p.id = cur.pid
        UNION
        SELECT m.consumer_group, q.id
          FROM queen.consumer_groups_metadata m
          JOIN queen.queues q
            ON q.name = m.queue_name
            OR (m.queue_name = '' AND (m.namespace <> '' OR m.task <> '')
                AND (m.namespace = '' OR m.namespace = q.namespace)
                AND (m.task = '' OR m.task = q.task))
         WHERE p_group IS NULL OR m.consumer_group = p_group
    )
    SELECT gq.grp, q.id, q.name, p.id, p.name,
           pc.pid IS NOT NULL,
           coalesce(pc.lease_expires_at > now(), false),
           pc.lease_expires_at,
           greatest(s.n - coalesce(pc.acked, 0), 0),
           s.oldest,
           pc.last_consumed_at,
           pc.activity
      FROM gq
      JOIN queen.queues q ON q.id = gq.qid
      JOIN queen.partitions p ON p.queue_id = q.id
      LEFT JOIN cur pc ON pc.pid = p.id AND pc.grp = gq.grp
     CROSS JOIN LATERAL (
            SELECT CASE WHEN pc.pid IS NOT NULL OR gq.grp = '__QUEUE_MODE__' THEN NULL
                        ELSE queen._subscription_start(gq.grp, q.name, p.name, q.namespace, q.task)
                   END AS start_ts
           ) st
     CROSS JOIN LATERAL (
            SELECT CASE WHEN pc.pid IS NOT NULL
                        THEN coalesce(pc.cur_ts, '-infinity')
                        ELSE coalesce(st.start_ts, '-infinity') END AS ts,
                   CASE WHEN pc.pid IS NOT NULL THEN pc.cur_id
                        WHEN st.start_ts IS NOT NULL THEN 9223372036854775807
                        ELSE 0 END AS id
           ) c
     CROSS JOIN LATERAL queen._messages_after(p.id, c.ts, c.id) s;
END;
$$;

-- SEEK: move a consumer group's cursor on every partition of a queue (or one partition)
-- and drop its leases and retry state. Partitions it has not visited yet get a cursor too.
-- Input:  {consumerGroup, queue, partition|null, toEnd: bool, timestamp: ISO|null}
--   toEnd     -> after the newest message ever pushed to the partition
--   timestamp -> after the last message created at or before it (the beginning if none)
-- Output: {queueFound, partitionFound, partitionsUpdated}
CREATE OR REPLACE FUNCTION queen.seek_consumer_group_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_group  text := coalesce(nullif(p ->> 'consumerGroup', ''), '__QUEUE_MODE__');
    v_queue  text := p ->> 'queue';
    v_part   text := nullif(p ->> 'partition', '');
    v_to_end boolean := coalesce(queen._jbool(p -> 'toEnd', false), false);
    v_ts     timestamptz := queen._try_timestamptz(p ->> 'timestamp');
    v_q      queen.queues;
    v_count  integer := 0;
    v_at     timestamptz;
    v_mid    bigint;
    r        record;
BEGIN
    SELECT * INTO v_q FROM queen.queues WHERE name = v_queue;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('queueFound', false, 'partitionFound', false,
                                  'partitionsUpdated', 0);
    END IF;
    IF NOT v_to_end AND v_ts IS NULL THEN
        RAISE EXCEPTION 'toEnd or timestamp is required' USING ERRCODE = '22023';
    END IF;
    -- Partition by partition in id order (the order push and pop lock them in), each one's
    -- target and cursor by its own key (on Citus: statements on its node).
    FOR r IN
        SELECT p.id, p.name FROM queen.partitions p
         WHERE p.queue_id = v_q.id AND (v_part IS NULL OR p.name = v_part)
         ORDER BY p.id
    LOOP
        IF v_to_end THEN
            SELECT pl.last_message_created_at, pl.last_message_id INTO v_at, v_mid
              FROM queen.partition_lookup pl WHERE pl.partition_id = r.id;
        ELSE
            SELECT m.created_at, m.id INTO v_at, v_mid
              FROM queen.messages m
             WHERE m.partition_id = r.id AND m.created_at <= v_ts
             ORDER BY m.created_at DESC, m.id DESC
             LIMIT 1;
        END IF;
        INSERT INTO queen.partition_consumers AS pc
               (partition_id, consumer_group, last_consumed_created_at, last_consumed_id)
        VALUES (r.id, v_group, v_at, coalesce(v_mid, 0))
        ON CONFLICT (partition_id, consumer_group) DO UPDATE
           SET last_consumed_created_at = EXCLUDED.last_consumed_created_at,
               last_consumed_id = EXCLUDED.last_consumed_id,
               lease_id = NULL, lease_expires_at = NULL, lease_acquired_at = NULL,
               batch_ids = NULL, acked_ids = NULL,
               retry_message_id = NULL, retry_count = 0, retry_available_at = NULL,
               not_before = NULL;  -- a seek backwards makes old messages visible at once
        v_count := v_count + 1;
        -- A seek backwards (or a dropped lease) can make messages available: wake pollers.
        PERFORM queen._wake(jsonb_build_object(
                    'kind', 'free', 'queue', v_q.name, 'partition', r.name,
                    'consumerGroup', v_group, 'namespace', v_q.namespace, 'task', v_q.task));
    END LOOP;
    RETURN jsonb_build_object('queueFound', true, 'partitionFound', v_count > 0,
                              'partitionsUpdated', v_count);
END;
$$;

-- Where one message stands for every consumer group that has a cursor on its partition or
-- dead-lettered it. status: dead_letter | completed | processing | pending.
-- Failed attempts (docs/retries.md) come from the DLQ row, else from the group's retry
-- history while this message is the one being retried: attempts (oldest first), attempt =
-- the number of the last failed attempt (0: none), last_delay_ms = the last wait scheduled,
-- next_attempt_at = when a scheduled retry may be delivered (NULL once it was, or when none
-- waits), last_error / error_type = those of the last failed attempt.
-- plpgsql, every statement keyed by the partition (Citus: router statements, run nested in
-- the message listings, schema/citus/50_nested_reads.sql).
DROP FUNCTION IF EXISTS queen._message_states(bigint, uuid, timestamptz);
CREATE FUNCTION queen._message_states(p_mid bigint, p_pid uuid, p_created timestamptz)
RETURNS TABLE (
    consumer_group   text,
    status           text,
    consumed         boolean,
    leased           boolean,
    lease_expires_at timestamptz,
    dead_lettered    boolean,
    error_message    text,
    retry_count      integer,
    failed_at        timestamptz,
    attempt          integer,
    last_delay_ms    integer,
    next_attempt_at  timestamptz,
    last_error       text,
    error_type       text,
    attempts         jsonb
)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT g.grp,
           CASE WHEN d.id IS NOT NULL THEN 'dead_letter'
                WHEN s.consumed THEN 'completed'
                WHEN s.leased THEN 'processing'
                ELSE 'pending' END,
           s.consumed,
           s.leased,
           CASE WHEN s.leased THEN pc.lease_expires_at END,
           d.id IS NOT NULL,
           d.error_message,
           coalesce(d.retry_count,
                    CASE WHEN pc.retry_message_id = p_mid THEN pc.retry_count ELSE 0 END),
           d.failed_at,
           coalesce((h.a -> -1 ->> 'attempt')::integer, 0),
           (SELECT (e ->> 'delayMs')::integer
              FROM jsonb_array_elements(h.a) WITH ORDINALITY AS x(e, n)
             WHERE e ? 'delayMs' ORDER BY x.n DESC LIMIT 1),
           CASE WHEN d.id IS NULL AND pc.retry_message_id = p_mid THEN pc.retry_available_at END,
           h.a -> -1 ->> 'error',
           coalesce(d.error_type, h.a -> -1 ->> 'errorType'),
           h.a
      FROM (SELECT pc0.consumer_group AS grp FROM queen.partition_consumers pc0
             WHERE pc0.partition_id = p_pid
            UNION
            SELECT d0.consumer_group FROM queen.dead_letter_queue d0
             WHERE d0.partition_id = p_pid AND d0.message_id = p_mid) g
      LEFT JOIN queen.partition_consumers pc
             ON pc.partition_id = p_pid AND pc.consumer_group = g.grp
      LEFT JOIN queen.dead_letter_queue d
             ON d.partition_id = p_pid AND d.message_id = p_mid AND d.consumer_group = g.grp
     CROSS JOIN LATERAL (
            SELECT c.consumed,
                   NOT c.consumed AND coalesce(pc.lease_expires_at > now()
                                               AND p_mid = ANY (pc.batch_ids), false) AS leased
              FROM (SELECT pc.partition_id IS NOT NULL
                           AND ((p_created, p_mid) <= (coalesce(pc.last_consumed_created_at, '-infinity'),
                                                       pc.last_consumed_id)
                                OR p_mid = ANY (coalesce(pc.acked_ids, '{}'))) AS consumed) c
           ) s
     CROSS JOIN LATERAL (
            SELECT coalesce(CASE WHEN d.id IS NOT NULL THEN d.attempts
                                 WHEN pc.retry_message_id = p_mid THEN pc.retry_history END,
                            '[]'::jsonb) AS a
           ) h;
END;
$$;

DROP FUNCTION IF EXISTS queen._partition_stats(uuid);
-- Message counts of one partition as queue mode sees them (admin listings, status routes
-- and metrics): total; pending = beyond the cursor, not acked out of order, not in a live
-- lease; processing = in the live lease's batch, not acked yet; completed = consumed or
-- dead-lettered (total - pending - processing); oldest_pending = creation time of the
-- first message beyond the cursor.
-- plpgsql (as _queue_stats): Citus plans no SQL function's parameterized statements on its
-- tables; on Citus these run nested in the admin listings' queries on reference tables
-- (schema/citus/50_nested_reads.sql).
CREATE OR REPLACE FUNCTION queen._partition_stats(p_pid uuid)
RETURNS TABLE (total bigint, pending bigint, processing bigint, completed bigint,
               oldest_pending timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT t.n,
           greatest(b.n - a.acked - a.leased, 0),
           a.leased,
           t.n - greatest(b.n - a.acked, 0),
           b.oldest
      FROM (SELECT count(*) AS n FROM queen.messages m0 WHERE m0.partition_id = p_pid) t
      LEFT JOIN queen.partition_consumers pc
             ON pc.partition_id = p_pid AND pc.consumer_group = '__QUEUE_MODE__'
     CROSS JOIN LATERAL (
            SELECT count(*) AS n, min(m.created_at) AS oldest
              FROM queen.messages m
             WHERE m.partition_id = p_pid
               AND (m.created_at, m.id) > (coalesce(pc.last_consumed_created_at, '-infinity'),
                                           coalesce(pc.last_consumed_id, 0))
           ) b
     CROSS JOIN LATERAL (
            SELECT coalesce(cardinality(pc.acked_ids), 0)::bigint AS acked,
                   CASE WHEN pc.lease_expires_at > now()
                        THEN (SELECT count(*) FROM unnest(pc.batch_ids) x
                               WHERE NOT x = ANY (coalesce(pc.acked_ids, '{}')))
                        ELSE 0 END::bigint AS leased
           ) a;
END;
$$;

-- What the partition listing shows of one partition besides its counts, from the tables
-- Citus distributes (read by the partition's own key; nested-read allowed on Citus,
-- schema/citus/50_nested_reads.sql): {lastWrite, lastMessageAt, deadLettered,
-- consumerGroups: [{consumerGroup, lag, timeLagSeconds, oldestUnconsumedAt, leaseActive,
-- leaseExpiresAt, lastConsumedAt}] by group}.
CREATE OR REPLACE FUNCTION queen._partition_detail(p_pid uuid)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN jsonb_build_object(
        'lastWrite', (SELECT pc.last_activity FROM queen.partition_counters pc
                       WHERE pc.partition_id = p_pid),
        'lastMessageAt', (SELECT queen._iso_ms(pl.last_message_created_at)
                            FROM queen.partition_lookup pl WHERE pl.partition_id = p_pid),
        'deadLettered', (SELECT count(*) FROM queen.dead_letter_queue d
                          WHERE d.partition_id = p_pid),
        'consumerGroups', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                       'consumerGroup', pc.consumer_group,
                       'lag', greatest(b.n - coalesce(cardinality(pc.acked_ids), 0), 0),
                       'timeLagSeconds', coalesce(
                           floor(extract(epoch FROM now() - b.oldest))::bigint, 0),
                       'oldestUnconsumedAt', queen._iso_ms(b.oldest),
                       'leaseActive', coalesce(pc.lease_expires_at > now(), false),
                       'leaseExpiresAt', CASE WHEN pc.lease_expires_at > now()
                                              THEN queen._iso_ms(pc.lease_expires_at) END,
                       'lastConsumedAt', queen._iso_ms(pc.last_consumed_at))
                       ORDER BY pc.consumer_group)
              FROM queen.partition_consumers pc
             CROSS JOIN LATERAL (
                    SELECT count(*) AS n, min(m.created_at) AS oldest
                      FROM queen.messages m
                     WHERE m.partition_id = p_pid
                       AND (m.created_at, m.id)
                           > (coalesce(pc.last_consumed_created_at, '-infinity'),
                              pc.last_consumed_id)
                   ) b
             WHERE pc.partition_id = p_pid), '[]'::jsonb));
END;
$$;

-- The status routes' reads of the tables Citus distributes, per queue or partition by
-- its own key (nested-read allowed on Citus, schema/citus/50_nested_reads.sql).
-- A queue's partitions, last write, queue-mode counts, messages created in [p_from, p_to),
-- DLQ rows, consumer groups with a cursor and live leases.
CREATE OR REPLACE FUNCTION queen._queue_status(p_qid uuid, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (partitions bigint, last_activity timestamptz, total numeric, pending numeric,
               processing numeric, completed numeric, oldest timestamptz, ingested bigint,
               dead bigint, groups bigint, leases bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_pids uuid[];
    v_last timestamptz;
BEGIN
    SELECT coalesce(array_agg(p.id), '{}'), max(p.last_activity) INTO v_pids, v_last
      FROM queen.partitions p WHERE p.queue_id = p_qid;
    RETURN QUERY
    SELECT cardinality(v_pids)::bigint,
           greatest(v_last, (SELECT max(pc.last_activity) FROM queen.partition_counters pc
                              WHERE pc.partition_id = ANY (v_pids))),
           st.total, st.pending, st.processing, st.completed, st.oldest,
           (SELECT count(*) FROM queen.messages m
             WHERE m.partition_id = ANY (v_pids)
               AND m.created_at >= p_from AND m.created_at < p_to),
           (SELECT count(*) FROM queen.dead_letter_queue d WHERE d.partition_id = ANY (v_pids)),
           (SELECT count(DISTINCT pc.consumer_group) FROM queen.partition_consumers pc
             WHERE pc.partition_id = ANY (v_pids)),
           (SELECT count(*) FROM queen.partition_consumers pc
             WHERE pc.partition_id = ANY (v_pids) AND pc.lease_expires_at > now())
      FROM (SELECT coalesce(sum(c.total), 0) AS total, coalesce(sum(c.pending), 0) AS pending,
                   coalesce(sum(c.processing), 0) AS processing,
                   coalesce(sum(c.completed), 0) AS completed, min(c.oldest_pending) AS oldest
              FROM unnest(v_pids) AS x(pid)
             CROSS JOIN LATERAL queen._partition_stats(x.pid) c) st;
END;
$$;

-- A partition's last write (its counters) and the messages created in [p_from, p_to).
CREATE OR REPLACE FUNCTION queen._partition_writes(p_pid uuid, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (last_write timestamptz, ingested bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT (SELECT pc.last_activity FROM queen.partition_counters pc
             WHERE pc.partition_id = p_pid),
           (SELECT count(*) FROM queen.messages m
             WHERE m.partition_id = p_pid AND m.created_at >= p_from AND m.created_at < p_to);
END;
$$;

-- A partition's cursors with their lag (messages beyond, not acked out of order) and the
-- oldest message beyond each.
CREATE OR REPLACE FUNCTION queen._partition_cursors(p_pid uuid)
RETURNS TABLE (consumer_group text, last_consumed_at timestamptz, lease_expires_at timestamptz,
               last_consumed_created_at timestamptz, total_messages_consumed bigint,
               leased boolean, lag bigint, oldest timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT pc.consumer_group, pc.last_consumed_at, pc.lease_expires_at,
           pc.last_consumed_created_at, pc.total_messages_consumed::bigint,
           pc.lease_expires_at > now(),
           greatest(s.n - coalesce(cardinality(pc.acked_ids), 0), 0)::bigint, s.oldest
      FROM queen.partition_consumers pc
     CROSS JOIN LATERAL (
            SELECT count(*) AS n, min(m.created_at) AS oldest
              FROM queen.messages m
             WHERE m.partition_id = p_pid
               AND (m.created_at, m.id) > (coalesce(pc.last_consumed_created_at, '-infinity'),
                                           pc.last_consumed_id)) s
     WHERE pc.partition_id = p_pid;
END;
$$;

-- The error messages of a partition's DLQ rows (one per row).
CREATE OR REPLACE FUNCTION queen._partition_dlq_errors(p_pid uuid)
RETURNS TABLE (error_message text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT d.error_message FROM queen.dead_letter_queue d WHERE d.partition_id = p_pid;
END;
$$;

-- Queue mode's status of one message (queen._message_states), NULL when queue mode has no
-- cursor on its partition: a function call the message listing's filter can make on
-- Citus too (where a subquery over a function, correlated with the message, is refused).
CREATE OR REPLACE FUNCTION queen._message_queue_status(p_mid bigint, p_pid uuid,
                                                       p_created timestamptz)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT s.status FROM queen._message_states(p_mid, p_pid, p_created) s
             WHERE s.consumer_group = '__QUEUE_MODE__');
END;
$$;

-- A queue's options by its id: on Citus a whole row of a reference table read in a query
-- has its shard's row type, which queen._queue_options(queen.queues) does not take.
CREATE OR REPLACE FUNCTION queen._queue_options_of(p_qid uuid)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_q queen.queues;
BEGIN
    SELECT * INTO v_q FROM queen.queues WHERE id = p_qid;
    RETURN queen._queue_options(v_q);
END;
$$;

-- The consumer groups with a cursor on some partition of a queue, as a JSON array
-- (nested-read allowed on Citus, schema/citus/50_nested_reads.sql).
CREATE OR REPLACE FUNCTION queen._queue_groups(p_qid uuid)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT jsonb_agg(DISTINCT pc.consumer_group)
                       FROM queen.partition_consumers pc
                       JOIN queen.partitions p ON p.id = pc.partition_id
                      WHERE p.queue_id = p_qid), '[]'::jsonb);
END;
$$;

-- The same counts for a whole queue, plus its partition count and DLQ rows (every group).
CREATE OR REPLACE FUNCTION queen._queue_stats(p_qid uuid)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
    SELECT jsonb_build_object(
               'partitions', count(p.id),
               'messages', jsonb_build_object(
                   'total', coalesce(sum(s.total), 0),
                   'pending', coalesce(sum(s.pending), 0),
                   'processing', coalesce(sum(s.processing), 0),
                   'completed', coalesce(sum(s.completed), 0),
                   'deadLettered', (SELECT count(*) FROM queen.dead_letter_queue d
                                      JOIN queen.partitions dp ON dp.id = d.partition_id
                                     WHERE dp.queue_id = p_qid)))
      FROM queen.partitions p
     CROSS JOIN LATERAL queen._partition_stats(p.id) s
     WHERE p.queue_id = p_qid);
END;
$$;

-- Every trace of one message, oldest first, as GET /traces/{partition}/{transaction}
-- answers it; NULL when the message does not exist. The message and its trace rows are
-- read first (on Citus: from the partition's node, a trace row as JSON since a shard's row
-- has its own type), their names then joined here by queen._trace_json (the names live
-- beside the server, not with the partitions).
CREATE OR REPLACE FUNCTION queen.message_traces_v1(p_pid uuid, p_txn text)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_mid  bigint;
    v_rows jsonb;
BEGIN
    SELECT m.id INTO v_mid FROM queen.messages m
     WHERE m.partition_id = p_pid AND m.transaction_id = p_txn;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.created_at, t.id), '[]'::jsonb)
      INTO v_rows
      FROM queen.message_traces t
     WHERE t.partition_id = p_pid AND t.message_id = v_mid;
    RETURN jsonb_build_object(
        'partitionId', p_pid,
        'transactionId', p_txn,
        'traces', coalesce((SELECT jsonb_agg(queen._trace_json(
                                                 jsonb_populate_record(NULL::queen.message_traces,
                                                                       r.j))
                                             ORDER BY r.n)
                              FROM jsonb_array_elements(v_rows) WITH ORDINALITY AS r(j, n)),
                           '[]'::jsonb));
END;
$$;

-- One trace as the API shows it.
CREATE OR REPLACE FUNCTION queen._trace_json(t queen.message_traces)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
               'id', t.id,
               'transactionId', t.transaction_id,
               'partitionId', t.partition_id,
               'queue', q.name,
               'partition', p.name,
               'consumerGroup', t.consumer_group,
               'eventType', t.event_type,
               'data', t.data,
               'traceNames', coalesce((SELECT jsonb_agg(n.trace_name ORDER BY n.trace_name)
                                         FROM queen.message_trace_names n
                                        WHERE n.trace_id = t.id), '[]'::jsonb),
               'workerId', t.worker_id,
               'createdAt', queen._iso_ms(t.created_at))
      FROM queen.partitions p
      JOIN queen.queues q ON q.id = p.queue_id
     WHERE p.id = t.partition_id
$$;

-- DELETE /api/v1/consumer-groups/{group} (p_queue NULL: every queue) and its per-queue form:
-- a group's cursors and leases, its registrations (migration 0019) and its conflation
-- policy (a group that comes back declares again), and its subscription metadata when
-- p_delete_metadata. Returns (cursor rows deleted, metadata rows deleted).
-- One statement each, in one transaction: on Citus the cursors are a distributed table and
-- the rest reference tables, which one statement cannot write together, and a transaction
-- may write a reference table after a multi-shard write only in sequential mode (of no
-- effect on plain PostgreSQL).
CREATE OR REPLACE FUNCTION queen.delete_consumer_group_v1(
    p_group text, p_queue text, p_delete_metadata boolean)
RETURNS TABLE (cursors bigint, metadata bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_qid  uuid;
    v_pids uuid[];
BEGIN
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    IF p_queue IS NULL THEN
        DELETE FROM queen.partition_consumers pc WHERE pc.consumer_group = p_group;
        GET DIAGNOSTICS cursors = ROW_COUNT;
        DELETE FROM queen.queue_consumer_groups r WHERE r.consumer_group = p_group;
        DELETE FROM queen.conflation_groups c WHERE c.consumer_group = p_group;
        DELETE FROM queen.consumer_groups_metadata m
         WHERE p_delete_metadata AND m.consumer_group = p_group;
        GET DIAGNOSTICS metadata = ROW_COUNT;
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT q.id INTO v_qid FROM queen.queues q WHERE q.name = p_queue;
    v_pids := ARRAY(SELECT p.id FROM queen.partitions p WHERE p.queue_id = v_qid);
    DELETE FROM queen.partition_consumers pc
     WHERE pc.partition_id = ANY (v_pids) AND pc.consumer_group = p_group;
    GET DIAGNOSTICS cursors = ROW_COUNT;
    DELETE FROM queen.queue_consumer_groups r
     WHERE r.queue_id = v_qid AND r.consumer_group = p_group;
    DELETE FROM queen.conflation_groups c
     WHERE c.consumer_group = p_group AND c.queue_name = p_queue;
    DELETE FROM queen.consumer_groups_metadata m
     WHERE p_delete_metadata AND m.consumer_group = p_group AND m.queue_name = p_queue;
    GET DIAGNOSTICS metadata = ROW_COUNT;
    RETURN NEXT;
END;
$$;
