-- ===== wake-ups =====
-- The wake-ups' statements (queen_threads/wake/store.py is their only caller); the stored
-- functions are in schema/functions/10_helpers.sql and the migrations 0010 and later.

-- name: wake_batch
-- This process's wake-ups for the other processes waiting for them, after its commits.
SELECT queen.wake_batch_v2(%s::jsonb)::text;

-- name: wake_interest
-- This process's long polls want wake-ups for these selectors (wake/interest.py).
SELECT queen.wake_interest_v1(%s::jsonb)::text;

-- name: wake_interest_read
-- The other processes' live interest rows, and who waits, as a notifier keeps them
-- (wake/targets.py).
SELECT queen.wake_interest_read_v2(%s)::text;

-- name: wake_interest_withdraw
-- This process waits for nothing any more (shutdown).
SELECT queen.wake_interest_withdraw_v1(%s)::text;
