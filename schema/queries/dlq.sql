-- ===== the dead-letter queue =====
-- Caller: queen_threads/dlq/store.py (DlqStore), the only one; a bulk requeue is driven
-- chunk by chunk by queen_threads/dlq/service.py. Stored functions: functions/85_dlq.sql.

-- name: admin_dlq_list
-- Dead-letter rows, newest failure first, one page of them plus the total under the same
-- filters (from/to bound failed_at; error: case-insensitive substring of the error text,
-- as POST /dlq/requeue matches it).
WITH f AS (
    SELECT d.id AS dlq_id, d.consumer_group, d.error_message, d.retry_count, d.failed_at,
           d.error_type, d.attempts, m.id AS mid, m.transaction_id, m.partition_id, m.payload, m.trace_id,
           m.producer_sub, m.is_encrypted, m.created_at, p.name AS pname, q.name AS qname
      FROM queen.dead_letter_queue d
      -- (joined on the partition too: on Citus both are distributed by it, co-located)
      JOIN queen.messages m ON m.partition_id = d.partition_id AND m.id = d.message_id
      JOIN queen.partitions p ON p.id = d.partition_id
      JOIN queen.queues q ON q.id = p.queue_id
     WHERE (%(queue)s::text IS NULL OR q.name = %(queue)s::text)
       AND (%(partition)s::text IS NULL OR p.name = %(partition)s::text)
       AND (%(group)s::text IS NULL OR d.consumer_group = %(group)s::text)
       AND (%(from_ts)s::timestamptz IS NULL OR d.failed_at >= %(from_ts)s::timestamptz)
       AND (%(to_ts)s::timestamptz IS NULL OR d.failed_at <= %(to_ts)s::timestamptz)
       AND (%(error)s::text IS NULL
            OR strpos(lower(coalesce(d.error_message, '')), lower(%(error)s::text)) > 0)
), page AS (
    SELECT * FROM f ORDER BY failed_at DESC, mid DESC, consumer_group
     LIMIT %(limit)s OFFSET %(offset)s
)
SELECT jsonb_build_object(
           'messages', coalesce((
               SELECT jsonb_agg(jsonb_build_object(
                          'id', pg.mid::text,
                          'transactionId', pg.transaction_id,
                          'partitionId', pg.partition_id,
                          'queue', pg.qname,
                          'partition', pg.pname,
                          'consumerGroup', pg.consumer_group,
                          'errorMessage', pg.error_message,
                          'retryCount', pg.retry_count,
                          'errorType', pg.error_type,
                          'attempts', pg.attempts,
                          'data', pg.payload,
                          'traceId', pg.trace_id,
                          'producerSub', pg.producer_sub,
                          'createdAt', queen._iso_ms(pg.created_at),
                          'failedAt', queen._iso_ms(pg.failed_at),
                          'isEncrypted', pg.is_encrypted)
                        ORDER BY pg.failed_at DESC, pg.mid DESC, pg.consumer_group)
                 FROM page pg), '[]'::jsonb),
           'total', (SELECT count(*) FROM f),
           'pagination', jsonb_build_object('limit', %(limit)s, 'offset', %(offset)s))::text;

-- name: admin_requeue_dlq_message
-- Requeue a dead-lettered message (a copy at the tail of its partition) and drop its DLQ rows.
SELECT queen.requeue_dlq_message_v1(%s::jsonb)::text;

-- ===== bulk DLQ requeue (POST /api/v1/dlq/requeue) =====

-- name: admin_dlq_requeue_preview
-- The messages and partitions a bulk requeue selection matches, and a sample (changes nothing).
SELECT queen.dlq_requeue_preview_v1(%s::jsonb)::text;

-- name: admin_dlq_requeue_chunk
-- One chunk of a bulk requeue (its own transaction): copies at the tails, DLQ rows removed.
SELECT queen.requeue_dlq_chunk_v1(%s::jsonb)::text;
