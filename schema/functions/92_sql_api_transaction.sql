-- QUEEN'S SQL API: transaction and forward, the HTTP face's transaction
-- (queen.execute_transaction_v2: pushes and acks all or none, each ack fenced by its lease).
-- The rest of the API: 92_sql_api.sql; docs/sql.md.

-- The queues of a transaction's pushes that have encryptionEnabled (a produce from SQL
-- there is refused: 92_sql_api.sql), the first one, or NULL.
CREATE OR REPLACE FUNCTION queen._sql_encrypted_queue(p_queues text[]) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT q.name FROM queen.queues q
     WHERE q.name = ANY (p_queues) AND q.encryption_enabled
     ORDER BY q.name LIMIT 1
$$;

-- transaction(operations) -> {transactionId, success, results: [{type, index, success,
-- status, messageId, queueName, partitionId, transactionId, error}], error}: operations
-- {type: 'push', queue, partition, payload, transactionId?} and {type: 'ack',
-- transactionId, partitionId, leaseId?, consumerGroup, status, errorMessage?}, all or none:
-- a failing one takes the others back and the answer says success: false (no error is
-- raised). transactionId: this bundle's id (a uuid v7). An ack's 'failed' dead-letters at
-- once, as in the HTTP face's transactions.
CREATE OR REPLACE FUNCTION queen.transaction(operations jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp SET queen.commit_wakes = 'on' AS $$
DECLARE
    v_ops jsonb := CASE jsonb_typeof($1) WHEN 'object' THEN coalesce($1 -> 'operations', '[]')
                        ELSE $1 END;
    v_id  text := queen.uuid_generate_v7()::text;
    v_enc text;
    v_res jsonb;
BEGIN
    IF v_ops IS NULL OR jsonb_typeof(v_ops) <> 'array' THEN
        RAISE EXCEPTION 'queen.transaction: operations must be a JSON array' USING ERRCODE = '22023';
    END IF;
    IF jsonb_array_length(v_ops) = 0 THEN
        RETURN jsonb_build_object('transactionId', v_id, 'success', true, 'results', '[]'::jsonb);
    END IF;
    v_enc := queen._sql_encrypted_queue(ARRAY(
        SELECT e ->> 'queue' FROM jsonb_array_elements(v_ops) e WHERE e ->> 'type' = 'push'));
    IF v_enc IS NOT NULL THEN
        RETURN jsonb_build_object('transactionId', v_id, 'success', false, 'results', '[]'::jsonb,
            'error', format('queue %s has encryptionEnabled: a produce from SQL would store its '
                            'payload in clear (the key is the server''s)', v_enc));
    END IF;
    v_res := queen.execute_transaction_v2(jsonb_build_object('operations', (
        SELECT jsonb_agg(CASE WHEN e ->> 'type' = 'push'
                              THEN jsonb_build_object('type', 'push', 'items',
                                       queen._sql_produce_items(jsonb_build_array(e - 'type')))
                              WHEN e ->> 'type' = 'ack'
                              THEN queen._sql_ack_item(e) || jsonb_build_object('type', 'ack')
                              ELSE e END
                         ORDER BY o.n)
          FROM jsonb_array_elements(v_ops) WITH ORDINALITY AS o(e, n))));
    -- (nulls left out: an error only when there is one)
    RETURN jsonb_strip_nulls(jsonb_build_object(
        'transactionId', v_id, 'success', v_res -> 'success', 'error', v_res -> 'error',
        'results', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                               'type', r -> 'type', 'index', r -> 'index',
                               'success', r -> 'success', 'status', r -> 'status',
                               'messageId', r -> 'messageId', 'queueName', r -> 'queueName',
                               'partitionId', coalesce(r -> 'partitionId',
                                   v_ops -> (r ->> 'index')::integer -> 'partitionId'),
                               'transactionId', r -> 'transactionId', 'error', r -> 'error')
                               ORDER BY o.n), '[]'::jsonb)
                      FROM jsonb_array_elements(v_res -> 'results') WITH ORDINALITY AS o(r, n))));
END;
$$;
REVOKE ALL ON FUNCTION queen.transaction(jsonb) FROM PUBLIC;

-- forward: the source message's ack (completed, under its lease) and the push of a new
-- message, in one transaction (queen.execute_transaction_v2): the new message's id, or
-- NULL when the ack failed (a lease that is not held: nothing is pushed).
CREATE OR REPLACE FUNCTION queen.forward(
    source_transaction_id text, source_partition_id uuid, source_lease_id text,
    source_consumer_group text, dest_queue text, dest_payload jsonb,
    dest_partition text DEFAULT 'Default', dest_transaction_id text DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp SET queen.commit_wakes = 'on' AS $$
DECLARE
    v_res jsonb;
BEGIN
    IF queen._sql_encrypted_queue(ARRAY[$5]) IS NOT NULL THEN
        PERFORM queen._sql_refuse_encrypted($5);
    END IF;
    v_res := queen.execute_transaction_v2(jsonb_build_object('operations', jsonb_build_array(
        queen._sql_ack_item(jsonb_build_object(
            'transactionId', $1, 'partitionId', $2, 'leaseId', $3,
            'consumerGroup', coalesce(nullif($4, ''), '__QUEUE_MODE__'),
            'status', 'completed')) || '{"type": "ack"}'::jsonb,
        jsonb_build_object('type', 'push', 'items', jsonb_build_array(jsonb_strip_nulls(
            jsonb_build_object('queue', $5, 'partition', coalesce(nullif($7, ''), 'Default'),
                               'transactionId', $8))
            || jsonb_build_object('payload', coalesce($6, 'null'::jsonb)))))));
    IF NOT coalesce((v_res ->> 'success')::boolean, false) THEN
        RETURN NULL;
    END IF;
    RETURN (v_res -> 'results' -> 1 ->> 'messageId')::bigint;
END;
$$;
REVOKE ALL ON FUNCTION queen.forward(text, uuid, text, text, text, jsonb, text, text) FROM PUBLIC;
