-- ===== key/value and locks =====
-- queen_threads/kv/store.py and kv/sweeper.py are their only callers; the stored
-- functions live in schema/functions/65_kv_*.sql, 67_locks.sql and 68_kv_sweep.sql.

-- name: kv_batch
-- POST /api/v1/kv: the validated operations in one transaction.
SELECT queen.kv_batch_v1(%s::jsonb)::text;

-- name: locks_apply
-- POST /api/v1/locks: the validated operations, plus the outcome counts for the metrics.
SELECT queen.locks_apply_v1(%s::jsonb)::text;

-- name: kv_sweep
-- Delete one bounded batch of expired rows.
SELECT queen.kv_sweep_v1(%(limit)s);

-- name: kv_stats
SELECT queen.kv_stats_v1()::text;
