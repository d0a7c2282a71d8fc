-- TRANSACTION: pushes and acks applied atomically. Any failure (a failed push item, an ack
-- that does not succeed, an unknown operation type, a database error) rolls back every
-- operation and is reported as {success:false, error, results}.
--
-- Input:  {operations:[{type:"push", items:[...push items...]}
--                      | {type:"ack", transactionId, partitionId, status, error, consumerGroup}]}
-- Output: {success, error|null, results:[
--            {index, type:"push", itemIndex, success, status, transactionId, messageId, partitionId,
--             queueName, error and reason (as push: queue_full...) when it failed}
--          | {index, type:"ack", success, status, transactionId, error, dlq}]}
-- An ack is fenced by its lease: the operation's leaseId, or, when it names none and
-- requiredLeases names exactly one, that one (the 2.6.0 client's rule: in a bundle of two
-- leases an ack without its own is not lent one). An ack under a lease that expired or is
-- another's fails, and with it the whole bundle. 'failed' goes straight to the dead-letter
-- queue. A failure's error starts with "Transaction rolled back:".
--
-- Riders run before the operations, their results follow the operations' in the flat
-- results[] (kv first, then timers); with a rider, operations may be empty.
-- `kv` (queen.transaction_kv_v1, schema/functions/65_kv_apply.sql): its row locks come
-- before any partition's; a lost `required` precondition rolls everything back and answers
-- {success:false, reason:"kv_precondition", failedIndex, kvReason, version, value}.
-- `timers` (queen.transaction_timers_v1, schema/functions/98_timers.sql): its timer row
-- locks come before any partition's, the order of the timers' firer.
CREATE OR REPLACE FUNCTION queen.execute_transaction_v2(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql
-- Generic plans: these statements are cheap to run but costly to re-plan on every call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_ops     jsonb := CASE WHEN jsonb_typeof(p) = 'array' THEN p ELSE p -> 'operations' END;
    v_results jsonb[] := '{}';
    v_op      jsonb;
    v_idx     integer;
    v_type    text;
    v_res     jsonb;
    v_item    jsonb;
    v_ack     jsonb;
    v_fail    text;
    v_timers  jsonb := CASE WHEN jsonb_typeof(p) = 'object' THEN p -> 'timers' END;
    v_tm_res  jsonb := '[]'::jsonb;
    v_base    integer;
    v_lend    jsonb := CASE WHEN jsonb_typeof(p -> 'requiredLeases') = 'array'
                             AND jsonb_array_length(p -> 'requiredLeases') = 1
                            THEN p -> 'requiredLeases' -> 0 END;
    v_kv      jsonb := CASE WHEN jsonb_typeof(p) = 'object' THEN p -> 'kv' END;
    v_kv_res  jsonb := '[]'::jsonb;
BEGIN
    IF v_ops IS NULL OR jsonb_typeof(v_ops) <> 'array' THEN
        RETURN jsonb_build_object('success', false, 'error', 'operations array required',
                                  'results', '[]'::jsonb);
    END IF;
    IF jsonb_array_length(v_ops) = 0 AND coalesce(jsonb_array_length(v_kv), 0) = 0
       AND coalesce(jsonb_array_length(v_timers), 0) = 0 THEN
        RETURN jsonb_build_object('success', false, 'error', 'operations array cannot be empty',
                                  'results', '[]'::jsonb);
    END IF;

    -- The flat index of the first rider result: one entry per pushed item and per ack.
    SELECT coalesce(sum(CASE WHEN e ->> 'type' = 'push' AND jsonb_typeof(e -> 'items') = 'array'
                             THEN jsonb_array_length(e -> 'items') ELSE 1 END), 0)
      INTO v_base FROM jsonb_array_elements(v_ops) e;

    BEGIN
        IF jsonb_typeof(v_kv) = 'array' THEN
            v_kv_res := queen.transaction_kv_v1(v_kv, v_base);
        END IF;
        IF jsonb_typeof(v_timers) = 'array' THEN
            v_tm_res := queen.transaction_timers_v1(v_timers, v_base + jsonb_array_length(v_kv_res));
        END IF;
        FOR v_op, v_idx IN
            SELECT e, (o.n - 1)::integer FROM jsonb_array_elements(v_ops) WITH ORDINALITY AS o(e, n)
             ORDER BY o.n
        LOOP
            v_type := CASE WHEN jsonb_typeof(v_op) = 'object' THEN v_op ->> 'type' END;
            IF v_type = 'push' THEN
                IF jsonb_typeof(v_op -> 'items') <> 'array' OR jsonb_array_length(v_op -> 'items') = 0 THEN
                    RAISE EXCEPTION 'operation %: push requires a non-empty items array', v_idx;
                END IF;
                v_res := queen._push_items(v_op -> 'items', true)::jsonb;
                FOR v_item IN SELECT e FROM jsonb_array_elements(v_res) e LOOP
                    v_results := v_results || (jsonb_build_object(
                        'index', v_idx,
                        'type', 'push',
                        'itemIndex', v_item -> 'index',
                        'success', v_item ->> 'status' IN ('queued', 'duplicate'),
                        'status', v_item -> 'status',
                        'transactionId', v_item -> 'transactionId',
                        'messageId', v_item -> 'message_id',
                        'partitionId', v_item -> 'partition_id',
                        'queueName', v_item -> 'queueName')
                        || CASE WHEN v_item ? 'error'
                                THEN jsonb_build_object('error', v_item -> 'error',
                                                        'reason', v_item -> 'reason')
                                ELSE '{}'::jsonb END);
                    IF v_item ->> 'status' NOT IN ('queued', 'duplicate') THEN
                        RAISE EXCEPTION 'operation %: push of % failed: %', v_idx,
                            coalesce(v_item ->> 'transactionId', '?'),
                            coalesce(v_item ->> 'error', 'unknown error');
                    END IF;
                END LOOP;
            ELSIF v_type = 'ack' THEN
                IF nullif(v_op ->> 'leaseId', '') IS NULL AND v_lend IS NOT NULL THEN
                    v_op := v_op || jsonb_build_object('leaseId', v_lend);
                END IF;
                v_ack := (queen._ack_items(jsonb_build_array(v_op - 'type'), true)) -> 0;
                v_results := v_results || jsonb_build_object(
                    'index', v_idx,
                    'type', 'ack',
                    'success', v_ack -> 'success',
                    'status', v_ack -> 'status',
                    'transactionId', v_op -> 'transactionId',
                    'error', v_ack -> 'error',
                    'dlq', v_ack -> 'dlq');
                IF NOT coalesce((v_ack ->> 'success')::boolean, false) THEN
                    RAISE EXCEPTION 'operation %: ack of % failed: %', v_idx,
                        coalesce(v_op ->> 'transactionId', '?'),
                        coalesce(v_ack ->> 'error', 'unknown error');
                END IF;
            ELSE
                v_results := v_results || jsonb_build_object(
                    'index', v_idx, 'type', v_type, 'success', false,
                    'error', format('Unknown operation type: %s', coalesce(v_type, 'null')));
                RAISE EXCEPTION 'operation %: unknown operation type: %', v_idx, coalesce(v_type, 'null');
            END IF;
        END LOOP;
    EXCEPTION WHEN SQLSTATE 'QK001' THEN
        GET STACKED DIAGNOSTICS v_fail = PG_EXCEPTION_DETAIL;
        RETURN queen._kv_precondition_answer(v_fail, v_base) || jsonb_build_object('results', '[]'::jsonb);
    WHEN others THEN
        GET STACKED DIAGNOSTICS v_fail = MESSAGE_TEXT;
        RETURN jsonb_build_object('success', false, 'error', 'Transaction rolled back: ' || v_fail,
                                  'results', to_jsonb(v_results));
    END;

    RETURN jsonb_build_object('success', true, 'error', NULL,
                              'results', to_jsonb(v_results) || v_kv_res || v_tm_res);
END;
$$;
