-- BULK REQUEUE from the DLQ (POST /api/v1/dlq/requeue). Each selected message gets a copy
-- at the tail of its partition exactly as the single-message route makes it
-- (queen._dlq_copy_to_tail, 80_admin.sql); the Python side (queen_threads/queue/
-- dlq_requeue.py) calls requeue_dlq_chunk_v1 once per chunk, each chunk its own
-- transaction, and paces the chunks.
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
LANGUAGE sql STABLE AS $$
    SELECT d.id, d.message_id, d.partition_id, d.consumer_group, d.error_message, d.failed_at,
           m.created_at
      FROM queen.dead_letter_queue d
      JOIN queen.messages m ON m.id = d.message_id
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
       AND (p_from_partition IS NULL OR d.partition_id >= p_from_partition)
$$;

-- What a bulk requeue would do, changing nothing: the messages and partitions the selection
-- matches now, and the first `sample` messages in the order they would be requeued
-- (partition by partition, each in its original (created_at, id) order), without payloads.
-- Input:  the selection plus {sample: n}
-- Output: {matched, partitions, sample:[{partitionId, transactionId, queue, partition,
--          createdAt, deadLetters:[{consumerGroup, errorMessage, failedAt}]}]}
CREATE OR REPLACE FUNCTION queen.dlq_requeue_preview_v1(p jsonb)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
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
                     JOIN queen.messages m ON m.id = s.message_id
                     JOIN queen.partitions pt ON pt.id = s.partition_id
                     JOIN queen.queues q ON q.id = pt.queue_id), '[]'::jsonb))
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
                 WHERE d.id = ANY (r.dlq_ids)
                RETURNING d.consumer_group
            )
            SELECT array_agg(consumer_group ORDER BY consumer_group) INTO v_groups FROM gone;
            CONTINUE WHEN v_groups IS NULL;
            SELECT * INTO v_msg FROM queen.messages m WHERE m.id = r.message_id;
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
