-- Streams: define, poll (find and lease ready windows), ack, renew, seek, release.
-- Tables and the model: schema/migrations/0008_streams.sql; the rules: docs/streams.md.
--
-- Time windows are aligned to the epoch in whole milliseconds: a tumbling window of D ms
-- is [k*D, (k+1)*D); a sliding window of D ms every S ms is [k*S, k*S + D). Empty windows
-- are skipped: a key's next window is the first one, at or after its offset, holding a
-- message. It is ready when the watermark (newest created_at) of its source queue (every
-- source queue for the '__GLOBAL__' key) is at or past end + grace. A count window is the
-- next N messages after the offset in (created_at, id) order, ready when all N exist.
--
-- Locks: the offset row of (stream, group, key) first, then its lease row, everywhere;
-- a check that is not going to lease anything takes no lock and writes nothing (an idle
-- stream poll costs reads only).

CREATE OR REPLACE FUNCTION queen._stream_ts(p_ms numeric) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_timestamp(p_ms::double precision / 1000)
$$;

CREATE OR REPLACE FUNCTION queen._stream_ms(p_ts timestamptz) RETURNS numeric
LANGUAGE sql IMMUTABLE AS $$
    SELECT extract(epoch FROM p_ts) * 1000
$$;

-- A lease id carries its stream: the first 8 bytes of the stream's id, then the last 8 of
-- the random id the server proposed (a version 4 UUID still). A stream's leases and
-- offsets are keyed by the stream first (on Citus they are distributed by it), and an ack,
-- renew or release names only the lease id: queen._stream_of_lease finds the stream in
-- queen.streams (a reference table on Citus, read where the statement runs) by that
-- prefix, for the price of the stream lookup an ack made anyway.
CREATE OR REPLACE FUNCTION queen._stream_lease_id(p_stream uuid, p_random uuid) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$
    SELECT (left(p_stream::text, 19) || right(p_random::text, 17))::uuid
$$;

-- The stream of a lease id (see above); all NULL when none. Two streams whose ids share
-- their first 8 random bytes (one chance in about 2^60 per pair) would make the leases of
-- one of them unknown.
CREATE OR REPLACE FUNCTION queen._stream_of_lease(p_lease uuid) RETURNS queen.streams
LANGUAGE plpgsql STABLE AS $$
DECLARE
    s queen.streams;
BEGIN
    SELECT * INTO s FROM queen.streams
     WHERE id BETWEEN (left(p_lease::text, 19) || '0000-000000000000')::uuid
                  AND (left(p_lease::text, 19) || 'ffff-ffffffffffff')::uuid;
    IF NOT FOUND THEN
        -- a lease handed out before migration 0023, whose id does not carry its stream:
        -- looked for among the leases themselves (every shard on Citus; no row lock)
        SELECT * INTO s FROM queen.streams
         WHERE id = (SELECT l.stream_id FROM queen.stream_leases l
                      WHERE l.lease_id = p_lease LIMIT 1);
    END IF;
    RETURN s;
END;
$$;

-- The definition as the API shows it (the define body's names).
-- The helpers that read tables are plpgsql, not SQL functions: Citus does not plan a SQL
-- function's parameterized statements on its tables (reference tables included).
CREATE OR REPLACE FUNCTION queen._stream_json(s queen.streams) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
    SELECT jsonb_build_object(
        'id', s.id,
        'name', s.name,
        'namespace', s.namespace,
        'partitioned', s.partitioned,
        'window_type', s.window_type,
        'window_duration_ms', s.window_duration_ms,
        'window_slide_ms', CASE WHEN s.window_type = 'sliding' THEN s.window_slide_ms END,
        'window_size_count', s.window_size_count,
        'window_grace_period_ms', s.window_grace_period_ms,
        'window_lease_timeout_ms', s.window_lease_timeout_ms,
        'source_queue_names', coalesce((
            SELECT jsonb_agg(q.name ORDER BY q.name)
              FROM queen.stream_sources ss JOIN queen.queues q ON q.id = ss.queue_id
             WHERE ss.stream_id = s.id), '[]'::jsonb),
        'created_at', queen._iso_us(s.created_at),
        'updated_at', queen._iso_us(s.updated_at)));
END;
$$;

-- The keys of a stream: one per source partition, or '__GLOBAL__'.
CREATE OR REPLACE FUNCTION queen._stream_keys(s queen.streams)
RETURNS TABLE (stream_key text, partition_id uuid)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT p.id::text, p.id
      FROM queen.stream_sources ss JOIN queen.partitions p ON p.queue_id = ss.queue_id
     WHERE s.partitioned AND ss.stream_id = s.id
    UNION ALL
    SELECT '__GLOBAL__', NULL::uuid WHERE NOT s.partitioned
    ORDER BY 1;
END;
$$;

-- The partitions whose messages make up a key.
CREATE OR REPLACE FUNCTION queen._stream_key_partitions(s queen.streams, p_pid uuid)
RETURNS uuid[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
    SELECT CASE WHEN p_pid IS NOT NULL THEN ARRAY[p_pid] ELSE
        (SELECT coalesce(array_agg(p.id), '{}')
           FROM queen.stream_sources ss JOIN queen.partitions p ON p.queue_id = ss.queue_id
          WHERE ss.stream_id = s.id) END);
END;
$$;

-- How far the sources of a key have got: the newest created_at of the partition's queue,
-- or for '__GLOBAL__' the oldest of the source queues' newest. A source without messages
-- (never pushed to, or emptied by retention) holds nothing back: messages are stamped with
-- the server's time as they are stored, so its next one lands after every closed window
-- anyway (commit skew aside, which the grace period covers). NULL: no source has any.
CREATE OR REPLACE FUNCTION queen._stream_watermark(s queen.streams, p_pid uuid)
RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_queues uuid[];
BEGIN
    -- the source queues (definitions), then their newest messages (on Citus distributed:
    -- read apart from the definitions)
    SELECT array_agg(ss.queue_id) INTO v_queues
      FROM queen.stream_sources ss
     WHERE ss.stream_id = s.id
       AND (p_pid IS NULL
            OR ss.queue_id = (SELECT p.queue_id FROM queen.partitions p WHERE p.id = p_pid));
    RETURN (SELECT min(w.mark)
              FROM (SELECT max(pl.last_message_created_at) AS mark
                      FROM queen.partition_lookup pl
                     WHERE pl.queue_id = ANY (v_queues)
                     GROUP BY pl.queue_id) w);
END;
$$;

-- A window with its messages, as a stream poll answers it. Built as json, not jsonb: a
-- window of a busy queue holds thousands of messages, and json costs about half as much
-- to build and nothing to print (5,000 messages: ~45 ms against ~95 ms).
DROP FUNCTION IF EXISTS queen._stream_window_json(queen.streams, queen.stream_leases);
CREATE FUNCTION queen._stream_window_json(s queen.streams, l queen.stream_leases)
RETURNS json
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_parts    uuid[] := queen._stream_key_partitions(
                             s, CASE WHEN l.stream_key = '__GLOBAL__' THEN NULL
                                     ELSE l.stream_key::uuid END);
    v_messages json;
BEGIN
    WITH names AS (
        SELECT p.id, p.name AS partition, q.name AS queue
          FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
         WHERE p.id = ANY(v_parts)
    ), picked AS (
        SELECT m.* FROM queen.messages m
         WHERE l.first_id IS NULL AND m.partition_id = ANY(v_parts)
           AND m.created_at >= l.window_start AND m.created_at < l.window_end
        UNION ALL
        SELECT m.* FROM queen.messages m
         WHERE l.first_id IS NOT NULL AND m.partition_id = ANY(v_parts)
           AND (m.created_at, m.id) >= (l.first_at, l.first_id)
           AND (m.created_at, m.id) <= (l.last_at, l.last_id)
    )
    SELECT json_agg(json_build_object(
               'id', m.id::text,
               'transactionId', m.transaction_id,
               'partitionId', m.partition_id,
               'partition', n.partition,
               'queue', n.queue,
               'data', m.payload,
               'traceId', m.trace_id,
               'producerSub', m.producer_sub,
               'createdAt', queen._iso_us(m.created_at),
               'isEncrypted', m.is_encrypted,
               'traceContext', m.trace_context) ORDER BY m.created_at, m.id)
      INTO v_messages
      FROM picked m JOIN names n ON n.id = m.partition_id;
    RETURN json_build_object(
        'id', l.window_id,
        'leaseId', l.lease_id,
        'stream', s.name,
        'consumerGroup', l.consumer_group,
        'key', l.stream_key,
        'start', queen._iso_us(l.window_start),
        'end', queen._iso_us(l.window_end),
        'leaseExpiresAt', queen._iso_us(l.lease_expires_at),
        'deliveryCount', l.delivery_count,
        'messages', coalesce(v_messages, '[]'::json));
END;
$$;

-- One key of one group: lease its next window if it is ready. Returns {leaseId,
-- redelivered, released?} when leased, else {wakeInMs} (no push before that many ms can make it ready; absent:
-- any push may), or NULL when only an ack or a lease expiry can change anything.
CREATE OR REPLACE FUNCTION queen._stream_try_key(
    s queen.streams, p_group text, p_key text, p_pid uuid, p_lease uuid)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_now    timestamptz := clock_timestamp();
    o        queen.stream_consumer_offsets;
    l        queen.stream_leases;
    v_parts  uuid[];
    v_dur    numeric := s.window_duration_ms;
    v_slide  numeric := CASE WHEN s.window_type = 'sliding' THEN s.window_slide_ms
                             ELSE s.window_duration_ms END;
    v_t      timestamptz;
    v_cs     numeric;
    v_ws     numeric;
    v_start  timestamptz;
    v_end    timestamptz;
    v_mark   timestamptz;
    v_ready  timestamptz;
    w        record;
    v_cur_at timestamptz;
    v_cur_id bigint;
    v_first_at timestamptz;
    v_first_id bigint;
    v_last_at  timestamptz;
    v_last_id  bigint;
    v_count    integer;
    v_released boolean;
    v_lease    uuid := queen._stream_lease_id(s.id, p_lease);
    v_expires  timestamptz := v_now + s.window_lease_timeout_ms * interval '1 millisecond';
    v_pid      uuid;
    v_one      timestamptz;
    v_ats      timestamptz[] := '{}';
    v_ids      bigint[] := '{}';
BEGIN
    SELECT * INTO o FROM queen.stream_consumer_offsets
     WHERE stream_id = s.id AND consumer_group = p_group AND stream_key = p_key;
    IF NOT FOUND AND p_key <> '__GLOBAL__' THEN
        -- A key the group has not read yet starts where a seek put the group ('__GLOBAL__'
        -- holds that for partitions created after the seek); from the start otherwise.
        SELECT * INTO o FROM queen.stream_consumer_offsets
         WHERE stream_id = s.id AND consumer_group = p_group AND stream_key = '__GLOBAL__';
    END IF;
    v_cur_at := o.cursor_at;
    v_cur_id := coalesce(o.cursor_id, 0);
    SELECT * INTO l FROM queen.stream_leases
     WHERE stream_id = s.id AND consumer_group = p_group AND stream_key = p_key;
    IF FOUND THEN
        IF l.lease_expires_at > v_now THEN
            RETURN jsonb_build_object('wakeInMs',
                ceil(queen._stream_ms(l.lease_expires_at) - queen._stream_ms(v_now)));
        END IF;
        -- Expired or given back (nack): the same window again, to whoever asks now.
        v_released := l.lease_expires_at = '-infinity';
        PERFORM 1 FROM queen.stream_consumer_offsets
          WHERE stream_id = s.id AND consumer_group = p_group AND stream_key = p_key
          FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN NULL;  -- another check or an ack holds the key right now
        END IF;
        UPDATE queen.stream_leases
           SET lease_id = v_lease, delivery_count = delivery_count + 1, leased_at = v_now,
               lease_expires_at = v_expires
         WHERE stream_id = s.id AND lease_id = l.lease_id AND lease_expires_at <= v_now
        RETURNING * INTO l;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        RETURN jsonb_build_object('leaseId', l.lease_id, 'redelivered', true,
                                  'released', v_released);
    END IF;

    -- Each partition's first messages after the offset, one partition at a time: a read
    -- that stops after the few it needs (an index range per partition; on Citus a query
    -- routed to the partition's shard, where a lateral join over the partitions is
    -- refused), then the first of them all.
    v_parts := queen._stream_key_partitions(s, p_pid);
    IF s.window_type = 'count' THEN
        FOREACH v_pid IN ARRAY v_parts LOOP
            SELECT v_ats || array_agg(y.created_at), v_ids || array_agg(y.id)
              INTO v_ats, v_ids
              FROM (SELECT m.created_at, m.id FROM queen.messages m
                     WHERE m.partition_id = v_pid
                       AND (m.created_at, m.id)
                         > (coalesce(v_cur_at, '-infinity'::timestamptz), v_cur_id)
                     ORDER BY m.created_at, m.id
                     LIMIT s.window_size_count) y;
        END LOOP;
        SELECT count(*)::integer AS n,
               min(x.created_at) FILTER (WHERE x.rn = 1) AS first_at,
               min(x.id) FILTER (WHERE x.rn = 1) AS first_id,
               max(x.created_at) FILTER (WHERE x.rn = s.window_size_count) AS last_at,
               max(x.id) FILTER (WHERE x.rn = s.window_size_count) AS last_id
          INTO w
          FROM (SELECT y.created_at, y.id, row_number() OVER (ORDER BY y.created_at, y.id) AS rn
                  FROM unnest(v_ats, v_ids) AS y(created_at, id)
                 ORDER BY y.created_at, y.id
                 LIMIT s.window_size_count) x;
        IF w.n < s.window_size_count THEN
            RETURN '{}'::jsonb;  -- the next push may complete it
        END IF;
        v_first_at := w.first_at;
        v_first_id := w.first_id;
        v_last_at := w.last_at;
        v_last_id := w.last_id;
        v_count := w.n;
        v_start := w.first_at;
        v_end := w.last_at;
    ELSE
        v_cs := ceil(queen._stream_ms(v_cur_at) / v_slide) * v_slide;  -- NULL: from the start
        v_one := coalesce(queen._stream_ts(v_cs), '-infinity');
        FOREACH v_pid IN ARRAY v_parts LOOP
            v_t := least(v_t, (SELECT m.created_at FROM queen.messages m
                                WHERE m.partition_id = v_pid AND m.created_at >= v_one
                                ORDER BY m.created_at LIMIT 1));
        END LOOP;
        IF v_t IS NULL THEN
            RETURN '{}'::jsonb;  -- no message yet at or after the offset
        END IF;
        v_ws := greatest(v_cs, (floor((queen._stream_ms(v_t) - v_dur) / v_slide) + 1) * v_slide);
        v_start := queen._stream_ts(v_ws);
        v_end := queen._stream_ts(v_ws + v_dur);
        v_ready := v_end + s.window_grace_period_ms * interval '1 millisecond';
        v_mark := queen._stream_watermark(s, p_pid);
        IF v_mark IS NULL OR v_mark < v_ready THEN
            RETURN jsonb_build_object('wakeInMs',
                greatest(0, ceil(queen._stream_ms(v_ready) - queen._stream_ms(v_now))));
        END IF;
        SELECT count(*)::integer INTO v_count FROM queen.messages m
         WHERE m.partition_id = ANY(v_parts) AND m.created_at >= v_start AND m.created_at < v_end;
    END IF;

    -- Ready: take the key (creating its offset row the first time), check that nobody
    -- moved it meanwhile, and lease the window.
    INSERT INTO queen.stream_consumer_offsets
           (stream_id, consumer_group, stream_key, partition_id, cursor_at, cursor_id)
    VALUES (s.id, p_group, p_key, p_pid, v_cur_at, v_cur_id)
    ON CONFLICT DO NOTHING;
    SELECT * INTO o FROM queen.stream_consumer_offsets
     WHERE stream_id = s.id AND consumer_group = p_group AND stream_key = p_key
       FOR UPDATE SKIP LOCKED;
    IF NOT FOUND OR o.cursor_at IS DISTINCT FROM v_cur_at OR o.cursor_id <> v_cur_id THEN
        RETURN NULL;  -- another check is on this key, or it moved: the next round sees it
    END IF;
    INSERT INTO queen.stream_leases AS sl
           (lease_id, stream_id, consumer_group, stream_key, window_start, window_end,
            first_at, first_id, last_at, last_id, message_count, lease_expires_at, leased_at)
    VALUES (v_lease, s.id, p_group, p_key, v_start, v_end,
            v_first_at, v_first_id, v_last_at, v_last_id, v_count, v_expires, v_now)
    ON CONFLICT (stream_id, consumer_group, stream_key) DO NOTHING
    RETURNING * INTO l;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object('leaseId', l.lease_id, 'redelivered', false);
END;
$$;

-- Stream polls: one window per request, in order. Input {requests: [{idx, stream,
-- consumerGroup, leaseId}], stopOnEmpty}: the requests of one group (stopOnEmpty: stop at
-- the first that gets nothing, the group has nothing more now) or the head requests of
-- several groups. Output: [{idx, window?, redelivered?, wakeInMs?, notFound?}] where
-- wakeInMs (no window) is the least of the keys' hints: a push sooner cannot help.
DROP FUNCTION IF EXISTS queen.stream_poll_v1(jsonb);
CREATE FUNCTION queen.stream_poll_v1(p jsonb) RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
    v_stop  boolean := coalesce((p ->> 'stopOnEmpty')::boolean, false);
    v_out   json[] := '{}';
    r       jsonb;
    s       queen.streams;
    l       queen.stream_leases;
    k       record;
    v_one   jsonb;
    v_found jsonb;
    v_wake  numeric;
    v_any   boolean;
BEGIN
    FOR r IN SELECT value FROM jsonb_array_elements(coalesce(p -> 'requests', '[]'::jsonb))
    LOOP
        SELECT * INTO s FROM queen.streams WHERE name = r ->> 'stream';
        IF NOT FOUND THEN
            v_out := v_out || json_build_object('idx', r -> 'idx', 'notFound', true);
            CONTINUE;
        END IF;
        v_found := NULL;
        v_wake := NULL;
        v_any := false;
        FOR k IN SELECT * FROM queen._stream_keys(s) LOOP
            v_one := queen._stream_try_key(s, r ->> 'consumerGroup', k.stream_key,
                                           k.partition_id, (r ->> 'leaseId')::uuid);
            IF v_one ? 'leaseId' THEN
                v_found := v_one;
                EXIT;
            ELSIF v_one ? 'wakeInMs' THEN
                v_wake := least(v_wake, (v_one ->> 'wakeInMs')::numeric);
            ELSIF v_one IS NOT NULL THEN
                v_any := true;  -- any push may help this key
            END IF;
        END LOOP;
        IF v_found IS NOT NULL THEN
            SELECT * INTO l FROM queen.stream_leases
             WHERE stream_id = s.id AND lease_id = (v_found ->> 'leaseId')::uuid;
            v_out := v_out || json_build_object(
                'idx', r -> 'idx', 'window', queen._stream_window_json(s, l),
                'redelivered', (v_found ->> 'redelivered')::boolean,
                'released', coalesce((v_found ->> 'released')::boolean, false));
            CONTINUE;
        END IF;
        v_out := v_out || CASE WHEN v_any OR v_wake IS NULL
                               THEN json_build_object('idx', r -> 'idx')
                               ELSE json_build_object('idx', r -> 'idx', 'wakeInMs', v_wake) END;
        IF v_stop THEN
            EXIT;
        END IF;
    END LOOP;
    RETURN array_to_json(v_out);
END;
$$;

-- Ack a window: {leaseId, success}. success moves the key's offset past the window and
-- ends the lease; false gives the window back at once (the next poll gets it again, same
-- window id, deliveryCount + 1). {error: 'invalid_lease'} when the lease is unknown,
-- already ended or expired.
CREATE OR REPLACE FUNCTION queen.stream_ack_v1(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_lease   uuid := (p ->> 'leaseId')::uuid;
    v_success boolean := coalesce((p ->> 'success')::boolean, true);
    s         queen.streams := queen._stream_of_lease(v_lease);
    l         queen.stream_leases;
    v_at      timestamptz;
    v_id      bigint;
    v_now     timestamptz := now();
BEGIN
    SELECT * INTO l FROM queen.stream_leases WHERE stream_id = s.id AND lease_id = v_lease;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('error', 'invalid_lease');
    END IF;
    PERFORM 1 FROM queen.stream_consumer_offsets
      WHERE stream_id = l.stream_id AND consumer_group = l.consumer_group
        AND stream_key = l.stream_key
      FOR UPDATE;
    SELECT * INTO l FROM queen.stream_leases
     WHERE stream_id = s.id AND lease_id = v_lease FOR UPDATE;
    IF NOT FOUND OR l.lease_expires_at <= clock_timestamp() THEN
        RETURN jsonb_build_object('error', 'invalid_lease', 'expired', FOUND);
    END IF;
    IF v_success THEN
        -- the new offset computed first (Citus: no CASE in the SET of a distributed table)
        v_at := CASE s.window_type
                    WHEN 'count' THEN l.last_at
                    WHEN 'sliding' THEN l.window_start
                                        + s.window_slide_ms * interval '1 millisecond'
                    ELSE l.window_end END;
        v_id := CASE WHEN s.window_type = 'count' THEN l.last_id ELSE 0 END;
        UPDATE queen.stream_consumer_offsets
           SET cursor_at = v_at,
               cursor_id = v_id,
               last_acked_window_start = l.window_start,
               last_acked_window_end = l.window_end,
               last_acked_at = v_now,
               windows_acked = windows_acked + 1,
               messages_acked = messages_acked + l.message_count
         WHERE stream_id = l.stream_id AND consumer_group = l.consumer_group
           AND stream_key = l.stream_key;
        DELETE FROM queen.stream_leases WHERE stream_id = s.id AND lease_id = v_lease;
    ELSE
        -- Given back: the lease ends ('-infinity' tells it from an expiry), so the next
        -- poll gets the same window (same id, deliveryCount + 1) and this leaseId is
        -- refused from now on.
        UPDATE queen.stream_leases SET lease_expires_at = '-infinity'
         WHERE stream_id = s.id AND lease_id = v_lease;
    END IF;
    PERFORM queen._wake(jsonb_build_object('kind', 'stream', 'stream', s.name,
                                           'consumerGroup', l.consumer_group));
    RETURN jsonb_build_object(
        'acknowledged', true, 'success', v_success, 'stream', s.name,
        'consumerGroup', l.consumer_group, 'key', l.stream_key,
        'windowId', l.window_id, 'messages', l.message_count,
        'start', queen._iso_us(l.window_start), 'end', queen._iso_us(l.window_end));
END;
$$;

-- Extend a live lease by extendMs from now: {leaseId, extendMs}; NULL when unknown/expired.
-- (PL/pgSQL, the times computed first: on Citus a SQL function's parameters cannot reach a
-- distributed table, nor a volatile function the SET of one.)
CREATE OR REPLACE FUNCTION queen.stream_renew_v1(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_lease   uuid := (p ->> 'leaseId')::uuid;
    v_stream  uuid := (queen._stream_of_lease(v_lease)).id;
    v_now     timestamptz := clock_timestamp();
    v_expires timestamptz := v_now + (p ->> 'extendMs')::bigint * interval '1 millisecond';
    v_window  uuid;
BEGIN
    UPDATE queen.stream_leases SET lease_expires_at = v_expires
     WHERE stream_id = v_stream AND lease_id = v_lease AND lease_expires_at > v_now
    RETURNING window_id INTO v_window;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object('leaseId', v_lease, 'windowId', v_window,
                              'leaseExpiresAt', queen._iso_us(v_expires));
END;
$$;

-- Give back the windows whose client left before it got them: as a nack, the next poll
-- of the group gets the same window (same id, deliveryCount + 1).
CREATE OR REPLACE FUNCTION queen.stream_release_v1(p jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_count integer := 0;
    v_now   timestamptz := clock_timestamp();
    v_lease uuid;
    s       queen.streams;
    v_group text;
BEGIN
    FOR v_lease IN SELECT (jsonb_array_elements_text(p -> 'leaseIds'))::uuid LOOP
        s := queen._stream_of_lease(v_lease);
        UPDATE queen.stream_leases l SET lease_expires_at = '-infinity'
         WHERE l.stream_id = s.id AND l.lease_id = v_lease AND l.lease_expires_at > v_now
        RETURNING l.consumer_group INTO v_group;
        IF FOUND THEN
            v_count := v_count + 1;
            PERFORM queen._wake(jsonb_build_object(
                        'kind', 'stream', 'stream', s.name, 'consumerGroup', v_group));
        END IF;
    END LOOP;
    RETURN v_count;
END;
$$;

-- Move every key of a group to a time: {stream, consumerGroup, timestamp}. Time windows:
-- the next window starts at or after it; count windows: the next message is the first at or
-- after it. Every source partition's key and '__GLOBAL__' get an offset (whichever the
-- stream uses now), and the group's leases end. NULL when the stream does not exist.
CREATE OR REPLACE FUNCTION queen.stream_seek_v1(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    s       queen.streams;
    v_group text := p ->> 'consumerGroup';
    v_ts    timestamptz := (p ->> 'timestamp')::timestamptz;
    v_keys  integer;
BEGIN
    SELECT * INTO s FROM queen.streams WHERE name = p ->> 'stream';
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM 1 FROM queen.stream_consumer_offsets
      WHERE stream_id = s.id AND consumer_group = v_group
      ORDER BY stream_key FOR UPDATE;
    DELETE FROM queen.stream_leases WHERE stream_id = s.id AND consumer_group = v_group;
    WITH keys AS (
        SELECT p2.id::text AS stream_key, p2.id AS partition_id
          FROM queen.stream_sources ss JOIN queen.partitions p2 ON p2.queue_id = ss.queue_id
         WHERE ss.stream_id = s.id
        UNION ALL
        SELECT '__GLOBAL__', NULL
    ), moved AS (
        INSERT INTO queen.stream_consumer_offsets AS o
               (stream_id, consumer_group, stream_key, partition_id, cursor_at, cursor_id)
        SELECT s.id, v_group, keys.stream_key, keys.partition_id, v_ts, 0 FROM keys
         ORDER BY keys.stream_key
        ON CONFLICT (stream_id, consumer_group, stream_key) DO UPDATE
           SET cursor_at = EXCLUDED.cursor_at, cursor_id = 0
        RETURNING 1
    )
    SELECT count(*) INTO v_keys FROM moved;
    PERFORM queen._wake(jsonb_build_object('kind', 'stream', 'stream', s.name,
                                           'consumerGroup', v_group));
    RETURN jsonb_build_object('stream', s.name, 'consumerGroup', v_group,
                              'timestamp', queen._iso_us(v_ts), 'keys', v_keys);
END;
$$;

-- Define a stream (validated input: name, namespace, partitioned, window_type,
-- window_duration_ms, window_slide_ms, window_size_count, window_grace_period_ms,
-- window_lease_timeout_ms, source_queue_names). The same definition again changes nothing;
-- another one replaces it while no group has consumed from the stream, else
-- {error: 'conflict'}. {error: 'sources_not_found', missing} when a source queue is unknown.
CREATE OR REPLACE FUNCTION queen.stream_define_v1(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_names   text[] := ARRAY(SELECT DISTINCT jsonb_array_elements_text(p -> 'source_queue_names'));
    v_missing text[];
    v_ids     uuid[];
    v_old_ids uuid[];
    s         queen.streams;
    n         queen.streams;
BEGIN
    SELECT array_agg(x ORDER BY x) INTO v_missing
      FROM unnest(v_names) x WHERE NOT EXISTS (SELECT 1 FROM queen.queues q WHERE q.name = x);
    IF v_missing IS NOT NULL THEN
        RETURN jsonb_build_object('error', 'sources_not_found', 'missing', to_jsonb(v_missing));
    END IF;
    -- Locked: a source deleted meanwhile would leave the stream without it.
    SELECT array_agg(x.id ORDER BY x.id) INTO v_ids
      FROM (SELECT q.id FROM queen.queues q WHERE q.name = ANY(v_names) FOR KEY SHARE) x;
    INSERT INTO queen.streams
           (name, namespace, partitioned, window_type, window_duration_ms, window_slide_ms,
            window_size_count, window_grace_period_ms, window_lease_timeout_ms)
    VALUES (p ->> 'name', coalesce(p ->> 'namespace', ''), (p ->> 'partitioned')::boolean,
            p ->> 'window_type', (p ->> 'window_duration_ms')::bigint,
            (p ->> 'window_slide_ms')::bigint, (p ->> 'window_size_count')::integer,
            (p ->> 'window_grace_period_ms')::bigint, (p ->> 'window_lease_timeout_ms')::bigint)
    ON CONFLICT (name) DO NOTHING
    RETURNING * INTO s;
    IF FOUND THEN
        INSERT INTO queen.stream_sources (stream_id, queue_id) SELECT s.id, unnest(v_ids);
        RETURN jsonb_build_object('created', true, 'changed', true,
                                  'stream', queen._stream_json(s));
    END IF;
    SELECT * INTO s FROM queen.streams WHERE name = p ->> 'name' FOR UPDATE;
    SELECT array_agg(ss.queue_id ORDER BY ss.queue_id) INTO v_old_ids
      FROM queen.stream_sources ss WHERE ss.stream_id = s.id;
    IF s.namespace = coalesce(p ->> 'namespace', '')
       AND s.partitioned = (p ->> 'partitioned')::boolean
       AND s.window_type = p ->> 'window_type'
       AND s.window_duration_ms IS NOT DISTINCT FROM (p ->> 'window_duration_ms')::bigint
       AND s.window_slide_ms IS NOT DISTINCT FROM (p ->> 'window_slide_ms')::bigint
       AND s.window_size_count IS NOT DISTINCT FROM (p ->> 'window_size_count')::integer
       AND s.window_grace_period_ms = (p ->> 'window_grace_period_ms')::bigint
       AND s.window_lease_timeout_ms = (p ->> 'window_lease_timeout_ms')::bigint
       AND v_old_ids IS NOT DISTINCT FROM v_ids THEN
        RETURN jsonb_build_object('created', false, 'changed', false,
                                  'stream', queen._stream_json(s));
    END IF;
    IF EXISTS (SELECT 1 FROM queen.stream_consumer_offsets o WHERE o.stream_id = s.id) THEN
        RETURN jsonb_build_object('error', 'conflict', 'stream', queen._stream_json(s));
    END IF;
    UPDATE queen.streams
       SET namespace = coalesce(p ->> 'namespace', ''),
           partitioned = (p ->> 'partitioned')::boolean,
           window_type = p ->> 'window_type',
           window_duration_ms = (p ->> 'window_duration_ms')::bigint,
           window_slide_ms = (p ->> 'window_slide_ms')::bigint,
           window_size_count = (p ->> 'window_size_count')::integer,
           window_grace_period_ms = (p ->> 'window_grace_period_ms')::bigint,
           window_lease_timeout_ms = (p ->> 'window_lease_timeout_ms')::bigint,
           updated_at = now()
     WHERE id = s.id
    RETURNING * INTO n;
    -- New sources first: deleting the last old one must not find the stream sourceless.
    INSERT INTO queen.stream_sources (stream_id, queue_id)
    SELECT s.id, unnest(v_ids) ON CONFLICT DO NOTHING;
    DELETE FROM queen.stream_sources WHERE stream_id = s.id AND queue_id <> ALL(v_ids);
    RETURN jsonb_build_object('created', false, 'changed', true, 'stream', queen._stream_json(n));
END;
$$;

-- The admin reads (schema/queries/streams.sql). The stream first, then its offsets and
-- leases by stream_id: on Citus a query routed to the stream's shard (a correlated
-- subquery on them under a query of queen.streams, a reference table, is not planned
-- there, nor a whole row of a reference table handed to a function in a query).

-- Every stream (of p_namespace when set) with its consumer groups and live leases.
CREATE OR REPLACE FUNCTION queen.stream_list_v1(p_namespace text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    s        queen.streams;
    v_ids    uuid[];
    v_groups jsonb;
    v_leases jsonb;
    v_out    jsonb := '[]';
BEGIN
    v_ids := ARRAY(SELECT id FROM queen.streams
                    WHERE p_namespace IS NULL OR namespace = p_namespace);
    SELECT jsonb_object_agg(g.stream_id, g.n) INTO v_groups
      FROM (SELECT o.stream_id, count(DISTINCT o.consumer_group) AS n
              FROM queen.stream_consumer_offsets o
             WHERE o.stream_id = ANY (v_ids) GROUP BY o.stream_id) g;
    SELECT jsonb_object_agg(a.stream_id, a.n) INTO v_leases
      FROM (SELECT l.stream_id, count(*) AS n FROM queen.stream_leases l
             WHERE l.stream_id = ANY (v_ids) AND l.lease_expires_at > now()
             GROUP BY l.stream_id) a;
    FOR s IN SELECT * FROM queen.streams WHERE id = ANY (v_ids) ORDER BY name LOOP
        v_out := v_out || jsonb_build_array(queen._stream_json(s) || jsonb_build_object(
                     'consumerGroups', coalesce(v_groups -> s.id::text, '0'),
                     'activeLeases', coalesce(v_leases -> s.id::text, '0')));
    END LOOP;
    RETURN v_out;
END;
$$;

-- One stream's definition with per-group totals; NULL when it does not exist.
CREATE OR REPLACE FUNCTION queen.stream_detail_v1(p_name text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    s        queen.streams;
    v_groups jsonb;
BEGIN
    SELECT * INTO s FROM queen.streams WHERE name = p_name;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT jsonb_agg(jsonb_build_object(
               'consumerGroup', g.consumer_group,
               'keys', g.keys,
               'windowsAcked', g.windows_acked,
               'messagesAcked', g.messages_acked,
               'lastAckedAt', queen._iso_us(g.last_acked_at),
               'activeLeases', g.active) ORDER BY g.consumer_group)
      INTO v_groups
      FROM (SELECT o.consumer_group, count(*) AS keys,
                   sum(o.windows_acked) AS windows_acked,
                   sum(o.messages_acked) AS messages_acked,
                   max(o.last_acked_at) AS last_acked_at,
                   count(l.lease_id) FILTER (WHERE l.lease_expires_at > now()) AS active
              FROM queen.stream_consumer_offsets o
              LEFT JOIN queen.stream_leases l
                ON l.stream_id = s.id AND l.consumer_group = o.consumer_group
               AND l.stream_key = o.stream_key
             WHERE o.stream_id = s.id
             GROUP BY o.consumer_group) g;
    RETURN queen._stream_json(s)
           || jsonb_build_object('consumerGroups', coalesce(v_groups, '[]'::jsonb));
END;
$$;

-- Every key of every group of one stream: offset, counters, the window out if any; NULL
-- when the stream does not exist.
CREATE OR REPLACE FUNCTION queen.stream_consumers_v1(p_name text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_id  uuid;
    v_out jsonb;
BEGIN
    SELECT s.id INTO v_id FROM queen.streams s WHERE s.name = p_name;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
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
      INTO v_out
      FROM queen.stream_consumer_offsets o
      LEFT JOIN queen.partitions p ON p.id = o.partition_id
      LEFT JOIN queen.queues q ON q.id = p.queue_id
      LEFT JOIN queen.stream_leases l
        ON l.stream_id = v_id AND l.consumer_group = o.consumer_group
       AND l.stream_key = o.stream_key
     WHERE o.stream_id = v_id;
    RETURN coalesce(v_out, '[]'::jsonb);
END;
$$;
