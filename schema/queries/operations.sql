-- ===== operations =====
-- Background services (retention, eviction), their shared schedule, the status routes and
-- the Prometheus backlog gauges. Callers: queen_threads/background/{exclusive,retention}.py,
-- queen_threads/admin/store.py (status routes, backlog gauges). Stored functions:
-- 90_operations.sql.

-- name: ops_session_setup
-- Timeouts of a background service's dedicated connection (statement, lock; ms as text).
SELECT set_config('statement_timeout', %s, false), set_config('lock_timeout', %s, false),
       set_config('application_name', 'queen-threads:maintenance', false);

-- name: ops_try_lock
-- Session advisory lock of one background service: true when this connection got it.
SELECT pg_try_advisory_lock(%s);

-- name: ops_unlock
SELECT pg_advisory_unlock(%s);

-- name: ops_service_age
-- Seconds (database clock) since the service last started a run; NULL if it never ran.
SELECT extract(epoch FROM now() - started_at)::float8
  FROM queen.service_runs WHERE service = %s;

-- name: ops_service_started
INSERT INTO queen.service_runs AS s (service, started_at, owner, runs)
VALUES (%(service)s, now(), %(owner)s, 1)
ON CONFLICT (service) DO UPDATE
   SET started_at = now(), owner = EXCLUDED.owner, runs = s.runs + 1;

-- name: ops_service_finished
UPDATE queen.service_runs
   SET finished_at = now(), result = %(result)s::jsonb, error = %(error)s
 WHERE service = %(service)s;

-- name: ops_service_runs
-- Every background service's last run, as JSON.
SELECT coalesce(jsonb_object_agg(s.service, jsonb_build_object(
           'startedAt', queen._iso_ms(s.started_at),
           'finishedAt', queen._iso_ms(s.finished_at),
           'owner', s.owner,
           'runs', s.runs,
           'result', s.result,
           'error', s.error)), '{}'::jsonb)::text
  FROM queen.service_runs s;

-- name: ops_cleanup_batch
-- One bounded batch of retention / completed retention / max-wait eviction.
SELECT queen.ops_cleanup_batch_v1(%s::jsonb)::text;

-- name: ops_cleanup_partitions
-- One bounded batch of idle empty partition deletion.
SELECT queen.ops_cleanup_partitions_v1(%s::jsonb)::text;

-- name: ops_prune_history
-- Forget retention history older than %(days)s days, at most %(limit)s rows.
WITH old AS (
    SELECT id FROM queen.retention_history
     WHERE executed_at < now() - make_interval(days => %(days)s)
     ORDER BY id
     LIMIT %(limit)s
)
DELETE FROM queen.retention_history h USING old WHERE h.id = old.id;

-- name: ops_backlog
-- Scrape-time backlog of every queue, in one statement: per (queue, consumer group) the
-- messages beyond the group's cursors (minus those acked out of order) and the creation
-- time of the oldest of them, over the partitions where the group has a cursor. Queue mode
-- (the queue's depth) also counts partitions it has not visited yet, from their start.
-- Cost grows with the backlog (index range scans after each cursor), not with the
-- consumed history. Rows: queue, consumer_group, partitions, lag, oldest_epoch (or NULL).
WITH cur AS (
    SELECT q.name AS queue, pc.consumer_group AS grp, pc.partition_id AS pid,
           coalesce(pc.last_consumed_created_at, '-infinity'::timestamptz) AS ts,
           pc.last_consumed_id AS id,
           coalesce(cardinality(pc.acked_ids), 0) AS acked
      FROM queen.partition_consumers pc
      JOIN queen.partitions p ON p.id = pc.partition_id
      JOIN queen.queues q ON q.id = p.queue_id
    UNION ALL
    SELECT q.name, '__QUEUE_MODE__', p.id, '-infinity'::timestamptz, 0::bigint, 0
      FROM queen.partitions p
      JOIN queen.queues q ON q.id = p.queue_id
     WHERE NOT EXISTS (SELECT 1 FROM queen.partition_consumers pc
                        WHERE pc.partition_id = p.id AND pc.consumer_group = '__QUEUE_MODE__')
)
SELECT cur.queue, cur.grp, count(*)::bigint,
       coalesce(sum(greatest(s.n - cur.acked, 0)), 0)::bigint,
       extract(epoch FROM min(s.oldest))::float8
  FROM cur
 CROSS JOIN LATERAL (
        SELECT count(*) AS n, min(m.created_at) AS oldest
          FROM queen.messages m
         WHERE m.partition_id = cur.pid
           AND (m.created_at, m.id) > (cur.ts, cur.id)
       ) s
 GROUP BY cur.queue, cur.grp;

-- name: ops_queue_count
SELECT count(*) FROM queen.queues;

-- name: status_summary
-- GET /api/v1/status: counts over the queues matching the filters, and what happened in
-- [from, to): messages ingested (created_at), dead-lettered (failed_at) and removed by
-- retention (executed_at), per %(bucket)s bucket and in total.
WITH fq AS MATERIALIZED (
    SELECT q.id, q.name FROM queen.queues q
     WHERE (%(queue)s::text IS NULL OR q.name = %(queue)s::text)
       AND (%(namespace)s::text IS NULL OR q.namespace = %(namespace)s::text)
       AND (%(task)s::text IS NULL OR q.task = %(task)s::text)
), fp AS MATERIALIZED (
    SELECT p.id FROM queen.partitions p JOIN fq ON fq.id = p.queue_id
), counts AS (
    SELECT coalesce(sum(c.total), 0) AS total, coalesce(sum(c.pending), 0) AS pending,
           coalesce(sum(c.processing), 0) AS processing,
           coalesce(sum(c.completed), 0) AS completed, min(c.oldest_pending) AS oldest
      FROM fp CROSS JOIN LATERAL queen._partition_stats(fp.id) c
), dlq AS MATERIALIZED (
    SELECT d.partition_id, d.error_message, d.failed_at
      FROM queen.dead_letter_queue d JOIN fp ON fp.id = d.partition_id
), leases AS (
    SELECT count(*) FILTER (WHERE pc.lease_expires_at > now()) AS active,
           count(DISTINCT pc.consumer_group) AS groups
      FROM queen.partition_consumers pc JOIN fp ON fp.id = pc.partition_id
), ingest AS (
    SELECT date_trunc(%(bucket)s::text, m.created_at, 'UTC') AS b, count(*) AS n
      FROM fp
     CROSS JOIN LATERAL (
            SELECT m0.created_at FROM queen.messages m0
             WHERE m0.partition_id = fp.id
               AND m0.created_at >= %(from_ts)s::timestamptz
               AND m0.created_at < %(to_ts)s::timestamptz
           ) m
     GROUP BY 1
), dead AS (
    SELECT date_trunc(%(bucket)s::text, d.failed_at, 'UTC') AS b, count(*) AS n
      FROM dlq d
     WHERE d.failed_at >= %(from_ts)s::timestamptz AND d.failed_at < %(to_ts)s::timestamptz
     GROUP BY 1
), ret AS (
    SELECT h.retention_type, sum(h.messages_deleted) AS n, count(*) AS runs
      FROM queen.retention_history h
     WHERE h.queue_name IN (SELECT name FROM fq)
       AND h.executed_at >= %(from_ts)s::timestamptz AND h.executed_at < %(to_ts)s::timestamptz
     GROUP BY 1
), series AS (
    SELECT g.b, coalesce(i.n, 0) AS ingested, coalesce(d.n, 0) AS dead
      FROM generate_series(date_trunc(%(bucket)s::text, %(from_ts)s::timestamptz, 'UTC'),
                           %(to_ts)s::timestamptz - interval '1 microsecond',
                           ('1 ' || %(bucket)s::text)::interval) AS g(b)
      LEFT JOIN ingest i ON i.b = g.b
      LEFT JOIN dead d ON d.b = g.b
)
SELECT jsonb_build_object(
           'queues', (SELECT count(*) FROM fq),
           'partitions', (SELECT count(*) FROM fp),
           'consumerGroups', (SELECT groups FROM leases),
           'messages', (SELECT jsonb_build_object(
                                   'total', c.total, 'pending', c.pending,
                                   'processing', c.processing, 'completed', c.completed,
                                   'deadLettered', (SELECT count(*) FROM dlq),
                                   'oldestPendingAt', queen._iso_ms(c.oldest))
                          FROM counts c),
           'leases', jsonb_build_object('active', (SELECT active FROM leases)),
           'deadLetterQueue', jsonb_build_object(
               'total', (SELECT count(*) FROM dlq),
               'affectedPartitions', (SELECT count(DISTINCT partition_id) FROM dlq),
               'topErrors', coalesce((
                   SELECT jsonb_agg(jsonb_build_object('error', e.err, 'count', e.n)
                                    ORDER BY e.n DESC, e.err)
                     FROM (SELECT coalesce(error_message, '') AS err, count(*) AS n
                             FROM dlq GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10) e), '[]'::jsonb)),
           'throughput', jsonb_build_object(
               'bucket', %(bucket)s::text,
               'ingested', (SELECT coalesce(sum(ingested), 0) FROM series),
               'deadLettered', (SELECT coalesce(sum(dead), 0) FROM series),
               'series', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                             'timestamp', queen._iso_ms(s.b),
                                             'ingested', s.ingested,
                                             'deadLettered', s.dead) ORDER BY s.b)
                                     FROM series s), '[]'::jsonb)),
           'retention', jsonb_build_object(
               'deleted', (SELECT coalesce(sum(n), 0) FROM ret WHERE retention_type <> 'partition_cleanup'),
               'byType', coalesce((SELECT jsonb_object_agg(retention_type,
                                             jsonb_build_object('messages', n, 'records', runs))
                                     FROM ret), '{}'::jsonb))
       )::text;

-- name: status_queues
-- GET /api/v1/status/queues: one page of queues (by name) matching the filters, with their
-- counts and what they ingested in [from, to); plus the total under the filters.
WITH fq AS MATERIALIZED (
    SELECT q.* FROM queen.queues q
     WHERE (%(namespace)s::text IS NULL OR q.namespace = %(namespace)s::text)
       AND (%(task)s::text IS NULL OR q.task = %(task)s::text)
), pg AS MATERIALIZED (
    SELECT * FROM fq ORDER BY name LIMIT %(limit)s OFFSET %(offset)s
), rows AS (
    SELECT pg.name, jsonb_build_object(
               'id', pg.id,
               'name', pg.name,
               'namespace', pg.namespace,
               'task', pg.task,
               'priority', pg.priority,
               'createdAt', queen._iso_ms(pg.created_at),
               'partitions', st.partitions,
               'consumerGroups', st.groups,
               'lastActivityAt', queen._iso_ms(st.last_activity),
               'messages', jsonb_build_object(
                   'total', st.total, 'pending', st.pending, 'processing', st.processing,
                   'completed', st.completed, 'deadLettered', st.dead,
                   'oldestPendingAt', queen._iso_ms(st.oldest)),
               'leases', jsonb_build_object('active', st.leases),
               'throughput', jsonb_build_object('ingested', st.ingested)) AS j
      FROM pg
     CROSS JOIN LATERAL (
            SELECT count(*) AS partitions,
                   max(greatest(p.last_activity, (SELECT pc.last_activity
                                                    FROM queen.partition_counters pc
                                                   WHERE pc.partition_id = p.id)))
                       AS last_activity,
                   coalesce(sum(c.total), 0) AS total, coalesce(sum(c.pending), 0) AS pending,
                   coalesce(sum(c.processing), 0) AS processing,
                   coalesce(sum(c.completed), 0) AS completed, min(c.oldest_pending) AS oldest,
                   coalesce(sum(i.n), 0) AS ingested,
                   (SELECT count(*) FROM queen.dead_letter_queue d
                      JOIN queen.partitions dp ON dp.id = d.partition_id
                     WHERE dp.queue_id = pg.id) AS dead,
                   (SELECT count(DISTINCT pc.consumer_group) FROM queen.partition_consumers pc
                      JOIN queen.partitions gp ON gp.id = pc.partition_id
                     WHERE gp.queue_id = pg.id) AS groups,
                   (SELECT count(*) FROM queen.partition_consumers pc
                      JOIN queen.partitions lp ON lp.id = pc.partition_id
                     WHERE lp.queue_id = pg.id AND pc.lease_expires_at > now()) AS leases
              FROM queen.partitions p
             CROSS JOIN LATERAL queen._partition_stats(p.id) c
             CROSS JOIN LATERAL (
                    SELECT count(*) AS n FROM queen.messages m
                     WHERE m.partition_id = p.id
                       AND m.created_at >= %(from_ts)s::timestamptz
                       AND m.created_at < %(to_ts)s::timestamptz) i
             WHERE p.queue_id = pg.id
           ) st
)
SELECT jsonb_build_object(
           'queues', coalesce((SELECT jsonb_agg(j ORDER BY name) FROM rows), '[]'::jsonb),
           'total', (SELECT count(*) FROM fq),
           'pagination', jsonb_build_object('limit', %(limit)s, 'offset', %(offset)s))::text;

-- name: status_queue
-- GET /api/v1/status/queues/{queue}: the queue, its options and counts, every partition
-- with its counts and consumer cursors, consumer groups with their lag, dead-letter and
-- retention summaries, ingest in [from, to). No row when the queue does not exist.
WITH q AS MATERIALIZED (
    SELECT * FROM queen.queues WHERE name = %(queue)s
), parts AS MATERIALIZED (
    SELECT p.id, p.name, p.created_at,
           greatest(p.last_activity, (SELECT pc.last_activity FROM queen.partition_counters pc
                                       WHERE pc.partition_id = p.id)) AS last_activity, c.*,
           (SELECT count(*) FROM queen.messages m
             WHERE m.partition_id = p.id
               AND m.created_at >= %(from_ts)s::timestamptz
               AND m.created_at < %(to_ts)s::timestamptz) AS ingested
      FROM queen.partitions p
      JOIN q ON q.id = p.queue_id
     CROSS JOIN LATERAL queen._partition_stats(p.id) c
), cons AS MATERIALIZED (
    SELECT pc.partition_id, pc.consumer_group, pc.last_consumed_at, pc.lease_expires_at,
           pc.last_consumed_created_at, pc.total_messages_consumed,
           pc.lease_expires_at > now() AS leased,
           greatest(s.n - coalesce(cardinality(pc.acked_ids), 0), 0) AS lag, s.oldest
      FROM queen.partition_consumers pc
      JOIN parts ON parts.id = pc.partition_id
     CROSS JOIN LATERAL (
            SELECT count(*) AS n, min(m.created_at) AS oldest
              FROM queen.messages m
             WHERE m.partition_id = pc.partition_id
               AND (m.created_at, m.id) > (coalesce(pc.last_consumed_created_at, '-infinity'),
                                           pc.last_consumed_id)) s
), dlq AS MATERIALIZED (
    SELECT d.* FROM queen.dead_letter_queue d JOIN parts ON parts.id = d.partition_id
)
SELECT jsonb_build_object(
           'queue', jsonb_build_object(
               'id', q.id, 'name', q.name, 'namespace', q.namespace, 'task', q.task,
               'createdAt', queen._iso_ms(q.created_at),
               'updatedAt', queen._iso_ms(q.updated_at),
               'options', queen._queue_options(q)),
           'totals', jsonb_build_object(
               'partitions', (SELECT count(*) FROM parts),
               'messages', jsonb_build_object(
                   'total', (SELECT coalesce(sum(total), 0) FROM parts),
                   'pending', (SELECT coalesce(sum(pending), 0) FROM parts),
                   'processing', (SELECT coalesce(sum(processing), 0) FROM parts),
                   'completed', (SELECT coalesce(sum(completed), 0) FROM parts),
                   'deadLettered', (SELECT count(*) FROM dlq),
                   'oldestPendingAt', (SELECT queen._iso_ms(min(oldest_pending)) FROM parts)),
               'leases', jsonb_build_object('active', (SELECT count(*) FROM cons WHERE leased)),
               'throughput', jsonb_build_object(
                   'ingested', (SELECT coalesce(sum(ingested), 0) FROM parts))),
           'partitions', coalesce((
               SELECT jsonb_agg(jsonb_build_object(
                          'id', pt.id,
                          'name', pt.name,
                          'createdAt', queen._iso_ms(pt.created_at),
                          'lastActivityAt', queen._iso_ms(pt.last_activity),
                          'messages', jsonb_build_object(
                              'total', pt.total, 'pending', pt.pending,
                              'processing', pt.processing, 'completed', pt.completed,
                              'oldestPendingAt', queen._iso_ms(pt.oldest_pending)),
                          'throughput', jsonb_build_object('ingested', pt.ingested),
                          'consumers', coalesce((
                              SELECT jsonb_agg(jsonb_build_object(
                                         'consumerGroup', c.consumer_group,
                                         'lag', c.lag,
                                         'oldestUnconsumedAt', queen._iso_ms(c.oldest),
                                         'cursorAt', queen._iso_us(c.last_consumed_created_at),
                                         'messagesConsumed', c.total_messages_consumed,
                                         'lastConsumedAt', queen._iso_ms(c.last_consumed_at),
                                         'leaseActive', c.leased,
                                         'leaseExpiresAt', CASE WHEN c.leased
                                                                THEN queen._iso_ms(c.lease_expires_at) END)
                                         ORDER BY c.consumer_group)
                                FROM cons c WHERE c.partition_id = pt.id), '[]'::jsonb))
                          ORDER BY pt.name)
                 FROM parts pt), '[]'::jsonb),
           'consumerGroups', coalesce((
               SELECT jsonb_agg(jsonb_build_object(
                          'consumerGroup', g.consumer_group,
                          'partitions', g.partitions,
                          'lag', g.lag,
                          'timeLagSeconds', g.time_lag,
                          'activeLeases', g.leases,
                          'lastConsumedAt', queen._iso_ms(g.last_consumed_at))
                          ORDER BY g.consumer_group)
                 FROM (SELECT c.consumer_group, count(*) AS partitions, sum(c.lag) AS lag,
                              coalesce(floor(extract(epoch FROM now() - min(c.oldest)))::bigint, 0)
                                  AS time_lag,
                              count(*) FILTER (WHERE c.leased) AS leases,
                              max(c.last_consumed_at) AS last_consumed_at
                         FROM cons c GROUP BY c.consumer_group) g), '[]'::jsonb),
           'deadLetterQueue', jsonb_build_object(
               'total', (SELECT count(*) FROM dlq),
               'topErrors', coalesce((
                   SELECT jsonb_agg(jsonb_build_object('error', e.err, 'count', e.n)
                                    ORDER BY e.n DESC, e.err)
                     FROM (SELECT coalesce(error_message, '') AS err, count(*) AS n
                             FROM dlq GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10) e), '[]'::jsonb)),
           'retention', jsonb_build_object(
               'recent', coalesce((
                   SELECT jsonb_agg(jsonb_build_object(
                              'partition', h.partition_name,
                              'partitionId', h.partition_id,
                              'type', h.retention_type,
                              'messagesDeleted', h.messages_deleted,
                              'executedAt', queen._iso_ms(h.executed_at))
                              ORDER BY h.executed_at DESC, h.id DESC)
                     FROM (SELECT * FROM queen.retention_history rh
                            WHERE rh.queue_name = q.name
                            ORDER BY rh.executed_at DESC, rh.id DESC LIMIT 20) h), '[]'::jsonb))
       )::text
  FROM q;

-- name: resources_overview
-- GET /api/v1/resources/overview: what the whole system holds right now.
WITH counts AS (
    SELECT coalesce(sum(c.total), 0) AS total, coalesce(sum(c.pending), 0) AS pending,
           coalesce(sum(c.processing), 0) AS processing,
           coalesce(sum(c.completed), 0) AS completed, min(c.oldest_pending) AS oldest
      FROM queen.partitions p CROSS JOIN LATERAL queen._partition_stats(p.id) c
), groups AS (
    SELECT consumer_group FROM queen.partition_consumers
    UNION
    SELECT consumer_group FROM queen.consumer_groups_metadata
)
SELECT jsonb_build_object(
           'queues', (SELECT count(*) FROM queen.queues),
           'partitions', (SELECT count(*) FROM queen.partitions),
           'namespaces', (SELECT count(DISTINCT namespace) FROM queen.queues WHERE namespace <> ''),
           'tasks', (SELECT count(DISTINCT task) FROM queen.queues WHERE task <> ''),
           'consumerGroups', (SELECT count(*) FROM groups),
           'messages', (SELECT jsonb_build_object(
                                   'total', c.total, 'pending', c.pending,
                                   'processing', c.processing, 'completed', c.completed,
                                   'deadLettered', (SELECT count(*) FROM queen.dead_letter_queue),
                                   'oldestPendingAt', queen._iso_ms(c.oldest))
                          FROM counts c),
           'leases', jsonb_build_object(
               'active', (SELECT count(*) FROM queen.partition_consumers
                           WHERE lease_expires_at > now())),
           'lastPushAt', (SELECT queen._iso_ms(max(last_message_created_at))
                            FROM queen.partition_lookup),
           'retention', jsonb_build_object(
               'deletedLast24h', (SELECT coalesce(sum(messages_deleted), 0)
                                    FROM queen.retention_history
                                   WHERE executed_at > now() - interval '24 hours'),
               'partitionsDeletedLast24h', (SELECT count(*) FROM queen.retention_history
                                             WHERE executed_at > now() - interval '24 hours'
                                               AND retention_type = 'partition_cleanup')),
           'timestamp', queen._iso_ms(now())
       )::text;

-- name: ops_local_timeout
-- statement_timeout for the rest of the current transaction (ms as text).
SELECT set_config('statement_timeout', %s, true);
