-- EPHEMERAL QUEUES (/api/v1/ephemeral/*): tables and contract in migration 0016 and
-- docs/ephemeral.md. Every function takes and returns JSON, one call per request; pushes,
-- pops and acks of one queue take turns on its ring row (FOR UPDATE), so the counters and
-- the bounds are exact.

-- The queue's configuration, created with the defaults when a push or a pop names a queue
-- nobody declared.
CREATE OR REPLACE FUNCTION queen._eph_config(p_queue text)
RETURNS queen.ephemeral_queues
LANGUAGE plpgsql AS $$
DECLARE
    v queen.ephemeral_queues;
BEGIN
    SELECT * INTO v FROM queen.ephemeral_queues WHERE name = p_queue;
    IF NOT FOUND THEN
        INSERT INTO queen.ephemeral_queues (name) VALUES (p_queue)
        ON CONFLICT (name) DO NOTHING;
        SELECT * INTO v FROM queen.ephemeral_queues WHERE name = p_queue;
    END IF;
    RETURN v;
END;
$$;

-- The queue's ring row, created when missing (first use, or after a crash emptied the
-- unlogged tables), locked for the rest of the transaction.
CREATE OR REPLACE FUNCTION queen._eph_ring(p_queue text)
RETURNS queen.ephemeral_rings
LANGUAGE plpgsql AS $$
DECLARE
    v queen.ephemeral_rings;
BEGIN
    SELECT * INTO v FROM queen.ephemeral_rings WHERE queue = p_queue FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO queen.ephemeral_rings (queue) VALUES (p_queue)
        ON CONFLICT (queue) DO NOTHING;
        SELECT * INTO v FROM queen.ephemeral_rings WHERE queue = p_queue FOR UPDATE;
    END IF;
    RETURN v;
END;
$$;

-- The id a client sees: the ring's incarnation and the message's number.
CREATE OR REPLACE FUNCTION queen._eph_id(p_incarnation uuid, p_id bigint)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT replace(p_incarnation::text, '-', '') || '.' || p_id
$$;

-- Remove messages from the ring (the caller holds the ring row): their in-flight rows go
-- with them, and the ring's counters follow. p_counted: they were dropped (bounds, age)
-- rather than consumed. Returns how many went.
CREATE OR REPLACE FUNCTION queen._eph_remove(p_queue text, p_ids bigint[], p_counted boolean)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_n     integer;
    v_bytes bigint;
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) = 0 THEN
        RETURN 0;
    END IF;
    DELETE FROM queen.ephemeral_inflight f WHERE f.queue = p_queue AND f.id = ANY (p_ids);
    WITH d AS (
        DELETE FROM queen.ephemeral_messages m
         WHERE m.queue = p_queue AND m.id = ANY (p_ids)
        RETURNING m.bytes
    )
    SELECT count(*), coalesce(sum(d.bytes), 0) INTO v_n, v_bytes FROM d;
    UPDATE queen.ephemeral_rings r
       SET length = r.length - v_n, bytes = r.bytes - v_bytes,
           dropped = r.dropped + CASE WHEN p_counted THEN v_n ELSE 0 END
     WHERE r.queue = p_queue;
    RETURN v_n;
END;
$$;

-- The messages of p_ids some group still needs: beyond that group's cursor of their
-- partition (a group that never read the partition needs all of it), or in a group's
-- flight. While no group has read the queue, every message is needed. The others are
-- history: the ring keeps them (a group that comes later reads them) until newer
-- messages need their room.
CREATE OR REPLACE FUNCTION queen._eph_needed(p_queue text, p_ids bigint[])
RETURNS bigint[]
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM queen.ephemeral_cursors c0
                                  WHERE c0.queue = p_queue)
                THEN coalesce(p_ids, '{}')
                ELSE ARRAY(
                    SELECT m.id
                      FROM queen.ephemeral_messages m
                     WHERE m.queue = p_queue AND m.id = ANY (p_ids)
                       AND (EXISTS (SELECT 1 FROM queen.ephemeral_inflight f
                                     WHERE f.queue = p_queue AND f.id = m.id)
                            OR EXISTS (SELECT 1
                                         FROM (SELECT DISTINCT c1.grp
                                                 FROM queen.ephemeral_cursors c1
                                                WHERE c1.queue = p_queue) g
                                         LEFT JOIN queen.ephemeral_cursors c
                                                ON c.queue = p_queue AND c.grp = g.grp
                                               AND c.partition = m.partition
                                        WHERE m.id > coalesce(c.last_id, 0))))
           END
$$;

-- Remove messages that make room or expired: the ones some group still needed are counted
-- as dropped, history is not.
CREATE OR REPLACE FUNCTION queen._eph_evict(p_queue text, p_ids bigint[])
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_needed bigint[] := queen._eph_needed(p_queue, p_ids);
BEGIN
    RETURN queen._eph_remove(p_queue, v_needed, true)
         + queen._eph_remove(p_queue, ARRAY(SELECT unnest(p_ids) EXCEPT SELECT unnest(v_needed)),
                             false);
END;
$$;

-- Messages older than the queue's ttlSeconds leave the ring (counted as dropped when a
-- group still needed them).
CREATE OR REPLACE FUNCTION queen._eph_expire(p_cfg queen.ephemeral_queues)
RETURNS integer
LANGUAGE sql AS $$
    SELECT CASE WHEN p_cfg.ttl_seconds > 0 THEN
               queen._eph_evict(p_cfg.name, ARRAY(
                   SELECT m.id FROM queen.ephemeral_messages m
                    WHERE m.queue = p_cfg.name
                      AND m.created_at < now() - make_interval(secs => p_cfg.ttl_seconds)))
           ELSE 0 END
$$;

CREATE OR REPLACE FUNCTION queen._eph_options_json(c queen.ephemeral_queues)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'maxBytes', c.max_bytes, 'maxLength', c.max_length, 'policy', c.policy,
        'ttlSeconds', c.ttl_seconds, 'leaseSeconds', c.lease_seconds,
        'retryLimit', c.retry_limit,
        'windowBuffer', jsonb_build_object('ms', c.window_ms, 'count', c.window_count))
$$;

-- configure: {queue, options: {maxBytes?, maxLength?, policy?, ttlSeconds?, leaseSeconds?,
-- retryLimit?, windowBuffer?: {ms?, count?}}} (validated by queen_threads/ephemeral/body.py).
-- An option left out keeps its value (its default for a new queue). The contents stay.
-- Answer: {queue, declared: true, created, options}.
CREATE OR REPLACE FUNCTION queen.ephemeral_configure_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    o       jsonb := coalesce(p -> 'options', '{}'::jsonb);
    v       queen.ephemeral_queues;
    v_new   boolean;
BEGIN
    v_new := NOT EXISTS (SELECT 1 FROM queen.ephemeral_queues WHERE name = p ->> 'queue');
    v := queen._eph_config(p ->> 'queue');
    UPDATE queen.ephemeral_queues c
       SET max_bytes = coalesce((o ->> 'maxBytes')::bigint, c.max_bytes),
           max_length = coalesce((o ->> 'maxLength')::integer, c.max_length),
           policy = coalesce(o ->> 'policy', c.policy),
           ttl_seconds = coalesce((o ->> 'ttlSeconds')::integer, c.ttl_seconds),
           lease_seconds = coalesce((o ->> 'leaseSeconds')::integer, c.lease_seconds),
           retry_limit = coalesce((o ->> 'retryLimit')::integer, c.retry_limit),
           window_ms = coalesce((o #>> '{windowBuffer,ms}')::integer, c.window_ms),
           window_count = coalesce((o #>> '{windowBuffer,count}')::integer, c.window_count),
           declared = true, updated_at = now()
     WHERE c.name = v.name
    RETURNING * INTO v;
    RETURN jsonb_build_object('queue', v.name, 'declared', true, 'created', v_new,
                              'options', queen._eph_options_json(v));
END;
$$;

-- push: {queue, partition, messages: [{payload, traceContext?}]}: all or nothing.
-- The ring holds at most maxLength messages and maxBytes of payload. When a push needs
-- room, the oldest messages leave: history (every group is done with it) always; messages
-- a group still needs only with policy drop_oldest (counted as dropped). With policy
-- reject the push is refused instead: {error: "full", length, bytes, maxLength,
-- maxBytes}, nothing stored. A push larger than the bounds themselves is refused
-- {error: "too_large"} whatever the policy. Answer: {pushed}.
CREATE OR REPLACE FUNCTION queen.ephemeral_push_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_cfg   queen.ephemeral_queues := queen._eph_config(p ->> 'queue');
    v_ring  queen.ephemeral_rings := queen._eph_ring(p ->> 'queue');
    v_n     integer := jsonb_array_length(p -> 'messages');
    v_bytes bigint;
    v_over  integer;
    v_free  bigint;
    v_room  bigint[];
BEGIN
    SELECT coalesce(sum(octet_length((e -> 'payload')::text)), 0) INTO v_bytes
      FROM jsonb_array_elements(p -> 'messages') e;
    IF v_n > v_cfg.max_length OR v_bytes > v_cfg.max_bytes THEN
        RETURN jsonb_build_object('error', 'too_large', 'count', v_n, 'bytes', v_bytes,
                                  'maxLength', v_cfg.max_length, 'maxBytes', v_cfg.max_bytes);
    END IF;
    PERFORM queen._eph_expire(v_cfg);
    SELECT * INTO v_ring FROM queen.ephemeral_rings WHERE queue = v_cfg.name;
    IF v_ring.length + v_n > v_cfg.max_length OR v_ring.bytes + v_bytes > v_cfg.max_bytes THEN
        -- The oldest messages, as many as make room for this push.
        v_over := v_ring.length + v_n - v_cfg.max_length;
        v_free := v_ring.bytes + v_bytes - v_cfg.max_bytes;
        v_room := ARRAY(
            SELECT o.id
              FROM (SELECT m.id,
                           row_number() OVER (ORDER BY m.id) AS n,
                           sum(m.bytes) OVER (ORDER BY m.id) - m.bytes AS before
                      FROM queen.ephemeral_messages m
                     WHERE m.queue = v_cfg.name) o
             WHERE o.n <= v_over OR o.before < v_free);
        IF v_cfg.policy <> 'drop_oldest'
           AND cardinality(queen._eph_needed(v_cfg.name, v_room)) > 0 THEN
            RETURN jsonb_build_object('error', 'full', 'length', v_ring.length,
                                      'bytes', v_ring.bytes, 'maxLength', v_cfg.max_length,
                                      'maxBytes', v_cfg.max_bytes);
        END IF;
        PERFORM queen._eph_evict(v_cfg.name, v_room);
    END IF;
    INSERT INTO queen.ephemeral_messages (queue, id, partition, payload, bytes, trace_context)
    SELECT v_cfg.name, v_ring.pushed + o.n, p ->> 'partition', o.e -> 'payload',
           octet_length((o.e -> 'payload')::text), o.e -> 'traceContext'
      FROM jsonb_array_elements(p -> 'messages') WITH ORDINALITY AS o(e, n);
    UPDATE queen.ephemeral_rings r
       SET length = r.length + v_n, bytes = r.bytes + v_bytes, pushed = r.pushed + v_n
     WHERE r.queue = v_cfg.name;
    RETURN jsonb_build_object('pushed', v_n);
END;
$$;

-- pop: {queue, group, partition|null, batch, autoAck, window: bool}
-- Hands out, in id order, first the group's messages due for redelivery (lease over, or
-- handed back), then new ones past the group's cursors. With explicit ack each message
-- goes into the group's flight for leaseSeconds; one that was delivered retryLimit + 1
-- times is dropped (counted) instead. `window` (a waiting pop with time left): new
-- messages go out only when windowBuffer.count of them are there or the oldest waited
-- windowBuffer.ms. Answer: {queue, messages: [{id, partition, payload, attempts, traceContext}]}.
CREATE OR REPLACE FUNCTION queen.ephemeral_pop_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_cfg     queen.ephemeral_queues := queen._eph_config(p ->> 'queue');
    v_ring    queen.ephemeral_rings := queen._eph_ring(p ->> 'queue');
    v_group   text := p ->> 'group';
    v_part    text := p ->> 'partition';
    v_batch   integer := (p ->> 'batch')::integer;
    v_auto    boolean := coalesce((p ->> 'autoAck')::boolean, false);
    v_lease   timestamptz := now() + make_interval(secs => v_cfg.lease_seconds);
    v_retried jsonb;
    v_new     jsonb;
    v_dead    bigint[];
    v_held    interval;
BEGIN
    PERFORM queen._eph_expire(v_cfg);
    -- The group is alive: retention drops only the cursors of groups that stopped popping
    -- (written at most once a minute).
    UPDATE queen.ephemeral_cursors c SET updated_at = now()
     WHERE c.queue = v_cfg.name AND c.grp = v_group
       AND c.updated_at < now() - interval '1 minute';

    -- Redeliveries: due in-flight messages of this group, oldest first.
    WITH due AS (
        SELECT f.id, f.attempts
          FROM queen.ephemeral_inflight f
         WHERE f.queue = v_cfg.name AND f.grp = v_group AND f.lease_expires_at <= now()
           AND (v_part IS NULL OR f.partition = v_part)
         ORDER BY f.id
         LIMIT v_batch
           FOR UPDATE
    ),
    dead AS (
        DELETE FROM queen.ephemeral_inflight f USING due
         WHERE f.queue = v_cfg.name AND f.grp = v_group AND f.id = due.id
           AND due.attempts > v_cfg.retry_limit
        RETURNING f.id
    ),
    again AS (
        UPDATE queen.ephemeral_inflight f
           SET attempts = f.attempts + 1, lease_expires_at = v_lease
          FROM due
         WHERE f.queue = v_cfg.name AND f.grp = v_group AND f.id = due.id
           AND due.attempts <= v_cfg.retry_limit
        RETURNING f.id, f.partition, f.attempts
    )
    SELECT (SELECT coalesce(array_agg(id), '{}') FROM dead),
           (SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', queen._eph_id(v_ring.incarnation, a.id), 'partition', a.partition,
                       'payload', m.payload, 'attempts', a.attempts,
                       'traceContext', m.trace_context) ORDER BY a.id), '[]')
              FROM again a
              JOIN queen.ephemeral_messages m ON m.queue = v_cfg.name AND m.id = a.id)
      INTO v_dead, v_retried;
    IF cardinality(v_dead) > 0 THEN
        UPDATE queen.ephemeral_rings r SET dropped = r.dropped + cardinality(v_dead)
         WHERE r.queue = v_cfg.name;
    END IF;

    -- New messages past the group's cursors: each partition read from its cursor on (an
    -- index seek, whatever history the ring keeps before it), the partitions found by
    -- skipping through the partition index, the oldest first across them.
    WITH RECURSIVE parts AS (
        (SELECT m.partition FROM queen.ephemeral_messages m
          WHERE m.queue = v_cfg.name AND (v_part IS NULL OR m.partition = v_part)
          ORDER BY m.partition LIMIT 1)
        UNION ALL
        SELECT (SELECT m.partition FROM queen.ephemeral_messages m
                 WHERE m.queue = v_cfg.name AND m.partition > parts.partition
                   AND v_part IS NULL
                 ORDER BY m.partition LIMIT 1)
          FROM parts WHERE parts.partition IS NOT NULL
    ),
    fresh AS MATERIALIZED (
        SELECT x.*
          FROM parts
          LEFT JOIN queen.ephemeral_cursors c
            ON c.queue = v_cfg.name AND c.grp = v_group AND c.partition = parts.partition
         CROSS JOIN LATERAL (
                SELECT m.id, m.partition, m.payload, m.created_at, m.trace_context
                  FROM queen.ephemeral_messages m
                 WHERE m.queue = v_cfg.name AND m.partition = parts.partition
                   AND m.id > coalesce(c.last_id, 0)
                 ORDER BY m.id
                 LIMIT greatest(v_batch - jsonb_array_length(v_retried), 0)) x
         WHERE parts.partition IS NOT NULL
         ORDER BY x.id
         LIMIT greatest(v_batch - jsonb_array_length(v_retried), 0)
    ),
    ready AS (
        SELECT f.* FROM fresh f
         WHERE NOT coalesce((p ->> 'window')::boolean, false) OR v_cfg.window_count <= 1
            OR (SELECT count(*) FROM fresh) >= least(v_cfg.window_count, v_batch)
            OR (SELECT min(created_at) FROM fresh)
               <= now() - make_interval(secs => v_cfg.window_ms / 1000.0)
    ),
    moved AS (
        INSERT INTO queen.ephemeral_cursors AS c (queue, grp, partition, last_id)
        SELECT v_cfg.name, v_group, r.partition, max(r.id) FROM ready r GROUP BY r.partition
        ON CONFLICT (queue, grp, partition) DO UPDATE
           SET last_id = greatest(c.last_id, EXCLUDED.last_id), updated_at = now()
    ),
    flight AS (
        INSERT INTO queen.ephemeral_inflight (queue, grp, id, partition, attempts, lease_expires_at)
        SELECT v_cfg.name, v_group, r.id, r.partition, 1, v_lease FROM ready r WHERE NOT v_auto
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'id', queen._eph_id(v_ring.incarnation, r.id), 'partition', r.partition,
               'payload', r.payload, 'attempts', 1,
               'traceContext', r.trace_context) ORDER BY r.id), '[]'),
           CASE WHEN count(r.id) = 0 AND EXISTS (SELECT 1 FROM fresh)
                THEN (SELECT min(f.created_at) FROM fresh f)
                     + make_interval(secs => v_cfg.window_ms / 1000.0) - now() END
      INTO v_new, v_held
      FROM ready r;

    -- version: what the waiting pop compares the watcher's reads with (gates.py);
    -- windowWaitMs: new messages are there but held for windowBuffer this much longer.
    RETURN jsonb_build_object('queue', v_cfg.name, 'messages', v_retried || v_new,
                              'version', v_ring.pushed + v_ring.released,
                              'windowWaitMs', ceil(extract(epoch FROM v_held) * 1000));
END;
$$;

-- ack: {queue, group, acks: [{id, status: completed|success|failed|retry, error?}]}
-- Answer {results: [{id, outcome}]} in input order; outcome: acked; redelivered (failed or
-- retry: handed back for redelivery now, attempts + 1 next time); dropped (failed or
-- retry after retryLimit redeliveries: gone, counted); stale (a message of an earlier
-- incarnation of the ring: a crash or a reset came between); unknown (not in this
-- group's flight: acked already, dropped, or popped with autoAck).
CREATE OR REPLACE FUNCTION queen.ephemeral_ack_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_ring    queen.ephemeral_rings;
    v_cfg     queen.ephemeral_queues;
    v_group   text := p ->> 'group';
    v_results jsonb;
BEGIN
    SELECT * INTO v_cfg FROM queen.ephemeral_queues WHERE name = p ->> 'queue';
    SELECT * INTO v_ring FROM queen.ephemeral_rings WHERE queue = p ->> 'queue' FOR UPDATE;

    WITH a AS MATERIALIZED (
        SELECT o.n, o.e ->> 'id' AS mid, coalesce(o.e ->> 'status', 'completed') AS status,
               CASE WHEN v_ring.queue IS NOT NULL
                     AND split_part(o.e ->> 'id', '.', 1)
                         = replace(v_ring.incarnation::text, '-', '')
                     AND split_part(o.e ->> 'id', '.', 2) ~ '^[0-9]{1,18}$'
                    THEN split_part(o.e ->> 'id', '.', 2)::bigint
               END AS num
          FROM jsonb_array_elements(p -> 'acks') WITH ORDINALITY AS o(e, n)
    ),
    -- One decision per message (the first ack of an id in the call wins).
    firsts AS (
        SELECT DISTINCT ON (a.num) a.n, a.num, a.status, f.attempts
          FROM a
          JOIN queen.ephemeral_inflight f
            ON f.queue = v_ring.queue AND f.grp = v_group AND f.id = a.num
         ORDER BY a.num, a.n
    ),
    done AS (
        DELETE FROM queen.ephemeral_inflight f USING firsts x
         WHERE f.queue = v_ring.queue AND f.grp = v_group AND f.id = x.num
           AND (x.status IN ('completed', 'success') OR x.attempts > v_cfg.retry_limit)
        RETURNING f.id
    ),
    back AS (
        UPDATE queen.ephemeral_inflight f SET lease_expires_at = now()
          FROM firsts x
         WHERE f.queue = v_ring.queue AND f.grp = v_group AND f.id = x.num
           AND x.status NOT IN ('completed', 'success') AND x.attempts <= v_cfg.retry_limit
        RETURNING f.id
    )
    SELECT jsonb_agg(jsonb_build_object(
               'id', a.mid,
               'outcome', CASE WHEN a.num IS NULL THEN
                                   CASE WHEN a.mid ~ '^[0-9a-f]{32}\.[0-9]+$' THEN 'stale'
                                        ELSE 'unknown' END
                               WHEN x.num IS NULL OR x.n <> a.n THEN 'unknown'
                               WHEN x.status IN ('completed', 'success') THEN 'acked'
                               WHEN x.attempts > v_cfg.retry_limit THEN 'dropped'
                               ELSE 'redelivered' END) ORDER BY a.n)
      INTO v_results
      FROM a LEFT JOIN firsts x ON x.num = a.num;

    IF v_ring.queue IS NOT NULL THEN
        UPDATE queen.ephemeral_rings r
           SET released = r.released + (SELECT count(*) FROM jsonb_array_elements(v_results) e
                                         WHERE e ->> 'outcome' = 'redelivered'),
               dropped = r.dropped + (SELECT count(*) FROM jsonb_array_elements(v_results) e
                                       WHERE e ->> 'outcome' = 'dropped')
         WHERE r.queue = v_ring.queue;
    END IF;
    RETURN jsonb_build_object('results', coalesce(v_results, '[]'::jsonb));
END;
$$;

-- reset: drop every message, void every lease, rewind every cursor; the configuration
-- stays and the ring starts a new incarnation (acks of earlier messages answer stale).
-- Answer {queue, dropped}.
CREATE OR REPLACE FUNCTION queen.ephemeral_reset_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_ring queen.ephemeral_rings;
BEGIN
    SELECT * INTO v_ring FROM queen.ephemeral_rings WHERE queue = p ->> 'queue' FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('queue', p ->> 'queue', 'dropped', 0);
    END IF;
    DELETE FROM queen.ephemeral_messages WHERE queue = v_ring.queue;
    DELETE FROM queen.ephemeral_inflight WHERE queue = v_ring.queue;
    DELETE FROM queen.ephemeral_cursors WHERE queue = v_ring.queue;
    UPDATE queen.ephemeral_rings
       SET incarnation = gen_random_uuid(), length = 0, bytes = 0
     WHERE queue = v_ring.queue;
    RETURN jsonb_build_object('queue', v_ring.queue, 'dropped', v_ring.length);
END;
$$;

-- delete: the contents, the cursors and the configuration. Answer {queue, deleted}.
CREATE OR REPLACE FUNCTION queen.ephemeral_delete_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_ring   boolean;
    v_config boolean;
BEGIN
    PERFORM 1 FROM queen.ephemeral_rings WHERE queue = p ->> 'queue' FOR UPDATE;
    DELETE FROM queen.ephemeral_messages WHERE queue = p ->> 'queue';
    DELETE FROM queen.ephemeral_inflight WHERE queue = p ->> 'queue';
    DELETE FROM queen.ephemeral_cursors WHERE queue = p ->> 'queue';
    DELETE FROM queen.ephemeral_rings WHERE queue = p ->> 'queue';
    v_ring := FOUND;
    DELETE FROM queen.ephemeral_queues WHERE name = p ->> 'queue';
    v_config := FOUND;
    RETURN jsonb_build_object('queue', p ->> 'queue', 'deleted', v_ring OR v_config);
END;
$$;

-- One queue's gauges, or NULL when the queue has neither configuration nor contents.
CREATE OR REPLACE FUNCTION queen.ephemeral_depth_v1(p_queue text)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
               'queue', coalesce(c.name, r.queue),
               'declared', coalesce(c.declared, false),
               'options', CASE WHEN c.name IS NOT NULL THEN queen._eph_options_json(c) END,
               'depth', coalesce(r.length, 0), 'bytes', coalesce(r.bytes, 0),
               'pushed', coalesce(r.pushed, 0), 'dropped', coalesce(r.dropped, 0),
               'inFlight', (SELECT count(*) FROM queen.ephemeral_inflight f
                             WHERE f.queue = coalesce(c.name, r.queue)),
               'groups', coalesce((
                   SELECT jsonb_agg(jsonb_build_object(
                              'group', g.grp, 'partitions', g.parts, 'inFlight', g.inflight)
                              ORDER BY g.grp)
                     FROM (SELECT cu.grp,
                                  jsonb_agg(jsonb_build_object(
                                      'partition', cu.partition, 'cursor', cu.last_id,
                                      'pending', (SELECT count(*) FROM queen.ephemeral_messages m
                                                   WHERE m.queue = cu.queue
                                                     AND m.partition = cu.partition
                                                     AND m.id > cu.last_id))
                                      ORDER BY cu.partition) AS parts,
                                  (SELECT count(*) FROM queen.ephemeral_inflight f
                                    WHERE f.queue = cu.queue AND f.grp = cu.grp) AS inflight
                             FROM queen.ephemeral_cursors cu
                            WHERE cu.queue = coalesce(c.name, r.queue)
                            GROUP BY cu.queue, cu.grp) g), '[]'::jsonb))
      FROM (SELECT p_queue AS name) k
      LEFT JOIN queen.ephemeral_queues c ON c.name = k.name
      LEFT JOIN queen.ephemeral_rings r ON r.queue = k.name
     WHERE c.name IS NOT NULL OR r.queue IS NOT NULL
$$;

-- Every queue, declared or only named by a push or pop: {queues: [{queue, declared,
-- depth, bytes, pushed, dropped, inFlight}]}, by name.
CREATE OR REPLACE FUNCTION queen.ephemeral_queues_v1()
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('queues', coalesce(jsonb_agg(jsonb_build_object(
               'queue', k.name, 'declared', coalesce(c.declared, false),
               'depth', coalesce(r.length, 0), 'bytes', coalesce(r.bytes, 0),
               'pushed', coalesce(r.pushed, 0), 'dropped', coalesce(r.dropped, 0),
               'inFlight', (SELECT count(*) FROM queen.ephemeral_inflight f
                             WHERE f.queue = k.name))
               ORDER BY k.name), '[]'::jsonb))
      FROM (SELECT name FROM queen.ephemeral_queues
            UNION SELECT queue FROM queen.ephemeral_rings) k
      LEFT JOIN queen.ephemeral_queues c ON c.name = k.name
      LEFT JOIN queen.ephemeral_rings r ON r.queue = k.name
$$;

-- What waiting pops watch (queen_threads/ephemeral/gates.py): per queue, [a number that
-- moves when messages arrive or come back, the epoch ms of the earliest lease that has
-- run out (NULL when none)].
CREATE OR REPLACE FUNCTION queen.ephemeral_watch_v1(p_queues text[])
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_object_agg(r.queue, jsonb_build_array(
               r.pushed + r.released,
               (SELECT floor(extract(epoch FROM min(f.lease_expires_at)) * 1000)::bigint
                  FROM queen.ephemeral_inflight f
                 WHERE f.queue = r.queue AND f.lease_expires_at <= now()))), '{}'::jsonb)
      FROM queen.ephemeral_rings r
     WHERE r.queue = ANY (p_queues)
$$;

-- Retention (the eviction job, queen_threads/background/retention.py): messages past their
-- queue's ttlSeconds, in-flight rows of messages that are gone, and the cursors of groups
-- that have not popped for p_idle_seconds (a subscriber that left must not hold the ring
-- for ever). Answer {expired, cursors}.
CREATE OR REPLACE FUNCTION queen.ephemeral_retention_v1(p_idle_seconds integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_cfg     queen.ephemeral_queues;
    v_expired integer := 0;
    v_cursors integer;
BEGIN
    FOR v_cfg IN
        SELECT c.* FROM queen.ephemeral_queues c
         WHERE c.ttl_seconds > 0
           AND EXISTS (SELECT 1 FROM queen.ephemeral_rings r WHERE r.queue = c.name)
    LOOP
        PERFORM 1 FROM queen.ephemeral_rings WHERE queue = v_cfg.name FOR UPDATE;
        v_expired := v_expired + queen._eph_expire(v_cfg);
    END LOOP;
    DELETE FROM queen.ephemeral_cursors c
     WHERE c.updated_at < now() - make_interval(secs => p_idle_seconds)
       AND NOT EXISTS (SELECT 1 FROM queen.ephemeral_inflight f
                        WHERE f.queue = c.queue AND f.grp = c.grp
                          AND f.lease_expires_at > now());
    GET DIAGNOSTICS v_cursors = ROW_COUNT;
    RETURN jsonb_build_object('expired', v_expired, 'cursors', v_cursors);
END;
$$;

-- The /metrics gauges: queues, messages and bytes held, dropped so far, in flight.
CREATE OR REPLACE FUNCTION queen.ephemeral_totals_v1()
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
               'queues', (SELECT count(*) FROM queen.ephemeral_queues),
               'depth', coalesce(sum(r.length), 0), 'bytes', coalesce(sum(r.bytes), 0),
               'dropped', coalesce(sum(r.dropped), 0),
               'inFlight', (SELECT count(*) FROM queen.ephemeral_inflight))
      FROM queen.ephemeral_rings r
$$;
