-- ===== analytics =====
-- The per-minute tables of migration 0007: what the worker processes flush, what the
-- `metrics` background service samples and prunes, and the chart statements of
-- GET /api/v1/status/analytics and /api/v1/analytics/* (docs/api-admin.md, "Analytics").
-- Callers: queen_threads/metrics/collector.py, queen_threads/background/metrics_job.py,
-- queen_threads/admin/analytics_store.py. Stored functions: 95_analytics.sql.
--
-- Every chart statement takes [%(from_ts)s, %(to_ts)s) and a bucket of %(step_s)s seconds
-- (queen._bucket: aligned on the Unix epoch); %(from_ts)s is already the start of the
-- bucket holding the asked `from` (http/buckets.py), so the first bucket is whole. The
-- bounds are plain values, so the planner sees the real range. Series carry every bucket
-- (queen._analytics_buckets), empty ones with zero counts and null levels.

-- name: analytics_flush
-- One worker process's counts and process rows (additive upserts).
SELECT queen.metrics_flush_v1(%s::jsonb)::text;

-- name: analytics_live
-- One worker process's counts not flushed yet (its live row; none: deleted).
SELECT queen.metrics_live_v1(%s::jsonb);

-- name: analytics_sample
-- The levels (depth, lags) of every queue into the current minute.
SELECT queen.metrics_sample_v1(%s::jsonb)::text;

-- name: analytics_prune
-- Delete analytics rows older than %(days)s days, at most %(limit)s per table.
SELECT queen.metrics_prune_v1(%(days)s, %(limit)s);

-- name: analytics_queue_series
-- Message flow and levels per bucket. %(scope)s: 'all' reads the all-queue rollup (one
-- row per minute), 'queue' one queue's primary-key range (index-only), 'filtered' sums the
-- minutes of the existing queues matching queue/namespace/task. The scopes not asked for
-- are pruned by the planner (their condition is a constant). `latest` (the newest level
-- sample) is one backward index probe in the first two scopes. The counts the worker
-- processes have not flushed yet (queen.metrics_live, a row per process) are added, so
-- the current minute is live.
WITH minutes AS NOT MATERIALIZED (
    SELECT r.minute, r.pushed, r.popped, r.acked, r.failed, r.dlq, r.poll_waits, r.depth,
           r.lag_s, r.group_lag_s
      FROM queen.metrics_minutes r
     WHERE %(scope)s::text = 'all'
       AND r.minute >= %(from_ts)s::timestamptz AND r.minute < %(to_ts)s::timestamptz
    UNION ALL
    SELECT r.minute, r.pushed, r.popped, r.acked, r.failed, r.dlq, r.poll_waits, r.depth,
           r.lag_s, r.group_lag_s
      FROM queen.metrics_queue_minutes r
     WHERE %(scope)s::text = 'queue' AND r.queue_name = %(queue)s::text
       AND r.minute >= %(from_ts)s::timestamptz AND r.minute < %(to_ts)s::timestamptz
    UNION ALL
    SELECT r.minute, sum(r.pushed), sum(r.popped), sum(r.acked), sum(r.failed), sum(r.dlq),
           sum(r.poll_waits), sum(r.depth), max(r.lag_s), max(r.group_lag_s)
      FROM queen.metrics_queue_minutes r
      JOIN queen.queues q ON q.name = r.queue_name
     WHERE %(scope)s::text = 'filtered'
       AND (%(queue)s::text IS NULL OR q.name = %(queue)s::text)
       AND (%(namespace)s::text IS NULL OR q.namespace = %(namespace)s::text)
       AND (%(task)s::text IS NULL OR q.task = %(task)s::text)
       AND r.minute >= %(from_ts)s::timestamptz AND r.minute < %(to_ts)s::timestamptz
     GROUP BY r.minute
    UNION ALL
    -- The worker processes' counts not flushed yet (migration 0018): the current minute.
    SELECT l.minute, l.pushed, l.popped, l.acked, l.failed, l.dlq, l.poll_waits, NULL, NULL,
           NULL
      FROM queen._metrics_live_rows() l
     WHERE l.minute >= %(from_ts)s::timestamptz AND l.minute < %(to_ts)s::timestamptz
       AND (%(scope)s::text <> 'queue' OR l.queue_name = %(queue)s::text)
       AND (%(scope)s::text <> 'filtered'
            OR EXISTS (SELECT 1 FROM queen.queues q
                        WHERE q.name = l.queue_name
                          AND (%(queue)s::text IS NULL OR q.name = %(queue)s::text)
                          AND (%(namespace)s::text IS NULL OR q.namespace = %(namespace)s::text)
                          AND (%(task)s::text IS NULL OR q.task = %(task)s::text)))
), agg AS (
    SELECT queen._bucket(m.minute, %(step_s)s) AS t,
           sum(m.pushed) AS pushed, sum(m.popped) AS popped, sum(m.acked) AS acked,
           sum(m.failed) AS failed, sum(m.dlq) AS dlq, sum(m.poll_waits) AS poll_waits,
           max(m.depth) AS depth, max(m.lag_s) AS lag_s, max(m.group_lag_s) AS group_lag_s
      FROM minutes m
     GROUP BY 1
), latest AS (
    (SELECT r.minute, r.depth, r.lag_s, r.group_lag_s
       FROM queen.metrics_minutes r
      WHERE %(scope)s::text = 'all' AND r.depth IS NOT NULL
        AND r.minute >= %(from_ts)s::timestamptz AND r.minute < %(to_ts)s::timestamptz
      ORDER BY r.minute DESC LIMIT 1)
    UNION ALL
    (SELECT r.minute, r.depth, r.lag_s, r.group_lag_s
       FROM queen.metrics_queue_minutes r
      WHERE %(scope)s::text = 'queue' AND r.queue_name = %(queue)s::text
        AND r.depth IS NOT NULL
        AND r.minute >= %(from_ts)s::timestamptz AND r.minute < %(to_ts)s::timestamptz
      ORDER BY r.minute DESC LIMIT 1)
    UNION ALL
    (SELECT m.minute, m.depth, m.lag_s, m.group_lag_s
       FROM minutes m
      WHERE %(scope)s::text = 'filtered' AND m.depth IS NOT NULL
      ORDER BY m.minute DESC LIMIT 1)
)
SELECT json_build_object(
           'series', coalesce((
               SELECT json_agg(json_build_object(
                          't', queen._iso_ms(b.t),
                          'pushed', coalesce(a.pushed, 0), 'popped', coalesce(a.popped, 0),
                          'acked', coalesce(a.acked, 0), 'failed', coalesce(a.failed, 0),
                          'dlq', coalesce(a.dlq, 0), 'longPollWaits', coalesce(a.poll_waits, 0),
                          'depth', a.depth, 'lagSeconds', round(a.lag_s::numeric, 1),
                          'groupLagSeconds', round(a.group_lag_s::numeric, 1)) ORDER BY b.t)
                 FROM queen._analytics_buckets(%(from_ts)s, %(to_ts)s, %(step_s)s) b
                 LEFT JOIN agg a ON a.t = b.t), '[]'::json),
           'totals', (SELECT json_build_object(
                                 'pushed', coalesce(sum(pushed), 0),
                                 'popped', coalesce(sum(popped), 0),
                                 'acked', coalesce(sum(acked), 0),
                                 'failed', coalesce(sum(failed), 0),
                                 'dlq', coalesce(sum(dlq), 0),
                                 'longPollWaits', coalesce(sum(poll_waits), 0),
                                 'maxDepth', max(depth),
                                 'maxLagSeconds', round(max(lag_s)::numeric, 1),
                                 'maxGroupLagSeconds', round(max(group_lag_s)::numeric, 1))
                        FROM agg),
           'latest', coalesce((SELECT json_build_object(
                                          't', queen._iso_ms(l.minute), 'depth', l.depth,
                                          'lagSeconds', round(l.lag_s::numeric, 1),
                                          'groupLagSeconds', round(l.group_lag_s::numeric, 1))
                                 FROM latest l),
                              json_build_object('t', NULL, 'depth', NULL, 'lagSeconds', NULL,
                                                'groupLagSeconds', NULL))
       )::text;

-- name: analytics_queue_latest
-- The newest level sample in [from, to) of each existing queue (or the one named), by
-- lag then depth, largest first: one backward primary-key probe per queue.
SELECT coalesce(json_agg(json_build_object(
           'queue', x.name, 't', queen._iso_ms(x.minute), 'depth', x.depth,
           'lagSeconds', round(x.lag_s::numeric, 1),
           'groupLagSeconds', round(x.group_lag_s::numeric, 1))
           ORDER BY x.lag_s DESC NULLS LAST, x.depth DESC NULLS LAST, x.name), '[]'::json)::text
  FROM (SELECT q.name, l.minute, l.depth, l.lag_s, l.group_lag_s
          FROM queen.queues q
         CROSS JOIN LATERAL (
                SELECT r.minute, r.depth, r.lag_s, r.group_lag_s
                  FROM queen.metrics_queue_minutes r
                 WHERE r.queue_name = q.name
                   AND r.minute >= %(from_ts)s::timestamptz AND r.minute < %(to_ts)s::timestamptz
                   AND r.depth IS NOT NULL
                 ORDER BY r.minute DESC
                 LIMIT 1
               ) l
         WHERE %(queue)s::text IS NULL OR q.name = %(queue)s::text
         ORDER BY l.lag_s DESC NULLS LAST, l.depth DESC NULLS LAST, q.name
         LIMIT 100) x;

-- name: analytics_process_series
-- Server processes per bucket: first per (process, bucket) (CPU seconds over wall seconds,
-- the largest levels, requests summed), then summed over the processes. Output:
-- {series, totals, workers}; `workers` holds each process's own points (the 200 most
-- recently seen) when %(per_worker)s is true, else null.
WITH per AS (
    SELECT queen._bucket(r.minute, %(step_s)s) AS t,
           r.hostname, r.port, r.worker_id, max(r.minute) AS last_minute,
           sum(r.cpu_seconds) / nullif(sum(r.wall_seconds), 0) * 100 AS cpu,
           max(r.rss_bytes) AS rss, sum(r.http_requests) AS requests,
           max(r.http_active) AS active, max(r.pool_in_use) AS in_use,
           max(r.pool_size) AS pool_size, max(r.pool_waiting) AS waiting,
           max(r.long_polls) AS long_polls
      FROM queen.metrics_process_minutes r
     WHERE r.minute >= %(from_ts)s::timestamptz AND r.minute < %(to_ts)s::timestamptz
       AND (%(hostname)s::text IS NULL OR r.hostname = %(hostname)s::text)
       AND (%(worker_id)s::text IS NULL OR r.worker_id = %(worker_id)s::text)
     GROUP BY 1, 2, 3, 4
), agg AS (
    SELECT t, count(*) AS processes, sum(cpu) AS cpu, sum(rss) AS rss,
           sum(requests) AS requests, sum(active) AS active, sum(in_use) AS in_use,
           sum(pool_size) AS pool_size, sum(waiting) AS waiting, sum(long_polls) AS long_polls
      FROM per GROUP BY t
), workers AS (
    SELECT hostname, port, worker_id, max(last_minute) AS last_seen,
           json_agg(json_build_object(
               't', queen._iso_ms(t), 'cpuPercent', round(cpu::numeric, 1),
               'rssBytes', rss, 'httpRequests', requests, 'httpActive', active,
               'dbPoolInUse', in_use, 'dbPoolSize', pool_size, 'dbPoolWaiting', waiting,
               'longPollsWaiting', long_polls) ORDER BY t) AS series
      FROM per
     WHERE %(per_worker)s
     GROUP BY hostname, port, worker_id
     ORDER BY max(last_minute) DESC, hostname, port, worker_id
     LIMIT 200
)
SELECT json_build_object(
           'series', coalesce((
               SELECT json_agg(json_build_object(
                          't', queen._iso_ms(b.t), 'processes', coalesce(a.processes, 0),
                          'cpuPercent', round(a.cpu::numeric, 1), 'rssBytes', a.rss,
                          'httpRequests', coalesce(a.requests, 0), 'httpActive', a.active,
                          'dbPoolInUse', a.in_use, 'dbPoolSize', a.pool_size,
                          'dbPoolWaiting', a.waiting, 'longPollsWaiting', a.long_polls)
                          ORDER BY b.t)
                 FROM queen._analytics_buckets(%(from_ts)s, %(to_ts)s, %(step_s)s) b
                 LEFT JOIN agg a ON a.t = b.t), '[]'::json),
           'totals', (SELECT json_build_object(
                                 'httpRequests', coalesce(sum(requests), 0),
                                 'processes', (SELECT count(*) FROM (
                                     SELECT DISTINCT hostname, port, worker_id FROM per) d),
                                 'maxCpuPercent', round(max(cpu)::numeric, 1),
                                 'maxRssBytes', max(rss))
                        FROM agg),
           'workers', CASE WHEN %(per_worker)s THEN coalesce((
               SELECT json_agg(json_build_object(
                          'hostname', hostname, 'port', port, 'workerId', worker_id,
                          'lastSeen', queen._iso_ms(last_seen), 'series', series)
                          ORDER BY last_seen DESC, hostname, port, worker_id)
                 FROM workers), '[]'::json) END
       )::text;

-- name: analytics_retention_series
-- Messages deleted by the background services per bucket and kind, from the history.
WITH agg AS (
    SELECT queen._bucket(h.executed_at, %(step_s)s) AS t,
           coalesce(sum(h.messages_deleted) FILTER (WHERE h.retention_type = 'retention'), 0)
               AS retention,
           coalesce(sum(h.messages_deleted)
                    FILTER (WHERE h.retention_type = 'completed_retention'), 0) AS completed,
           coalesce(sum(h.messages_deleted)
                    FILTER (WHERE h.retention_type = 'max_wait_time_eviction'), 0) AS eviction,
           count(*) FILTER (WHERE h.retention_type = 'partition_cleanup') AS partitions
      FROM queen.retention_history h
     WHERE h.executed_at >= %(from_ts)s::timestamptz
       AND h.executed_at < %(to_ts)s::timestamptz
       AND (%(queue)s::text IS NULL OR h.queue_name = %(queue)s::text)
     GROUP BY 1
)
SELECT json_build_object(
           'series', coalesce((
               SELECT json_agg(json_build_object(
                          't', queen._iso_ms(b.t), 'retention', coalesce(a.retention, 0),
                          'completedRetention', coalesce(a.completed, 0),
                          'eviction', coalesce(a.eviction, 0),
                          'partitionsDeleted', coalesce(a.partitions, 0)) ORDER BY b.t)
                 FROM queen._analytics_buckets(%(from_ts)s, %(to_ts)s, %(step_s)s) b
                 LEFT JOIN agg a ON a.t = b.t), '[]'::json),
           'totals', (SELECT json_build_object(
                                 'retention', coalesce(sum(retention), 0),
                                 'completedRetention', coalesce(sum(completed), 0),
                                 'eviction', coalesce(sum(eviction), 0),
                                 'partitionsDeleted', coalesce(sum(partitions), 0))
                        FROM agg)
       )::text;

-- name: analytics_postgres_stats
-- A snapshot of the database: size, connections, activity counters, the queen tables.
SELECT json_build_object(
           'at', queen._iso_ms(clock_timestamp()),
           'version', version(),
           'database', (
               SELECT json_build_object(
                          'name', current_database(),
                          'sizeBytes', pg_database_size(current_database()),
                          'maxConnections', current_setting('max_connections')::integer,
                          'connections', (
                              SELECT json_build_object(
                                         'total', count(*),
                                         'active', count(*) FILTER (WHERE state = 'active'),
                                         'idle', count(*) FILTER (WHERE state = 'idle'),
                                         'idleInTransaction', count(*) FILTER (
                                             WHERE state IN ('idle in transaction',
                                                             'idle in transaction (aborted)')),
                                         'waitingOnLocks', count(*) FILTER (
                                             WHERE wait_event_type = 'Lock'))
                                FROM pg_stat_activity
                               WHERE datname = current_database()
                                 AND backend_type = 'client backend'),
                          'oldestTransactionSeconds', (
                              SELECT round(coalesce(extract(epoch FROM
                                         clock_timestamp() - min(xact_start)), 0)::numeric, 1)
                                FROM pg_stat_activity
                               WHERE datname = current_database()
                                 AND backend_type = 'client backend'
                                 AND pid <> pg_backend_pid()),
                          'commits', d.xact_commit, 'rollbacks', d.xact_rollback,
                          'cacheHitRatio', round(d.blks_hit::numeric
                                                 / nullif(d.blks_hit + d.blks_read, 0), 4),
                          'deadlocks', d.deadlocks, 'tempBytes', d.temp_bytes)
                 FROM pg_stat_database d
                WHERE d.datname = current_database()),
           'tables', coalesce((
               SELECT json_agg(json_build_object(
                          'table', 'queen.' || s.relname,
                          'totalBytes', pg_total_relation_size(s.relid),
                          'liveRows', s.n_live_tup, 'deadRows', s.n_dead_tup,
                          'lastAutovacuum', queen._iso_ms(s.last_autovacuum),
                          'lastAutoanalyze', queen._iso_ms(s.last_autoanalyze))
                          ORDER BY pg_total_relation_size(s.relid) DESC, s.relname)
                 FROM pg_stat_user_tables s
                WHERE s.schemaname = 'queen'), '[]'::json)
       )::text;

-- name: analytics_queue_exists
SELECT EXISTS (SELECT 1 FROM queen.queues WHERE name = %s);
