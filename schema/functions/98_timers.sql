-- TIMERS: schedule, reschedule and cancel (POST /api/v1/timers, DELETE
-- /api/v1/timers/{queue}/{key}, the `timers` rider of POST /api/v1/transaction). The tables
-- are in migrations/0014_timers.sql; the fire is in 98_timers_fire.sql.
--
-- Input ops (validated by queen_threads/timers/body.py):
--   {op: "schedule"|"reschedule", queue, timerKey, partition, payload (any JSON),
--    isEncrypted, delayMs, txn, producerSub}
--   {op: "cancel", queue, timerKey, txn|null}
-- Schedule and reschedule are the same upsert on (queue, timerKey): status "scheduled"
-- when no timer of that key was pending, "rescheduled" when one was (it is replaced:
-- payload, delivery time, txn; attempts back to 0). The message id is drawn here and
-- kept by a reschedule that keeps the txn. A schedule creates its queue, as a push does.
-- Cancel: "cancelled" (with the txn of the timer it removed) or "absent" (nothing pending:
-- never scheduled, cancelled, or already fired; ok false, the caller's txn echoed back).
-- A timer being fired right now is locked by its firer: a cancel or reschedule waits for
-- that commit and then finds no timer (so "too_late" is never answered: the claim and the
-- delivery are one transaction).
-- Every op locks its row in (queue, timerKey) order, whatever the order of the ops, so
-- two calls touching the same keys cannot deadlock; one key may appear once per call
-- (checked by the caller, and here: 22023).
-- Output: one result per op, in input order:
--   {ok, status, queue, timerKey, txn, messageId?, deliverAt?, partition?}
CREATE OR REPLACE FUNCTION queen._timers_apply(p_ops jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_now     timestamptz := clock_timestamp();
    v_op      jsonb;
    v_idx     integer;
    v_queue   text;
    v_key     text;
    v_qid     uuid;
    v_txn     text;
    v_mid     bigint;
    v_due     timestamptz;
    v_part    text;
    v_new     boolean;
    v_results jsonb := '{}'::jsonb;  -- index -> result
BEGIN
    IF p_ops IS NULL OR jsonb_typeof(p_ops) <> 'array' THEN
        RAISE EXCEPTION 'timer operations must be an array' USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(p_ops) e
                GROUP BY e ->> 'queue', e ->> 'timerKey' HAVING count(*) > 1) THEN
        RAISE EXCEPTION 'a timer key may appear at most once per call' USING ERRCODE = '22023';
    END IF;

    FOR v_op, v_idx IN
        SELECT e, (o.n - 1)::integer
          FROM jsonb_array_elements(p_ops) WITH ORDINALITY AS o(e, n)
         ORDER BY e ->> 'queue' COLLATE "C", e ->> 'timerKey' COLLATE "C"
    LOOP
        v_queue := v_op ->> 'queue';
        v_key := v_op ->> 'timerKey';
        SELECT q.id INTO v_qid FROM queen.queues q WHERE q.name = v_queue;

        IF v_op ->> 'op' = 'cancel' THEN
            v_txn := NULL;
            IF v_qid IS NOT NULL THEN
                DELETE FROM queen.timers t
                 WHERE t.queue_id = v_qid AND t.timer_key = v_key
                RETURNING t.txn INTO v_txn;
            END IF;
            v_results := v_results || jsonb_build_object(v_idx::text, jsonb_build_object(
                'ok', v_txn IS NOT NULL,
                'status', CASE WHEN v_txn IS NOT NULL THEN 'cancelled' ELSE 'absent' END,
                'queue', v_queue, 'timerKey', v_key,
                'txn', coalesce(v_txn, v_op ->> 'txn')));
            CONTINUE;
        END IF;

        IF v_op ->> 'op' NOT IN ('schedule', 'reschedule') THEN
            RAISE EXCEPTION 'unknown timer op %', coalesce(v_op ->> 'op', 'null')
                USING ERRCODE = '22023';
        END IF;
        IF v_qid IS NULL THEN
            PERFORM queen._definitions_lock();
            INSERT INTO queen.queues (name, namespace, task)
            VALUES (v_queue, queen._queue_namespace(v_queue), queen._queue_task(v_queue))
            ON CONFLICT (name) DO NOTHING;
            SELECT q.id INTO v_qid FROM queen.queues q WHERE q.name = v_queue;
        END IF;
        v_due := v_now + make_interval(secs => (v_op ->> 'delayMs')::numeric / 1000);
        v_part := coalesce(nullif(v_op ->> 'partition', ''), 'Default');
        INSERT INTO queen.timers AS t
               (queue_id, timer_key, partition_name, payload, is_encrypted, txn, message_id,
                producer_sub, deliver_at, fire_at, created_at, updated_at)
        VALUES (v_qid, v_key, v_part, coalesce(v_op -> 'payload', 'null'::jsonb),
                coalesce((v_op ->> 'isEncrypted')::boolean, false), v_op ->> 'txn',
                nextval('queen.messages_id_seq'::regclass), nullif(v_op ->> 'producerSub', ''),
                v_due, v_due, v_now, v_now)
        ON CONFLICT (queue_id, timer_key) DO UPDATE
           SET partition_name = EXCLUDED.partition_name,
               payload = EXCLUDED.payload,
               is_encrypted = EXCLUDED.is_encrypted,
               message_id = CASE WHEN t.txn = EXCLUDED.txn THEN t.message_id
                                 ELSE EXCLUDED.message_id END,
               txn = EXCLUDED.txn,
               producer_sub = EXCLUDED.producer_sub,
               deliver_at = EXCLUDED.deliver_at,
               fire_at = EXCLUDED.fire_at,
               attempts = 0,
               last_error = NULL,
               updated_at = v_now
        -- A new row keeps this call's created_at; a replaced one its own (not `xmax = 0`:
        -- Citus cannot plan a system column in RETURNING on a distributed table).
        RETURNING t.message_id, (t.created_at = v_now) INTO v_mid, v_new;
        v_results := v_results || jsonb_build_object(v_idx::text, jsonb_build_object(
            'ok', true,
            'status', CASE WHEN v_new THEN 'scheduled' ELSE 'rescheduled' END,
            'queue', v_queue, 'timerKey', v_key, 'partition', v_part,
            'txn', v_op ->> 'txn', 'messageId', v_mid::text,
            'deliverAt', queen._iso_us(v_due)));
    END LOOP;

    RETURN (SELECT coalesce(jsonb_agg(v_results -> (n - 1)::text ORDER BY n), '[]'::jsonb)
              FROM generate_series(1, jsonb_array_length(p_ops)) n);
END;
$$;

-- POST /api/v1/timers and DELETE /api/v1/timers/{queue}/{key}: {operations} -> {results}.
CREATE OR REPLACE FUNCTION queen.timers_apply_v1(p jsonb)
RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('results', queen._timers_apply(p -> 'operations'))
$$;

-- The `timers` rider of a transaction (queen.execute_transaction_v2): the same ops, in the
-- transaction's flat result space from `p_base` on. Nothing here fails a bundle: a
-- schedule always succeeds, and a cancel that finds nothing is answered "absent".
CREATE OR REPLACE FUNCTION queen.transaction_timers_v1(p_ops jsonb, p_base integer)
RETURNS jsonb
LANGUAGE sql AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('index', p_base + (o.n - 1)::integer,
                                                 'type', 'timer',
                                                 'op', p_ops -> (o.n - 1)::integer ->> 'op',
                                                 'success', true) || o.r
                              ORDER BY o.n), '[]'::jsonb)
      FROM jsonb_array_elements(queen._timers_apply(p_ops)) WITH ORDINALITY AS o(r, n)
$$;

-- The reads below are PL/pgSQL, not SQL functions: Citus cannot plan a SQL function's
-- parameters in a query on a distributed table ("could not create distributed plan").
-- GET /api/v1/timers/{queue}/{key}: one pending timer, payload as stored (base64 is added
-- by the server), or {found: false}.
CREATE OR REPLACE FUNCTION queen.timers_peek_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce(
        (SELECT jsonb_build_object(
                    'found', true, 'queue', q.name, 'timerKey', t.timer_key,
                    'partition', t.partition_name, 'payload', t.payload,
                    'encrypted', t.is_encrypted, 'txn', t.txn, 'messageId', t.message_id::text,
                    'deliverAt', queen._iso_us(t.deliver_at),
                    'nextAttemptAt', queen._iso_us(t.fire_at),
                    'attempts', t.attempts, 'lastError', t.last_error,
                    'producerSub', t.producer_sub,
                    'createdAt', queen._iso_us(t.created_at),
                    'updatedAt', queen._iso_us(t.updated_at))
           FROM queen.timers t
           JOIN queen.queues q ON q.id = t.queue_id
          WHERE q.name = p ->> 'queue' AND t.timer_key = p ->> 'timerKey'),
        jsonb_build_object('found', false, 'queue', p ->> 'queue', 'timerKey', p ->> 'timerKey'));
END;
$$;

-- GET /api/v1/timers/{queue}: a keyset page of one queue's pending timers in key order
-- (byte order), after the exclusive cursor `after`. {queue, rows, truncated, nextAfter}.
CREATE OR REPLACE FUNCTION queen.timers_list_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (WITH page AS (
        SELECT t.*
          FROM queen.timers t
          JOIN queen.queues q ON q.id = t.queue_id
         WHERE q.name = p ->> 'queue'
           AND (p ->> 'after' IS NULL OR t.timer_key > (p ->> 'after') COLLATE "C")
         ORDER BY t.timer_key
         LIMIT (p ->> 'limit')::integer + 1
    ), numbered AS (
        SELECT page.*, row_number() OVER (ORDER BY timer_key) AS n FROM page
    )
    SELECT jsonb_build_object(
        'queue', p ->> 'queue',
        'rows', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                  'timerKey', x.timer_key, 'partition', x.partition_name,
                                  'txn', x.txn, 'messageId', x.message_id::text,
                                  'deliverAt', queen._iso_us(x.deliver_at),
                                  'nextAttemptAt', queen._iso_us(x.fire_at),
                                  'attempts', x.attempts, 'lastError', x.last_error,
                                  'encrypted', x.is_encrypted) ORDER BY x.n)
                            FROM numbered x WHERE x.n <= (p ->> 'limit')::integer), '[]'::jsonb),
        'truncated', (SELECT count(*) FROM page) > (p ->> 'limit')::integer,
        'nextAfter', (SELECT x.timer_key FROM numbered x
                       WHERE x.n = (p ->> 'limit')::integer
                         AND (SELECT count(*) FROM page) > (p ->> 'limit')::integer)));
END;
$$;
