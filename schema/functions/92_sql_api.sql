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

-- The deferred trigger of queen.commit_wakes (migrations/0027_sql_api.sql): sends the
-- transaction's wake-ups and deletes its row. As the table's owner: at commit the
-- session's role, which may have no right on the wake-interest rows, is the current one.
CREATE OR REPLACE FUNCTION queen.trg_commit_wakes() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM queen._wake_at_commit_send();
    DELETE FROM queen.commit_wakes WHERE xid = NEW.xid;
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION queen.trg_commit_wakes() FROM PUBLIC;

-- At commit, on plain PostgreSQL: the wake-up of a partition a produce pushed to (the
-- deferred trigger partition_lookup_sql_wakes, migrations/0027_sql_api.sql), once per
-- partition and transaction, when some server process waits for its queue; the
-- wake-interest lock shared from the first one to the commit, as above. One function, the
-- trigger's (as its owner: the session's role may have no right on the interest rows), and
-- a look at the partition only when some long poll waits anywhere.
CREATE OR REPLACE FUNCTION queen.trg_partition_lookup_sql_wakes() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_done text := coalesce(current_setting('queen.commit_wakes_pushed', true), '');
    v_all  boolean := current_setting('transaction_isolation') <> 'read committed';
BEGIN
    IF strpos(v_done, NEW.partition_id::text) > 0 THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('queen.commit_wakes_pushed', v_done || NEW.partition_id::text, true);
    IF v_done = '' THEN
        PERFORM queen._wake_epoch();
    END IF;
    IF v_all OR EXISTS (SELECT 1 FROM queen.wake_interest i WHERE i.expires_at > now()) THEN
        PERFORM pg_notify('queen_wakeup', jsonb_build_object(
                    'kind', 'push', 'queue', q.name, 'partition', p.name,
                    'namespace', q.namespace, 'task', q.task)::text)
           FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
          WHERE p.id = NEW.partition_id
            AND (v_all OR queen._wake_wanted(NULL, q.name, q.namespace, q.task));
    END IF;
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION queen.trg_partition_lookup_sql_wakes() FROM PUBLIC;

-- A produce's push is the HTTP face's (queen._push_retrying), run with
-- queen.server_wakes = 'on' and queen.commit_wakes = 'push' (the produce functions' own
-- settings): it sends no wake-up itself, and on plain PostgreSQL its partitions'
-- newest-message writes carry them to the commit (queen.trg_partition_lookup_sql_wakes).
-- On Citus, where those writes are the workers', they are recorded here, for
-- queen._wake_at_commit on the coordinator.
CREATE OR REPLACE FUNCTION queen._sql_citus_wakes(p_items jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        PERFORM queen._wake_at_commit(jsonb_build_object(
                    'kind', 'push', 'queue', q.name, 'partition', x.pn,
                    'namespace', q.namespace, 'task', q.task))
           FROM (SELECT DISTINCT e ->> 'queue' AS qn,
                        coalesce(nullif(e ->> 'partition', ''), 'Default') AS pn
                   FROM jsonb_array_elements(p_items) e) x
           JOIN queen.queues q ON q.name = x.qn;
    END IF;
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

-- One message (produce_one, produce_full, produce_notify): stored by the HTTP face's push
-- (queen._push_retrying), or scheduled as a timer when delay_until is still to come
-- (queen._sql_produce_later). A queue that does not exist yet is created with
-- p_namespace/p_task when given (queen.configure_queue_v1), else as a push creates it. A
-- failed item (a full queue) is an error: the caller's transaction keeps nothing.
CREATE OR REPLACE FUNCTION queen._sql_produce_one(
    p_queue text, p_payload jsonb, p_partition text, p_txn text, p_namespace text,
    p_task text, p_delay_until timestamptz, p_notify boolean,
    OUT message_id bigint, OUT transaction_id text
) LANGUAGE plpgsql AS $$
DECLARE
    v_part text := coalesce(nullif(p_partition, ''), 'Default');
    v_enc  boolean;
    v_pid  uuid;
    v_items jsonb;
    r      jsonb;
BEGIN
    SELECT q.encryption_enabled, p.id INTO v_enc, v_pid
      FROM queen.queues q
      LEFT JOIN queen.partitions p ON p.queue_id = q.id AND p.name = v_part
     WHERE q.name = p_queue;
    IF v_enc THEN
        PERFORM queen._sql_refuse_encrypted(p_queue);
    ELSIF v_enc IS NULL AND (p_namespace IS NOT NULL OR p_task IS NOT NULL) THEN
        PERFORM queen.configure_queue_v1(jsonb_build_object(
            'queue', p_queue, 'namespace', p_namespace, 'task', p_task));
    END IF;
    IF p_delay_until > clock_timestamp() THEN
        SELECT l.message_id, l.transaction_id INTO message_id, transaction_id
          FROM queen._sql_produce_later(p_queue, p_payload, v_part, v_pid, p_txn,
                                        p_delay_until) l;
    ELSE
        -- (by the partition's id when it exists, as the server's single push: its one-item
        -- path, queen.push_partition_v3; a NULL answer, a capped queue or a partition gone,
        -- runs the general push)
        v_items := jsonb_build_array(jsonb_build_object(
                       'queue', p_queue, 'partition', v_part, 'transactionId', p_txn,
                       'payload', coalesce(p_payload, 'null'::jsonb)));
        r := coalesce(queen.push_partition_v3(v_pid, v_items::text)::jsonb,
                      queen._push_retrying(v_items, true)::jsonb) -> 0;
        PERFORM queen._sql_citus_wakes(v_items);
        IF r ->> 0 NOT IN ('queued', 'duplicate') THEN
            IF r ->> 5 = 'encryption_key_missing' THEN
                PERFORM queen._sql_refuse_encrypted(p_queue);
            END IF;
            RAISE EXCEPTION '%', coalesce(r ->> 4, 'message not stored')
                USING ERRCODE = '23514', DETAIL = format('reason: %s', r ->> 5);
        END IF;
        message_id := (r ->> 1)::bigint;
        transaction_id := coalesce(r ->> 6, p_txn);
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
-- (On Citus one connection per node: the timers are distributed, the queue a timer may
-- create is a reference table, which Citus writes only over the connections a transaction
-- used for them. On PostgreSQL a setting nothing reads.)
CREATE OR REPLACE FUNCTION queen._sql_produce_later(
    p_queue text, p_payload jsonb, p_partition text, p_pid uuid, p_txn text,
    p_at timestamptz, OUT message_id bigint, OUT transaction_id text
) LANGUAGE plpgsql SET citus.multi_shard_modify_mode = 'sequential' AS $$
DECLARE
    v_key   text;
    v_timer jsonb;
    v_ms    numeric;
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
        -- (the delay from now: the timer is due at its schedule's clock plus the delay)
        v_ms := ceil(extract(epoch FROM p_at - clock_timestamp()) * 1000);
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

-- A batch function's argument: a JSON array, or one object taken as an array of it; else
-- an error (22023) naming the function and its argument.
CREATE OR REPLACE FUNCTION queen._sql_array(p jsonb, p_what text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF jsonb_typeof(p) = 'object' THEN
        RETURN jsonb_build_array(p);
    ELSIF p IS NULL OR jsonb_typeof(p) <> 'array' THEN
        RAISE EXCEPTION 'queen.% must be a JSON array', p_what USING ERRCODE = '22023';
    END IF;
    RETURN p;
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
    IF NOT jsonb_path_exists(p_items, '$[*] ? (exists(@.isEncrypted) || exists(@.producerSub)
                                                || exists(@.traceContext) || exists(@.namespace)
                                                || exists(@.task))') THEN
        RETURN p_items;  -- (nearly every produce)
    END IF;
    SELECT jsonb_agg(e - 'isEncrypted' - 'producerSub' - 'traceContext' ORDER BY o.n)
      INTO p_items
      FROM jsonb_array_elements(p_items) WITH ORDINALITY AS o(e, n);
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
    RETURN p_items;
END;
$$;

-- produce(items) -> per item {index, status: queued|duplicate|failed, message_id,
-- partition_id, transaction_id, trace_id} (+ error and reason when failed: a full queue,
-- a missing queue name, as the HTTP push answers them). Items into a queue with
-- encryptionEnabled: refused (an error, nothing stored). The answer is made in one pass
-- over the push's compact answer and the items side by side (ROWS FROM), each object from
-- a row (jsonb_agg of a record: the cheapest of the ways measured; the push answers in
-- about two thirds of a produce's time, the objects take the rest, docs/sql.md "Cost").
CREATE OR REPLACE FUNCTION queen.produce(items jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp
SET queen.server_wakes = 'on' SET queen.commit_wakes = 'push' AS $$
DECLARE
    v_items jsonb := queen._sql_array($1, 'produce: items');
    v_res   json;
    v_out   jsonb;
    v_enc   text;
    v_queue text;
    v_part  text;
    v_pid   uuid;
BEGIN
    IF jsonb_array_length(v_items) = 0 THEN
        RETURN '[]'::jsonb;
    END IF;
    v_items := queen._sql_produce_items(v_items);
    -- Items of one existing partition (nearly every produce of a batch) go by its id, as
    -- the server's push of one partition does: the first item's partition is looked up,
    -- and the push by its id declines (writing nothing) unless every item names it; then
    -- the general push runs. (Checking the items here first cost 1.5 ms in 1,000.)
    v_queue := v_items -> 0 ->> 'queue';
    v_part := coalesce(nullif(v_items -> 0 ->> 'partition', ''), 'Default');
    SELECT p.id INTO v_pid FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE q.name = v_queue AND p.name = v_part;
    v_res := coalesce(CASE WHEN v_pid IS NOT NULL
                           THEN queen._push_retrying(v_items, true, v_pid) END,
                      queen._push_retrying(v_items, true));
    PERFORM queen._sql_citus_wakes(v_items);
    -- (the compact answer holds statuses, ids and error texts: a failed item says "failed")
    IF strpos(v_res::text, '"failed"') = 0 THEN
        SELECT jsonb_agg(x) INTO v_out
          FROM (SELECT (z.n - 1)::integer AS index, z.r ->> 0 AS status,
                       z.r ->> 1 AS message_id, z.r ->> 2 AS partition_id,
                       coalesce(z.r ->> 6, z.e ->> 'transactionId') AS transaction_id,
                       z.r ->> 3 AS trace_id
                  FROM ROWS FROM (jsonb_array_elements(v_res::jsonb),
                                  jsonb_array_elements(v_items)) WITH ORDINALITY AS z(r, e, n)
                 ORDER BY z.n) x;
        RETURN v_out;
    END IF;
    SELECT jsonb_agg(jsonb_build_object(
                         'index', z.n - 1, 'status', z.r ->> 0, 'message_id', z.r ->> 1,
                         'partition_id', z.r ->> 2,
                         'transaction_id', coalesce(z.r ->> 6, z.e ->> 'transactionId'),
                         'trace_id', z.r ->> 3)
                     || CASE WHEN z.r ->> 0 = 'failed'
                             THEN jsonb_build_object('error', z.r ->> 4, 'reason', z.r ->> 5)
                             ELSE '{}'::jsonb END
                     ORDER BY z.n),
           min(z.e ->> 'queue') FILTER (WHERE z.r ->> 5 = 'encryption_key_missing')
      INTO v_out, v_enc
      FROM ROWS FROM (jsonb_array_elements(v_res::jsonb),
                      jsonb_array_elements(v_items)) WITH ORDINALITY AS z(r, e, n);
    IF v_enc IS NOT NULL THEN
        PERFORM queen._sql_refuse_encrypted(v_enc);
    END IF;
    RETURN v_out;
END;
$$;
REVOKE ALL ON FUNCTION queen.produce(jsonb) FROM PUBLIC;

CREATE OR REPLACE FUNCTION queen.produce_one(
    queue text, payload jsonb, partition text DEFAULT 'Default',
    transaction_id text DEFAULT NULL, notify boolean DEFAULT false
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp
SET queen.server_wakes = 'on' SET queen.commit_wakes = 'push' AS $$
BEGIN
    RETURN (queen._sql_produce_one($1, $2, $3, $4, NULL, NULL, NULL, $5)).message_id;
END;
$$;
REVOKE ALL ON FUNCTION queen.produce_one(text, jsonb, text, text, boolean) FROM PUBLIC;

-- (The transaction id argument is named txn: the result has a column transaction_id.)
CREATE OR REPLACE FUNCTION queen.produce_full(
    queue text, payload jsonb, partition text DEFAULT 'Default', txn text DEFAULT NULL,
    namespace text DEFAULT NULL, task text DEFAULT NULL,
    delay_until timestamptz DEFAULT NULL, notify boolean DEFAULT false
) RETURNS TABLE (message_id bigint, transaction_id text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp
SET queen.server_wakes = 'on' SET queen.commit_wakes = 'push' AS $$
BEGIN
    RETURN QUERY
    SELECT p.message_id, p.transaction_id
      FROM queen._sql_produce_one($1, $2, $3, $4, $5, $6, $7, $8) p;
END;
$$;
REVOKE ALL ON FUNCTION queen.produce_full(text, jsonb, text, text, text, text, timestamptz,
                                          boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION queen.produce_notify(
    queue text, payload jsonb, partition text DEFAULT 'Default',
    transaction_id text DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp
SET queen.server_wakes = 'on' SET queen.commit_wakes = 'push' AS $$
BEGIN
    RETURN (queen._sql_produce_one($1, $2, $3, $4, NULL, NULL, NULL, true)).message_id;
END;
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
