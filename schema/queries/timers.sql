-- ===== timers =====
-- Statements of the timers room (queen_threads/timers/store.py is their only caller); the
-- stored functions are in schema/functions/98_timers*.sql.

-- name: timers_apply
-- Schedule, reschedule and cancel timers: {operations} -> {results}, index-aligned.
SELECT queen.timers_apply_v1(%s::jsonb)::text;

-- name: timers_peek
-- One pending timer, or {found: false}.
SELECT queen.timers_peek_v1(%s::jsonb)::text;

-- name: timers_list
-- A keyset page of one queue's pending timers.
SELECT queen.timers_list_v1(%s::jsonb)::text;

-- name: timers_fire
-- Claim due timers (FOR UPDATE SKIP LOCKED) and store their messages, one transaction.
SELECT queen.timers_fire_v1(%s::jsonb)::text;

-- name: timers_stats
-- Pending timers and the last hour's fires (metrics, dashboard).
SELECT queen.timers_stats_v1()::text;

-- name: timers_announce
-- Tell the firers of the other processes that a timer is due in `inMs` (a NOTIFY on the
-- wake-up channel, sent after the commit that scheduled it; timers/announcer.py).
SELECT pg_notify('queen_wakeup', %s);

-- name: timers_prune_fires
-- Retention of the fire log: rows older than the hours given, a bounded batch.
SELECT queen.timers_prune_fires_v1(%s, %s);

-- name: timers_queues
-- The queues with pending timers, the soonest first (a bounded list).
SELECT queen.timers_queues_v1(%s)::text;
