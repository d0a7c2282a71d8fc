-- ===== streams =====
-- Windowed consumption (queen_threads/streams/store.py is their only caller; the
-- stored functions live in schema/functions/97_streams.sql).

-- name: stream_define
SELECT queen.stream_define_v1(%s::jsonb)::text;

-- name: stream_poll
-- Find and lease ready windows for several stream polls (one call per poll round).
SELECT queen.stream_poll_v1(%s::jsonb)::text;

-- name: stream_ack
SELECT queen.stream_ack_v1(%s::jsonb)::text;

-- name: stream_renew
SELECT queen.stream_renew_v1(%s::jsonb)::text;

-- name: stream_release
SELECT queen.stream_release_v1(%s::jsonb)::text;

-- name: stream_seek
SELECT queen.stream_seek_v1(%s::jsonb)::text;

-- name: stream_sources
-- The source queues of a stream (NULL when the stream does not exist).
SELECT (SELECT coalesce(array_agg(q.name ORDER BY q.name), '{}')
          FROM queen.stream_sources ss JOIN queen.queues q ON q.id = ss.queue_id
         WHERE ss.stream_id = s.id)
  FROM queen.streams s WHERE s.name = %(name)s;

-- name: stream_list
-- Every stream (of %(namespace)s when set) with its consumer groups and live leases.
SELECT coalesce(jsonb_agg(queen._stream_json(s) || jsonb_build_object(
           'consumerGroups', (SELECT count(DISTINCT o.consumer_group)
                                FROM queen.stream_consumer_offsets o WHERE o.stream_id = s.id),
           'activeLeases', (SELECT count(*) FROM queen.stream_leases l
                             WHERE l.stream_id = s.id AND l.lease_expires_at > now()))
           ORDER BY s.name), '[]'::jsonb)::text
  FROM queen.streams s
 WHERE %(namespace)s::text IS NULL OR s.namespace = %(namespace)s::text;

-- name: stream_stats
-- Totals over every stream.
SELECT jsonb_build_object(
    'streams', (SELECT count(*) FROM queen.streams),
    'partitionedStreams', (SELECT count(*) FROM queen.streams WHERE partitioned),
    'sources', (SELECT count(*) FROM queen.stream_sources),
    'consumerGroups', (SELECT count(*) FROM (SELECT DISTINCT stream_id, consumer_group
                                               FROM queen.stream_consumer_offsets) g),
    'keys', (SELECT count(*) FROM queen.stream_consumer_offsets),
    'activeLeases', (SELECT count(*) FROM queen.stream_leases WHERE lease_expires_at > now()),
    'expiredLeases', (SELECT count(*) FROM queen.stream_leases
                       WHERE lease_expires_at <= now() AND lease_expires_at > '-infinity'),
    'releasedWindows', (SELECT count(*) FROM queen.stream_leases
                         WHERE lease_expires_at = '-infinity'),
    'windowsAcked', (SELECT coalesce(sum(windows_acked), 0) FROM queen.stream_consumer_offsets),
    'messagesAcked', (SELECT coalesce(sum(messages_acked), 0)
                        FROM queen.stream_consumer_offsets))::text;

-- name: stream_detail
-- One stream's definition with per-group totals; NULL when it does not exist.
SELECT (queen._stream_json(s) || jsonb_build_object(
           'consumerGroups', coalesce((
               SELECT jsonb_agg(jsonb_build_object(
                          'consumerGroup', g.consumer_group,
                          'keys', g.keys,
                          'windowsAcked', g.windows_acked,
                          'messagesAcked', g.messages_acked,
                          'lastAckedAt', queen._iso_us(g.last_acked_at),
                          'activeLeases', g.active) ORDER BY g.consumer_group)
                 FROM (SELECT o.consumer_group, count(*) AS keys,
                              sum(o.windows_acked) AS windows_acked,
                              sum(o.messages_acked) AS messages_acked,
                              max(o.last_acked_at) AS last_acked_at,
                              count(l.lease_id) FILTER (WHERE l.lease_expires_at > now()) AS active
                         FROM queen.stream_consumer_offsets o
                         LEFT JOIN queen.stream_leases l
                           ON (l.stream_id, l.consumer_group, l.stream_key)
                            = (o.stream_id, o.consumer_group, o.stream_key)
                        WHERE o.stream_id = s.id
                        GROUP BY o.consumer_group) g), '[]'::jsonb)))::text
  FROM queen.streams s WHERE s.name = %(name)s;

-- name: stream_consumers
-- Every key of every group of one stream: offset, counters, the window out if any; NULL
-- when the stream does not exist.
SELECT coalesce((
    SELECT jsonb_agg(jsonb_build_object(
               'consumerGroup', o.consumer_group,
               'key', o.stream_key,
               'partitionId', o.partition_id,
               'partition', p.name,
               'queue', q.name,
               'offset', queen._iso_us(o.cursor_at),
               'lastAckedWindowStart', queen._iso_us(o.last_acked_window_start),
               'lastAckedWindowEnd', queen._iso_us(o.last_acked_window_end),
               'lastAckedAt', queen._iso_us(o.last_acked_at),
               'windowsAcked', o.windows_acked,
               'messagesAcked', o.messages_acked,
               'lease', CASE WHEN l.lease_id IS NOT NULL THEN jsonb_build_object(
                   'windowId', l.window_id,
                   'start', queen._iso_us(l.window_start),
                   'end', queen._iso_us(l.window_end),
                   'messages', l.message_count,
                   'deliveryCount', l.delivery_count,
                   'expiresAt', queen._iso_us(l.lease_expires_at),  -- NULL: given back
                   'expired', l.lease_expires_at <= now() AND l.lease_expires_at > '-infinity',
                   'released', l.lease_expires_at = '-infinity') END)
               ORDER BY o.consumer_group, o.stream_key)
      FROM queen.stream_consumer_offsets o
      LEFT JOIN queen.partitions p ON p.id = o.partition_id
      LEFT JOIN queen.queues q ON q.id = p.queue_id
      LEFT JOIN queen.stream_leases l
        ON (l.stream_id, l.consumer_group, l.stream_key)
         = (o.stream_id, o.consumer_group, o.stream_key)
     WHERE o.stream_id = s.id), '[]'::jsonb)::text
  FROM queen.streams s WHERE s.name = %(name)s;

-- name: stream_delete
-- Delete a stream with its sources, offsets and leases; true when it existed.
WITH gone AS (DELETE FROM queen.streams WHERE name = %(name)s RETURNING 1)
SELECT count(*) > 0 FROM gone;
