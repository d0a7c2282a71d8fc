-- READS BY OFFSET (POST /api/v1/fetch) and PARTITION DISCOVERY (POST /api/v1/partitions/changed).
-- What an offset is, and why a reader is never overtaken: migration 0015 and docs/reads.md.
-- Neither function takes a lock, a lease or moves a cursor: two readers asking the same
-- question get the same answer, and no consumer group notices them.

-- A time as every answer of this room spells it: UTC, microseconds, 'Z'. One spelling, so
-- that the strings compare in time order (the client compares safeTime strings).
CREATE OR REPLACE FUNCTION queen._reads_ts(p_ts timestamptz)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_char(p_ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- The offset of a partition's oldest kept message (its next offset when it keeps none).
CREATE OR REPLACE FUNCTION queen._reads_log_start(p_pid uuid, p_next bigint)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT m.partition_offset FROM queen.messages m
                      WHERE m.partition_id = p_pid
                      ORDER BY m.created_at, m.id LIMIT 1), p_next)
$$;

-- Input (validated by queen_threads/reads/body.py):
--   {entries: [{queue, partition, offset, maxBytes}], maxBytes}
-- Output: {entries: [{queue, partition, highWatermark, logStartOffset, records, error?}]}
--   in input order; records [{offset, transactionId, payload, ts, isEncrypted?}] from
--   `offset` on, in offset order. error: UNKNOWN_TOPIC_OR_PARTITION (no such queue or
--   partition), OFFSET_OUT_OF_RANGE (below logStartOffset or above highWatermark).
-- Bounds: an entry's records stop before its maxBytes of payload (JSON text) and the call's
-- before the call's maxBytes, except that the first record of the call always goes out (a
-- record larger than the budget must not stop a reader for ever); an entry reads at most
-- 20000 / entries (at least 16) records per call: the client asks again from nextOffset.
-- One statement, so one snapshot: the high watermark and the records agree.
CREATE OR REPLACE FUNCTION queen.fetch_offsets_v1(p jsonb)
RETURNS json
LANGUAGE sql STABLE AS $$
WITH e AS (
    SELECT (o.n - 1)::integer AS idx, o.x ->> 'queue' AS qn, o.x ->> 'partition' AS pn,
           (o.x ->> 'offset')::bigint AS off, (o.x ->> 'maxBytes')::bigint AS emax
      FROM jsonb_array_elements(p -> 'entries') WITH ORDINALITY AS o(x, n)
),
pt AS MATERIALIZED (
    SELECT e.*, pa.id AS pid, coalesce(pc.next_offset, 0) AS hw,
           CASE WHEN pa.id IS NULL THEN 0
                ELSE queen._reads_log_start(pa.id, coalesce(pc.next_offset, 0)) END AS ls
      FROM e
      LEFT JOIN queen.queues q ON q.name = e.qn
      LEFT JOIN queen.partitions pa ON pa.queue_id = q.id AND pa.name = e.pn
      LEFT JOIN queen.partition_counters pc ON pc.partition_id = pa.id  -- (migration 0020)
),
recs AS (
    SELECT pt.idx, pt.emax, r.*,
           sum(r.sz) OVER (PARTITION BY pt.idx ORDER BY r.off) AS ecum
      FROM pt
      -- Where to start: the nearest indexed offset at or below the asked one (0015).
      LEFT JOIN LATERAL (
            SELECT a.created_at, a.id FROM queen.messages a
             WHERE a.partition_id = pt.pid AND a.partition_offset <= pt.off
               AND a.partition_offset % 256 = 0
             ORDER BY a.partition_offset DESC LIMIT 1) anchor ON true
     CROSS JOIN LATERAL (
            SELECT m.partition_offset AS off, m.transaction_id AS txn, m.payload,
                   m.created_at AS ts, m.is_encrypted AS enc,
                   octet_length(m.payload::text) AS sz
              FROM queen.messages m
             WHERE m.partition_id = pt.pid
               AND (m.created_at, m.id) >= (coalesce(anchor.created_at, '-infinity'),
                                            coalesce(anchor.id, 0))
               AND m.partition_offset >= pt.off AND m.partition_offset < pt.hw
             ORDER BY m.created_at, m.id
             LIMIT greatest(16, 20000 / greatest(jsonb_array_length(p -> 'entries'), 1))) r
     WHERE pt.pid IS NOT NULL AND pt.off >= pt.ls AND pt.off < pt.hw
),
kept AS (
    SELECT c.*
      FROM (SELECT recs.*, sum(recs.sz) OVER (ORDER BY recs.idx, recs.off) AS ccum
              FROM recs) c
     WHERE (c.ecum <= c.emax AND c.ccum <= (p ->> 'maxBytes')::bigint) OR c.ccum = c.sz
),
rs AS (
    SELECT k.idx,
           json_agg(CASE WHEN k.enc
                         THEN json_build_object('offset', k.off, 'transactionId', k.txn,
                                                'payload', k.payload,
                                                'ts', queen._reads_ts(k.ts), 'isEncrypted', true)
                         ELSE json_build_object('offset', k.off, 'transactionId', k.txn,
                                                'payload', k.payload, 'ts', queen._reads_ts(k.ts))
                    END ORDER BY k.off) AS records
      FROM kept k
     GROUP BY k.idx
)
SELECT json_build_object('entries', coalesce(json_agg(
           json_build_object(
               'queue', pt.qn, 'partition', pt.pn,
               'highWatermark', pt.hw, 'logStartOffset', pt.ls,
               'records', coalesce(rs.records, '[]'::json),
               'error', CASE WHEN pt.pid IS NULL THEN 'UNKNOWN_TOPIC_OR_PARTITION'
                             WHEN pt.off < pt.ls OR pt.off > pt.hw THEN 'OFFSET_OUT_OF_RANGE'
                        END)
           ORDER BY pt.idx), '[]'::json))
  FROM pt
  LEFT JOIN rs ON rs.idx = pt.idx
$$;

-- The time up to which every write is visible to a statement that starts after this call:
-- the earlier of now and the start of the oldest transaction of this database that has
-- written something (holds a transaction id) or is running a statement. A write stamps its
-- partition's last_activity inside a statement of its transaction (the server's pushes
-- after their transaction got its id), so a write still in flight can only commit with a
-- last_activity at or after this time. Needs to see every writer's xact_start in
-- pg_stat_activity: the server's own role, or a role with pg_read_all_stats (docs/reads.md).
CREATE OR REPLACE FUNCTION queen._reads_safe_time()
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_now    timestamptz := clock_timestamp();  -- read before the writers, on purpose
    v_oldest timestamptz;
BEGIN
    SELECT min(a.xact_start) INTO v_oldest
      FROM pg_stat_activity a
     WHERE a.datname = current_database()
       AND (a.backend_xid IS NOT NULL OR a.state = 'active')
       AND a.pid <> pg_backend_pid();
    RETURN least(v_now, v_oldest);
END;
$$;

-- One page of a queue's partitions written at or after `since` (all of them without it),
-- in creation order. `after` is the `next` of the previous page.
CREATE OR REPLACE FUNCTION queen._reads_changed_page(p_entry jsonb)
RETURNS json
LANGUAGE sql STABLE AS $$
WITH arg AS (
    SELECT q.id AS qid,
           (p_entry ->> 'since')::timestamptz AS since,
           (split_part(p_entry ->> 'after', '/', 1))::timestamptz AS after_ts,
           queen._try_uuid(split_part(p_entry ->> 'after', '/', 2)) AS after_id,
           (p_entry ->> 'limit')::integer AS lim
      FROM (SELECT 1) one
      LEFT JOIN queen.queues q ON q.name = p_entry ->> 'queue'
),
page AS MATERIALIZED (
    SELECT pa.id, pa.name, pa.created_at,
           greatest(pa.last_activity, pc.last_activity) AS last_activity,
           coalesce(pc.next_offset, 0) AS next_offset
      FROM arg
      JOIN queen.partitions pa ON pa.queue_id = arg.qid
      LEFT JOIN queen.partition_counters pc ON pc.partition_id = pa.id  -- (migration 0020)
     WHERE (arg.since IS NULL OR greatest(pa.last_activity, pc.last_activity) >= arg.since)
       AND (arg.after_ts IS NULL OR (pa.created_at, pa.id) > (arg.after_ts, arg.after_id))
     ORDER BY pa.created_at, pa.id
     LIMIT (SELECT lim + 1 FROM arg)
),
numbered AS (
    SELECT page.*, row_number() OVER (ORDER BY page.created_at, page.id) AS rn FROM page
)
SELECT CASE WHEN (SELECT qid FROM arg) IS NULL
            THEN json_build_object('queue', p_entry ->> 'queue',
                                   'error', 'UNKNOWN_TOPIC_OR_PARTITION', 'partitions', '[]'::json)
            ELSE json_build_object(
                'queue', p_entry ->> 'queue',
                'partitions', coalesce((
                    SELECT json_agg(json_build_object(
                               'name', n.name, 'id', n.id,
                               'lastOffset', n.next_offset - 1,
                               'logStart', queen._reads_log_start(n.id, n.next_offset),
                               'lastWriteAt', queen._reads_ts(n.last_activity))
                               ORDER BY n.rn)
                      FROM numbered n, arg WHERE n.rn <= arg.lim), '[]'::json),
                'next', (SELECT queen._reads_ts(n.created_at) || '/' || n.id
                           FROM numbered n, arg
                          WHERE n.rn = arg.lim
                            AND EXISTS (SELECT 1 FROM numbered m WHERE m.rn > arg.lim)))
       END
$$;

-- Input (validated by queen_threads/reads/body.py):
--   {entries: [{queue, since?: ISO time, after?: page cursor, limit}]}
-- Output: {safeTime, entries: [{queue, partitions: [{name, id, lastOffset, logStart,
--          lastWriteAt}], next: cursor|null, error?}]}
-- safeTime is read before the pages (queen._reads_safe_time), so the pages' snapshot sees
-- every write stamped before it: passing it as the next `since` misses nothing.
CREATE OR REPLACE FUNCTION queen.partitions_changed_v1(p jsonb)
RETURNS json
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_safe   timestamptz := queen._reads_safe_time();
    v_result json;
BEGIN
    -- A new statement: a new snapshot, taken after the safe time was read.
    SELECT json_build_object(
               'safeTime', queen._reads_ts(v_safe),
               'entries', coalesce(json_agg(queen._reads_changed_page(o.x) ORDER BY o.n),
                                   '[]'::json))
      INTO v_result
      FROM jsonb_array_elements(p -> 'entries') WITH ORDINALITY AS o(x, n);
    RETURN v_result;
END;
$$;
