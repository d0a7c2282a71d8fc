-- QUEEN'S SQL API: the queue's second face, for applications that produce inside their own
-- transaction (the outbox pattern) and consume from SQL (docs/sql.md; the contract:
-- ../shared/reference/sql-api.md). Every function here is a thin layer over the entry
-- points the HTTP face calls (queen._push_retrying, queen.pop_unified_batch,
-- queen.ack_messages_v2, queen.renew_lease_v3, queen.execute_transaction_v2, ...): one
-- implementation of push, pop and ack behind both faces.
-- This file: the wake-ups at commit, produce, channel_name and notify; consume and commit
-- in 92_sql_api_consume.sql, the utilities in 92_sql_api_utilities.sql, the uuid v7
-- helpers in 92_sql_api_uuid.sql.
--
-- Rights: the functions that read or write the queue run as their owner (SECURITY
-- DEFINER) with a pinned search_path, and PUBLIC may not call them: a role is granted the
-- ones it may use (docs/sql.md, "Rights"). Their search_path starts with queen_clock, so the
-- queue's functions they call tell time by the wall clock (migrations/0027_sql_api.sql).
-- They run with queen.commit_wakes = 'on': the wake-ups of what they do wait for the
-- caller's commit (queen._wake).

-- A wake-up of this transaction, sent when it commits (queen._wake_at_commit_send, from the
-- deferred trigger of queen.commit_wakes). The events are kept in a setting of the
-- transaction, one JSON text a line; a savepoint rolled back takes back its own. An event
-- already there is not added twice; past 16 kB (a transaction producing into hundreds of
-- partitions) an event stands for its whole queue (no partition: it wakes the long polls
-- of every partition, listener.py).
CREATE OR REPLACE FUNCTION queen._wake_at_commit(p_event jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_events text := coalesce(current_setting('queen.commit_wake_events', true), '');
    v_event  text := p_event::text;
BEGIN
    IF v_events = '' THEN
        INSERT INTO queen.commit_wakes DEFAULT VALUES ON CONFLICT DO NOTHING;
    ELSE
        IF length(v_events) > 16384 AND p_event ? 'partition' THEN
            v_event := (p_event || '{"partition": null}'::jsonb)::text;
        END IF;
        IF strpos(v_events, v_event) > 0 THEN
            RETURN;
        END IF;
    END IF;
    PERFORM set_config('queen.commit_wake_events', v_events || v_event || E'\n', true);
END;
$$;

-- At commit: the transaction's wake-ups that some server process waits for (a long poll
-- on the queue or its namespace/task, queen._wake_wanted: no origin, so every process's
-- rows count), and every timers announcement (the firers, timers/service.py). The
-- wake-interest lock is held shared from here to the commit (queen._wake_epoch): an
-- interest that appears meanwhile waits for the commit. Its check reads the rows committed
-- before the lock, which needs READ COMMITTED; under another isolation level every event
-- goes out. Returns how many were sent.
CREATE OR REPLACE FUNCTION queen._wake_at_commit_send() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_events text := coalesce(current_setting('queen.commit_wake_events', true), '');
    v_all    boolean := current_setting('transaction_isolation') <> 'read committed';
    v_count  integer;
BEGIN
    -- (sent: a later wake-up of the transaction, after SET CONSTRAINTS ... IMMEDIATE fired
    -- this one early, starts again with a row of its own)
    PERFORM set_config('queen.commit_wake_events', '', true);
    IF v_events = '' THEN
        RETURN 0;
    END IF;
    PERFORM queen._wake_epoch();
    SELECT count(pg_notify('queen_wakeup', x.e::text)) INTO v_count
      FROM (SELECT DISTINCT line::jsonb AS e
              FROM unnest(string_to_array(rtrim(v_events, E'\n'), E'\n')) AS line) x
     WHERE v_all OR x.e ->> 'kind' = 'timers'
        OR queen._wake_wanted(NULL, x.e ->> 'queue', x.e ->> 'namespace', x.e ->> 'task');
    RETURN v_count;
END;
$$;

-- The refusal of a produce into a queue with encryptionEnabled: the database does not hold
-- the key (QUEEN_ENCRYPTION_KEY is the server's), and plain text must never be stored there.
CREATE OR REPLACE FUNCTION queen._sql_refuse_encrypted(p_queue text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'queue % has encryptionEnabled: a produce from SQL would store its payload in clear (the key is the server''s); produce it through the HTTP API', p_queue
        USING ERRCODE = '0A000', HINT = 'POST /api/v1/push to a server with QUEEN_ENCRYPTION_KEY';
END;
$$;

-- One message (produce_one, produce_full, produce_notify): stored by the push the HTTP face
-- runs (queen._push_retrying; by the partition's id when it exists and its queue is not
-- capped, as the server's push_partition_v2), or scheduled as a timer when delay_until is
-- still to come (queen._sql_produce_later). A queue that does not exist yet is created
-- with p_namespace/p_task when given (queen.configure_queue_v1), else as a push creates
-- it. A failed item (a full queue) is an error: the caller's transaction keeps nothing.
CREATE OR REPLACE FUNCTION queen._sql_produce_one(
    p_queue text, p_payload jsonb, p_partition text, p_txn text, p_namespace text,
    p_task text, p_delay_until timestamptz, p_notify boolean,
    OUT message_id bigint, OUT transaction_id text
) LANGUAGE plpgsql AS $$
DECLARE
    v_part text := coalesce(nullif(p_partition, ''), 'Default');
    v_enc  boolean;
    v_max  integer;
    v_pid  uuid;
    v_item jsonb;
    v_res  json;
BEGIN
    IF coalesce(p_queue, '') = '' THEN
        RAISE EXCEPTION 'queue is required' USING ERRCODE = '22023';
    END IF;
    SELECT q.encryption_enabled, q.max_queue_size, p.id INTO v_enc, v_max, v_pid
      FROM queen.queues q
      LEFT JOIN queen.partitions p ON p.queue_id = q.id AND p.name = v_part
     WHERE q.name = p_queue;
    IF NOT FOUND AND (p_namespace IS NOT NULL OR p_task IS NOT NULL) THEN
        PERFORM queen.configure_queue_v1(jsonb_build_object(
            'queue', p_queue, 'namespace', p_namespace, 'task', p_task));
    END IF;
    IF v_enc THEN
        PERFORM queen._sql_refuse_encrypted(p_queue);
    END IF;
    IF p_delay_until > clock_timestamp() THEN
        SELECT l.message_id, l.transaction_id INTO message_id, transaction_id
          FROM queen._sql_produce_later(p_queue, p_payload, v_part, v_pid, p_txn,
                                        p_delay_until) l;
    ELSE
        v_item := jsonb_build_object('queue', p_queue, 'partition', v_part,
                                     'payload', coalesce(p_payload, 'null'::jsonb));
        IF p_txn IS NOT NULL THEN
            v_item := v_item || jsonb_build_object('transactionId', p_txn);
        END IF;
        IF v_pid IS NOT NULL AND v_max <= 0 THEN
            v_res := queen._push_retrying(jsonb_build_array(v_item), true, v_pid);
        END IF;
        IF v_res IS NULL THEN  -- (a new partition, a capped queue: the general push)
            v_res := queen._push_retrying(jsonb_build_array(v_item), true);
        END IF;
        IF v_res -> 0 ->> 0 NOT IN ('queued', 'duplicate') THEN
            IF v_res -> 0 ->> 5 = 'encryption_key_missing' THEN
                PERFORM queen._sql_refuse_encrypted(p_queue);
            END IF;
            RAISE EXCEPTION '%', v_res -> 0 ->> 4 USING ERRCODE = '23514',
                DETAIL = format('reason: %s', v_res -> 0 ->> 5);
        END IF;
        message_id := (v_res -> 0 ->> 1)::bigint;
        transaction_id := coalesce(v_res -> 0 ->> 6, p_txn);
    END IF;
    IF p_notify THEN
        PERFORM queen.notify(p_queue, json_build_object(
            'queue', p_queue, 'partition', v_part, 'messageId', message_id::text,
            'transactionId', transaction_id)::text);
    END IF;
END;
$$;

-- A message for later (produce_full's delay_until): a timer (docs/timers.md), whose
-- message id is drawn now and which the servers' timer firers store at that time, waking
-- the long polls as a push does. Announced to the firers at commit. The first produce of a
-- transaction id wins, as a push's dedup: a message of that id already in the partition,
-- or a timer of this produce pending, answers with its id.
CREATE OR REPLACE FUNCTION queen._sql_produce_later(
    p_queue text, p_payload jsonb, p_partition text, p_pid uuid, p_txn text,
    p_at timestamptz, OUT message_id bigint, OUT transaction_id text
) LANGUAGE plpgsql AS $$
DECLARE
    v_key   text;
    v_timer jsonb;
    v_ms    numeric := ceil(extract(epoch FROM p_at - clock_timestamp()) * 1000);
BEGIN
    transaction_id := coalesce(p_txn, gen_random_uuid()::text);
    IF p_pid IS NOT NULL THEN
        SELECT m.id INTO message_id FROM queen.messages m
         WHERE m.partition_id = p_pid AND m.transaction_id = _sql_produce_later.transaction_id;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    v_key := 'queen.produce:' || jsonb_build_array(p_partition, transaction_id)::text;
    v_timer := queen.timers_peek_v1(jsonb_build_object('queue', p_queue, 'timerKey', v_key));
    IF NOT (v_timer ->> 'found')::boolean THEN
        v_timer := queen.timers_apply_v1(jsonb_build_object('operations', jsonb_build_array(
                       jsonb_build_object('op', 'schedule', 'queue', p_queue,
                                          'timerKey', v_key, 'partition', p_partition,
                                          'payload', coalesce(p_payload, 'null'::jsonb),
                                          'delayMs', v_ms, 'txn', transaction_id))))
                   -> 'results' -> 0;
        PERFORM queen._wake_at_commit(jsonb_build_object('kind', 'timers', 'inMs', v_ms));
    END IF;
    message_id := (v_timer ->> 'messageId')::bigint;
END;
$$;

-- `produce`'s items as the push takes them: the fields a producer names (queue, partition,
-- payload, transactionId, traceId, namespace, task), without those that are the server's
-- (producerSub comes from a verified token, isEncrypted from the server's key,
-- traceContext is checked by the HTTP layer). Queues that do not exist yet and that items
-- give a namespace or task are created with them.
CREATE OR REPLACE FUNCTION queen._sql_produce_items(p_items jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    IF jsonb_path_exists(p_items, '$[*] ? (exists(@.isEncrypted) || exists(@.producerSub)
                                            || exists(@.traceContext))') THEN
        SELECT jsonb_agg(e - 'isEncrypted' - 'producerSub' - 'traceContext' ORDER BY o.n)
          INTO p_items
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS o(e, n);
    END IF;
    IF jsonb_path_exists(p_items, '$[*] ? (exists(@.namespace) || exists(@.task))') THEN
        FOR r IN
            SELECT DISTINCT ON (e ->> 'queue') e ->> 'queue' AS queue,
                   e ->> 'namespace' AS ns, e ->> 'task' AS task
              FROM jsonb_array_elements(p_items) e
             WHERE coalesce(e ->> 'queue', '') <> ''
               AND (e ->> 'namespace' IS NOT NULL OR e ->> 'task' IS NOT NULL)
               AND NOT EXISTS (SELECT 1 FROM queen.queues q WHERE q.name = e ->> 'queue')
        LOOP
            PERFORM queen.configure_queue_v1(jsonb_build_object(
                'queue', r.queue, 'namespace', r.ns, 'task', r.task));
        END LOOP;
    END IF;
    RETURN p_items;
END;
$$;

-- produce(items) -> per item {index, status: queued|duplicate|failed, message_id,
-- partition_id, transaction_id, trace_id} (+ error and reason when failed: a full queue,
-- a missing queue name, as the HTTP push answers them). Items into a queue with
-- encryptionEnabled: refused (an error, nothing stored).
CREATE OR REPLACE FUNCTION queen.produce(items jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp SET queen.commit_wakes = 'on' AS $$
DECLARE
    v_items jsonb := CASE jsonb_typeof($1) WHEN 'object'
                          THEN jsonb_build_array($1) ELSE $1 END;
    v_res   json;
    v_enc   text;
BEGIN
    IF v_items IS NULL OR jsonb_typeof(v_items) <> 'array' THEN
        RAISE EXCEPTION 'queen.produce: items must be a JSON array' USING ERRCODE = '22023';
    END IF;
    IF jsonb_array_length(v_items) = 0 THEN
        RETURN '[]'::jsonb;
    END IF;
    v_items := queen._sql_produce_items(v_items);
    v_res := queen._push_retrying(v_items, true);
    SELECT v_items -> (o.n - 1)::integer ->> 'queue' INTO v_enc
      FROM json_array_elements(v_res) WITH ORDINALITY AS o(r, n)
     WHERE o.r ->> 5 = 'encryption_key_missing' LIMIT 1;
    IF FOUND THEN
        PERFORM queen._sql_refuse_encrypted(v_enc);
    END IF;
    RETURN (SELECT jsonb_agg(jsonb_build_object(
                       'index', o.n - 1, 'status', o.r ->> 0, 'message_id', o.r ->> 1,
                       'partition_id', o.r ->> 2,
                       'transaction_id', coalesce(o.r ->> 6,
                                                  v_items -> (o.n - 1)::integer ->> 'transactionId'),
                       'trace_id', o.r ->> 3)
                   || CASE WHEN o.r ->> 0 = 'failed'
                           THEN jsonb_build_object('error', o.r ->> 4, 'reason', o.r ->> 5)
                           ELSE '{}'::jsonb END
                   ORDER BY o.n)
              FROM json_array_elements(v_res) WITH ORDINALITY AS o(r, n));
END;
$$;
REVOKE ALL ON FUNCTION queen.produce(jsonb) FROM PUBLIC;

CREATE OR REPLACE FUNCTION queen.produce_one(
    queue text, payload jsonb, partition text DEFAULT 'Default',
    transaction_id text DEFAULT NULL, notify boolean DEFAULT false
) RETURNS bigint
LANGUAGE sql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp SET queen.commit_wakes = 'on' AS $$
    SELECT p.message_id
      FROM queen._sql_produce_one($1, $2, $3, $4, NULL, NULL, NULL, $5) p
$$;
REVOKE ALL ON FUNCTION queen.produce_one(text, jsonb, text, text, boolean) FROM PUBLIC;

-- (The transaction id argument is named txn: the result has a column transaction_id.)
CREATE OR REPLACE FUNCTION queen.produce_full(
    queue text, payload jsonb, partition text DEFAULT 'Default', txn text DEFAULT NULL,
    namespace text DEFAULT NULL, task text DEFAULT NULL,
    delay_until timestamptz DEFAULT NULL, notify boolean DEFAULT false
) RETURNS TABLE (message_id bigint, transaction_id text)
LANGUAGE sql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp SET queen.commit_wakes = 'on' AS $$
    SELECT p.message_id, p.transaction_id
      FROM queen._sql_produce_one($1, $2, $3, $4, $5, $6, $7, $8) p
$$;
REVOKE ALL ON FUNCTION queen.produce_full(text, jsonb, text, text, text, text, timestamptz,
                                          boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION queen.produce_notify(
    queue text, payload jsonb, partition text DEFAULT 'Default',
    transaction_id text DEFAULT NULL
) RETURNS bigint
LANGUAGE sql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp SET queen.commit_wakes = 'on' AS $$
    SELECT p.message_id
      FROM queen._sql_produce_one($1, $2, $3, $4, NULL, NULL, NULL, true) p
$$;
REVOKE ALL ON FUNCTION queen.produce_notify(text, jsonb, text, text) FROM PUBLIC;

-- The application's own channel of a queue, for LISTEN: 'queen_' and the name with '.' and
-- '-' as '_' (the server's wake-ups use channel queen_wakeup, not these).
CREATE OR REPLACE FUNCTION queen.channel_name(queue text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'queen_' || translate($1, '.-', '__')
$$;

-- NOTIFY on a queue's channel (delivered at commit; nothing on rollback). produce_notify
-- and produce_one(..., notify => true) send {queue, partition, messageId, transactionId}.
CREATE OR REPLACE FUNCTION queen.notify(queue text, payload text DEFAULT '') RETURNS void
LANGUAGE sql AS $$
    SELECT pg_notify(queen.channel_name($1), coalesce($2, ''))
$$;
