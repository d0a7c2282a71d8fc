-- THE DEAD-LETTER QUEUE: every stored function behind the DLQ routes (queen_threads/dlq/).
-- Requeueing one message (POST /api/v1/messages/{partitionId}/{transactionId}/retry) and
-- many at once (POST /api/v1/dlq/requeue) share the copy to the partition's tail and the
-- wake-up. (The DLQ list is a plain statement, schema/queries/dlq.sql.)

-- REQUEUE from the DLQ. Consumption is cursor-based, so a dead-lettered message (which the
-- cursor has passed) becomes deliverable again as a copy appended at the tail of its
-- partition: new id, same payload / traceId / producerSub / encryption flag, transactionId
-- "<original>:retry:<12 hex>" (the original row keeps its transactionId, which is unique per
-- partition). The copy is a new message: no retry state follows it.
-- Other groups whose cursor had already reached the old tail of the partition are moved past
-- the copy, so a group that completed the original does not receive it again when it is
-- caught up; a group still behind the tail will read the copy too (at-least-once).
-- Shared by the single-message route (requeue_dlq_message_v1) and the bulk one
-- (requeue_dlq_chunk_v1, below). The caller holds the partition's row lock
-- (FOR NO KEY UPDATE, as push takes it, so the copy's (created_at, id) follows every
-- message committed before it), has deleted the DLQ rows of p_groups (the groups the copy
-- is for) and sends the wake-up.
CREATE OR REPLACE FUNCTION queen._dlq_copy_to_tail(p_msg queen.messages, p_groups text[])
RETURNS queen.messages
LANGUAGE plpgsql AS $$
DECLARE
    v_tail_ts timestamptz;
    v_tail_id bigint;
    v_new     queen.messages;
    v_offset  bigint;
    v_now     timestamptz := clock_timestamp();
BEGIN
    -- The partition's counters row (migration 0020): its offset, under the lock pushes
    -- take; the tail is read after it (a new snapshot sees every push committed before).
    INSERT INTO queen.partition_counters AS pc (partition_id, next_offset, last_activity)
    VALUES (p_msg.partition_id, 1, v_now)
    ON CONFLICT (partition_id) DO UPDATE
       SET next_offset = pc.next_offset + 1, last_activity = EXCLUDED.last_activity
    RETURNING pc.next_offset - 1 INTO v_offset;

    SELECT pl.last_message_created_at, pl.last_message_id INTO v_tail_ts, v_tail_id
      FROM queen.partition_lookup pl WHERE pl.partition_id = p_msg.partition_id;

    INSERT INTO queen.messages
           (transaction_id, partition_id, payload, trace_id, producer_sub, is_encrypted,
            created_at, partition_offset)
    VALUES (p_msg.transaction_id || ':retry:' || left(replace(gen_random_uuid()::text, '-', ''), 12),
            p_msg.partition_id, p_msg.payload, p_msg.trace_id, p_msg.producer_sub,
            p_msg.is_encrypted, greatest(clock_timestamp(), v_tail_ts), v_offset)
    RETURNING * INTO v_new;

    IF v_tail_id IS NOT NULL THEN
        UPDATE queen.partition_consumers pc
           SET last_consumed_created_at = v_new.created_at,
               last_consumed_id = v_new.id
         WHERE pc.partition_id = p_msg.partition_id
           AND pc.consumer_group <> ALL (p_groups)
           AND (coalesce(pc.last_consumed_created_at, '-infinity'), pc.last_consumed_id)
               >= (v_tail_ts, v_tail_id);
    END IF;
    RETURN v_new;
END;
$$;

-- The wake-up after requeued copies were appended to a partition (pollers of every process
-- hear it through LISTEN); sent once per partition and transaction.
CREATE OR REPLACE FUNCTION queen._dlq_requeue_wake(p_pid uuid)
RETURNS void
LANGUAGE sql AS $$
    SELECT queen._wake(jsonb_build_object(
               'kind', 'push', 'queue', q.name, 'partition', p.name,
               'namespace', q.namespace, 'task', q.task))
      FROM queen.partitions p
      JOIN queen.queues q ON q.id = p.queue_id
     WHERE p.id = p_pid
$$;

-- One dead-lettered message (the single-message route).
-- Input:  {partitionId, transactionId, consumerGroup|null (null = every group that
--          dead-lettered it)}
-- Output: {found, messageFound, requeuedFor:[groups], newTransactionId, messageId, queue,
--          partition}
CREATE OR REPLACE FUNCTION queen.requeue_dlq_message_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_pid    uuid := queen._try_uuid(p ->> 'partitionId');
    v_txn    text := p ->> 'transactionId';
    v_group  text := nullif(p ->> 'consumerGroup', '');
    v_msg    queen.messages;
    v_pname  text;
    v_qname  text;
    v_groups text[];
    v_new    queen.messages;
BEGIN
    SELECT * INTO v_msg FROM queen.messages
     WHERE partition_id = v_pid AND transaction_id = v_txn;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('found', false, 'messageFound', false);
    END IF;

    SELECT p.name INTO v_pname FROM queen.partitions p WHERE p.id = v_pid FOR NO KEY UPDATE;
    SELECT q.name INTO v_qname FROM queen.queues q JOIN queen.partitions p ON p.queue_id = q.id
     WHERE p.id = v_pid;

    WITH gone AS (
        DELETE FROM queen.dead_letter_queue d
         WHERE d.partition_id = v_pid AND d.message_id = v_msg.id
           AND (v_group IS NULL OR d.consumer_group = v_group)
        RETURNING d.consumer_group
    )
    SELECT array_agg(consumer_group ORDER BY consumer_group) INTO v_groups FROM gone;
    IF v_groups IS NULL THEN
        RETURN jsonb_build_object('found', false, 'messageFound', true);
    END IF;

    v_new := queen._dlq_copy_to_tail(v_msg, v_groups);
    PERFORM queen._dlq_requeue_wake(v_pid);

    RETURN jsonb_build_object(
        'found', true,
        'messageFound', true,
        'requeuedFor', to_jsonb(v_groups),
        'newTransactionId', v_new.transaction_id,
        'messageId', v_new.id::text,
        'queue', v_qname,
        'partition', v_pname);
END;
$$;

-- BULK REQUEUE from the DLQ (POST /api/v1/dlq/requeue). Each selected message gets a copy
-- at the tail of its partition exactly as the single-message route makes it
-- (queen._dlq_copy_to_tail, above); the Python side (queen_threads/dlq/service.py) calls
-- requeue_dlq_chunk_v1 once per chunk, each chunk its own transaction, and paces the
-- chunks.
--
-- Selection (every key optional, all of them ANDed; the route requires at least one):
--   {queue, partition, consumerGroup, error (case-insensitive substring of the DLQ row's
--    error text), from, to (ISO, bounds on failed_at, inclusive),
--    ids: [{partitionId, transactionId}]}
-- A message is selected through its matching DLQ rows: the copy is for the groups of those
-- rows (rows of other groups for the same message stay in the DLQ).

-- The matching DLQ rows; p_partition: only that partition (NULL: all), p_from_partition:
-- only partitions whose id is >= it (NULL: all).
CREATE OR REPLACE FUNCTION queen._dlq_requeue_matches(p jsonb, p_partition uuid,
                                                      p_from_partition uuid)
RETURNS TABLE (
    dlq_id         uuid,
    message_id     bigint,
    partition_id   uuid,
    consumer_group text,
    error_message  text,
    failed_at      timestamptz,
    created_at     timestamptz
)
-- (plpgsql: Citus plans no SQL function's parameterized statement over distributed tables)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT d.id, d.message_id, d.partition_id, d.consumer_group, d.error_message, d.failed_at,
           m.created_at
      FROM queen.dead_letter_queue d
      JOIN queen.messages m ON m.partition_id = d.partition_id AND m.id = d.message_id
      JOIN queen.partitions pt ON pt.id = d.partition_id
      JOIN queen.queues q ON q.id = pt.queue_id
     WHERE (p ->> 'queue' IS NULL OR q.name = p ->> 'queue')
       AND (p ->> 'partition' IS NULL OR pt.name = p ->> 'partition')
       AND (p ->> 'consumerGroup' IS NULL OR d.consumer_group = p ->> 'consumerGroup')
       AND (p ->> 'error' IS NULL
            OR strpos(lower(coalesce(d.error_message, '')), lower(p ->> 'error')) > 0)
       AND (p ->> 'from' IS NULL OR d.failed_at >= (p ->> 'from')::timestamptz)
       AND (p ->> 'to' IS NULL OR d.failed_at <= (p ->> 'to')::timestamptz)
       AND (jsonb_typeof(p -> 'ids') IS DISTINCT FROM 'array'
            OR (m.partition_id, m.transaction_id) IN (
                   SELECT (e ->> 'partitionId')::uuid, e ->> 'transactionId'
                     FROM jsonb_array_elements(p -> 'ids') e))
       AND (p_partition IS NULL OR d.partition_id = p_partition)
       AND (p_from_partition IS NULL OR d.partition_id >= p_from_partition);
END;
$$;

-- What a bulk requeue would do, changing nothing: the messages and partitions the selection
-- matches now, and the first `sample` messages in the order they would be requeued
-- (partition by partition, each in its original (created_at, id) order), without payloads.
-- Input:  the selection plus {sample: n}
-- Output: {matched, partitions, sample:[{partitionId, transactionId, queue, partition,
--          createdAt, deadLetters:[{consumerGroup, errorMessage, failedAt}]}]}
CREATE OR REPLACE FUNCTION queen.dlq_requeue_preview_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
    WITH rows AS MATERIALIZED (
        SELECT * FROM queen._dlq_requeue_matches(p, NULL, NULL)
    ), msgs AS (
        SELECT r.message_id, r.partition_id, r.created_at,
               jsonb_agg(jsonb_build_object(
                   'consumerGroup', r.consumer_group,
                   'errorMessage', r.error_message,
                   'failedAt', queen._iso_ms(r.failed_at)) ORDER BY r.consumer_group) AS dead
          FROM rows r
         GROUP BY r.message_id, r.partition_id, r.created_at
    ), sample AS (
        SELECT * FROM msgs
         ORDER BY partition_id, created_at, message_id
         LIMIT greatest(coalesce((p ->> 'sample')::integer, 0), 0)
    )
    SELECT jsonb_build_object(
               'matched', (SELECT count(*) FROM msgs),
               'partitions', (SELECT count(DISTINCT partition_id) FROM msgs),
               'sample', coalesce((
                   SELECT jsonb_agg(jsonb_build_object(
                              'partitionId', s.partition_id,
                              'transactionId', m.transaction_id,
                              'queue', q.name,
                              'partition', pt.name,
                              'createdAt', queen._iso_ms(m.created_at),
                              'deadLetters', s.dead)
                            ORDER BY s.partition_id, s.created_at, s.message_id)
                     FROM sample s
                     JOIN queen.messages m
                       ON m.partition_id = s.partition_id AND m.id = s.message_id
                     JOIN queen.partitions pt ON pt.id = s.partition_id
                     JOIN queen.queues q ON q.id = pt.queue_id), '[]'::jsonb)));
END;
$$;

-- One chunk of a bulk requeue: at most `limit` messages, partition by partition in id
-- order from `fromPartition` (NULL: the first), each partition's matching messages in their
-- original (created_at, id) order, so the copies reach consumers in that order.
-- Order and exactly-once under races: the partition's row lock (the lock push takes) is
-- taken BEFORE its matching rows are read. A racing request (or a single-message requeue)
-- on the same partition waits for this transaction to commit and then reads only the rows
-- it left, so its copies follow these ones and no message is copied twice (the DELETE ...
-- RETURNING is the final word: a row somebody else removed yields no copy). Partitions are
-- locked in id order, as push locks them.
-- Input:  the selection plus {limit, fromPartition|null}
-- Output: {requeued, partitions:[ids that got copies], lastPartitionId (the last one
--          visited: the next chunk starts there, it may have rows left)}
CREATE OR REPLACE FUNCTION queen.requeue_dlq_chunk_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_left   integer := greatest(coalesce((p ->> 'limit')::integer, 0), 0);
    v_from   uuid := queen._try_uuid(p ->> 'fromPartition');
    v_pid    uuid;
    v_last   uuid;
    v_done   integer := 0;
    v_here   integer;
    v_parts  uuid[] := '{}';
    v_groups text[];
    v_msg    queen.messages;
    r        record;
BEGIN
    FOR v_pid IN
        SELECT DISTINCT x.partition_id FROM queen._dlq_requeue_matches(p, NULL, v_from) x
         ORDER BY 1
    LOOP
        EXIT WHEN v_left <= 0;
        v_last := v_pid;
        PERFORM 1 FROM queen.partitions pt WHERE pt.id = v_pid FOR NO KEY UPDATE;
        CONTINUE WHEN NOT FOUND;  -- the partition was deleted meanwhile
        v_here := 0;
        -- Opened after the lock: sees what a racing requeue committed before it.
        FOR r IN
            SELECT x.message_id, array_agg(x.dlq_id) AS dlq_ids
              FROM queen._dlq_requeue_matches(p, v_pid, NULL) x
             GROUP BY x.message_id, x.created_at
             ORDER BY x.created_at, x.message_id
             LIMIT v_left
        LOOP
            WITH gone AS (
                DELETE FROM queen.dead_letter_queue d
                 WHERE d.partition_id = v_pid AND d.id = ANY (r.dlq_ids)
                RETURNING d.consumer_group
            )
            SELECT array_agg(consumer_group ORDER BY consumer_group) INTO v_groups FROM gone;
            CONTINUE WHEN v_groups IS NULL;
            SELECT * INTO v_msg FROM queen.messages m
             WHERE m.partition_id = v_pid AND m.id = r.message_id;
            PERFORM queen._dlq_copy_to_tail(v_msg, v_groups);
            v_here := v_here + 1;
        END LOOP;
        IF v_here > 0 THEN
            v_parts := v_parts || v_pid;
            v_done := v_done + v_here;
            v_left := v_left - v_here;
            PERFORM queen._dlq_requeue_wake(v_pid);
        END IF;
    END LOOP;
    RETURN jsonb_build_object('requeued', v_done, 'partitions', to_jsonb(v_parts),
                              'lastPartitionId', v_last);
END;
$$;
