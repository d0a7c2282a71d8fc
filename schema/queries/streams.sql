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
SELECT queen.stream_list_v1(%(namespace)s::text)::text;

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
SELECT queen.stream_detail_v1(%(name)s::text)::text;

-- name: stream_consumers
-- Every key of every group of one stream: offset, counters, the window out if any; NULL
-- when the stream does not exist.
SELECT queen.stream_consumers_v1(%(name)s::text)::text;

-- name: stream_delete
-- Delete a stream with its sources, offsets and leases; true when it existed.
WITH gone AS (DELETE FROM queen.streams WHERE name = %(name)s RETURNING 1)
SELECT count(*) > 0 FROM gone;
