-- name: ping
-- Liveness probe of the database.
SELECT 1;

-- name: transaction_timeouts
-- The pool's timeouts (statement, lock, idle in transaction; ms) for the current
-- transaction only: behind a transaction pooler every pooled statement is sent after
-- this one in the same query string (one implicit transaction, one round trip), so the
-- settings end with it and never stay on a server connection other clients share.
-- Integers written in by queen_threads/db/statements.py (SET takes no bind parameters);
-- SET LOCAL costs the server about 5 us, a SELECT of set_config() calls about 25 us.
SET LOCAL statement_timeout = %s;
SET LOCAL lock_timeout = %s;
SET LOCAL idle_in_transaction_session_timeout = %s;

-- name: advisory_lock
-- Serialise migrations across workers and instances.
SELECT pg_advisory_lock(%s);

-- name: advisory_unlock
SELECT pg_advisory_unlock(%s);

-- name: create_migrations_table
CREATE SCHEMA IF NOT EXISTS queen;
CREATE TABLE IF NOT EXISTS queen.schema_migrations (
    version    TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL DEFAULT 'migration',
    checksum   TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- name: citus_installed
-- Is this database a Citus node (queen_threads/migrate.py)?
SELECT extversion FROM pg_extension WHERE extname = 'citus';

-- name: create_citus_extension
-- QUEEN_CITUS=1: the coordinator's extension (the workers need theirs already).
CREATE EXTENSION IF NOT EXISTS citus;

-- name: citus_allow_triggers
-- Triggers on distributed tables fire on the shards (docs/scaling.md, "Citus"); Citus
-- creates them only when asked to.
SET citus.enable_unsafe_triggers = on;

-- name: applied_migrations
-- version -> checksum of what has been applied (migrations and function files).
SELECT version, checksum FROM queen.schema_migrations;

-- name: record_migration
INSERT INTO queen.schema_migrations (version, name, kind, checksum)
VALUES (%s, %s, %s, %s)
ON CONFLICT (version) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now();

-- name: push_messages
-- Push a batch of items (auto-creates queues/partitions, dedups, enforces maxSize).
-- The server wakes long polls itself after the commit (queen._wake, wake/notifier.py).
-- Compact answer, one array per item (QueueStore.push expands it), and the epoch of
-- queen.wake_interest the notifier must have read before it decides whom to wake.
SELECT results::text, wake_epoch FROM queen.push_messages_v4(%s::jsonb);

-- name: push_partition
-- A push whose items all name one partition whose id the server knows (QueueStore.push):
-- the epoch of queen.wake_interest (as for push_messages), then the compact answer, or NULL
-- when the function declined (nothing written; the server pushes with push_messages).
SELECT queen._wake_epoch(), queen.push_partition_v3(%s::uuid, %s::text);

-- name: push_partition_delegated
-- The same on Citus: the call alone, so that Citus delegates it to the node that holds
-- the partition (schema/citus/30_push.sql); the epoch comes after its commit
-- (wake_epoch, queen_threads/db/citus.py). Its entry point there runs the twin of
-- push_partition_v3 on the partition's shard group (schema/citus/70_twins.sql).
SELECT queen.push_partition_v3_on_shard(%s::uuid, %s::text);

-- name: partition_id
-- On Citus, before the delegated push of a partition the server has no id for: its id,
-- the partition (and its queue) created when missing (schema/functions/20_push.sql).
SELECT queen.partition_id_v1(%s, %s)::text;

-- name: wake_epoch
-- The epoch of queen.wake_interest, after a delegated push committed: every registration
-- that committed before the push is in it (wake/targets.py).
SELECT queen._wake_epoch();

-- name: encrypted_queues
-- Which of these queues store encrypted payloads.
SELECT name FROM queen.queues WHERE encryption_enabled AND name = ANY(%s);

-- name: pop_batch
-- Several pops in one call, each with its own lease and batch size.
SELECT queen.pop_unified_batch(%s::jsonb)::text;

-- name: pop_partition
-- One pop of one partition, by its id and its request (queue/placement.py). A bare
-- `SELECT f(<constants>)`: on Citus only such a call is delegated to the worker that holds
-- the partition (schema/citus/40_delegate.sql). The answer is text.
SELECT queen.pop_partition_v1(%s::uuid, %s::jsonb);

-- name: ack_partition
-- An ack whose items all name one partition (as pop_partition): {results, wakeEpoch}.
SELECT queen.ack_partition_v2(%s::uuid, %s::text);

-- name: renew_partition
-- A lease renewal where the lease is held on one partition (as pop_partition).
SELECT queen.renew_partition_v1(%s::uuid, %s::jsonb);

-- name: pop_queue_on_node
-- On Citus, a pop of a whole queue served by the node that holds the anchor's shard group,
-- from its own shards (schema/citus/70_twins.sql); NULL: pop with pop_batch.
SELECT queen.pop_queue_on_node_v1(%s::uuid, %s::jsonb);

-- name: citus_node_anchors
-- On Citus, one anchor (a queen.shard_anchors id) per node that holds shard groups: a JSON
-- array.
SELECT queen.citus_node_anchors_v1();

-- name: pop_partition_on_shard
-- pop_partition on Citus: the entry point that runs the twin of pop_partition_v1 on the
-- partition's shard group, else pop_partition_v1 itself (schema/citus/70_twins.sql).
SELECT queen.pop_partition_v1_on_shard(%s::uuid, %s::jsonb);

-- name: ack_partition_on_shard
-- ack_partition on Citus (as pop_partition_on_shard).
SELECT queen.ack_partition_v2_on_shard(%s::uuid, %s::text);

-- name: renew_partition_on_shard
-- renew_partition on Citus (as pop_partition_on_shard).
SELECT queen.renew_partition_v1_on_shard(%s::uuid, %s::jsonb);

-- name: ack_messages
-- The server wakes long polls itself after the commit (queen._wake, wake/notifier.py);
-- with the epoch of queen.wake_interest, as for a push.
SELECT results::text, wake_epoch FROM queen.ack_messages_v3(%s::jsonb);

-- name: execute_transaction
SELECT queen.execute_transaction_v2(%s::jsonb)::text;

-- name: renew_lease
SELECT queen.renew_lease_v3(%s::jsonb)::text;

-- name: release_leases
-- Give leases back without acking (the client that asked for them is gone).
SELECT queen.release_leases_v1(%s::jsonb)::text;

-- name: configure_queue
SELECT queen.configure_queue_v1(%s::jsonb)::text;

-- name: delete_queue
-- Delete a queue (cascades to partitions, messages, cursors, DLQ, traces) and the
-- subscription metadata and conflation policies recorded for it; true when it existed.
-- The streams it was the last source of go too (on plain PostgreSQL the trigger
-- stream_sources_gone would also see to it; on Citus a trigger on a reference table cannot,
-- schema/citus/51_triggers.sql).
WITH meta AS (
    DELETE FROM queen.consumer_groups_metadata WHERE queue_name = %(name)s
), policies AS (
    DELETE FROM queen.conflation_groups WHERE queue_name = %(name)s
), orphans AS (
    DELETE FROM queen.streams s
     WHERE s.id IN (SELECT ss.stream_id FROM queen.stream_sources ss
                      JOIN queen.queues q ON q.id = ss.queue_id WHERE q.name = %(name)s)
       AND s.id NOT IN (SELECT ss.stream_id FROM queen.stream_sources ss
                          JOIN queen.queues q ON q.id = ss.queue_id WHERE q.name <> %(name)s)
), gone AS (
    DELETE FROM queen.queues WHERE name = %(name)s RETURNING 1
)
SELECT count(*) > 0 FROM gone;

-- name: citus_queue_partitions
-- On Citus, first in a queue's deletion: its partitions, their pushes held
-- (schema/citus/30_push.sql).
SELECT queen.citus_queue_partitions(%s);

-- name: delete_queue_messages
-- On Citus, last in a queue's deletion: the messages of its partitions (no foreign key
-- cascades to them there, schema/citus/30_push.sql).
DELETE FROM queen.messages WHERE partition_id = ANY (%s::uuid[]);

-- ===== admin =====
-- Statements of the administration routes (queen_threads/admin/store.py is their only
-- caller). Each returns one JSON text value (or a few counts); optional filters are NULL
-- when unset. The stored functions they use live in schema/functions/80_admin.sql. The
-- DLQ's statements are in queries/dlq.sql.

-- name: admin_message_list
-- Messages newest first (without payloads), one page plus the total under the same
-- filters (from/to bound created_at; status is queue mode's view of the message, one of
-- queen._message_states' statuses, 'pending' when queue mode has no cursor on it).
WITH f AS (
    SELECT m.id, m.transaction_id, m.partition_id, m.trace_id, m.producer_sub, m.created_at,
           m.is_encrypted, p.name AS pname, q.name AS qname, q.namespace, q.task
      FROM queen.messages m
      JOIN queen.partitions p ON p.id = m.partition_id
      JOIN queen.queues q ON q.id = p.queue_id
     WHERE (%(queue)s::text IS NULL OR q.name = %(queue)s::text)
       AND (%(partition)s::text IS NULL OR p.name = %(partition)s::text)
       AND (%(namespace)s::text IS NULL OR q.namespace = %(namespace)s::text)
       AND (%(task)s::text IS NULL OR q.task = %(task)s::text)
       AND (%(status)s::text IS NULL
            OR coalesce(queen._message_queue_status(m.id, m.partition_id, m.created_at),
                        'pending') = %(status)s::text)
       AND (%(from_ts)s::timestamptz IS NULL OR m.created_at >= %(from_ts)s::timestamptz)
       AND (%(to_ts)s::timestamptz IS NULL OR m.created_at <= %(to_ts)s::timestamptz)
), page AS (
    SELECT * FROM f ORDER BY created_at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s
)
SELECT jsonb_build_object(
           'messages', coalesce((
               SELECT jsonb_agg(jsonb_build_object(
                          'id', pg.id::text,
                          'transactionId', pg.transaction_id,
                          'partitionId', pg.partition_id,
                          'queue', pg.qname,
                          'partition', pg.pname,
                          'namespace', pg.namespace,
                          'task', pg.task,
                          'traceId', pg.trace_id,
                          'producerSub', pg.producer_sub,
                          'encrypted', pg.is_encrypted,
                          'createdAt', queen._iso_us(pg.created_at),
                          'status', coalesce(st.queue_status, 'pending'),
                          'busStatus', jsonb_build_object('consumedBy', st.consumed_by,
                                                          'totalGroups', st.total_groups))
                        ORDER BY pg.created_at DESC, pg.id DESC)
                 FROM page pg
                CROSS JOIN LATERAL (
                       SELECT max(s.status) FILTER (WHERE s.consumer_group = '__QUEUE_MODE__')
                                  AS queue_status,
                              count(*) FILTER (WHERE s.consumer_group <> '__QUEUE_MODE__'
                                               AND s.consumed) AS consumed_by,
                              count(*) FILTER (WHERE s.consumer_group <> '__QUEUE_MODE__')
                                  AS total_groups
                         FROM queen._message_states(pg.id, pg.partition_id, pg.created_at) s
                      ) st), '[]'::jsonb),
           'total', (SELECT count(*) FROM f),
           'pagination', jsonb_build_object('limit', %(limit)s, 'offset', %(offset)s))::text;

-- name: admin_message_detail
-- One message with its payload and its state in every consumer group, failed attempts
-- included (docs/retries.md); no row when missing.
SELECT jsonb_build_object(
           'id', m.id::text,
           'transactionId', m.transaction_id,
           'partitionId', m.partition_id,
           'queue', q.name,
           'partition', p.name,
           'namespace', q.namespace,
           'task', q.task,
           'data', m.payload,
           'traceId', m.trace_id,
           'producerSub', m.producer_sub,
           'createdAt', queen._iso_us(m.created_at),
           'isEncrypted', m.is_encrypted,
           'consumerGroups', coalesce((
               SELECT jsonb_agg(jsonb_build_object(
                          'consumerGroup', s.consumer_group,
                          'status', s.status,
                          'consumed', s.consumed,
                          'leased', s.leased,
                          'leaseExpiresAt', queen._iso_ms(s.lease_expires_at),
                          'deadLettered', s.dead_lettered,
                          'errorMessage', s.error_message,
                          'retryCount', s.retry_count,
                          'failedAt', queen._iso_ms(s.failed_at),
                          'attempt', s.attempt,
                          'lastDelayMs', s.last_delay_ms,
                          'nextAttemptAt', queen._iso_ms(s.next_attempt_at),
                          'lastError', s.last_error,
                          'errorType', s.error_type,
                          'attempts', s.attempts)
                        ORDER BY s.consumer_group)
                 FROM queen._message_states(m.id, m.partition_id, m.created_at) s), '[]'::jsonb)
       )::text
  FROM queen.messages m
  JOIN queen.partitions p ON p.id = m.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
 WHERE m.partition_id = %(partition_id)s::uuid AND m.transaction_id = %(transaction_id)s;

-- name: admin_message_delete
-- Delete one message (its DLQ rows and traces go with it) unless a live lease holds it
-- unacked; reports whether it existed, was deleted, and which groups hold it.
WITH m AS (
    SELECT id FROM queen.messages
     WHERE partition_id = %(partition_id)s::uuid AND transaction_id = %(transaction_id)s
), leased AS (
    SELECT pc.consumer_group
      FROM queen.partition_consumers pc, m
     WHERE pc.partition_id = %(partition_id)s::uuid
       AND pc.lease_expires_at > now()
       AND m.id = ANY (pc.batch_ids)
       AND NOT m.id = ANY (coalesce(pc.acked_ids, '{}'))
), del AS (
    DELETE FROM queen.messages
     WHERE id IN (SELECT id FROM m) AND NOT EXISTS (SELECT 1 FROM leased)
    RETURNING id
)
SELECT jsonb_build_object(
           'found', EXISTS (SELECT 1 FROM m),
           'deleted', EXISTS (SELECT 1 FROM del),
           'leasedBy', coalesce((SELECT jsonb_agg(consumer_group ORDER BY consumer_group)
                                   FROM leased), '[]'::jsonb))::text;

-- name: admin_consumer_groups
-- Summaries of every consumer group (or only %(group)s), with per-queue lag; per-partition
-- states when %(details)s. A group is Dead when it has lag and no activity for an hour,
-- Lagging when its oldest unconsumed message is at least a minute old, else Stable.
WITH gp AS MATERIALIZED (
    SELECT * FROM queen._group_partitions(%(group)s::text)
), groups AS (
    SELECT consumer_group AS grp FROM gp
    UNION
    SELECT m.consumer_group FROM queen.consumer_groups_metadata m
     WHERE %(group)s::text IS NULL OR m.consumer_group = %(group)s::text
), gq AS (
    SELECT gp.consumer_group, gp.queue_name,
           count(*) AS partitions,
           count(*) FILTER (WHERE gp.has_cursor) AS members,
           sum(gp.lag) AS lag,
           coalesce(floor(extract(epoch FROM now() - min(gp.oldest_unconsumed_at)))::bigint, 0)
               AS max_time_lag,
           count(*) FILTER (WHERE gp.lag > 0) AS with_lag,
           max(gp.last_activity_at) AS last_activity,
           jsonb_agg(jsonb_build_object(
               'partition', gp.partition_name,
               'partitionId', gp.partition_id,
               'hasCursor', gp.has_cursor,
               'lag', gp.lag,
               'timeLagSeconds', coalesce(
                   floor(extract(epoch FROM now() - gp.oldest_unconsumed_at))::bigint, 0),
               'oldestUnconsumedAt', queen._iso_ms(gp.oldest_unconsumed_at),
               'leaseActive', gp.lease_active,
               'leaseExpiresAt', CASE WHEN gp.lease_active
                                      THEN queen._iso_ms(gp.lease_expires_at) END,
               'lastConsumedAt', queen._iso_ms(gp.last_consumed_at))
               ORDER BY gp.partition_name) AS parts
      FROM gp
     GROUP BY gp.consumer_group, gp.queue_name
), summary AS (
    SELECT g.grp, a.*, md.subs, md.created
      FROM groups g
     CROSS JOIN LATERAL (
            SELECT coalesce(jsonb_agg(gq.queue_name ORDER BY gq.queue_name), '[]'::jsonb) AS topics,
                   coalesce(sum(gq.members), 0) AS members,
                   coalesce(sum(gq.lag), 0) AS total_lag,
                   coalesce(max(gq.max_time_lag), 0) AS max_time_lag,
                   coalesce(sum(gq.with_lag), 0) AS with_lag,
                   max(gq.last_activity) AS last_activity,
                   coalesce(jsonb_agg(jsonb_build_object(
                       'queue', gq.queue_name,
                       'partitions', gq.partitions,
                       'members', gq.members,
                       'totalLag', gq.lag,
                       'maxTimeLag', gq.max_time_lag,
                       'partitionsWithLag', gq.with_lag,
                       'lastActivityAt', queen._iso_ms(gq.last_activity))
                       || CASE WHEN %(details)s THEN jsonb_build_object('partitionDetails', gq.parts)
                               ELSE '{}'::jsonb END
                       ORDER BY gq.queue_name), '[]'::jsonb) AS queues
              FROM gq
             WHERE gq.consumer_group = g.grp
           ) a
     CROSS JOIN LATERAL (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'queue', nullif(m.queue_name, ''),
                       'partition', nullif(m.partition_name, ''),
                       'namespace', nullif(m.namespace, ''),
                       'task', nullif(m.task, ''),
                       'mode', m.subscription_mode,
                       'timestamp', queen._iso_ms(m.subscription_timestamp),
                       'createdAt', queen._iso_ms(m.created_at))
                       ORDER BY m.queue_name, m.partition_name, m.namespace, m.task),
                       '[]'::jsonb) AS subs,
                   max(m.created_at) AS created
              FROM queen.consumer_groups_metadata m
             WHERE m.consumer_group = g.grp
           ) md
)
SELECT coalesce(jsonb_agg(jsonb_build_object(
           'name', s.grp,
           'topics', s.topics,
           'members', s.members,
           'totalLag', s.total_lag,
           'maxTimeLag', s.max_time_lag,
           'state', CASE
                        WHEN s.total_lag > 0
                             AND coalesce(greatest(s.last_activity, s.created), '-infinity')
                                 < now() - interval '1 hour' THEN 'Dead'
                        WHEN s.max_time_lag >= 60 THEN 'Lagging'
                        ELSE 'Stable' END,
           'partitionsWithLag', s.with_lag,
           'lastActivityAt', queen._iso_ms(s.last_activity),
           'queues', s.queues,
           'subscriptions', s.subs)
           ORDER BY s.grp), '[]'::jsonb)::text
  FROM summary s;

-- name: admin_consumer_groups_lagging
-- (group, partition) pairs whose oldest unconsumed message is at least %(min_lag)s seconds
-- old, the longest waiting first.
SELECT coalesce(jsonb_agg(jsonb_build_object(
           'consumerGroup', gp.consumer_group,
           'queue', gp.queue_name,
           'partition', gp.partition_name,
           'partitionId', gp.partition_id,
           'lag', gp.lag,
           'timeLagSeconds', floor(extract(epoch FROM now() - gp.oldest_unconsumed_at))::bigint,
           'oldestUnconsumedAt', queen._iso_ms(gp.oldest_unconsumed_at),
           'lastConsumedAt', queen._iso_ms(gp.last_consumed_at))
           ORDER BY gp.oldest_unconsumed_at, gp.consumer_group, gp.queue_name,
                    gp.partition_name), '[]'::jsonb)::text
  FROM queen._group_partitions(NULL) gp
 WHERE gp.lag > 0
   AND gp.oldest_unconsumed_at <= now() - make_interval(secs => %(min_lag)s);

-- name: admin_delete_consumer_group
-- Drop a group's cursors, leases, registrations and conflation policy on every queue (or
-- on %(queue)s alone when given), and its subscription metadata when %(delete_metadata)s;
-- returns (cursor rows deleted, metadata rows deleted). schema/functions/80_admin.sql.
SELECT * FROM queen.delete_consumer_group_v1(%(group)s, %(queue)s, %(delete_metadata)s);

-- name: admin_update_subscription
-- New subscription instant for every metadata row of a group (cursors created later start
-- after it; existing cursors do not move).
UPDATE queen.consumer_groups_metadata
   SET subscription_timestamp = %(timestamp)s, subscription_mode = 'timestamp'
 WHERE consumer_group = %(group)s;

-- name: admin_seek_consumer_group
-- Move a group's cursor on the partitions of a queue (to the end or to a time).
SELECT queen.seek_consumer_group_v1(%s::jsonb)::text;

-- name: admin_trace_insert
-- Record a trace event of a message with its names; no row when the message does not exist.
WITH m AS (
    SELECT id, partition_id, transaction_id FROM queen.messages
     WHERE partition_id = %(partition_id)s::uuid AND transaction_id = %(transaction_id)s
), t AS (
    INSERT INTO queen.message_traces
           (message_id, partition_id, transaction_id, consumer_group, event_type, data, worker_id)
    SELECT m.id, m.partition_id, m.transaction_id, %(group)s, %(event_type)s,
           %(data)s::jsonb, %(worker_id)s
      FROM m
    RETURNING id
), n AS (
    INSERT INTO queen.message_trace_names (trace_id, trace_name)
    SELECT t.id, x FROM t, unnest(%(names)s::text[]) AS x
    ON CONFLICT DO NOTHING
)
SELECT id::text FROM t;

-- name: admin_traces_for_message
-- Every trace of one message, oldest first; no row (NULL) when the message does not exist
-- (queen.message_traces_v1, 80_admin.sql).
SELECT queen.message_traces_v1(%(partition_id)s::uuid, %(transaction_id)s)::text;

-- name: admin_traces_by_name
-- Traces carrying one name, newest first, one page plus the total.
WITH f AS (
    SELECT t.*
      FROM queen.message_trace_names n
      JOIN queen.message_traces t ON t.id = n.trace_id
     WHERE n.trace_name = %(name)s
), page AS (
    SELECT * FROM f ORDER BY created_at DESC, id LIMIT %(limit)s OFFSET %(offset)s
)
SELECT jsonb_build_object(
           'traceName', %(name)s::text,
           'traces', coalesce((SELECT jsonb_agg(queen._trace_json(pg::queen.message_traces)
                                                ORDER BY pg.created_at DESC, pg.id)
                                 FROM page pg), '[]'::jsonb),
           'total', (SELECT count(*) FROM f),
           'pagination', jsonb_build_object('limit', %(limit)s, 'offset', %(offset)s))::text;

-- name: admin_trace_names
-- Distinct trace names with their use count, most recently used first, one page + total.
WITH f AS (
    SELECT n.trace_name, count(*) AS uses, max(t.created_at) AS last_seen
      FROM queen.message_trace_names n
      JOIN queen.message_traces t ON t.id = n.trace_id
     GROUP BY n.trace_name
), page AS (
    SELECT * FROM f ORDER BY last_seen DESC, trace_name LIMIT %(limit)s OFFSET %(offset)s
)
SELECT jsonb_build_object(
           'names', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                         'name', pg.trace_name,
                                         'traceCount', pg.uses,
                                         'lastSeen', queen._iso_ms(pg.last_seen))
                                     ORDER BY pg.last_seen DESC, pg.trace_name)
                                FROM page pg), '[]'::jsonb),
           'total', (SELECT count(*) FROM f),
           'pagination', jsonb_build_object('limit', %(limit)s, 'offset', %(offset)s))::text;

-- name: admin_queue_list
-- Every queue with its partition count and message counts (queue mode's view).
SELECT jsonb_build_object('queues', coalesce(jsonb_agg(
           jsonb_build_object(
               'id', q.id,
               'name', q.name,
               'namespace', q.namespace,
               'task', q.task,
               'priority', q.priority,
               'createdAt', queen._iso_ms(q.created_at))
           || queen._queue_stats(q.id)
           ORDER BY q.name), '[]'::jsonb))::text
  FROM queen.queues q;

-- name: admin_queue_detail
-- One queue: its options, counts, the list of its partitions with their counts (the
-- original server's shape: `partitions` is the list, each with `stats`; `partitionCount`
-- the number), and the consumer groups that have a cursor on it; no row when the queue
-- does not exist. (One correlated subquery on the queue's row: Citus plans it; it plans
-- none beside a CTE.)
SELECT (jsonb_build_object(
            'id', q.id,
            'name', q.name,
            'namespace', q.namespace,
            'task', q.task,
            'createdAt', queen._iso_ms(q.created_at),
            'updatedAt', queen._iso_ms(q.updated_at),
            'options', queen._queue_options_of(q.id),
            'consumerGroups', queen._queue_groups(q.id))
        || (st - 'partitions')
        || jsonb_build_object(
            'partitionCount', st -> 'partitions',
            'partitions', coalesce((
                SELECT jsonb_agg(jsonb_build_object(
                           'id', p.id,
                           'name', p.name,
                           'createdAt', queen._iso_ms(p.created_at),
                           'lastActivity', queen._iso_ms(p.last_activity),
                           'messages', jsonb_build_object('total', s.total, 'pending', s.pending,
                                                          'processing', s.processing,
                                                          'completed', s.completed),
                           'stats', jsonb_build_object('total', s.total, 'pending', s.pending,
                                                       'processing', s.processing,
                                                       'completed', s.completed))
                         ORDER BY p.name)
                  FROM queen.partitions p
                 CROSS JOIN LATERAL queen._partition_stats(p.id) s
                 WHERE p.queue_id = q.id), '[]'::jsonb)))::text
  FROM queen.queues q
 CROSS JOIN LATERAL queen._queue_stats(q.id) st
 WHERE q.name = %(queue)s;

-- name: admin_namespace_list
-- Namespaces (or, with %(by_task)s, tasks) with their queues and summed counts.
WITH qs AS (
    SELECT CASE WHEN %(by_task)s THEN q.task ELSE q.namespace END AS key,
           q.name, queen._queue_stats(q.id) AS st
      FROM queen.queues q
)
SELECT coalesce(jsonb_agg(jsonb_build_object(
           CASE WHEN %(by_task)s THEN 'task' ELSE 'namespace' END, g.key,
           'queues', g.queues,
           'partitions', g.partitions,
           'messages', jsonb_build_object('total', g.total, 'pending', g.pending,
                                          'processing', g.processing,
                                          'completed', g.completed,
                                          'deadLettered', g.dead))
           ORDER BY g.key), '[]'::jsonb)::text
  FROM (SELECT qs.key,
               jsonb_agg(qs.name ORDER BY qs.name) AS queues,
               sum((qs.st ->> 'partitions')::bigint) AS partitions,
               sum((qs.st #>> '{messages,total}')::bigint) AS total,
               sum((qs.st #>> '{messages,pending}')::bigint) AS pending,
               sum((qs.st #>> '{messages,processing}')::bigint) AS processing,
               sum((qs.st #>> '{messages,completed}')::bigint) AS completed,
               sum((qs.st #>> '{messages,deadLettered}')::bigint) AS dead
          FROM qs
         GROUP BY qs.key) g;
