-- ANALYTICS. Writers of the per-minute tables of migration 0007 (docs/api-admin.md,
-- "Analytics"), and the bucket helper of the chart statements (schema/queries/analytics.sql).
-- Rows are always upserted in key order (queue name, minute), then the rollup by minute,
-- so concurrent flushes and the sampler never lock the same rows in opposite orders.

-- The queue counts of a flush input as rows (minute truncated; missing counts are 0).
CREATE OR REPLACE FUNCTION queen._metrics_flush_rows(p jsonb)
RETURNS TABLE (queue_name text, minute timestamptz, pushed integer, popped integer,
               acked integer, failed integer, dlq integer, poll_waits integer)
LANGUAGE sql STABLE AS $$
    SELECT r.queue, date_trunc('minute', r.minute), coalesce(r.pushed, 0),
           coalesce(r.popped, 0), coalesce(r.acked, 0), coalesce(r.failed, 0),
           coalesce(r.dlq, 0), coalesce(r."pollWaits", 0)
      FROM jsonb_to_recordset(coalesce(p -> 'queues', '[]')) AS r(
               queue text, minute timestamptz, pushed integer, popped integer,
               acked integer, failed integer, dlq integer, "pollWaits" integer)
     WHERE r.queue IS NOT NULL AND r.minute IS NOT NULL
$$;

-- FLUSH of one worker process: its event counts per (queue, minute) and its process rows.
-- Input: {queues: [{queue, minute, pushed, popped, acked, failed, dlq, pollWaits}],
--         process: {hostname, port, workerId,
--                   minutes: [{minute, cpuSeconds, wallSeconds, rssBytes, httpRequests,
--                              httpActive, poolInUse, poolSize, poolWaiting, longPolls}]}}
-- Counts are added (to the queue rows and to the all-queue rollup), process levels keep the
-- largest value; the process's live row (migration 0018, 96_metrics_live.sql) goes, its
-- counts being part of this flush. Output: {queueRows, processRows}.
CREATE OR REPLACE FUNCTION queen.metrics_flush_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_queue_rows   integer;
    v_process_rows integer;
BEGIN
    INSERT INTO queen.metrics_queue_minutes AS t
           (queue_name, minute, pushed, popped, acked, failed, dlq, poll_waits)
    SELECT queue_name, minute, sum(pushed), sum(popped), sum(acked), sum(failed), sum(dlq),
           sum(poll_waits)
      FROM queen._metrics_flush_rows(p)
     GROUP BY queue_name, minute
     ORDER BY queue_name, minute
    ON CONFLICT (queue_name, minute) DO UPDATE
       SET pushed = t.pushed + EXCLUDED.pushed,
           popped = t.popped + EXCLUDED.popped,
           acked = t.acked + EXCLUDED.acked,
           failed = t.failed + EXCLUDED.failed,
           dlq = t.dlq + EXCLUDED.dlq,
           poll_waits = t.poll_waits + EXCLUDED.poll_waits;
    GET DIAGNOSTICS v_queue_rows = ROW_COUNT;

    INSERT INTO queen.metrics_minutes AS t
           (minute, pushed, popped, acked, failed, dlq, poll_waits)
    SELECT minute, sum(pushed), sum(popped), sum(acked), sum(failed), sum(dlq), sum(poll_waits)
      FROM queen._metrics_flush_rows(p)
     GROUP BY minute
     ORDER BY minute
    ON CONFLICT (minute) DO UPDATE
       SET pushed = t.pushed + EXCLUDED.pushed,
           popped = t.popped + EXCLUDED.popped,
           acked = t.acked + EXCLUDED.acked,
           failed = t.failed + EXCLUDED.failed,
           dlq = t.dlq + EXCLUDED.dlq,
           poll_waits = t.poll_waits + EXCLUDED.poll_waits;

    INSERT INTO queen.metrics_process_minutes AS t
           (minute, hostname, port, worker_id, cpu_seconds, wall_seconds, rss_bytes,
            http_requests, http_active, pool_in_use, pool_size, pool_waiting, long_polls)
    SELECT date_trunc('minute', r.minute), p #>> '{process,hostname}',
           (p #>> '{process,port}')::integer, p #>> '{process,workerId}',
           coalesce(r."cpuSeconds", 0), coalesce(r."wallSeconds", 0),
           coalesce(r."rssBytes", 0), coalesce(r."httpRequests", 0),
           coalesce(r."httpActive", 0), coalesce(r."poolInUse", 0), coalesce(r."poolSize", 0),
           coalesce(r."poolWaiting", 0), coalesce(r."longPolls", 0)
      FROM jsonb_to_recordset(coalesce(p #> '{process,minutes}', '[]')) AS r(
               minute timestamptz, "cpuSeconds" float8, "wallSeconds" float8,
               "rssBytes" bigint, "httpRequests" bigint, "httpActive" integer,
               "poolInUse" integer, "poolSize" integer, "poolWaiting" integer,
               "longPolls" integer)
     WHERE r.minute IS NOT NULL AND p #>> '{process,hostname}' IS NOT NULL
     ORDER BY 1
    ON CONFLICT (minute, hostname, port, worker_id) DO UPDATE
       SET cpu_seconds = t.cpu_seconds + EXCLUDED.cpu_seconds,
           wall_seconds = t.wall_seconds + EXCLUDED.wall_seconds,
           rss_bytes = greatest(t.rss_bytes, EXCLUDED.rss_bytes),
           http_requests = t.http_requests + EXCLUDED.http_requests,
           http_active = greatest(t.http_active, EXCLUDED.http_active),
           pool_in_use = greatest(t.pool_in_use, EXCLUDED.pool_in_use),
           pool_size = greatest(t.pool_size, EXCLUDED.pool_size),
           pool_waiting = greatest(t.pool_waiting, EXCLUDED.pool_waiting),
           long_polls = greatest(t.long_polls, EXCLUDED.long_polls);
    GET DIAGNOSTICS v_process_rows = ROW_COUNT;

    -- The counts are durable now: the process's live row (migration 0018) showed them.
    DELETE FROM queen.metrics_live
     WHERE hostname = p #>> '{process,hostname}' AND port = (p #>> '{process,port}')::integer
       AND worker_id = p #>> '{process,workerId}';

    RETURN jsonb_build_object('queueRows', v_queue_rows, 'processRows', v_process_rows);
END;
$$;

-- SAMPLE the levels of every queue into the current minute (the `metrics` background
-- service, one process per database at a time):
--   depth       = messages beyond queue mode's cursor not acked out of order (a partition
--                 queue mode never read counts from its start), as queen._queue_depth;
--   lag_s       = age of the oldest of them (0 when there is none);
--   group_lag_s = the largest age of the first message beyond a named group's cursor, over
--                 the partitions where the group has a cursor (0 when none waits).
-- Cost: an index range scan over each partition's queue-mode backlog, one index probe per
-- named cursor. A level sampled twice in a minute keeps the larger value.
-- Output: {queues, depth}.
CREATE OR REPLACE FUNCTION queen.metrics_sample_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_minute timestamptz := date_trunc('minute', now());
    v_queues integer;
    v_depth  bigint;
BEGIN
    -- The per-partition parts read only the tables distributed by partition (on Citus:
    -- pushed down to the nodes, each partition's messages beside its cursor); the queues'
    -- names join their results on the coordinator. partition_lookup has a row for every
    -- partition that has messages.
    WITH pl AS MATERIALIZED (
        SELECT l.queue_id,
               greatest(b.n - coalesce(cardinality(pc.acked_ids), 0), 0) AS depth,
               b.oldest
          FROM queen.partition_lookup l
          LEFT JOIN queen.partition_consumers pc
                 ON pc.partition_id = l.partition_id AND pc.consumer_group = '__QUEUE_MODE__'
         CROSS JOIN LATERAL (
                 SELECT count(*) AS n, min(m.created_at) AS oldest
                   FROM queen.messages m
                  WHERE m.partition_id = l.partition_id
                    AND (m.created_at, m.id) > (coalesce(pc.last_consumed_created_at, '-infinity'),
                                                coalesce(pc.last_consumed_id, 0))
               ) b
    ), gp AS MATERIALIZED (
        SELECT l.queue_id, f.created_at AS oldest
          FROM queen.partition_consumers pc
          JOIN queen.partition_lookup l ON l.partition_id = pc.partition_id
         CROSS JOIN LATERAL (
                SELECT m.created_at
                  FROM queen.messages m
                 WHERE m.partition_id = pc.partition_id
                   AND (m.created_at, m.id) > (coalesce(pc.last_consumed_created_at, '-infinity'),
                                               pc.last_consumed_id)
                 ORDER BY m.created_at, m.id
                 LIMIT 1
               ) f
         WHERE pc.consumer_group <> '__QUEUE_MODE__'
    ), qm AS (
        SELECT q.name, coalesce(sum(pl.depth), 0) AS depth,
               extract(epoch FROM now() - min(pl.oldest)) AS lag_s
          FROM queen.queues q
          LEFT JOIN pl ON pl.queue_id = q.id
         GROUP BY q.name
    ), gl AS (
        SELECT q.name, extract(epoch FROM now() - min(gp.oldest)) AS group_lag_s
          FROM gp JOIN queen.queues q ON q.id = gp.queue_id
         GROUP BY q.name
    ), levels AS (
        SELECT qm.name, qm.depth::bigint AS depth,
               greatest(coalesce(qm.lag_s, 0), 0)::real AS lag_s,
               greatest(coalesce(gl.group_lag_s, 0), 0)::real AS group_lag_s
          FROM qm LEFT JOIN gl ON gl.name = qm.name
    ), upserted AS (
        INSERT INTO queen.metrics_queue_minutes AS t (queue_name, minute, depth, lag_s, group_lag_s)
        SELECT name, v_minute, depth, lag_s, group_lag_s FROM levels ORDER BY name
        ON CONFLICT (queue_name, minute) DO UPDATE
           SET depth = greatest(t.depth, EXCLUDED.depth),
               lag_s = greatest(t.lag_s, EXCLUDED.lag_s),
               group_lag_s = greatest(t.group_lag_s, EXCLUDED.group_lag_s)
    )
    SELECT count(*), coalesce(sum(depth), 0) INTO v_queues, v_depth FROM levels;
    INSERT INTO queen.metrics_minutes AS t (minute, depth, lag_s, group_lag_s)
    SELECT v_minute, coalesce(sum(depth), 0), coalesce(max(lag_s), 0), coalesce(max(group_lag_s), 0)
      FROM queen.metrics_queue_minutes
     WHERE minute = v_minute AND depth IS NOT NULL
    ON CONFLICT (minute) DO UPDATE
       SET depth = greatest(t.depth, EXCLUDED.depth),
           lag_s = greatest(t.lag_s, EXCLUDED.lag_s),
           group_lag_s = greatest(t.group_lag_s, EXCLUDED.group_lag_s);
    RETURN jsonb_build_object('queues', v_queues, 'depth', v_depth);
END;
$$;

-- PRUNE rows older than p_days days, at most p_limit per table per call (one short
-- transaction each). Output: the rows deleted.
CREATE OR REPLACE FUNCTION queen.metrics_prune_v1(p_days integer, p_limit integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_cutoff  timestamptz := now() - make_interval(days => p_days);
    v_deleted integer := 0;
    v_n       integer;
BEGIN
    DELETE FROM queen.metrics_queue_minutes t
     USING (SELECT queue_name, minute FROM queen.metrics_queue_minutes
             WHERE minute < v_cutoff ORDER BY minute LIMIT p_limit) old
     WHERE t.queue_name = old.queue_name AND t.minute = old.minute;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_deleted := v_deleted + v_n;
    DELETE FROM queen.metrics_minutes t
     USING (SELECT minute FROM queen.metrics_minutes
             WHERE minute < v_cutoff ORDER BY minute LIMIT p_limit) old
     WHERE t.minute = old.minute;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_deleted := v_deleted + v_n;
    DELETE FROM queen.metrics_process_minutes t
     USING (SELECT minute, hostname, port, worker_id FROM queen.metrics_process_minutes
             WHERE minute < v_cutoff ORDER BY minute LIMIT p_limit) old
     WHERE (t.minute, t.hostname, t.port, t.worker_id)
         = (old.minute, old.hostname, old.port, old.worker_id);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_deleted + v_n;
END;
$$;

-- The start of the `p_step_s`-second bucket holding p_ts (buckets aligned on the Unix
-- epoch; http/buckets.py computes the same). Inlined by the planner.
CREATE OR REPLACE FUNCTION queen._bucket(p_ts timestamptz, p_step_s integer)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT date_bin(make_interval(secs => p_step_s), p_ts, timestamptz '1970-01-01 00:00:00+00')
$$;

-- The buckets of a chart: every bucket start from the one holding p_from up to p_to
-- (exclusive), oldest first.
CREATE OR REPLACE FUNCTION queen._analytics_buckets(
    p_from timestamptz, p_to timestamptz, p_step_s integer
) RETURNS TABLE (t timestamptz)
LANGUAGE sql IMMUTABLE AS $$
    SELECT g
      FROM generate_series(queen._bucket(p_from, p_step_s), p_to,
                           make_interval(secs => p_step_s)) g
     WHERE g < p_to
$$;
