-- ===== streams SDK =====
-- The official clients' Stream runtime (queen_threads/streams_sdk/service.py is their only
-- caller; the stored functions live in schema/functions/97b_streams_sdk.sql).

-- name: sdk_register
SELECT queen.sdk_register_v1(%s::jsonb)::text;

-- name: sdk_cycle
-- One cycle: state operations, sink pushes and the source ack in one transaction.
SELECT queen.sdk_cycle_v1(%s::jsonb)::text;

-- name: sdk_state_get
SELECT queen.sdk_state_get_v1(%s::jsonb)::text;

-- name: sdk_query_delete
-- Deleting the query deletes its shards and their state (ON DELETE CASCADE).
DELETE FROM queen.sdk_queries WHERE name = %(name)s;

-- name: sdk_query_list
-- Every query with its shards' counters, its state size and the lag of its consumer group
-- on the source queue (the group its cycles used, else the SDK's default streams.<name>):
-- queen._sdk_query_stats, 97b_streams_sdk.sql.
SELECT coalesce(jsonb_agg(jsonb_build_object(
           'name', q.name, 'queryId', q.id, 'sourceQueue', q.source_queue,
           'sinkQueue', q.sink_queue, 'configHash', q.config_hash,
           'createdAt', queen._iso_ms(q.created_at),
           'updatedAt', queen._iso_ms(q.updated_at), 'resetAt', queen._iso_ms(q.reset_at))
           || queen._sdk_query_stats(q.id, q.name, q.source_queue)
           ORDER BY q.name), '[]'::jsonb)::text
  FROM queen.sdk_queries q;
