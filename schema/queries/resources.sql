-- ===== resources =====
-- The partition listing, clearing a queue and refreshing the planner statistics
-- (queen_threads/admin/store.py is their only caller; the stored functions live in
-- schema/functions/85_clear_and_stats.sql).

-- name: admin_partition_list
-- Partitions (of %(queue)s, or of the queues in %(namespace)s / %(task)s), by queue and
-- partition name, one page plus the total under the same filters: queue mode's message
-- counts, DLQ rows, and every consumer group with a cursor on the partition with its lag.
WITH f AS (
    SELECT p.id, p.name, p.created_at,
           greatest(p.last_activity, (SELECT pc.last_activity FROM queen.partition_counters pc
                                       WHERE pc.partition_id = p.id)) AS last_activity,
           q.name AS qname, q.namespace, q.task
      FROM queen.partitions p
      JOIN queen.queues q ON q.id = p.queue_id
     WHERE (%(queue)s::text IS NULL OR q.name = %(queue)s::text)
       AND (%(namespace)s::text IS NULL OR q.namespace = %(namespace)s::text)
       AND (%(task)s::text IS NULL OR q.task = %(task)s::text)
), page AS (
    SELECT * FROM f ORDER BY qname, name LIMIT %(limit)s OFFSET %(offset)s
)
SELECT jsonb_build_object(
           'partitions', coalesce((
               SELECT jsonb_agg(jsonb_build_object(
                          'id', pg.id,
                          'name', pg.name,
                          'queue', pg.qname,
                          'namespace', pg.namespace,
                          'task', pg.task,
                          'createdAt', queen._iso_ms(pg.created_at),
                          'lastActivity', queen._iso_ms(pg.last_activity),
                          'lastMessageAt', (SELECT queen._iso_ms(pl.last_message_created_at)
                                              FROM queen.partition_lookup pl
                                             WHERE pl.partition_id = pg.id),
                          'messages', jsonb_build_object(
                              'total', s.total, 'pending', s.pending,
                              'processing', s.processing, 'completed', s.completed,
                              'deadLettered', (SELECT count(*) FROM queen.dead_letter_queue d
                                                WHERE d.partition_id = pg.id)),
                          'consumerGroups', coalesce((
                              SELECT jsonb_agg(jsonb_build_object(
                                         'consumerGroup', pc.consumer_group,
                                         'lag', greatest(b.n - coalesce(cardinality(pc.acked_ids), 0), 0),
                                         'timeLagSeconds', coalesce(
                                             floor(extract(epoch FROM now() - b.oldest))::bigint, 0),
                                         'oldestUnconsumedAt', queen._iso_ms(b.oldest),
                                         'leaseActive', coalesce(pc.lease_expires_at > now(), false),
                                         'leaseExpiresAt', CASE WHEN pc.lease_expires_at > now()
                                                                THEN queen._iso_ms(pc.lease_expires_at) END,
                                         'lastConsumedAt', queen._iso_ms(pc.last_consumed_at))
                                         ORDER BY pc.consumer_group)
                                FROM queen.partition_consumers pc
                               CROSS JOIN LATERAL (
                                      SELECT count(*) AS n, min(m.created_at) AS oldest
                                        FROM queen.messages m
                                       WHERE m.partition_id = pc.partition_id
                                         AND (m.created_at, m.id)
                                             > (coalesce(pc.last_consumed_created_at, '-infinity'),
                                                pc.last_consumed_id)
                                     ) b
                               WHERE pc.partition_id = pg.id), '[]'::jsonb))
                        ORDER BY pg.qname, pg.name)
                 FROM page pg
                CROSS JOIN LATERAL queen._partition_stats(pg.id) s), '[]'::jsonb),
           'total', (SELECT count(*) FROM f),
           'pagination', jsonb_build_object('limit', %(limit)s, 'offset', %(offset)s))::text;

-- name: admin_clear_queue
-- Remove the messages of a queue or of one partition (queen.clear_queue_v1).
SELECT queen.clear_queue_v1(%s::jsonb)::text;

-- name: admin_refresh_stats
-- ANALYZE the queen tables (queen.refresh_stats_v1).
SELECT queen.refresh_stats_v1()::text;
