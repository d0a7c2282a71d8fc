-- ===== resources =====
-- The partition listing, clearing a queue and refreshing the planner statistics
-- (queen_threads/admin/store.py is their only caller; the stored functions live in
-- schema/functions/85_clear_and_stats.sql).

-- name: admin_partition_list
-- Partitions (of %(queue)s, or of the queues in %(namespace)s / %(task)s), by queue and
-- partition name, one page plus the total under the same filters: queue mode's message
-- counts, DLQ rows, and every consumer group with a cursor on the partition with its lag
-- (what comes from the tables distributed on Citus: queen._partition_stats and
-- queen._partition_detail, 80_admin.sql).
WITH f AS (
    SELECT p.id, p.name, p.created_at, p.last_activity,
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
                          'lastActivity', queen._iso_ms(greatest(pg.last_activity,
                                                                 (d.j ->> 'lastWrite')::timestamptz)),
                          'lastMessageAt', d.j -> 'lastMessageAt',
                          'messages', jsonb_build_object(
                              'total', s.total, 'pending', s.pending,
                              'processing', s.processing, 'completed', s.completed,
                              'deadLettered', d.j -> 'deadLettered'),
                          'consumerGroups', d.j -> 'consumerGroups')
                        ORDER BY pg.qname, pg.name)
                 FROM page pg
                CROSS JOIN LATERAL queen._partition_stats(pg.id) s
                CROSS JOIN LATERAL (SELECT queen._partition_detail(pg.id) AS j) d), '[]'::jsonb),
           'total', (SELECT count(*) FROM f),
           'pagination', jsonb_build_object('limit', %(limit)s, 'offset', %(offset)s))::text;

-- name: admin_clear_queue
-- Remove the messages of a queue or of one partition (queen.clear_queue_v1).
SELECT queen.clear_queue_v1(%s::jsonb)::text;

-- name: admin_refresh_stats
-- ANALYZE the queen tables (queen.refresh_stats_v1).
SELECT queen.refresh_stats_v1()::text;
