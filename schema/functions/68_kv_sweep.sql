-- KEY/VALUE expiry and numbers. Readers never see an expired row (queen._kv_live); the
-- sweeper (queen_threads/kv/sweeper.py, one process per database at a time) deletes
-- them in bounded batches, oldest expiry first, skipping rows a writer holds (a write in
-- flight may be resurrecting one).

-- Delete at most p_limit expired rows; how many went (also added to queen.kv_totals).
-- The candidates are read first, then each deleted by its key when no writer holds it:
-- on Citus kv is distributed by namespace, and only a statement on one shard may lock rows.
CREATE OR REPLACE FUNCTION queen.kv_sweep_v1(p_limit integer)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_gone integer := 0;
    v_one  integer;
    c      record;
BEGIN
    FOR c IN SELECT k.namespace, k.key FROM queen.kv k
              WHERE k.expires_at <= now()
              ORDER BY k.expires_at
              LIMIT p_limit
    LOOP
        DELETE FROM queen.kv k
         WHERE k.namespace = c.namespace AND k.key = c.key AND k.expires_at <= now()
           AND (k.namespace, k.key) = (SELECT x.namespace, x.key FROM queen.kv x
                                        WHERE x.namespace = c.namespace AND x.key = c.key
                                          FOR UPDATE SKIP LOCKED);
        GET DIAGNOSTICS v_one = ROW_COUNT;
        v_gone := v_gone + v_one;
    END LOOP;
    IF v_gone > 0 THEN
        UPDATE queen.kv_totals SET expired = expired + v_gone;
    END IF;
    RETURN v_gone;
END;
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
