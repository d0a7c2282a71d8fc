-- ACK. queen._ack_items is the shared implementation (plain acks and transaction acks);
-- queen.ack_messages_v2 is the entry point the server calls; queen.retry_delay_ms is the
-- retry schedule a failed ack applies (docs/retries.md).

-- How long (ms) a message waits after its p_attempt-th failed attempt (1 = its first
-- delivery failed) before it may be delivered again. Pure, so that the schedule can be
-- checked with fixed p_rand values:
--   fixed        p_base_ms
--   exponential  p_base_ms x 2^(p_attempt - 1)  } capped by p_max_ms (a cap below
--   linear       p_base_ms x p_attempt          } p_base_ms itself is raised to p_base_ms)
-- plus a jitter extra of floor(delay x p_jitter x p_rand), p_rand in [0, 1]: never earlier
-- than the schedule, at most p_jitter of it later. The cap applies before the jitter, so
-- that consumers that all reached the cap still spread out. Out-of-range inputs are
-- clamped (attempt >= 1, jitter and rand to [0, 1]); 2^n is never computed beyond the cap,
-- and the result is clamped to int4.
CREATE OR REPLACE FUNCTION queen.retry_delay_ms(
    p_strategy text, p_base_ms integer, p_max_ms integer, p_jitter real,
    p_attempt integer, p_rand double precision
) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT least(d.ms + floor(d.ms * j.share * j.r), 2147483647)::integer
      FROM (SELECT greatest(coalesce(p_base_ms, 0), 0)::bigint AS base,
                   greatest(coalesce(p_max_ms, 0), coalesce(p_base_ms, 0), 0)::bigint AS cap,
                   greatest(coalesce(p_attempt, 1), 1)::bigint AS n) a
     CROSS JOIN LATERAL (
            SELECT CASE lower(coalesce(p_strategy, 'fixed'))
                       WHEN 'exponential' THEN
                           CASE WHEN a.base = 0 THEN 0
                                WHEN a.n > 32 THEN a.cap  -- base x 2^32 > any int4 cap
                                ELSE least(a.base << (a.n - 1)::integer, a.cap) END
                       WHEN 'linear' THEN least(a.base * a.n, a.cap)
                       ELSE a.base
                   END AS ms) d
     CROSS JOIN (SELECT least(greatest(coalesce(p_jitter, 0), 0), 1)::numeric AS share,
                        least(greatest(coalesce(p_rand, 0), 0), 1)::numeric AS r) j
$$;

-- One failed attempt as the retry history, the dead-letter row and the traces keep it.
CREATE OR REPLACE FUNCTION queen._failed_attempt(
    p_attempt integer, p_at timestamptz, p_error text, p_error_type text,
    p_delay_ms integer, p_available_at timestamptz
) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object('attempt', p_attempt, 'failedAt', queen._iso_ms(p_at),
                              'error', p_error, 'errorType', p_error_type)
           || CASE WHEN p_delay_ms IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('delayMs', p_delay_ms,
                                           'availableAt', queen._iso_ms(p_available_at)) END
$$;

-- A trace row of the failure path (retry_scheduled, dead_lettered), shown by
-- GET /api/v1/traces/{partitionId}/{transactionId} with the consumers' own traces.
CREATE OR REPLACE FUNCTION queen._trace_failure(
    p_mid bigint, p_pid uuid, p_txn text, p_group text, p_event text, p_data jsonb
) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO queen.message_traces
           (message_id, partition_id, transaction_id, consumer_group, event_type, data)
    VALUES (p_mid, p_pid, p_txn, p_group, p_event, p_data)
$$;

-- Writes a partition_consumers row held in a variable (after moving its cursor over the
-- done prefix) and announces a freed lease; a freed lease whose retry waits carries the
-- wait (delayMs), so that listeners wake their long polls when it is over, not now.
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
           -- a lease this write frees is remembered (renewing it is "released", not unknown)
           last_lease_id = CASE WHEN p_pc.lease_id IS DISTINCT FROM lease_id
                                THEN coalesce(lease_id, last_lease_id) ELSE last_lease_id END,
           lease_id = p_pc.lease_id,
           lease_expires_at = p_pc.lease_expires_at,
           lease_acquired_at = p_pc.lease_acquired_at,
           batch_ids = p_pc.batch_ids,
           acked_ids = p_pc.acked_ids,
           retry_message_id = p_pc.retry_message_id,
           retry_count = p_pc.retry_count,
           retry_available_at = p_pc.retry_available_at,
           retry_history = p_pc.retry_history,
           total_messages_consumed = p_pc.total_messages_consumed,
           total_batches_consumed = p_pc.total_batches_consumed,
           last_consumed_at = p_pc.last_consumed_at
     WHERE partition_id = p_pc.partition_id AND consumer_group = p_pc.consumer_group;
    IF p_notify THEN
        PERFORM queen._wake(jsonb_build_object(
            'kind', 'free', 'queue', p_queue, 'partition', p_partition,
            'consumerGroup', p_pc.consumer_group, 'namespace', p_namespace, 'task', p_task)
            || CASE WHEN p_pc.retry_available_at > now()
                    THEN jsonb_build_object('delayMs', ceil(extract(epoch FROM
                             p_pc.retry_available_at - now()) * 1000)::bigint)
                    ELSE '{}'::jsonb END);
    END IF;
END;
$$;

-- The answer to an ack of a message its group has already committed: a completed ack is a
-- harmless no-op (success, noop), any nack (failed, retry, dlq) is refused: it can no longer
-- be honoured, and saying so beats a silent success (the 2.6.0 client's contract).
CREATE OR REPLACE FUNCTION queen._ack_committed(
    p_status text, OUT success boolean, OUT status text, OUT noop boolean, OUT error text
) LANGUAGE sql IMMUTABLE AS $$
    SELECT p_status IN ('completed', 'success'),
           CASE WHEN p_status IN ('completed', 'success') THEN 'already_acked' END,
           p_status IN ('completed', 'success'),
           CASE WHEN p_status NOT IN ('completed', 'success')
                THEN format('Already committed: the consumer group''s cursor is past this '
                            'message, so a %s cannot be applied', p_status) END
$$;

-- p_acks: array of {transactionId, partitionId, status, error, errorType, retryable,
--         consumerGroup, leaseId}.
-- p_tx:   transaction mode: 'failed' goes straight to the DLQ and a nack keeps the batch's
--         lease. A leaseId is checked in both modes (lease fencing).
-- A completed ack commits the silent gap before it in its delivered batch; an ack of a
-- committed message is a no-op flagged noop, a nack of one is refused (_ack_committed).
-- A nack ('failed', 'retry', 'dlq') releases the lease outside transactions.
-- A 'failed' item is retryable unless it says retryable:false, or errorType 'validation'
-- without retryable:true; a non-retryable one goes to the DLQ at once. A retryable one
-- waits queen.retry_delay_ms (the queue's policy) before its next delivery, until
-- retryLimit. Every failed attempt is kept (partition_consumers.retry_history, then the DLQ
-- row's attempts) and traced (retry_scheduled / dead_lettered); successes pay for none of it.
-- Items are processed per (partition, group) in (created_at, id) order; the result array is
-- in input order: {index, transactionId, success, error, status, queueName, partitionName,
-- leaseReleased, dlq} (+ {retryDelayMs, nextAttemptAt} when a retry was scheduled).
-- status: completed | failed_retry | failed_dlq | retry | already_acked (null when success
-- is false).
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
    v_hist      jsonb;     -- failed attempts of this message so far (retry_history)
    v_delay     integer;   -- retry wait scheduled by this item, ms
    v_retryable boolean;
    v_reason    text;
    v_noop      boolean;
    v_gap       integer := 0;  -- v_batch[1:v_gap] is committed by this request's acks
    v_pos       integer;
BEGIN
    IF p_acks IS NULL OR jsonb_typeof(p_acks) <> 'array' OR jsonb_array_length(p_acks) = 0 THEN
        RETURN '[]'::jsonb;
    END IF;

    FOR r IN
        SELECT i.idx, i.txn, i.pid, i.status, i.err, i.etype, i.retryable, i.grp, i.lease_txt,
               m.id AS mid, m.created_at AS mts,
               p.name AS pname, q.name AS qname, q.namespace AS ns, q.task AS tk,
               q.retry_limit, q.retry_delay, q.retry_strategy, q.retry_delay_max, q.retry_jitter
          FROM (SELECT (o.n - 1)::integer AS idx,
                       e ->> 'transactionId' AS txn,
                       queen._try_uuid(e ->> 'partitionId') AS pid,
                       lower(btrim(coalesce(nullif(e ->> 'status', ''), 'completed'))) AS status,
                       e ->> 'error' AS err,
                       nullif(e ->> 'errorType', '') AS etype,
                       queen._jbool(e -> 'retryable', NULL) AS retryable,
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
            v_gap := 0;
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
        v_delay := NULL;
        v_noop := false;

        <<item>>
        BEGIN
            IF r.mid IS NULL THEN
                v_error := 'Unresolvable transaction: no message with this transactionId in '
                           'this partition (never pushed, or removed by retention)';
                EXIT item;
            END IF;
            IF r.status NOT IN ('completed', 'success', 'failed', 'dlq', 'retry') THEN
                v_error := format('Unknown ack status: %s', r.status);
                EXIT item;
            END IF;

            -- Already committed (at/behind the cursor, or committed by a later ack of its
            -- batch): a completed ack is a harmless no-op and says so (noop); a nack can no
            -- longer be honoured and is refused instead of silently accepted.
            IF v_exists AND (
                   (r.mts, r.mid) <= (coalesce(v_pc.last_consumed_created_at, '-infinity'),
                                      v_pc.last_consumed_id)
                   OR r.mid = ANY (v_acked)) THEN
                SELECT a.success, a.status, a.noop, a.error
                  INTO v_success, v_status, v_noop, v_error FROM queen._ack_committed(r.status) a;
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

            -- A leaseId must name the live lease of (partition, group), in a transaction too
            -- (lease fencing: a holder whose lease expired commits nothing).
            IF r.lease_txt IS NOT NULL THEN
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
                IF r.lease_txt IS NOT NULL THEN
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
                        SELECT a.success, a.status, a.noop, a.error
                          INTO v_success, v_status, v_noop, v_error
                          FROM queen._ack_committed(r.status) a;
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
                v_gap := 0;
            END IF;

            v_dirty := true;
            v_rc := CASE WHEN v_pc.retry_message_id = r.mid THEN v_pc.retry_count ELSE 0 END;
            v_retryable := coalesce(r.retryable, lower(btrim(r.etype)) IS DISTINCT FROM 'validation');
            v_reason := CASE WHEN r.status = 'dlq' THEN 'dlq'
                             WHEN r.status <> 'failed' THEN NULL
                             WHEN p_tx THEN 'transaction'
                             WHEN NOT v_retryable THEN 'non_retryable'
                             WHEN v_rc >= r.retry_limit THEN 'retries_exhausted' END;
            IF r.status IN ('failed', 'dlq') THEN
                v_hist := CASE WHEN v_pc.retry_message_id = r.mid
                               THEN coalesce(v_pc.retry_history, '[]'::jsonb) ELSE '[]'::jsonb END;
                IF jsonb_array_length(v_hist) >= 100 THEN  -- keeps the last 100 attempts
                    v_hist := v_hist - 0;
                END IF;
            END IF;

            IF r.status IN ('completed', 'success') THEN
                -- An ack is a commit: it completes every message delivered before it under
                -- this lease that was neither acked nor nacked (the silent gap), never one
                -- outside the delivered batch. A nack earlier in the batch has already
                -- released it (below), so a later ack cannot pass over a nack.
                v_pos := array_position(v_batch, r.mid);
                IF v_pos > v_gap THEN
                    v_acked := v_acked || v_batch[v_gap + 1:v_pos];
                    v_gap := v_pos;
                ELSE
                    v_acked := v_acked || r.mid;
                END IF;
                v_status := 'completed';
            ELSIF v_reason IS NOT NULL THEN
                v_hist := v_hist || jsonb_build_array(
                    queen._failed_attempt(v_rc + 1, v_now, r.err, r.etype, NULL, NULL));
                INSERT INTO queen.dead_letter_queue
                       (message_id, partition_id, consumer_group, error_message, retry_count,
                        original_created_at, error_type, attempts)
                VALUES (r.mid, r.pid, r.grp,
                        coalesce(r.err, CASE WHEN v_reason = 'non_retryable'
                                             THEN 'Non-retryable failure'
                                             ELSE 'Retries exhausted' END),
                        v_rc, r.mts, r.etype, v_hist)
                ON CONFLICT ON CONSTRAINT dead_letter_queue_message_group_unique DO UPDATE
                   SET error_message = EXCLUDED.error_message,
                       retry_count = EXCLUDED.retry_count,
                       error_type = EXCLUDED.error_type,
                       attempts = EXCLUDED.attempts,
                       failed_at = now();
                PERFORM queen._trace_failure(r.mid, r.pid, r.txn, r.grp, 'dead_lettered',
                    jsonb_build_object('attempt', v_rc + 1, 'retryCount', v_rc, 'reason', v_reason,
                                       'error', r.err, 'errorType', r.etype));
                v_acked := v_acked || r.mid;
                IF v_pc.retry_message_id = r.mid THEN
                    v_pc.retry_message_id := NULL;
                    v_pc.retry_count := 0;
                    v_pc.retry_history := NULL;
                END IF;
                v_status := 'failed_dlq';
                v_dlq := true;
                -- A consumer's nack (under its lease) ends the lease: it drops the rest of
                -- its batch, which is redelivered at once, once everything before the
                -- dead-lettered message is done; with a silent gap before it the lease
                -- stays, so the message is not delivered again from the cursor.
                -- Transactions and an operator's move to the DLQ (no lease) keep the batch.
                IF NOT p_tx AND r.lease_txt IS NOT NULL AND v_pc.lease_id IS NOT NULL THEN
                    v_pc.batch_ids := v_batch;
                    v_pc.acked_ids := v_acked;
                    v_pc := queen._pc_apply_prefix(v_pc);
                    v_batch := v_pc.batch_ids;
                    v_acked := coalesce(v_pc.acked_ids, '{}');
                    v_gap := 0;
                    IF NOT r.mid = ANY (coalesce(v_batch, '{}')) THEN
                        v_rel_batch := v_batch;
                        v_released := true;
                        v_pc.lease_id := NULL;
                        v_pc.lease_expires_at := NULL;
                        v_pc.lease_acquired_at := NULL;
                        v_batch := NULL;
                        v_acked := '{}';
                    END IF;
                END IF;
            ELSE
                -- 'failed' below the limit, or 'retry': give the partition back; the cursor
                -- stays before this message (it only covers the done prefix before it).
                v_pc.batch_ids := v_batch;
                v_pc.acked_ids := v_acked;
                v_pc := queen._pc_apply_prefix(v_pc);
                v_rel_batch := v_pc.batch_ids;
                IF r.status = 'failed' THEN
                    v_delay := queen.retry_delay_ms(r.retry_strategy, r.retry_delay,
                                                    r.retry_delay_max, r.retry_jitter,
                                                    v_rc + 1, random());
                    v_pc.retry_message_id := r.mid;
                    v_pc.retry_count := v_rc + 1;
                    v_pc.retry_available_at := CASE WHEN v_delay > 0
                        THEN v_now + v_delay * interval '1 millisecond' END;
                    v_pc.retry_history := v_hist || jsonb_build_array(queen._failed_attempt(
                        v_rc + 1, v_now, r.err, r.etype, v_delay,
                        coalesce(v_pc.retry_available_at, v_now)));
                    PERFORM queen._trace_failure(r.mid, r.pid, r.txn, r.grp, 'retry_scheduled',
                        jsonb_build_object('attempt', v_rc + 1, 'delayMs', v_delay,
                                           'availableAt', queen._iso_ms(
                                               coalesce(v_pc.retry_available_at, v_now)),
                                           'error', r.err, 'errorType', r.etype,
                                           'strategy', r.retry_strategy));
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
                v_gap := 0;
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
                v_gap := 0;
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

        v_out := v_out || (jsonb_build_object(
            'index', r.idx,
            'transactionId', r.txn,
            'success', v_success,
            'error', v_error,
            'status', v_status,
            'queueName', r.qname,
            'partitionName', r.pname,
            'leaseReleased', v_released,
            'dlq', v_dlq)
            || CASE WHEN v_noop THEN '{"noop": true}'::jsonb ELSE '{}'::jsonb END
            || CASE WHEN v_delay IS NULL THEN '{}'::jsonb
                    ELSE jsonb_build_object('retryDelayMs', v_delay, 'nextAttemptAt',
                                            queen._iso_ms(v_now + v_delay * interval '1 millisecond'))
               END);
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

-- What the server calls: ack_messages_v2 with wake-ups left to the server
-- (queen.server_wakes) and the wake-interest epoch (queen._wake_epoch).
CREATE OR REPLACE FUNCTION queen.ack_messages_v3(p jsonb, OUT results jsonb, OUT wake_epoch bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('queen.server_wakes', 'on', true);
    wake_epoch := queen._wake_epoch();
    results := queen.ack_messages_v2(p);
END;
$$;
