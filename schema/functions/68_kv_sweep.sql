-- KEY/VALUE expiry and numbers. Readers never see an expired row (queen._kv_live); the
-- sweeper (queen_threads/kv/sweeper.py, one process per database at a time) deletes
-- them in bounded batches, oldest expiry first, skipping rows a writer holds (a write in
-- flight may be resurrecting one).

-- Delete at most p_limit expired rows; how many went (also added to queen.kv_totals).
CREATE OR REPLACE FUNCTION queen.kv_sweep_v1(p_limit integer)
RETURNS integer
LANGUAGE sql
AS $$
    WITH doomed AS (
        SELECT namespace, key FROM queen.kv
         WHERE expires_at <= now()
         ORDER BY expires_at
         LIMIT p_limit
           FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM queen.kv k USING doomed d
         WHERE k.namespace = d.namespace AND k.key = d.key AND k.expires_at <= now()
        RETURNING 1
    ), counted AS (
        UPDATE queen.kv_totals SET expired = expired + (SELECT count(*) FROM gone) RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;

-- The numbers of /metrics and the dashboard: live keys (exact up to 100,000, then the
-- planner's estimate), expired rows not swept yet, rows swept since the start, live
-- lock permits.
CREATE OR REPLACE FUNCTION queen.kv_stats_v1()
RETURNS jsonb
LANGUAGE sql
STABLE
AS $$
    WITH total AS (
        SELECT count(*) AS n FROM (SELECT 1 FROM queen.kv LIMIT 100000) t
    ), pending AS (
        SELECT count(*) AS n FROM (SELECT 1 FROM queen.kv WHERE expires_at <= now() LIMIT 100000) t
    )
    SELECT jsonb_build_object(
        'keys', greatest(0, CASE WHEN total.n < 100000 THEN total.n
                                 ELSE (SELECT reltuples::bigint FROM pg_class
                                        WHERE oid = 'queen.kv'::regclass) END - pending.n),
        'expiredPending', pending.n,
        'expiredTotal', (SELECT expired FROM queen.kv_totals),
        'lockPermits', (SELECT count(*) FROM queen.kv k
                         WHERE k.namespace = 'queen-locks' AND queen._kv_live(k.expires_at, now())))
      FROM total, pending
$$;
