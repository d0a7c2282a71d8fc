-- ACK. queen._ack_items is the shared implementation (plain acks and transaction acks);
-- queen.ack_messages_v2 is the entry point the server calls.

-- Writes a partition_consumers row held in a variable (after moving its cursor over the
-- done prefix) and announces a freed lease.
CREATE OR REPLACE FUNCTION queen._pc_store(
    p_pc queen.partition_consumers, p_notify boolean,
    p_queue text, p_partition text, p_namespace text, p_task text
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    p_pc := queen._pc_apply_prefix(p_pc);
    UPDATE queen.partition_consumers
       SET last_consumed_id = p_pc.last_consumed_id,
           last_consumed_created_at = p_pc.last_consumed_created_at,
           lease_id = p_pc.lease_id,
           lease_expires_at = p_pc.lease_expires_at,
           lease_acquired_at = p_pc.lease_acquired_at,
           batch_ids = p_pc.batch_ids,
           acked_ids = p_pc.acked_ids,
           retry_message_id = p_pc.retry_message_id,
           retry_count = p_pc.retry_count,
           retry_available_at = p_pc.retry_available_at,
           total_messages_consumed = p_pc.total_messages_consumed,
           total_batches_consumed = p_pc.total_batches_consumed,
           last_consumed_at = p_pc.last_consumed_at
     WHERE partition_id = p_pc.partition_id AND consumer_group = p_pc.consumer_group;
    IF p_notify THEN
        PERFORM pg_notify('queen_wakeup', jsonb_build_object(
            'kind', 'free', 'queue', p_queue, 'partition', p_partition,
            'consumerGroup', p_pc.consumer_group, 'namespace', p_namespace, 'task', p_task)::text);
    END IF;
END;
$$;

-- p_acks: array of {transactionId, partitionId, status, error, consumerGroup, leaseId}.
-- p_tx:   transaction mode: no lease check, 'failed' goes straight to the DLQ.
-- Items are processed per (partition, group) in (created_at, id) order; the result array is
-- in input order: {index, transactionId, success, error, status, queueName, partitionName,
-- leaseReleased, dlq}. status: completed | failed_retry | failed_dlq | retry | already_acked
-- (null when success is false).
CREATE OR REPLACE FUNCTION queen._ack_items(p_acks jsonb, p_tx boolean)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_now       timestamptz := now();
    r           record;
    v_pc        queen.partition_consumers;
    v_exists    boolean := false;
    v_loaded    boolean := false;
    v_dirty     boolean := false;
    v_notify    boolean := false;
    v_cur_pid   uuid;
    v_cur_grp   text;
    v_q_name    text;
    v_p_name    text;
    v_q_ns      text;
    v_q_task    text;
    v_rel_batch bigint[];
    v_batch     bigint[];  -- working copies of v_pc.batch_ids / acked_ids (in-place appends)
    v_acked     bigint[];
    v_out       jsonb[] := '{}';
    v_lease     uuid;
    v_success   boolean;
    v_error     text;
    v_status    text;
    v_released  boolean;
    v_dlq       boolean;
    v_rc        integer;
    v_start     timestamptz;
BEGIN
    IF p_acks IS NULL OR jsonb_typeof(p_acks) <> 'array' OR jsonb_array_length(p_acks) = 0 THEN
        RETURN '[]'::jsonb;
    END IF;

    FOR r IN
        SELECT i.idx, i.txn, i.pid, i.status, i.err, i.grp, i.lease_txt,
               m.id AS mid, m.created_at AS mts,
               p.name AS pname, q.name AS qname, q.namespace AS ns, q.task AS tk,
               q.retry_limit, q.retry_delay
          FROM (SELECT (o.n - 1)::integer AS idx,
                       e ->> 'transactionId' AS txn,
                       queen._try_uuid(e ->> 'partitionId') AS pid,
                       lower(btrim(coalesce(nullif(e ->> 'status', ''), 'completed'))) AS status,
                       e ->> 'error' AS err,
                       coalesce(nullif(e ->> 'consumerGroup', ''), '__QUEUE_MODE__') AS grp,
                       nullif(e ->> 'leaseId', '') AS lease_txt
                  FROM jsonb_array_elements(p_acks) WITH ORDINALITY AS o(e, n)) i
          -- An index probe per item, whatever the statistics say (see 20_push.sql).
          LEFT JOIN LATERAL (
                SELECT m0.id, m0.created_at, m0.partition_id FROM queen.messages m0
                 WHERE m0.partition_id = i.pid AND m0.transaction_id = i.txn
                 LIMIT 1) m ON true
          LEFT JOIN queen.partitions p ON p.id = m.partition_id
          LEFT JOIN queen.queues q ON q.id = p.queue_id
         ORDER BY (m.id IS NULL) DESC, i.pid, i.grp, m.created_at, m.id, i.idx
    LOOP
        -- Switch to the (partition, group) of this item: store the previous one, lock this one.
        IF r.mid IS NOT NULL AND (NOT v_loaded OR r.pid <> v_cur_pid OR r.grp <> v_cur_grp) THEN
            IF v_loaded AND v_dirty THEN
                v_pc.batch_ids := v_batch;
                v_pc.acked_ids := v_acked;
                PERFORM queen._pc_store(v_pc, v_notify, v_q_name, v_p_name, v_q_ns, v_q_task);
            END IF;
            SELECT * INTO v_pc FROM queen.partition_consumers
             WHERE partition_id = r.pid AND consumer_group = r.grp
               FOR UPDATE;
            v_exists := FOUND;
            v_batch := v_pc.batch_ids;
            v_acked := coalesce(v_pc.acked_ids, '{}');
            v_loaded := true;
            v_dirty := false;
            v_notify := false;
            v_rel_batch := NULL;
            v_cur_pid := r.pid;
            v_cur_grp := r.grp;
            v_q_name := r.qname;
            v_p_name := r.pname;
            v_q_ns := r.ns;
            v_q_task := r.tk;
        END IF;

        v_success := false;
        v_error := NULL;
        v_status := NULL;
        v_released := false;
        v_dlq := false;

        <<item>>
        BEGIN
            IF r.mid IS NULL THEN
                v_error := 'Message not found';
                EXIT item;
            END IF;
            IF r.status NOT IN ('completed', 'success', 'failed', 'dlq', 'retry') THEN
                v_error := format('Unknown ack status: %s', r.status);
                EXIT item;
            END IF;

            -- Already consumed (at/behind the cursor, or acked out of order): harmless no-op.
            IF v_exists AND (
                   (r.mts, r.mid) <= (coalesce(v_pc.last_consumed_created_at, '-infinity'),
                                      v_pc.last_consumed_id)
                   OR r.mid = ANY (v_acked)) THEN
                v_success := true;
                v_status := 'already_acked';
                EXIT item;
            END IF;

            -- Part of a batch an earlier failed/retry ack of this request already released.
            IF r.mid = ANY (coalesce(v_rel_batch, '{}')) THEN
                IF r.status IN ('failed', 'retry') THEN
                    v_success := true;
                    v_status := CASE WHEN r.status = 'failed' THEN 'failed_retry' ELSE 'retry' END;
                ELSE
                    v_error := 'Lease was released by an earlier failed ack in this request';
                END IF;
                EXIT item;
            END IF;

            -- A leaseId must name the live lease of (partition, group).
            IF r.lease_txt IS NOT NULL AND NOT p_tx THEN
                v_lease := queen._try_uuid(r.lease_txt);
                IF NOT v_exists OR v_lease IS NULL OR v_pc.lease_id IS DISTINCT FROM v_lease
                   OR v_pc.lease_expires_at IS NULL OR v_pc.lease_expires_at <= v_now THEN
                    v_error := 'Invalid or expired lease';
                    EXIT item;
                END IF;
            END IF;

            IF NOT (v_exists AND r.mid = ANY (coalesce(v_batch, '{}'))) THEN
                -- Not delivered under the current lease. Without a lease (transactions,
                -- clients that omit it) the next message after the cursor may still be acked
                -- when nobody holds the partition; anything else would skip messages.
                IF r.lease_txt IS NOT NULL AND NOT p_tx THEN
                    v_error := 'Message was not delivered under this lease';
                    EXIT item;
                END IF;
                IF v_exists AND v_pc.lease_id IS NOT NULL AND v_pc.lease_expires_at > v_now THEN
                    v_error := 'Message is not part of the current lease';
                    EXIT item;
                END IF;
                IF NOT v_exists THEN
                    v_start := CASE WHEN r.grp = '__QUEUE_MODE__' THEN NULL
                                    ELSE queen._subscription_start(r.grp, r.qname, r.pname, r.ns, r.tk) END;
                    INSERT INTO queen.partition_consumers
                           (partition_id, consumer_group, last_consumed_created_at, last_consumed_id)
                    VALUES (r.pid, r.grp, v_start,
                            CASE WHEN v_start IS NULL THEN 0 ELSE 9223372036854775807 END)
                    ON CONFLICT (partition_id, consumer_group) DO NOTHING;
                    SELECT * INTO v_pc FROM queen.partition_consumers
                     WHERE partition_id = r.pid AND consumer_group = r.grp
                       FOR UPDATE;
                    v_exists := true;
                    v_batch := v_pc.batch_ids;
                    v_acked := coalesce(v_pc.acked_ids, '{}');
                    IF (r.mts, r.mid) <= (coalesce(v_pc.last_consumed_created_at, '-infinity'),
                                          v_pc.last_consumed_id) THEN
                        v_success := true;
                        v_status := 'already_acked';
                        EXIT item;
                    END IF;
                END IF;
                IF EXISTS (SELECT 1 FROM queen.messages m
                            WHERE m.partition_id = r.pid
                              AND (m.created_at, m.id)
                                  > (coalesce(v_pc.last_consumed_created_at, '-infinity'), v_pc.last_consumed_id)
                              AND (m.created_at, m.id) < (r.mts, r.mid)) THEN
                    v_error := 'Earlier messages of this partition are not acknowledged yet';
                    EXIT item;
                END IF;
                -- Implicit one-message batch (an expired lease, if any, is dropped).
                v_pc.lease_id := NULL;
                v_pc.lease_expires_at := NULL;
                v_pc.lease_acquired_at := NULL;
                v_batch := ARRAY[r.mid];
                v_acked := '{}';
            END IF;

            v_dirty := true;
            v_rc := CASE WHEN v_pc.retry_message_id = r.mid THEN v_pc.retry_count ELSE 0 END;

            IF r.status IN ('completed', 'success') THEN
                v_acked := v_acked || r.mid;
                v_status := 'completed';
            ELSIF r.status = 'dlq' OR (r.status = 'failed' AND (p_tx OR v_rc >= r.retry_limit)) THEN
                INSERT INTO queen.dead_letter_queue
                       (message_id, partition_id, consumer_group, error_message, retry_count,
                        original_created_at)
                VALUES (r.mid, r.pid, r.grp, coalesce(r.err, 'Retries exhausted'), v_rc, r.mts)
                ON CONFLICT ON CONSTRAINT dead_letter_queue_message_group_unique DO UPDATE
                   SET error_message = EXCLUDED.error_message,
                       retry_count = EXCLUDED.retry_count,
                       failed_at = now();
                v_acked := v_acked || r.mid;
                IF v_pc.retry_message_id = r.mid THEN
                    v_pc.retry_message_id := NULL;
                    v_pc.retry_count := 0;
                END IF;
                v_status := 'failed_dlq';
                v_dlq := true;
            ELSE
                -- 'failed' below the limit, or 'retry': give the partition back; the cursor
                -- stays before this message (it only covers the done prefix before it).
                v_pc.batch_ids := v_batch;
                v_pc.acked_ids := v_acked;
                v_pc := queen._pc_apply_prefix(v_pc);
                v_rel_batch := v_pc.batch_ids;
                IF r.status = 'failed' THEN
                    v_pc.retry_message_id := r.mid;
                    v_pc.retry_count := v_rc + 1;
                    v_pc.retry_available_at := CASE WHEN r.retry_delay > 0
                        THEN v_now + r.retry_delay * interval '1 millisecond' END;
                    v_status := 'failed_retry';
                ELSE
                    v_status := 'retry';
                END IF;
                v_released := v_pc.lease_id IS NOT NULL;
                v_pc.lease_id := NULL;
                v_pc.lease_expires_at := NULL;
                v_pc.lease_acquired_at := NULL;
                v_batch := NULL;
                v_acked := '{}';
            END IF;
            v_success := true;

            -- Whole delivered batch done: move the cursor and release the lease.
            IF coalesce(cardinality(v_batch), 0) > 0
               AND cardinality(v_acked) >= cardinality(v_batch) THEN
                v_pc.batch_ids := v_batch;
                v_pc.acked_ids := v_acked;
                v_pc := queen._pc_apply_prefix(v_pc);
                v_batch := v_pc.batch_ids;
                v_acked := coalesce(v_pc.acked_ids, '{}');
                IF cardinality(v_batch) = 0 THEN
                    v_released := v_pc.lease_id IS NOT NULL;
                    v_pc.total_batches_consumed := v_pc.total_batches_consumed + 1;
                    v_pc.lease_id := NULL;
                    v_pc.lease_expires_at := NULL;
                    v_pc.lease_acquired_at := NULL;
                    v_batch := NULL;
                    v_acked := '{}';
                END IF;
            END IF;
            IF v_released THEN
                v_notify := true;
            END IF;
        END item;

        v_out := v_out || jsonb_build_object(
            'index', r.idx,
            'transactionId', r.txn,
            'success', v_success,
            'error', v_error,
            'status', v_status,
            'queueName', r.qname,
            'partitionName', r.pname,
            'leaseReleased', v_released,
            'dlq', v_dlq);
    END LOOP;

    IF v_loaded AND v_dirty THEN
        v_pc.batch_ids := v_batch;
        v_pc.acked_ids := v_acked;
        PERFORM queen._pc_store(v_pc, v_notify, v_q_name, v_p_name, v_q_ns, v_q_task);
    END IF;

    RETURN (SELECT jsonb_agg(x ORDER BY (x ->> 'index')::integer) FROM unnest(v_out) AS x);
END;
$$;

-- Input: {acks:[...], consumerGroup?} (a top-level consumerGroup overrides the items'),
-- or a bare array of ack items, or a single ack item object.
CREATE OR REPLACE FUNCTION queen.ack_messages_v2(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql
-- Generic plans: these statements are cheap to run but costly to re-plan on every call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_acks  jsonb;
    v_group text;
BEGIN
    IF jsonb_typeof(p) = 'array' THEN
        v_acks := p;
    ELSIF jsonb_typeof(p) = 'object' THEN
        IF p ? 'acks' OR p ? 'acknowledgments' THEN
            v_acks := coalesce(p -> 'acks', p -> 'acknowledgments');
            v_group := nullif(p ->> 'consumerGroup', '');
        ELSE
            v_acks := jsonb_build_array(p);
        END IF;
    END IF;
    IF v_group IS NOT NULL AND jsonb_typeof(v_acks) = 'array' THEN
        SELECT jsonb_agg(e || jsonb_build_object('consumerGroup', v_group) ORDER BY o.n)
          INTO v_acks
          FROM jsonb_array_elements(v_acks) WITH ORDINALITY AS o(e, n);
    END IF;
    RETURN coalesce(queen._ack_items(v_acks, false), '[]'::jsonb);
END;
$$;
