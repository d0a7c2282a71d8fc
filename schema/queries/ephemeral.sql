-- ===== ephemeral queues =====
-- queen_threads/ephemeral/store.py and the eviction job are their only callers; the stored
-- functions live in schema/functions/99_ephemeral.sql.

-- name: ephemeral_configure
SELECT queen.ephemeral_configure_v1(%s::jsonb)::text;

-- name: ephemeral_reset
SELECT queen.ephemeral_reset_v1(%s::jsonb)::text;

-- name: ephemeral_delete
SELECT queen.ephemeral_delete_v1(%s::jsonb)::text;

-- name: ephemeral_push
SELECT queen.ephemeral_push_v1(%s::jsonb)::text;

-- name: ephemeral_pop
SELECT queen.ephemeral_pop_v1(%s::jsonb)::text;

-- name: ephemeral_ack
SELECT queen.ephemeral_ack_v1(%s::jsonb)::text;

-- name: ephemeral_queues
SELECT queen.ephemeral_queues_v1()::text;

-- name: ephemeral_depth
-- One queue's gauges (NULL when it has neither configuration nor contents).
SELECT queen.ephemeral_depth_v1(%(queue)s)::text;

-- name: ephemeral_watch
-- What waiting pops watch, for the queues of %(queues)s.
SELECT queen.ephemeral_watch_v1(%(queues)s::text[])::text;

-- name: ephemeral_totals
SELECT queen.ephemeral_totals_v1()::text;

-- name: ephemeral_retention
-- Messages past their ttlSeconds, cursors of groups idle for %s seconds; with the totals.
SELECT (queen.ephemeral_retention_v1(%s) || queen.ephemeral_totals_v1())::text;
