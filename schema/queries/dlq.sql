-- ===== bulk DLQ requeue =====
-- POST /api/v1/dlq/requeue. Caller: queen_threads/queue/admin_store.py (AdminStore), driven
-- chunk by chunk by queen_threads/queue/dlq_requeue.py. Stored functions: 85_dlq_requeue.sql.

-- name: admin_dlq_requeue_preview
-- The messages and partitions a bulk requeue selection matches, and a sample (changes nothing).
SELECT queen.dlq_requeue_preview_v1(%s::jsonb)::text;

-- name: admin_dlq_requeue_chunk
-- One chunk of a bulk requeue (its own transaction): copies at the tails, DLQ rows removed.
SELECT queen.requeue_dlq_chunk_v1(%s::jsonb)::text;
