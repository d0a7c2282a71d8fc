-- QUEEN'S SQL API: consume, commit, renew, transaction and forward (the rest of the API and
-- its rules: 92_sql_api.sql; docs/sql.md). A consume is the HTTP face's pop
-- (queen.pop_unified_batch), a commit its ack (queen.ack_messages_v2), a renewal its lease
-- extension (queen.renew_lease_v3), a transaction its transaction
-- (queen.execute_transaction_v2): the same leases, cursors, retries and dead letters.

-- A consume from a queue with encryptionEnabled is refused: its payloads are ciphertext
-- that only a server holding the key can read (GET /api/v1/pop over HTTP).
CREATE OR REPLACE FUNCTION queen._sql_consume_check(p_queue text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(p_queue, '') = '' THEN
        RAISE EXCEPTION 'queue is required' USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM queen.queues q WHERE q.name = p_queue AND q.encryption_enabled) THEN
        RAISE EXCEPTION 'queue % has encryptionEnabled: its payloads are ciphertext only a server holding the key can read; consume it through the HTTP API', p_queue
            USING ERRCODE = '0A000';
    END IF;
END;
$$;

-- One pop (queen.pop_unified_batch's request, the HTTP face's): its answer when it
-- delivered something, else NULL, with everything the empty pop did undone (a
-- subtransaction rolled back): in the caller's transaction an empty pop must hold nothing a
-- producer's commit waits for (a group's registration lock, a parked cursor row), least of
-- all while consume_one waits. A named group's subscription is recorded first, and kept,
-- as the pop records it on a group's first pop of the queue (queen._ensure_subscription).
CREATE OR REPLACE FUNCTION queen._sql_pop(p_req jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_res jsonb;
BEGIN
    BEGIN
        v_res := queen.pop_unified_batch(jsonb_build_array(p_req)) -> 0;
        IF jsonb_array_length(v_res -> 'messages') = 0 THEN
            RAISE EXCEPTION 'nothing delivered' USING ERRCODE = 'QA000';
        END IF;
    EXCEPTION WHEN SQLSTATE 'QA000' THEN
        RETURN NULL;
    END;
    RETURN v_res;
END;
$$;

CREATE OR REPLACE FUNCTION queen._sql_subscribe(p_req jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_group text := coalesce(nullif(p_req ->> 'consumerGroup', ''), '__QUEUE_MODE__');
BEGIN
    IF v_group <> '__QUEUE_MODE__' THEN
        PERFORM queen._ensure_subscription(
            v_group, p_req ->> 'queue', coalesce(nullif(p_req ->> 'partition', ''), ''), '', '',
            p_req ->> 'subscriptionMode', p_req ->> 'subscriptionFrom', now());
    END IF;
END;
$$;

-- A consume request of the contract ({queueName, partitionName ('' = any), consumerGroup,
-- batchSize (1), leaseSeconds (60), workerId, autoAck, subMode, subFrom}, snake_case too)
-- as the pop's. workerId is the lease id when it is a uuid (lease ids are the server's).
CREATE OR REPLACE FUNCTION queen._sql_pop_request(r jsonb, p_idx integer) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'idx', p_idx,
        'queue', coalesce(r ->> 'queueName', r ->> 'queue_name', r ->> 'queue'),
        'partition', nullif(coalesce(r ->> 'partitionName', r ->> 'partition_name',
                                     r ->> 'partition'), ''),
        'consumerGroup', coalesce(nullif(coalesce(r ->> 'consumerGroup', r ->> 'consumer_group'),
                                         ''), '__QUEUE_MODE__'),
        'batch', coalesce(r -> 'batchSize', r -> 'batch_size', '1'::jsonb),
        'leaseSeconds', coalesce(r -> 'leaseSeconds', r -> 'lease_seconds', '60'::jsonb),
        'leaseId', queen._try_uuid(coalesce(r ->> 'workerId', r ->> 'worker_id')),
        'autoAck', coalesce(r -> 'autoAck', r -> 'auto_ack', 'false'::jsonb),
        'subscriptionMode', nullif(coalesce(r ->> 'subMode', r ->> 'sub_mode'), ''),
        'subscriptionFrom', nullif(coalesce(r ->> 'subFrom', r ->> 'sub_from'), ''))
$$;

-- consume(requests) -> per request {idx, result: {success, queue, partition, partitionId,
-- consumerGroup, leaseId, messages: [the HTTP pop's messages: id, transactionId, data,
-- createdAt, traceId, producerSub, ...]}}; nothing to give: success false, error
-- 'no_available_partition'.
CREATE OR REPLACE FUNCTION queen.consume(requests jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp SET queen.commit_wakes = 'on' AS $$
DECLARE
    v_reqs jsonb := queen._sql_array($1, 'consume: requests');
    v_out  jsonb := '[]'::jsonb;
    v_req  jsonb;
    v_res  jsonb;
    v_n    integer;
BEGIN
    FOR v_req, v_n IN
        SELECT e, (o.n - 1)::integer FROM jsonb_array_elements(v_reqs) WITH ORDINALITY AS o(e, n)
    LOOP
        v_req := queen._sql_pop_request(v_req, v_n);
        PERFORM queen._sql_consume_check(v_req ->> 'queue');
        PERFORM queen._sql_subscribe(v_req);
        v_res := queen._sql_pop(v_req);
        v_out := v_out || jsonb_build_array(jsonb_build_object('idx', v_n, 'result',
            CASE WHEN v_res IS NULL
                 THEN jsonb_build_object(
                          'success', false, 'error', 'no_available_partition',
                          'queue', v_req -> 'queue', 'partition', v_req -> 'partition',
                          'partitionId', NULL, 'consumerGroup', v_req -> 'consumerGroup',
                          'leaseId', NULL, 'messages', '[]'::jsonb)
                 ELSE jsonb_build_object(
                          'success', true, 'queue', v_res -> 'queue',
                          'partition', v_res -> 'partition', 'partitionId', v_res -> 'partitionId',
                          'consumerGroup', v_res -> 'consumerGroup',
                          'leaseId', to_jsonb(nullif(v_res ->> 'leaseId', '')),
                          'messages', v_res -> 'messages')
            END));
    END LOOP;
    RETURN v_out;
END;
$$;
REVOKE ALL ON FUNCTION queen.consume(jsonb) FROM PUBLIC;

-- consume_one: the messages of one partition, leased for the queue's lease time (or
-- consumed at once, auto_commit). timeout_seconds > 0: waits that long at most for a
-- message, looking again after 0.1 s, then twice as long each time up to 1 s; between two
-- looks it holds nothing (queen._sql_pop). Needs READ COMMITTED to see what others commit
-- meanwhile.
CREATE OR REPLACE FUNCTION queen.consume_one(
    queue text, consumer_group text DEFAULT '__QUEUE_MODE__', batch_size integer DEFAULT 1,
    partition text DEFAULT NULL, timeout_seconds integer DEFAULT 0,
    auto_commit boolean DEFAULT false, subscription_mode text DEFAULT NULL
) RETURNS TABLE (partition_id uuid, id bigint, transaction_id text, payload jsonb,
                 created_at timestamptz, lease_id text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp SET queen.commit_wakes = 'on' AS $$
DECLARE
    v_req   jsonb := jsonb_build_object(
                'idx', 0, 'queue', $1,
                'consumerGroup', coalesce(nullif($2, ''), '__QUEUE_MODE__'),
                'partition', nullif($4, ''), 'batch', greatest(coalesce($3, 1), 1),
                'autoAck', coalesce($6, false), 'subscriptionMode', $7);
    v_until timestamptz := clock_timestamp() + make_interval(secs => greatest(coalesce($5, 0), 0));
    v_pause double precision := 0.1;
    v_res   jsonb;
BEGIN
    PERFORM queen._sql_consume_check($1);
    PERFORM queen._sql_subscribe(v_req);
    LOOP
        v_res := queen._sql_pop(v_req);
        EXIT WHEN v_res IS NOT NULL OR clock_timestamp() >= v_until;
        PERFORM pg_sleep(least(v_pause, extract(epoch FROM v_until - clock_timestamp())));
        v_pause := least(v_pause * 2, 1.0);
    END LOOP;
    RETURN QUERY
    SELECT (v_res ->> 'partitionId')::uuid, (m ->> 'id')::bigint, m ->> 'transactionId',
           m -> 'data', (m ->> 'createdAt')::timestamptz, nullif(v_res ->> 'leaseId', '')
      FROM jsonb_array_elements(coalesce(v_res -> 'messages', '[]'::jsonb)) WITH ORDINALITY AS x(m, n)
     ORDER BY x.n;
END;
$$;
REVOKE ALL ON FUNCTION queen.consume_one(text, text, integer, text, integer, boolean, text)
    FROM PUBLIC;

-- An ack of the contract ({transactionId, partitionId, leaseId, consumerGroup, status,
-- errorMessage}, snake_case too) as the HTTP ack's item.
CREATE OR REPLACE FUNCTION queen._sql_ack_item(a jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'transactionId', coalesce(a -> 'transactionId', a -> 'transaction_id'),
        'partitionId', coalesce(a -> 'partitionId', a -> 'partition_id'),
        'leaseId', coalesce(a -> 'leaseId', a -> 'lease_id'),
        'consumerGroup', coalesce(a -> 'consumerGroup', a -> 'consumer_group'),
        'status', coalesce(a -> 'status', '"completed"'::jsonb),
        'error', coalesce(a -> 'errorMessage', a -> 'error_message', a -> 'error')))
$$;

-- commit(acks) -> per ack the HTTP ack's answer {index, transactionId, success, error,
-- status, queueName, partitionName, leaseReleased, dlq}. completed moves the cursor; retry
-- gives the lease back (delivered again now); failed counts a retry (the queue's retry
-- policy and limit, then the dead-letter queue); dlq dead-letters at once.
CREATE OR REPLACE FUNCTION queen.commit(acks jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp SET queen.commit_wakes = 'on' AS $$
DECLARE
    v_acks jsonb := queen._sql_array($1, 'commit: acks');
BEGIN
    RETURN queen.ack_messages_v2(
        (SELECT coalesce(jsonb_agg(queen._sql_ack_item(e) ORDER BY o.n), '[]'::jsonb)
           FROM jsonb_array_elements(v_acks) WITH ORDINALITY AS o(e, n)));
END;
$$;
REVOKE ALL ON FUNCTION queen.commit(jsonb) FROM PUBLIC;

-- One ack; true when it succeeded. Status 'failed' acts as 'retry' (as the contract says),
-- 'retry' and 'dlq' as themselves, anything else as 'completed'.
CREATE OR REPLACE FUNCTION queen._sql_ack_one(
    p_txn text, p_pid uuid, p_lease text, p_group text, p_status text, p_error text
) RETURNS boolean
LANGUAGE sql AS $$
    SELECT coalesce((queen.ack_messages_v2(jsonb_build_array(jsonb_strip_nulls(
               jsonb_build_object(
                   'transactionId', p_txn, 'partitionId', p_pid, 'leaseId', p_lease,
                   'consumerGroup', coalesce(nullif(p_group, ''), '__QUEUE_MODE__'),
                   'status', CASE WHEN p_status IN ('failed', 'retry') THEN 'retry'
                                  WHEN p_status = 'dlq' THEN 'dlq' ELSE 'completed' END,
                   'error', p_error)))) -> 0 ->> 'success')::boolean, false)
$$;

CREATE OR REPLACE FUNCTION queen.commit_one(
    transaction_id text, partition_id uuid, lease_id text,
    consumer_group text DEFAULT '__QUEUE_MODE__', status text DEFAULT 'completed',
    error_message text DEFAULT NULL
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp SET queen.commit_wakes = 'on' AS $$
BEGIN
    RETURN queen._sql_ack_one($1, $2, $3, $4, $5, $6);
END;
$$;
REVOKE ALL ON FUNCTION queen.commit_one(text, uuid, text, text, text, text) FROM PUBLIC;

-- A nack: the message is delivered again at once (the lease is given back).
CREATE OR REPLACE FUNCTION queen.nack(
    transaction_id text, partition_id uuid, lease_id text,
    error_message text DEFAULT 'Processing failed', consumer_group text DEFAULT '__QUEUE_MODE__'
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp SET queen.commit_wakes = 'on' AS $$
BEGIN
    RETURN queen._sql_ack_one($1, $2, $3, $5, 'retry', $4);
END;
$$;
REVOKE ALL ON FUNCTION queen.nack(text, uuid, text, text, text) FROM PUBLIC;

-- A reject: the message goes to the dead-letter queue with the error text.
CREATE OR REPLACE FUNCTION queen.reject(
    transaction_id text, partition_id uuid, lease_id text,
    error_message text DEFAULT 'Rejected', consumer_group text DEFAULT '__QUEUE_MODE__'
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp SET queen.commit_wakes = 'on' AS $$
BEGIN
    RETURN queen._sql_ack_one($1, $2, $3, $5, 'dlq', $4);
END;
$$;
REVOKE ALL ON FUNCTION queen.reject(text, uuid, text, text, text) FROM PUBLIC;

-- renew(leases) -> per lease {leaseId, success, expiresAt, error}: a live lease lasts until
-- the later of its expiry and now + extendSeconds (missing: the queue's lease time).
CREATE OR REPLACE FUNCTION queen.renew(leases jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp AS $$
DECLARE
    v_leases jsonb := queen._sql_array($1, 'renew: leases');
BEGIN
    RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'leaseId', r -> 'leaseId', 'success', r -> 'success',
                       'expiresAt', r -> 'expiresAt', 'error', r -> 'error') ORDER BY o.n),
                       '[]'::jsonb)
              FROM jsonb_array_elements(v_leases) WITH ORDINALITY AS o(e, n)
             CROSS JOIN LATERAL queen.renew_lease_v3(jsonb_build_object(
                       'leaseId', coalesce(o.e ->> 'leaseId', o.e ->> 'lease_id'),
                       'seconds', coalesce(o.e -> 'extendSeconds', o.e -> 'extend_seconds')))
                   AS r);
END;
$$;
REVOKE ALL ON FUNCTION queen.renew(jsonb) FROM PUBLIC;

-- The lease's new expiry, NULL when it is unknown or expired.
CREATE OR REPLACE FUNCTION queen.renew_one(lease_id text, extend_seconds integer DEFAULT 60)
RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp AS $$
DECLARE
    v_res jsonb := queen.renew_lease_v3(jsonb_build_object('leaseId', $1, 'seconds', $2));
BEGIN
    RETURN CASE WHEN (v_res ->> 'success')::boolean
                THEN (v_res ->> 'expiresAt')::timestamptz END;
END;
$$;
REVOKE ALL ON FUNCTION queen.renew_one(text, integer) FROM PUBLIC;
