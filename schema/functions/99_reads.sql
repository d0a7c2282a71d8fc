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
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT m.partition_offset FROM queen.messages m
                      WHERE m.partition_id = p_pid
                      ORDER BY m.created_at, m.id LIMIT 1), p_next);
END;
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
-- Three statements whatever the number of entries: the partitions (definitions), then every
-- partition's watermark, log start and records in one statement joined by the partition key
-- (on Citus pushed down to each shard's node: a join of the entries' values with the
-- messages is refused there, and a statement per entry cost 29 s for 1,000 entries), then
-- the answer from those values.
CREATE OR REPLACE FUNCTION queen.fetch_offsets_v1(p jsonb)
RETURNS json
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_pts  jsonb;  -- per entry: idx, qn, pn, off, emax, pid
    v_from jsonb;  -- {partition id: the lowest offset asked of it}
    v_pids uuid[];
    v_rows jsonb;  -- per partition: pid, hw, ls, recs (from v_from's offset on)
    v_lim  integer := greatest(16, 20000 / greatest(jsonb_array_length(p -> 'entries'), 1));
BEGIN
    -- 1. The entries' partitions (definitions: on Citus reference tables, read locally).
    SELECT coalesce(jsonb_agg(jsonb_build_object('idx', e.idx, 'qn', e.qn, 'pn', e.pn,
                                                 'off', e.off, 'emax', e.emax, 'pid', pa.id)
                              ORDER BY e.idx), '[]'::jsonb)
      INTO v_pts
      FROM (SELECT (o.n - 1)::integer AS idx, o.x ->> 'queue' AS qn, o.x ->> 'partition' AS pn,
                   (o.x ->> 'offset')::bigint AS off, (o.x ->> 'maxBytes')::bigint AS emax
              FROM jsonb_array_elements(p -> 'entries') WITH ORDINALITY AS o(x, n)) e
      LEFT JOIN queen.queues q ON q.name = e.qn
      LEFT JOIN queen.partitions pa ON pa.queue_id = q.id AND pa.name = e.pn;
    -- (a partition asked twice reads from the lower offset; the entries filter below)
    SELECT coalesce(jsonb_object_agg(k, m), '{}') INTO v_from
      FROM (SELECT x ->> 'pid' AS k, min((x ->> 'off')::bigint) AS m
              FROM jsonb_array_elements(v_pts) x WHERE x ->> 'pid' IS NOT NULL GROUP BY 1) d;
    v_pids := ARRAY(SELECT k::uuid FROM jsonb_object_keys(v_from) k);

    -- 2. Every partition's high watermark (migration 0020), log start and records in one
    -- statement, so one snapshot: every message below a watermark committed with it. Each
    -- part is keyed by the partition (on Citus one query per shard, run on its node).
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'pid', pc.partition_id, 'hw', pc.next_offset,
               'ls', coalesce(ls.off, pc.next_offset), 'recs', coalesce(r.recs, '[]'::jsonb))),
               '[]'::jsonb)
      INTO v_rows
      FROM queen.partition_counters pc
      LEFT JOIN LATERAL (
            SELECT m.partition_offset AS off FROM queen.messages m
             WHERE m.partition_id = pc.partition_id
             ORDER BY m.created_at, m.id LIMIT 1) ls ON true
      -- Where to start: the nearest indexed offset at or below the asked one (0015).
      LEFT JOIN LATERAL (
            SELECT a.created_at, a.id FROM queen.messages a
             WHERE a.partition_id = pc.partition_id
               AND a.partition_offset <= (v_from ->> pc.partition_id::text)::bigint
               AND a.partition_offset % 256 = 0
             ORDER BY a.partition_offset DESC LIMIT 1) anchor ON true
      LEFT JOIN LATERAL (
            SELECT jsonb_agg(jsonb_build_object(
                       'off', x.off, 'txn', x.txn, 'payload', x.payload, 'ts', x.ts,
                       'enc', x.enc, 'tc', x.tc, 'sz', x.sz) ORDER BY x.off) AS recs
              FROM (SELECT m.partition_offset AS off, m.transaction_id AS txn, m.payload,
                           m.created_at AS ts, m.is_encrypted AS enc, m.trace_context AS tc,
                           octet_length(m.payload::text) AS sz
                      FROM queen.messages m
                     WHERE m.partition_id = pc.partition_id
                       AND (m.created_at, m.id) >= (coalesce(anchor.created_at, '-infinity'),
                                                    coalesce(anchor.id, 0))
                       AND m.partition_offset >= (v_from ->> pc.partition_id::text)::bigint
                       AND m.partition_offset < pc.next_offset
                     ORDER BY m.created_at, m.id
                     LIMIT v_lim) x) r ON true
     WHERE pc.partition_id = ANY (v_pids);

    -- 3. The answer, from those values: each entry's records from its offset on, within
    -- the bounds.
    RETURN (
WITH pr AS (
    SELECT * FROM jsonb_to_recordset(v_rows) AS x(pid uuid, hw bigint, ls bigint, recs jsonb)
),
pt AS (
    SELECT x.*, coalesce(pr.hw, 0) AS hw,
           CASE WHEN x.pid IS NULL THEN 0 ELSE coalesce(pr.ls, 0) END AS ls, pr.recs
      FROM jsonb_to_recordset(v_pts)
        AS x(idx integer, qn text, pn text, off bigint, emax bigint, pid uuid)
      LEFT JOIN pr ON pr.pid = x.pid
),
recs AS (
    SELECT pt.idx, pt.emax, r.*, sum(r.sz) OVER (PARTITION BY pt.idx ORDER BY r.off) AS ecum
      FROM pt
     CROSS JOIN jsonb_to_recordset(pt.recs)
        AS r(off bigint, txn text, payload jsonb, ts timestamptz, enc boolean, tc jsonb,
             sz bigint)
     WHERE pt.off >= pt.ls AND pt.off < pt.hw AND r.off >= pt.off
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
                                                'ts', queen._reads_ts(k.ts), 'isEncrypted', true,
                                                'traceContext', k.tc)
                         ELSE json_build_object('offset', k.off, 'transactionId', k.txn,
                                                'payload', k.payload, 'ts', queen._reads_ts(k.ts),
                                                'traceContext', k.tc)
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
  LEFT JOIN rs ON rs.idx = pt.idx);
END;
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
    IF to_regclass('pg_catalog.citus_stat_activity') IS NULL THEN
        SELECT min(a.xact_start) INTO v_oldest
          FROM pg_stat_activity a
         WHERE a.datname = current_database()
           AND (a.backend_xid IS NOT NULL OR a.state = 'active')
           AND a.pid <> pg_backend_pid();
    ELSE
        -- On Citus a coordinator transaction that writes only shards holds no transaction
        -- id of its own: its writes are its backends' on the workers, which
        -- citus_stat_activity lists with every node's under one global pid (this call's
        -- own excluded). The start that counts is the earliest of that global pid's (the
        -- coordinator's): its stamps are evaluated there, before the workers' begin.
        WITH act AS MATERIALIZED (
            SELECT a.global_pid, a.xact_start, a.backend_xid, a.state
              FROM pg_catalog.citus_stat_activity a
             WHERE a.datname = current_database() AND a.global_pid <> citus_backend_gpid()
        )
        SELECT min(a.xact_start) INTO v_oldest
          FROM act a
         WHERE a.global_pid IN (SELECT w.global_pid FROM act w
                                 WHERE w.backend_xid IS NOT NULL OR w.state = 'active');
    END IF;
    RETURN least(v_now, v_oldest);
END;
$$;

-- One page of a queue's partitions written at or after `since` (all of them without it),
-- in creation order. `after` is the `next` of the previous page.
CREATE OR REPLACE FUNCTION queen._reads_changed_page(p_entry jsonb)
RETURNS json
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_qid      uuid;
    v_pids     uuid[];
    -- {partition id: [last_activity, next_offset]} of the queue's partitions (migration
    -- 0020; read apart from the definitions: on Citus a distributed table)
    v_counters jsonb;
BEGIN
    SELECT q.id INTO v_qid FROM queen.queues q WHERE q.name = p_entry ->> 'queue';
    IF v_qid IS NULL THEN
        RETURN json_build_object('queue', p_entry ->> 'queue',
                                 'error', 'UNKNOWN_TOPIC_OR_PARTITION', 'partitions', '[]'::json);
    END IF;
    v_pids := ARRAY(SELECT pa.id FROM queen.partitions pa WHERE pa.queue_id = v_qid);
    SELECT coalesce(jsonb_object_agg(pc.partition_id,
                                     jsonb_build_array(pc.last_activity, pc.next_offset)),
                    '{}'::jsonb)
      INTO v_counters
      FROM queen.partition_counters pc
     WHERE pc.partition_id = ANY (v_pids);
    RETURN (
WITH arg AS (
    SELECT v_qid AS qid,
           (p_entry ->> 'since')::timestamptz AS since,
           (split_part(p_entry ->> 'after', '/', 1))::timestamptz AS after_ts,
           queen._try_uuid(split_part(p_entry ->> 'after', '/', 2)) AS after_id,
           (p_entry ->> 'limit')::integer AS lim
),
parts AS (
    SELECT pa.id, pa.name, pa.created_at,
           greatest(pa.last_activity, (v_counters -> pa.id::text ->> 0)::timestamptz)
               AS last_activity,
           coalesce((v_counters -> pa.id::text ->> 1)::bigint, 0) AS next_offset
      FROM queen.partitions pa
     WHERE pa.queue_id = v_qid
),
page AS MATERIALIZED (
    SELECT parts.*
      FROM arg, parts
     WHERE (arg.since IS NULL OR parts.last_activity >= arg.since)
       AND (arg.after_ts IS NULL OR (parts.created_at, parts.id) > (arg.after_ts, arg.after_id))
     ORDER BY parts.created_at, parts.id
     LIMIT (SELECT lim + 1 FROM arg)
),
numbered AS (
    SELECT page.*, row_number() OVER (ORDER BY page.created_at, page.id) AS rn FROM page
)
SELECT json_build_object(
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
                       AND EXISTS (SELECT 1 FROM numbered m WHERE m.rn > arg.lim))));
END;
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
