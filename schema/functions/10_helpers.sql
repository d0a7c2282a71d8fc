-- Small shared helpers used by the queue functions. All take untrusted JSON values and
-- never raise on malformed input: they fall back to NULL / the given default instead.

-- text -> uuid, NULL when the text is not a UUID.
CREATE OR REPLACE FUNCTION queen._try_uuid(p_text text) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN p_text ~* '^\s*\{?[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\}?\s*$'
        THEN p_text::uuid
    END
$$;

-- text -> timestamptz, NULL when it does not parse (or is empty / 'now').
CREATE OR REPLACE FUNCTION queen._try_timestamptz(p_text text) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_text IS NULL OR btrim(p_text) = '' OR lower(btrim(p_text)) = 'now'
       OR p_text !~ '^\s*\d{4}-\d{2}-\d{2}' THEN
        RETURN NULL;
    END IF;
    RETURN p_text::timestamptz;
EXCEPTION WHEN others THEN
    RETURN NULL;
END;
$$;

-- JSON number or numeric string -> integer (truncated, clamped to int4); else p_default.
CREATE OR REPLACE FUNCTION queen._jint(p_value jsonb, p_default integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN jsonb_typeof(p_value) = 'number'
            OR (jsonb_typeof(p_value) = 'string'
                AND (p_value #>> '{}') ~ '^\s*[-+]?\d{1,30}(\.\d*)?\s*$')
        THEN least(greatest(trunc((p_value #>> '{}')::numeric), -2147483648), 2147483647)::integer
        ELSE p_default
    END
$$;

-- JSON boolean, 'true'/'false'/'1'/'0' string or number -> boolean; else p_default.
CREATE OR REPLACE FUNCTION queen._jbool(p_value jsonb, p_default boolean) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(p_value)
        WHEN 'boolean' THEN (p_value #>> '{}')::boolean
        WHEN 'number' THEN (p_value #>> '{}')::numeric <> 0
        WHEN 'string' THEN CASE lower(btrim(p_value #>> '{}'))
                               WHEN 'true' THEN true WHEN '1' THEN true
                               WHEN 'false' THEN false WHEN '0' THEN false
                               ELSE p_default END
        ELSE p_default
    END
$$;

-- UTC ISO-8601 with microseconds / milliseconds and a literal Z.
CREATE OR REPLACE FUNCTION queen._iso_us(p_ts timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_char(p_ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

CREATE OR REPLACE FUNCTION queen._iso_ms(p_ts timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_char(p_ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- Namespace / task derived from a dotted queue name: "ns.task.rest" -> ("ns", "task");
-- a name without a dot is its own namespace with task ''.
-- One writer of queue and partition definitions at a time (created by a push, a timer or
-- partition_id_v1, configured by configure_queue_v1), taken before the first such write of
-- the transaction and held to its end. On Citus queues and partitions are reference tables:
-- each write goes to a copy on every node at once, and two transactions that write them
-- could each get ahead on a different node and wait for the other there (Citus cancels one
-- as a distributed deadlock; measured: 35 in 2 minutes of the 2.6.0 client's suite in 4
-- runs side by side). On PostgreSQL it orders what was already rare.
CREATE OR REPLACE FUNCTION queen._definitions_lock() RETURNS void
LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(1364218453, 0)
$$;

CREATE OR REPLACE FUNCTION queen._queue_namespace(p_name text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT split_part(p_name, '.', 1)
$$;

CREATE OR REPLACE FUNCTION queen._queue_task(p_name text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT split_part(p_name, '.', 2)
$$;

-- Number of messages of a queue not yet consumed by the __QUEUE_MODE__ cursor
-- (the depth that max_queue_size limits).
-- Per partition: its cursor, then the messages after it by the partition's order index (a
-- range, not the partition's whole history). One partition per statement: Citus plans
-- neither an aggregate over a LATERAL subquery correlated to a reference table nor an SQL
-- function's parameters, and a join of the three lets PostgreSQL count every message of
-- the queue before filtering (a capped queue with a long consumed history).
CREATE OR REPLACE FUNCTION queen._queue_depth(p_queue_id uuid) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_total bigint := 0;
    v_n     bigint;
    v_pid   uuid;
    v_at    timestamptz;
    v_id    bigint;
BEGIN
    FOR v_pid IN SELECT p.id FROM queen.partitions p WHERE p.queue_id = p_queue_id LOOP
        v_at := NULL;
        v_id := NULL;
        SELECT pc.last_consumed_created_at, pc.last_consumed_id INTO v_at, v_id
          FROM queen.partition_consumers pc
         WHERE pc.partition_id = v_pid AND pc.consumer_group = '__QUEUE_MODE__';
        SELECT count(*) INTO v_n
          FROM queen.messages m
         WHERE m.partition_id = v_pid
           AND (m.created_at, m.id) > (coalesce(v_at, '-infinity'), coalesce(v_id, 0));
        v_total := v_total + v_n;
    END LOOP;
    RETURN v_total;
END;
$$;

-- Subscription start for a named group reaching a partition without a cursor:
-- the most specific stored metadata row wins (partition, then queue, then namespace/task).
-- NULL = start from the beginning; otherwise the new cursor starts after this instant.
CREATE OR REPLACE FUNCTION queen._subscription_start(
    p_group text, p_queue text, p_partition text, p_namespace text, p_task text
) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT m.subscription_timestamp
      FROM queen.consumer_groups_metadata m
     WHERE m.consumer_group = p_group
       AND (   (m.queue_name = p_queue AND m.partition_name IN (p_partition, ''))
            OR (m.queue_name = '' AND m.partition_name = ''
                AND (m.namespace <> '' OR m.task <> '')
                AND (m.namespace = '' OR m.namespace = p_namespace)
                AND (m.task = '' OR m.task = p_task)))
     ORDER BY CASE WHEN m.queue_name = '' THEN 2 WHEN m.partition_name = '' THEN 1 ELSE 0 END
     LIMIT 1
$$;

-- Record the subscription of a named group for the key the pop used, once: later pops keep
-- the first start whatever parameters they send.
--   subscriptionFrom = ISO time          -> mode 'timestamp', start after that time
--   subscriptionFrom = 'now' / mode new  -> mode 'new', start now
--   anything else (all, from_beginning)  -> mode 'all', from the beginning (timestamp NULL)
CREATE OR REPLACE FUNCTION queen._ensure_subscription(
    p_group text, p_queue text, p_partition text, p_namespace text, p_task text,
    p_mode text, p_from text, p_now timestamptz
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_mode text;
    v_ts timestamptz;
BEGIN
    PERFORM 1 FROM queen.consumer_groups_metadata m
     WHERE m.consumer_group = p_group AND m.queue_name = p_queue
       AND m.partition_name = p_partition AND m.namespace = p_namespace AND m.task = p_task;
    IF FOUND THEN
        RETURN;
    END IF;
    v_ts := queen._try_timestamptz(p_from);
    IF v_ts IS NOT NULL THEN
        v_mode := 'timestamp';
    ELSIF lower(btrim(coalesce(p_from, ''))) = 'now'
          OR lower(btrim(coalesce(p_mode, ''))) IN ('new', 'new-only') THEN
        v_mode := 'new';
        v_ts := p_now;
    ELSE
        v_mode := 'all';
    END IF;
    INSERT INTO queen.consumer_groups_metadata
           (consumer_group, queue_name, partition_name, namespace, task,
            subscription_mode, subscription_timestamp)
    VALUES (p_group, p_queue, p_partition, p_namespace, p_task, v_mode, v_ts)
    ON CONFLICT ON CONSTRAINT consumer_groups_metadata_key DO NOTHING;
END;
$$;

-- Moves the cursor of a partition_consumers row forward over the contiguous done prefix
-- of its delivered batch (batch_ids in delivery order, acked_ids = done ones). Never moves
-- backwards. Returns the updated row (the caller writes it).
CREATE OR REPLACE FUNCTION queen._pc_apply_prefix(p_pc queen.partition_consumers)
RETURNS queen.partition_consumers
LANGUAGE plpgsql AS $$
DECLARE
    v_k integer;
    v_n integer := coalesce(cardinality(p_pc.batch_ids), 0);
    v_last bigint;
    v_ts timestamptz;
    v_prefix bigint[];
BEGIN
    IF v_n = 0 OR coalesce(cardinality(p_pc.acked_ids), 0) = 0 THEN
        RETURN p_pc;
    END IF;
    IF p_pc.batch_ids <@ p_pc.acked_ids THEN
        -- Every id of the batch done (an ack of a whole batch): the prefix is the batch,
        -- without a statement (nor one for the acked ids left, below, when none is).
        v_k := v_n;
    ELSE
        SELECT coalesce(min(b.ord) - 1, v_n)::integer INTO v_k
          FROM unnest(p_pc.batch_ids) WITH ORDINALITY AS b(id, ord)
         WHERE NOT (b.id = ANY (p_pc.acked_ids));
    END IF;
    IF v_k = 0 THEN
        RETURN p_pc;
    END IF;
    v_prefix := p_pc.batch_ids[1:v_k];
    v_last := p_pc.batch_ids[v_k];
    SELECT m.created_at INTO v_ts FROM queen.messages m
     WHERE m.partition_id = p_pc.partition_id AND m.id = v_last;  -- (one shard on Citus)
    IF v_ts IS NOT NULL
       AND (v_ts, v_last) > (coalesce(p_pc.last_consumed_created_at, '-infinity'),
                             p_pc.last_consumed_id) THEN
        p_pc.last_consumed_created_at := v_ts;
        p_pc.last_consumed_id := v_last;
    END IF;
    p_pc.batch_ids := coalesce(p_pc.batch_ids[v_k + 1:v_n], '{}');
    IF p_pc.acked_ids <@ v_prefix THEN
        p_pc.acked_ids := '{}';
    ELSE
        p_pc.acked_ids := ARRAY(SELECT a FROM unnest(p_pc.acked_ids) a
                                 WHERE NOT (a = ANY (v_prefix)));
    END IF;
    p_pc.total_messages_consumed := p_pc.total_messages_consumed + v_k;
    p_pc.last_consumed_at := now();
    IF p_pc.retry_message_id = ANY (v_prefix) THEN
        p_pc.retry_message_id := NULL;
        p_pc.retry_count := 0;
        p_pc.retry_history := NULL;
    END IF;
    RETURN p_pc;
END;
$$;

-- A queue's 18 options as the API shows them (configure reply, queue detail, status).
CREATE OR REPLACE FUNCTION queen._queue_options(q queen.queues) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object(
        'priority', q.priority,
        'leaseTime', q.lease_time,
        'retryLimit', q.retry_limit,
        'retryDelay', q.retry_delay,
        'retryStrategy', q.retry_strategy,
        'retryDelayMax', q.retry_delay_max,
        'retryJitter', q.retry_jitter::numeric,
        'maxSize', q.max_queue_size,
        'ttl', q.ttl,
        'deadLetterQueue', q.dead_letter_queue,
        'dlqAfterMaxRetries', q.dlq_after_max_retries,
        'delayedProcessing', q.delayed_processing,
        'windowBuffer', q.window_buffer,
        'retentionSeconds', q.retention_seconds,
        'completedRetentionSeconds', q.completed_retention_seconds,
        'retentionEnabled', q.retention_enabled,
        'encryptionEnabled', q.encryption_enabled,
        'maxWaitTimeSeconds', q.max_wait_time_seconds)
$$;

-- Wake long polls everywhere: NOTIFY queen_wakeup (delivered at commit, dropped on
-- rollback), unless the statement running this is one of the server's pushes or acks
-- (queen.server_wakes = 'on', set for that transaction only): the server then wakes its
-- own polls at once and every other process after the commit, through queen.wake_batch_v1
-- (queen_threads/wake/notifier.py). A NOTIFY inside a data transaction holds PostgreSQL's
-- notify-queue lock until that transaction's commit has been flushed to disk, so every
-- notifying commit of the database would wait for the one before it.
-- Under the SQL API (queen.commit_wakes = 'on', its functions' setting) the event waits
-- for the commit and goes only where a server process waits for it (queen._wake_at_commit,
-- 92_sql_api.sql).
CREATE OR REPLACE FUNCTION queen._wake(p_event jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('queen.server_wakes', true) IS DISTINCT FROM 'on' THEN
        IF current_setting('queen.commit_wakes', true) = 'on' THEN
            PERFORM queen._wake_at_commit(p_event);
        ELSE
            PERFORM pg_notify('queen_wakeup', p_event::text);
        END IF;
    END IF;
END;
$$;

-- The server's wake-ups for other processes, sent after its commits: one notify-only
-- transaction for all the events that piled up meanwhile. Nothing in it must survive a
-- crash, so it commits without waiting for the WAL flush and holds the notify-queue lock
-- only for a moment. Adds each queue's namespace and task (for namespace/task long polls)
-- and the sender's origin (its own listener skips them: it woke its polls already).
-- Input: {origin, events: [{kind, queue, partition, consumerGroup?, delayMs?}]}.
-- `p_only_wanted`: only the events some other process waits for (queen._wake_wanted).
CREATE OR REPLACE FUNCTION queen._wake_batch(p jsonb, p_only_wanted boolean) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_count integer;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT count(pg_notify('queen_wakeup', (
               e || jsonb_build_object('namespace', q.namespace, 'task', q.task,
                                       'origin', p -> 'origin'))::text))
      INTO v_count
      FROM jsonb_array_elements(coalesce(p -> 'events', '[]'::jsonb)) e
      LEFT JOIN queen.queues q ON q.name = e ->> 'queue'
     WHERE NOT p_only_wanted
        OR queen._wake_wanted(p ->> 'origin', e ->> 'queue', q.namespace, q.task);
    RETURN v_count;
END;
$$;

-- Every event (servers of the version before queen.wake_interest call this).
CREATE OR REPLACE FUNCTION queen.wake_batch_v1(p jsonb) RETURNS integer
LANGUAGE sql AS $$ SELECT queen._wake_batch(p, false) $$;

-- Does a wake-up event concern another process's waiting long polls (queen.wake_interest)?
-- `p_namespace`/`p_task` are the event queue's; a scope's JSON null matches any.
-- (PL/pgSQL, whose plan is kept: a SQL function with a subquery is not inlined, and was
-- planned again by every statement that called it. queen.wake_batch_v2 of 2 events, one
-- wanted: 157 -> 73 us of PostgreSQL CPU, median, on a busy 2-core machine, 2026-11-28.)
CREATE OR REPLACE FUNCTION queen._wake_wanted(
    p_origin text, p_queue text, p_namespace text, p_task text
) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM queen.wake_interest i
         WHERE i.origin IS DISTINCT FROM p_origin
           AND i.expires_at > now()
           AND CASE WHEN i.selector ? 'queue' THEN i.selector ->> 'queue' = p_queue
                    ELSE (i.selector ->> 'namespace' IS NULL OR i.selector ->> 'namespace' = p_namespace)
                     AND (i.selector ->> 'task' IS NULL OR i.selector ->> 'task' = p_task)
               END);
END;
$$;

-- Only the events some other process waits for (queen.wake_interest). The server sends
-- what its copy of the interest rows says is wanted (wake/targets.py); this matches
-- namespace/task scopes, which the copy cannot, and drops what is no longer wanted. A
-- batch nobody waits for writes nothing (no transaction id, no notify-queue lock).
-- Returns how many events were sent.
CREATE OR REPLACE FUNCTION queen.wake_batch_v2(p jsonb) RETURNS integer
LANGUAGE sql AS $$ SELECT queen._wake_batch(p, true) $$;

-- The server's pushes and acks call this first (queen.push_messages_v4, ack_messages_v3):
-- it holds the wake-interest lock in shared mode until their commit and returns the epoch
-- of queen.wake_interest as of after the lock was granted. A change of interest takes the
-- lock exclusively (queen.wake_interest_v1), so it waits for the pushes in flight and the
-- pushes after it return its epoch (migrations/0010_wake_interest.sql).
CREATE OR REPLACE FUNCTION queen._wake_epoch() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_epoch bigint;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(8175552185029978981);  -- 'quee' 'wake'
    SELECT epoch INTO v_epoch FROM queen.wake_interest_epoch;
    RETURN v_epoch;
END;
$$;

-- A process's waiting long polls want wake-ups for these selectors until `ttlMs` from now
-- (renewed while they wait). A selector without a live row (new, or expired) is a change:
-- it takes the wake-interest lock exclusively and moves the epoch on, so that every
-- notifier re-reads the rows (queen._wake_epoch). Renewing a live row changes nothing
-- a notifier needs. Also forgets rows that expired long ago (processes gone).
-- The exclusive lock is waited for at most 200 ms (then 55P03, and the caller tries again
-- on its next pop): while it waits, the pushes after it wait too, and one push stuck on a
-- partition's row lock must not hold up every push of the database for the pool's
-- lock_timeout.
-- Input: {origin, ttlMs, selectors: [{"queue": q} | {"namespace": ns, "task": t}]}.
CREATE OR REPLACE FUNCTION queen.wake_interest_v1(p jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_origin text := p ->> 'origin';
    v_count integer;
BEGIN
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(p -> 'selectors', '[]'::jsonb)) s
                WHERE NOT EXISTS (SELECT 1 FROM queen.wake_interest i
                                   WHERE i.origin = v_origin AND i.selector = s
                                     AND i.expires_at > now())) THEN
        PERFORM set_config('lock_timeout', '200ms', true);
        PERFORM pg_advisory_xact_lock(8175552185029978981);
        UPDATE queen.wake_interest_epoch SET epoch = epoch + 1;
    END IF;
    DELETE FROM queen.wake_interest WHERE expires_at < now() - interval '1 hour';
    INSERT INTO queen.wake_interest (origin, selector, expires_at)
    SELECT DISTINCT v_origin, s, now() + make_interval(secs => (p ->> 'ttlMs')::numeric / 1000)
      FROM jsonb_array_elements(coalesce(p -> 'selectors', '[]'::jsonb)) s
    ON CONFLICT (origin, selector) DO UPDATE SET expires_at = EXCLUDED.expires_at;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;

-- The other processes' live rows, as notifiers before wake_interest_read_v2 keep them:
-- {epoch, queues: [names], scopes: whether any namespace/task scope is waited for, ttlMs:
-- how long until the first of them runs out (null without rows)}. One snapshot: rows and
-- epoch agree.
CREATE OR REPLACE FUNCTION queen.wake_interest_read_v1(p_origin text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'epoch', (SELECT epoch FROM queen.wake_interest_epoch),
        'queues', coalesce(jsonb_agg(DISTINCT i.selector -> 'queue')
                               FILTER (WHERE i.selector ? 'queue'), '[]'::jsonb),
        'scopes', coalesce(bool_or(NOT i.selector ? 'queue'), false),
        'ttlMs', floor(extract(epoch FROM min(i.expires_at) - now()) * 1000))
      FROM queen.wake_interest i
     WHERE i.origin IS DISTINCT FROM p_origin AND i.expires_at > now()
$$;

-- The same, with the processes that wait: {epoch, queues: {name: [origins]}, scopes:
-- [origins waiting for a namespace/task scope], ttlMs}. A notifier hands the wake-ups
-- that only its sibling processes wait for to them directly, over the instance's own
-- Unix sockets, and NOTIFYs only what some process out of their reach waits for
-- (queen_threads/wake/siblings.py).
CREATE OR REPLACE FUNCTION queen.wake_interest_read_v2(p_origin text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH live AS (
        SELECT i.origin, i.selector, i.expires_at
          FROM queen.wake_interest i
         WHERE i.origin IS DISTINCT FROM p_origin AND i.expires_at > now()
    )
    SELECT jsonb_build_object(
        'epoch', (SELECT epoch FROM queen.wake_interest_epoch),
        'queues', coalesce((SELECT jsonb_object_agg(g.queue, g.origins)
                              FROM (SELECT l.selector ->> 'queue' AS queue,
                                           jsonb_agg(DISTINCT l.origin) AS origins
                                      FROM live l WHERE l.selector ? 'queue'
                                     GROUP BY 1) g), '{}'::jsonb),
        'scopes', coalesce((SELECT jsonb_agg(DISTINCT l.origin)
                              FROM live l WHERE NOT l.selector ? 'queue'), '[]'::jsonb),
        'ttlMs', (SELECT floor(extract(epoch FROM min(l.expires_at) - now()) * 1000)
                    FROM live l))
$$;

-- A process stops waiting for anything (shutdown): a change, like a new row (the lock
-- waited for as briefly as there; rows left behind expire).
CREATE OR REPLACE FUNCTION queen.wake_interest_withdraw_v1(p_origin text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_count integer;
BEGIN
    PERFORM set_config('lock_timeout', '200ms', true);
    PERFORM pg_advisory_xact_lock(8175552185029978981);
    DELETE FROM queen.wake_interest WHERE origin = p_origin;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count > 0 THEN
        UPDATE queen.wake_interest_epoch SET epoch = epoch + 1;
    END IF;
    RETURN v_count;
END;
$$;
