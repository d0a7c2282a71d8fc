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
-- on the source queue (the group its cycles used, else the SDK's default streams.<name>).
SELECT coalesce(jsonb_agg(jsonb_build_object(
           'name', q.name, 'queryId', q.id, 'sourceQueue', q.source_queue,
           'sinkQueue', q.sink_queue, 'configHash', q.config_hash,
           'consumerGroup', g.grp, 'createdAt', queen._iso_ms(q.created_at),
           'updatedAt', queen._iso_ms(q.updated_at), 'resetAt', queen._iso_ms(q.reset_at),
           'partitions', sh.n, 'cycles', sh.cycles, 'acked', sh.acked, 'pushed', sh.pushed,
           'lastCycleAt', queen._iso_ms(sh.last_at),
           'stateRows', st.n, 'stateBytes', st.bytes, 'lag', lg.lag)
           ORDER BY q.name), '[]'::jsonb)::text
  FROM queen.sdk_queries q
 CROSS JOIN LATERAL (
        SELECT count(*) AS n, coalesce(sum(s.cycles), 0) AS cycles,
               coalesce(sum(s.acked), 0) AS acked, coalesce(sum(s.pushed), 0) AS pushed,
               max(s.last_cycle_at) AS last_at, min(s.consumer_group) AS grp
          FROM queen.sdk_shards s WHERE s.query_id = q.id) sh
 CROSS JOIN LATERAL (SELECT coalesce(sh.grp, 'streams.' || q.name) AS grp) g
 CROSS JOIN LATERAL (
        SELECT count(*) AS n,
               coalesce(sum(octet_length(s.key) + pg_column_size(s.value)), 0) AS bytes
          FROM queen.sdk_state s WHERE s.query_id = q.id) st
 CROSS JOIN LATERAL (
        SELECT coalesce(sum(gp.lag), 0) AS lag
          FROM queen._group_partitions(g.grp) gp WHERE gp.queue_name = q.source_queue) lg;
