-- THE FIRE: due timers become messages (queen_threads/timers/firer.py calls it; every
-- server process runs a firer, and any number may run this at once).
--
-- One transaction claims up to `limit` due timers with FOR UPDATE SKIP LOCKED (a timer
-- claimed by another firer is skipped, never fired twice), stores each one's message in its
-- queue with the message id reserved at schedule time, logs the fire (queen.timer_fires)
-- and deletes the timer. A firer that dies before its commit leaves the timers to the next.
-- Pushes take their partitions' row locks in id order (capped queues first); so does this,
-- after the claim, waiting at most 100 ms for them: a bundle of POST /transaction that
-- pushes into a partition and then reschedules a timer being fired holds them in the other
-- order, and one of the two must give way (this one: it answers retryInMs and claims again).
-- A message stored by a fire sorts after the partition's newest message (created_at one
-- microsecond later when the clock has not moved on), so that its reserved, older id can
-- never fall behind a consumer's cursor. A message whose (partition, txn) was stored
-- already is not stored again (status duplicate). A timer of a capped queue that is full
-- stays, with attempts + 1, last_error, and its next attempt 1 s, 2 s, 4 s ... 60 s later.
--
-- Wake-ups are the server's, as for its pushes: this holds the wake-interest lock shared
-- until its commit and returns the epoch; the server wakes the long polls of the pairs it
-- returns, here and (after the commit) in the other processes (wake/notifier.py).
--
-- Its steps are the queen._timers_* functions below, each called only from here (inside
-- its transaction, its lock timeout and its exception block).
--
-- Input {limit}. Output {fired, duplicates, deferred, pairs: [[queue, partition]...] of the
-- stored messages, stored: {queue: messages stored}, lateMs: [fired_at - due per fire; due: deliver_at, or when it was
-- scheduled if that is later], more (a full batch: call
-- again now), nextInMs (the next pending timer not yet due, from now; null: none),
-- retryInMs (due timers another transaction holds, or the partition locks could not be
-- had: call again then), epoch, error (the batch failed; see the handler below)}.
CREATE OR REPLACE FUNCTION queen.timers_fire_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_limit   integer := greatest(1, coalesce((p ->> 'limit')::integer, 500));
    v_epoch   bigint;
    v_now     timestamptz;
    v_ts      timestamptz;
    v_rows    queen.timers[];
    v_full    uuid[] := '{}';
    v_stored  bigint[] := '{}';
    v_pids    uuid[];
    v_error   text;
    v_next    timestamptz;
    v_out     jsonb;
BEGIN
    v_epoch := queen._wake_epoch();
    v_now := clock_timestamp();
    BEGIN
        PERFORM set_config('lock_timeout', '100ms', true);
        -- On Citus: one connection per node for the whole transaction (due timers are read
        -- from every node, then reference tables are written); of no effect elsewhere.
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true),
                set_config('citus.max_adaptive_executor_pool_size', '1', true);
        v_rows := queen._timers_claim(v_limit, v_now);
        IF cardinality(v_rows) > 0 THEN
            v_pids := queen._timers_lock_partitions(v_rows);
            v_full := queen._timers_full_queues(v_rows);
            v_ts := clock_timestamp();
            v_stored := queen._timers_store(v_rows, v_pids, v_full, v_ts);
            PERFORM queen._timers_defer_full(v_rows, v_full, v_ts);
            PERFORM queen._timers_log_fired(v_rows, v_full, v_stored, v_ts);
        END IF;
        v_out := queen._timers_fire_counts(v_rows, v_full, v_stored, v_ts);
    EXCEPTION
        WHEN lock_not_available OR deadlock_detected THEN
            RETURN queen._timers_fire_nothing(v_epoch, NULL);
        WHEN others THEN
            -- Nothing of the batch happened; its oldest due timer waits (see below).
            GET STACKED DIAGNOSTICS v_error = MESSAGE_TEXT;
            PERFORM queen._timers_fire_failed(v_now, v_error);
            RETURN queen._timers_fire_nothing(v_epoch, v_error);
    END;

    SELECT min(t.fire_at) INTO v_next FROM queen.timers t WHERE t.fire_at > v_now;
    RETURN v_out || jsonb_build_object(
        'more', cardinality(v_rows) >= v_limit,
        'nextInMs', CASE WHEN v_next IS NOT NULL
                         THEN greatest(0, round((extract(epoch FROM v_next - clock_timestamp())
                                                 * 1000)::numeric, 3)) END,
        -- Due timers left that this call did not claim: another firer (or a reschedule
        -- or cancel) holds them; look again soon, in case that transaction rolls back.
        'retryInMs', CASE WHEN cardinality(v_rows) < v_limit
                               AND EXISTS (SELECT 1 FROM queen.timers t WHERE t.fire_at <= v_now)
                          THEN 20 END,
        'epoch', v_epoch);
END;
$$;

-- The claim: up to p_limit timers due at p_now, locked. The queues of the oldest due timers
-- first (a plain read), then each queue's due timers locked by a statement of that queue
-- alone (on Citus timers are distributed by queue, and only a statement on one shard may
-- lock rows).
CREATE OR REPLACE FUNCTION queen._timers_claim(p_limit integer, p_now timestamptz)
RETURNS queen.timers[]
LANGUAGE plpgsql AS $$
DECLARE
    v_rows  queen.timers[] := '{}';
    v_qid   uuid;
    v_claim jsonb;
BEGIN
    FOR v_qid IN
        SELECT c.queue_id
          FROM (SELECT t.queue_id, t.fire_at FROM queen.timers t
                 WHERE t.fire_at <= p_now
                 ORDER BY t.fire_at
                 LIMIT p_limit) c
         GROUP BY c.queue_id
         ORDER BY min(c.fire_at), c.queue_id
    LOOP
        -- (as JSON: a whole row a Citus worker returns has its shard's row type)
        SELECT coalesce(jsonb_agg(s.t), '[]'::jsonb) INTO v_claim
          FROM (SELECT to_jsonb(t) AS t FROM queen.timers t
                 WHERE t.queue_id = v_qid AND t.fire_at <= p_now
                 ORDER BY t.fire_at
                 LIMIT p_limit - cardinality(v_rows)
                   FOR UPDATE SKIP LOCKED) s;
        v_rows := v_rows || ARRAY(SELECT jsonb_populate_record(NULL::queen.timers, e)
                                    FROM jsonb_array_elements(v_claim) e);
        EXIT WHEN cardinality(v_rows) >= p_limit;
    END LOOP;
    RETURN v_rows;
END;
$$;

-- The claimed timers' partitions, created when missing, and the locks a push takes, in
-- its order: capped queues, then partitions (their counters row, migration 0020, with
-- their last write), each in id order. Returns the partitions' ids.
CREATE OR REPLACE FUNCTION queen._timers_lock_partitions(p_rows queen.timers[])
RETURNS uuid[]
LANGUAGE plpgsql AS $$
DECLARE
    v_pids uuid[];
    v_ts   timestamptz;
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_rows) c
                WHERE NOT EXISTS (SELECT 1 FROM queen.partitions p
                                   WHERE p.queue_id = c.queue_id AND p.name = c.partition_name)) THEN
        PERFORM queen._definitions_lock();
        INSERT INTO queen.partitions (queue_id, name)
        SELECT DISTINCT c.queue_id, c.partition_name FROM unnest(p_rows) c
         WHERE NOT EXISTS (SELECT 1 FROM queen.partitions p
                            WHERE p.queue_id = c.queue_id AND p.name = c.partition_name)
         ORDER BY 1, 2
        ON CONFLICT (queue_id, name) DO NOTHING;
    END IF;
    PERFORM 1 FROM queen.queues q
     WHERE q.max_queue_size > 0
       AND q.id IN (SELECT c.queue_id FROM unnest(p_rows) c)
     ORDER BY q.id
       FOR NO KEY UPDATE;
    SELECT coalesce(array_agg(p.id ORDER BY p.id), '{}') INTO v_pids
      FROM queen.partitions p
     WHERE (p.queue_id, p.name) IN (SELECT c.queue_id, c.partition_name FROM unnest(p_rows) c);
    v_ts := clock_timestamp();
    INSERT INTO queen.partition_counters AS pc (partition_id, next_offset, last_activity)
    SELECT x.pid, 0, v_ts FROM unnest(v_pids) AS x(pid) ORDER BY x.pid
    ON CONFLICT (partition_id) DO UPDATE SET last_activity = EXCLUDED.last_activity;
    RETURN v_pids;
END;
$$;

-- Capped queues: every claimed timer of a queue that the batch would overfill waits.
-- Returns those queues' ids.
CREATE OR REPLACE FUNCTION queen._timers_full_queues(p_rows queen.timers[])
RETURNS uuid[]
LANGUAGE plpgsql AS $$
DECLARE
    v_full uuid[];
BEGIN
    SELECT coalesce(array_agg(x.queue_id), '{}') INTO v_full
      FROM (SELECT c.queue_id, q.max_queue_size
              FROM unnest(p_rows) c JOIN queen.queues q ON q.id = c.queue_id
             WHERE q.max_queue_size > 0
             GROUP BY c.queue_id, q.max_queue_size
            HAVING queen._queue_depth(c.queue_id) + count(*) > q.max_queue_size) x;
    RETURN v_full;
END;
$$;

-- The messages of the claimed timers outside the full queues, each created after its
-- partition's newest message; one whose (partition, txn) is stored already is not stored
-- again. Returns the ids stored.
CREATE OR REPLACE FUNCTION queen._timers_store(
    p_rows queen.timers[], p_pids uuid[], p_full uuid[], p_ts timestamptz)
RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    v_newest jsonb;
    v_stored bigint[];
BEGIN
    -- each partition's newest message (read apart: on Citus a distributed table)
    SELECT coalesce(jsonb_object_agg(pl.partition_id, pl.last_message_created_at), '{}'::jsonb)
      INTO v_newest
      FROM queen.partition_lookup pl
     WHERE pl.partition_id = ANY (p_pids);
    WITH ins AS (
        INSERT INTO queen.messages
               (id, transaction_id, partition_id, payload, trace_id, producer_sub,
                is_encrypted, created_at)
        OVERRIDING SYSTEM VALUE
        SELECT c.message_id, c.txn, p.id, c.payload, NULL, c.producer_sub, c.is_encrypted,
               greatest(p_ts, (v_newest ->> p.id::text)::timestamptz + interval '1 microsecond')
          FROM unnest(p_rows) c
          JOIN queen.partitions p ON p.queue_id = c.queue_id AND p.name = c.partition_name
         WHERE c.queue_id <> ALL (p_full)
         ORDER BY p.id, c.message_id
        ON CONFLICT ON CONSTRAINT messages_partition_transaction_unique DO NOTHING
        RETURNING id
    )
    SELECT coalesce(array_agg(ins.id), '{}') INTO v_stored FROM ins;
    RETURN v_stored;
END;
$$;

-- The claimed timers of full queues wait: attempts + 1, the reason in last_error, the
-- next attempt 1 s, 2 s, 4 s ... 60 s after p_ts.
-- (per queue, with values: on Citus an UPDATE of a distributed table may apply no stable
-- function, timestamptz + interval included, to its columns)
CREATE OR REPLACE FUNCTION queen._timers_defer_full(
    p_rows queen.timers[], p_full uuid[], p_ts timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_qid   uuid;
    v_error text;
BEGIN
    FOREACH v_qid IN ARRAY p_full LOOP
        SELECT format('queue %s is full (maxSize %s)', q.name, q.max_queue_size) INTO v_error
          FROM queen.queues q WHERE q.id = v_qid;
        UPDATE queen.timers t
           SET attempts = t.attempts + 1,
               last_error = v_error,
               fire_at = to_timestamp(extract(epoch FROM p_ts) + least(60, power(2, t.attempts))),
               updated_at = p_ts
         WHERE t.queue_id = v_qid
           AND t.timer_key IN (SELECT c.timer_key FROM unnest(p_rows) c WHERE c.queue_id = v_qid);
    END LOOP;
END;
$$;

-- The claimed timers outside the full queues are done: deleted, and their fires logged
-- (queued: its message stored now; duplicate: stored before).
CREATE OR REPLACE FUNCTION queen._timers_log_fired(
    p_rows queen.timers[], p_full uuid[], p_stored bigint[], p_ts timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queen.timers t
     WHERE t.queue_id <> ALL (p_full)
       AND (t.queue_id, t.timer_key) IN (SELECT c.queue_id, c.timer_key FROM unnest(p_rows) c);
    INSERT INTO queen.timer_fires (queue_name, timer_key, partition_name, txn, message_id,
                                   status, attempts, deliver_at, scheduled_at, fired_at)
    SELECT q.name, c.timer_key, c.partition_name, c.txn, c.message_id,
           CASE WHEN c.message_id = ANY (p_stored) THEN 'queued' ELSE 'duplicate' END,
           c.attempts + 1, c.deliver_at, c.updated_at, p_ts
      FROM unnest(p_rows) c JOIN queen.queues q ON q.id = c.queue_id
     WHERE c.queue_id <> ALL (p_full);
END;
$$;

-- What a fire did: {fired, duplicates, deferred, pairs, stored, lateMs} (timers_fire_v1's
-- output, without what follows the batch).
CREATE OR REPLACE FUNCTION queen._timers_fire_counts(
    p_rows queen.timers[], p_full uuid[], p_stored bigint[], p_ts timestamptz)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_out jsonb;
BEGIN
    SELECT jsonb_build_object(
               'fired', count(*) FILTER (WHERE c.message_id = ANY (p_stored)),
               'duplicates', count(*) FILTER (WHERE c.message_id <> ALL (p_stored)
                                                AND c.queue_id <> ALL (p_full)),
               'deferred', count(*) FILTER (WHERE c.queue_id = ANY (p_full)),
               'pairs', coalesce((SELECT jsonb_agg(DISTINCT jsonb_build_array(q.name,
                                                                              x.partition_name))
                                    FROM unnest(p_rows) x JOIN queen.queues q
                                      ON q.id = x.queue_id
                                   WHERE x.message_id = ANY (p_stored)), '[]'::jsonb),
               'stored', coalesce((SELECT jsonb_object_agg(s.name, s.n)
                                     FROM (SELECT q.name, count(*) AS n
                                             FROM unnest(p_rows) x JOIN queen.queues q
                                               ON q.id = x.queue_id
                                            WHERE x.message_id = ANY (p_stored)
                                            GROUP BY q.name) s), '{}'::jsonb),
               'lateMs', coalesce(jsonb_agg(round((extract(epoch FROM p_ts - greatest(
                                                       c.deliver_at, c.updated_at))
                                                   * 1000)::numeric, 3))
                                    FILTER (WHERE c.message_id = ANY (p_stored)),
                                  '[]'::jsonb))
      INTO v_out
      FROM unnest(p_rows) c;
    RETURN v_out;
END;
$$;

-- A fire that did nothing: its locks could not be had (p_error NULL), or its batch failed
-- (p_error: why); the firer calls again after retryInMs.
CREATE OR REPLACE FUNCTION queen._timers_fire_nothing(p_epoch bigint, p_error text)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('fired', 0, 'duplicates', 0, 'deferred', 0,
                              'pairs', '[]'::jsonb, 'lateMs', '[]'::jsonb, 'more', false,
                              'nextInMs', NULL, 'retryInMs', 10, 'epoch', p_epoch)
           || CASE WHEN p_error IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('error', p_error) END
$$;

-- A batch failed and nothing of it happened. Whatever failed must not stop every timer
-- behind it: the oldest timer due at p_now waits (attempts + 1, backoff, the error in
-- last_error) and the others are tried again at once. A timer that keeps failing ends up
-- alone at the head, and waits up to a minute between tries.
CREATE OR REPLACE FUNCTION queen._timers_fire_failed(p_now timestamptz, p_error text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_qid uuid;
    v_key text;
    v_ts  timestamptz;
BEGIN
    -- (found first, then locked by its own key, as the claim)
    SELECT x.queue_id, x.timer_key INTO v_qid, v_key
      FROM queen.timers x WHERE x.fire_at <= p_now ORDER BY x.fire_at LIMIT 1;
    v_ts := clock_timestamp();
    UPDATE queen.timers t
       SET attempts = t.attempts + 1,
           last_error = left('fire failed: ' || p_error, 2000),
           fire_at = to_timestamp(extract(epoch FROM v_ts) + least(60, power(2, t.attempts))),
           updated_at = v_ts
     WHERE t.queue_id = v_qid
       AND (t.queue_id, t.timer_key) = (SELECT x.queue_id, x.timer_key FROM queen.timers x
                                         WHERE x.queue_id = v_qid AND x.timer_key = v_key
                                           AND x.fire_at <= p_now
                                           FOR UPDATE SKIP LOCKED);
END;
$$;


-- Pending timers and recent fires, for /metrics and the dashboard: {pending, due (pending
-- and past their next attempt), deferred (waiting after a failed attempt), fired and
-- duplicates (last hour), late (fires more than 50 ms after their time, last hour),
-- lateP50Ms / lateP99Ms / lateMaxMs (last hour)}.
CREATE OR REPLACE FUNCTION queen.timers_stats_v1()
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'pending', (SELECT count(*) FROM queen.timers),
        'due', (SELECT count(*) FROM queen.timers WHERE fire_at <= now()),
        'deferred', (SELECT count(*) FROM queen.timers WHERE attempts > 0),
        'fired', count(*) FILTER (WHERE f.status = 'queued'),
        'duplicates', count(*) FILTER (WHERE f.status = 'duplicate'),
        'late', count(*) FILTER (WHERE l.ms > 50),
        'lateP50Ms', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY l.ms)::numeric, 3),
        'lateP99Ms', round(percentile_cont(0.99) WITHIN GROUP (ORDER BY l.ms)::numeric, 3),
        'lateMaxMs', round(max(l.ms)::numeric, 3))
      FROM queen.timer_fires f
     CROSS JOIN LATERAL (
            SELECT extract(epoch FROM f.fired_at - greatest(f.deliver_at, f.scheduled_at))
                   * 1000 AS ms) l
     WHERE f.fired_at > now() - interval '1 hour'
$$;

-- Retention of the fire log: rows older than `hours`, at most `limit` per call (one
-- transaction each). Returns how many were deleted.
CREATE OR REPLACE FUNCTION queen.timers_prune_fires_v1(p_hours integer, p_limit integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_deleted integer;
BEGIN
    DELETE FROM queen.timer_fires
     WHERE id IN (SELECT id FROM queen.timer_fires
                   WHERE fired_at < now() - make_interval(hours => p_hours)
                   ORDER BY id LIMIT p_limit);
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    RETURN v_deleted;
END;
$$;

-- The queues that have pending timers (the dashboard's Timers page, GET /metrics), the
-- soonest first: [{queue, pending, due, deferred, nextAt}], at most p_limit of them.
-- (PL/pgSQL: Citus cannot plan a SQL function's parameter in a query on a distributed table.)
CREATE OR REPLACE FUNCTION queen.timers_queues_v1(p_limit integer)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
               'queue', x.name, 'pending', x.pending, 'due', x.due, 'deferred', x.deferred,
               'nextAt', queen._iso_us(x.next_at)) ORDER BY x.next_at, x.name), '[]'::jsonb)
      FROM (SELECT q.name, count(*) AS pending,
                   count(*) FILTER (WHERE t.fire_at <= now()) AS due,
                   count(*) FILTER (WHERE t.attempts > 0) AS deferred,
                   min(t.fire_at) AS next_at
              FROM queen.timers t JOIN queen.queues q ON q.id = t.queue_id
             GROUP BY q.name
             ORDER BY min(t.fire_at), q.name
             LIMIT p_limit) x);
END;
$$;
