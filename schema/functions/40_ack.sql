-- ACK. queen._ack_items is the shared implementation (plain acks and transaction acks),
-- in named steps: the items resolved (its loop's query), _ack_implicit (an ack outside the
-- delivered batch), _ack_nack (with _ack_dead_letter and _ack_schedule_retry),
-- _ack_batch_done, _ack_flush (store a row); queen.ack_messages_v2 is the entry
-- point the server calls; queen.retry_delay_ms is the retry schedule a failed ack applies
-- (docs/retries.md).

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

DROP FUNCTION IF EXISTS queen._pc_store(queen.partition_consumers, boolean, text, text, text,
                                         text);
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

-- After a consumer's nack dead-lettered a message of its batch (2.6.0: the consumer drops
-- the rest of the batch), the lease ends and the rest of the batch is delivered again at
-- once, instead of after the lease time. Only when nothing the request completed stands
-- behind a silent gap (an acked message still in the batch): those would be delivered
-- twice, so the lease then stays until the consumer settles the gap or it expires.
CREATE OR REPLACE FUNCTION queen._pc_after_nack(p_pc queen.partition_consumers)
RETURNS queen.partition_consumers
LANGUAGE plpgsql AS $$
BEGIN
    p_pc := queen._pc_apply_prefix(p_pc);
    IF p_pc.lease_id IS NOT NULL AND coalesce(cardinality(p_pc.batch_ids), 0) > 0
       AND NOT (p_pc.batch_ids && coalesce(p_pc.acked_ids, '{}')) THEN
        p_pc.lease_id := NULL;
        p_pc.lease_expires_at := NULL;
        p_pc.lease_acquired_at := NULL;
        p_pc.batch_ids := NULL;
        p_pc.acked_ids := NULL;
    END IF;
    RETURN p_pc;
END;
$$;

-- The messages (partition_id, transaction_id) of the pairs p_pids/p_txns (aligned; those
-- found): one index probe per pair, one statement per partition (on Citus each one runs on
-- the worker that holds the partition).
CREATE OR REPLACE FUNCTION queen._ack_messages_of(p_pids uuid[], p_txns text[])
RETURNS TABLE (pid uuid, txn text, mid bigint, mts timestamptz)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_pid  uuid;
    v_txns text[];
BEGIN
    FOR v_pid IN SELECT DISTINCT u.p FROM unnest(p_pids) AS u(p) WHERE u.p IS NOT NULL LOOP
        v_txns := ARRAY(SELECT u.t FROM unnest(p_pids, p_txns) AS u(p, t) WHERE u.p = v_pid);
        -- an index probe per item, whatever the statistics say (see 20_push.sql); on Citus
        -- a statement keyed by one partition goes to its shard as it is
        RETURN QUERY
            SELECT m.partition_id, m.transaction_id, m.id, m.created_at
              FROM (SELECT DISTINCT u.t FROM unnest(v_txns) AS u(t)) t
             CROSS JOIN LATERAL (
                    SELECT m0.partition_id, m0.transaction_id, m0.id, m0.created_at
                      FROM queen.messages m0
                     WHERE m0.partition_id = v_pid AND m0.transaction_id = t.t
                     LIMIT 1) m;
    END LOOP;
END;
$$;

DROP FUNCTION IF EXISTS queen._ack_rows(jsonb);
-- The ack items of a request, each with its message and its queue's retry policy (NULL
-- message columns: no message with this transactionId in this partition), in the order
-- queen._ack_items works them: unresolvable ones first, then per (partition, group) in
-- (created_at, id) order; a cursor open on them, which _ack_items reads. A batch's ack
-- names one partition in every item (nearly every ack): its names and policy by its key,
-- then the items with their messages, one probe each, by a query on that partition alone
-- (on Citus a statement on its worker). Any other: each partitionId parsed and looked up
-- once, each item's message by an index probe (_ack_messages_of, a statement per
-- partition). (Statements of their own, not a table function: as one, _ack_rows cost a
-- third of an ack's time in calling and materializing.)
CREATE OR REPLACE FUNCTION queen._ack_resolve(p_acks jsonb)
RETURNS refcursor
LANGUAGE plpgsql AS $$
DECLARE
    v_rows    refcursor;
    v_one_txt text;  -- the partitionId every item names, if one
    v_one     uuid;
    v_def     record;  -- its names and retry policy
BEGIN
    v_one_txt := p_acks -> 0 ->> 'partitionId';
    IF v_one_txt IS NOT NULL
       AND jsonb_array_length(jsonb_path_query_array(
               p_acks, '$[*] ? (@.partitionId == $p)', jsonb_build_object('p', v_one_txt)))
           = jsonb_array_length(p_acks) THEN
        v_one := queen._try_uuid(v_one_txt);
    END IF;
    IF v_one IS NOT NULL THEN
        SELECT p.name::text AS pname, q.name::text AS qname, q.namespace::text AS ns,
               q.task::text AS tk, q.retry_limit, q.retry_delay,
               q.retry_strategy::text AS retry_strategy, q.retry_delay_max, q.retry_jitter
          INTO v_def
          FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
         WHERE p.id = v_one;
        OPEN v_rows FOR
            SELECT i.idx, i.txn, v_one AS pid, i.status, i.err, i.etype, i.retryable, i.grp,
                   i.lease_txt, m.mid, m.mts,
                   -- (the names and policy only with a message, as below)
                   CASE WHEN m.mid IS NOT NULL THEN v_def.pname END AS pname,
                   CASE WHEN m.mid IS NOT NULL THEN v_def.qname END AS qname,
                   CASE WHEN m.mid IS NOT NULL THEN v_def.ns END AS ns,
                   CASE WHEN m.mid IS NOT NULL THEN v_def.tk END AS tk,
                   CASE WHEN m.mid IS NOT NULL THEN v_def.retry_limit END AS retry_limit,
                   CASE WHEN m.mid IS NOT NULL THEN v_def.retry_delay END AS retry_delay,
                   CASE WHEN m.mid IS NOT NULL THEN v_def.retry_strategy END AS retry_strategy,
                   CASE WHEN m.mid IS NOT NULL THEN v_def.retry_delay_max END AS retry_delay_max,
                   CASE WHEN m.mid IS NOT NULL THEN v_def.retry_jitter END AS retry_jitter
              FROM (SELECT (o.n - 1)::integer AS idx,
                           e ->> 'transactionId' AS txn,
                           lower(btrim(coalesce(nullif(e ->> 'status', ''), 'completed')))
                               AS status,
                           e ->> 'error' AS err,
                           nullif(e ->> 'errorType', '') AS etype,
                           queen._jbool(e -> 'retryable', NULL) AS retryable,
                           coalesce(nullif(e ->> 'consumerGroup', ''), '__QUEUE_MODE__') AS grp,
                           nullif(e ->> 'leaseId', '') AS lease_txt
                      FROM jsonb_array_elements(p_acks) WITH ORDINALITY AS o(e, n)) i
              LEFT JOIN LATERAL (SELECT m0.id AS mid, m0.created_at AS mts
                                   FROM queen.messages m0
                                  WHERE m0.partition_id = v_one AND m0.transaction_id = i.txn
                                  LIMIT 1) m ON true
             ORDER BY (m.mid IS NULL) DESC, i.grp, m.mts, m.mid, i.idx;
    ELSE
        OPEN v_rows FOR
            WITH i AS (  -- each item's values, computed once (not once per use)
                SELECT (o.n - 1)::integer AS idx,
                       e ->> 'transactionId' AS txn,
                       e ->> 'partitionId' AS pid_txt,
                       lower(btrim(coalesce(nullif(e ->> 'status', ''), 'completed'))) AS status,
                       e ->> 'error' AS err,
                       nullif(e ->> 'errorType', '') AS etype,
                       queen._jbool(e -> 'retryable', NULL) AS retryable,
                       coalesce(nullif(e ->> 'consumerGroup', ''), '__QUEUE_MODE__') AS grp,
                       nullif(e ->> 'leaseId', '') AS lease_txt
                  FROM jsonb_array_elements(p_acks) WITH ORDINALITY AS o(e, n)),
            -- each partitionId parsed and looked up once: a batch's items name one (per item,
            -- _try_uuid's regular expression cost more than the rest of its resolution)
            ids AS (SELECT d.pid_txt, x.pid, pq.*
                      FROM (SELECT DISTINCT i.pid_txt FROM i) d
                     CROSS JOIN LATERAL (SELECT queen._try_uuid(d.pid_txt) AS pid) x
                      -- key lookups, whatever the statistics say
                      LEFT JOIN LATERAL (
                            SELECT p.name::text AS pname, q.name::text AS qname,
                                   q.namespace::text AS ns, q.task::text AS tk, q.retry_limit,
                                   q.retry_delay, q.retry_strategy::text AS retry_strategy,
                                   q.retry_delay_max, q.retry_jitter
                              FROM queen.partitions p
                             CROSS JOIN LATERAL (SELECT * FROM queen.queues q0
                                                  WHERE q0.id = p.queue_id LIMIT 1) q
                             WHERE p.id = x.pid
                             LIMIT 1) pq ON true)
            -- each item's message: an index probe per item (_ack_messages_of)
            , f AS MATERIALIZED (
                SELECT x.*
                  FROM (SELECT array_agg(ids.pid) AS ps, array_agg(i.txn) AS ts
                          FROM i JOIN ids ON ids.pid_txt = i.pid_txt
                         WHERE ids.pid IS NOT NULL) a
                 CROSS JOIN LATERAL queen._ack_messages_of(a.ps, a.ts) x)
            SELECT i.idx, i.txn, ids.pid, i.status, i.err, i.etype, i.retryable, i.grp, i.lease_txt,
                   m.mid, m.mts, n.pname, n.qname, n.ns, n.tk, n.retry_limit, n.retry_delay,
                   n.retry_strategy, n.retry_delay_max, n.retry_jitter
              FROM i
              LEFT JOIN ids ON ids.pid_txt = i.pid_txt
              LEFT JOIN f m ON m.pid = ids.pid AND m.txn = i.txn
              -- the names and policy of a found message's partition (none without a message)
              LEFT JOIN ids n ON n.pid_txt = i.pid_txt AND m.mid IS NOT NULL
             ORDER BY (m.mid IS NULL) DESC, ids.pid, i.grp, m.mts, m.mid, i.idx;
    END IF;
    RETURN v_rows;
END;
$$;

-- Writes what a request did to one (partition, group): its working batch and acked ids
-- (after moving its cursor over the done prefix), the end of the lease after a consumer's
-- nack dead-lettered a message of the batch (_pc_after_nack), and announces a freed lease;
-- a freed lease whose retry waits carries the wait (delayMs), so that listeners wake their
-- long polls when it is over, not now.
CREATE OR REPLACE FUNCTION queen._ack_flush(
    p_pc queen.partition_consumers, p_batch bigint[], p_acked bigint[], p_nacked boolean,
    p_notify boolean, p_queue text, p_partition text, p_namespace text, p_task text
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    p_pc.batch_ids := p_batch;
    p_pc.acked_ids := p_acked;
    IF p_nacked THEN
        p_pc := queen._pc_after_nack(p_pc);
        p_notify := p_notify OR p_pc.lease_id IS NULL;
    END IF;
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
    -- (queen._wake sends nothing for the server's own acks: not even called then)
    IF p_notify AND current_setting('queen.server_wakes', true) IS DISTINCT FROM 'on' THEN
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

-- Dead-letters a message (its attempts in p_hist, this one included) and traces it.
CREATE OR REPLACE FUNCTION queen._ack_dead_letter(
    p_mid bigint, p_pid uuid, p_txn text, p_group text, p_mts timestamptz, p_err text,
    p_etype text, p_rc integer, p_reason text, p_hist jsonb
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := now();
BEGIN
    INSERT INTO queen.dead_letter_queue
           (message_id, partition_id, consumer_group, error_message, retry_count,
            original_created_at, error_type, attempts)
    VALUES (p_mid, p_pid, p_group,
            coalesce(p_err, CASE WHEN p_reason = 'non_retryable' THEN 'Non-retryable failure'
                                 ELSE 'Retries exhausted' END),
            p_rc, p_mts, p_etype, p_hist)
    ON CONFLICT ON CONSTRAINT dead_letter_queue_message_group_unique DO UPDATE
       SET error_message = EXCLUDED.error_message,
           retry_count = EXCLUDED.retry_count,
           error_type = EXCLUDED.error_type,
           attempts = EXCLUDED.attempts,
           failed_at = v_now;  -- (a value: Citus refuses a function in DO UPDATE SET)
    PERFORM queen._trace_failure(p_mid, p_pid, p_txn, p_group, 'dead_lettered',
        jsonb_build_object('attempt', p_rc + 1, 'retryCount', p_rc, 'reason', p_reason,
                           'error', p_err, 'errorType', p_etype));
END;
$$;

-- A retryable failure of message p_mid (attempt p_rc + 1): its next delivery waits
-- p_delay ms; the attempt joins its history and is traced. Returns the row to store.
CREATE OR REPLACE FUNCTION queen._ack_schedule_retry(
    p_pc queen.partition_consumers, p_mid bigint, p_txn text, p_err text, p_etype text,
    p_strategy text, p_rc integer, p_hist jsonb, p_delay integer, p_now timestamptz
) RETURNS queen.partition_consumers
LANGUAGE plpgsql AS $$
BEGIN
    p_pc.retry_message_id := p_mid;
    p_pc.retry_count := p_rc + 1;
    p_pc.retry_available_at := CASE WHEN p_delay > 0
                                    THEN p_now + p_delay * interval '1 millisecond' END;
    p_pc.retry_history := p_hist || jsonb_build_array(queen._failed_attempt(
        p_rc + 1, p_now, p_err, p_etype, p_delay, coalesce(p_pc.retry_available_at, p_now)));
    PERFORM queen._trace_failure(p_mid, p_pc.partition_id, p_txn, p_pc.consumer_group,
        'retry_scheduled',
        jsonb_build_object('attempt', p_rc + 1, 'delayMs', p_delay,
                           'availableAt', queen._iso_ms(coalesce(p_pc.retry_available_at, p_now)),
                           'error', p_err, 'errorType', p_etype, 'strategy', p_strategy));
    RETURN p_pc;
END;
$$;

-- An ack of a message outside the delivered batch of its (partition, group) (p_pc: the
-- locked row, p_exists: whether there is one). Without a lease (transactions, clients
-- that omit it) the next message after the cursor may still be acked when nobody holds
-- the partition, as an implicit one-message batch (an expired lease, if any, is dropped);
-- anything else would skip messages (error). A group's first ack in a partition it never
-- popped from creates its cursor (created: pc is the new row; committed: the message is
-- behind that cursor already). Returns pc as the caller goes on with it.
CREATE OR REPLACE FUNCTION queen._ack_implicit(
    p_pc queen.partition_consumers, p_exists boolean, p_now timestamptz, p_pid uuid,
    p_group text, p_queue text, p_partition text, p_namespace text, p_task text,
    p_mts timestamptz, p_mid bigint, p_lease_txt text,
    OUT pc queen.partition_consumers, OUT error text, OUT created boolean, OUT committed boolean
) LANGUAGE plpgsql AS $$
DECLARE
    v_start timestamptz;
BEGIN
    pc := p_pc;
    created := false;
    committed := false;
    IF p_lease_txt IS NOT NULL THEN
        error := 'Message was not delivered under this lease';
        RETURN;
    END IF;
    IF p_exists AND pc.lease_id IS NOT NULL AND pc.lease_expires_at > p_now THEN
        error := 'Message is not part of the current lease';
        RETURN;
    END IF;
    IF NOT p_exists THEN
        -- queue mode starts at the beginning, a named group at its subscription's start
        v_start := CASE WHEN p_group = '__QUEUE_MODE__' THEN NULL
                        ELSE queen._subscription_start(p_group, p_queue, p_partition,
                                                       p_namespace, p_task) END;
        INSERT INTO queen.partition_consumers
               (partition_id, consumer_group, last_consumed_created_at, last_consumed_id)
        VALUES (p_pid, p_group, v_start,
                CASE WHEN v_start IS NULL THEN 0 ELSE 9223372036854775807 END)
        ON CONFLICT (partition_id, consumer_group) DO NOTHING;
        SELECT * INTO pc FROM queen.partition_consumers
         WHERE partition_id = p_pid AND consumer_group = p_group
           FOR UPDATE;
        created := true;
        IF (p_mts, p_mid) <= (coalesce(pc.last_consumed_created_at, '-infinity'),
                              pc.last_consumed_id) THEN
            committed := true;
            RETURN;
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queen.messages m
                WHERE m.partition_id = p_pid
                  AND (m.created_at, m.id)
                      > (coalesce(pc.last_consumed_created_at, '-infinity'), pc.last_consumed_id)
                  AND (m.created_at, m.id) < (p_mts, p_mid)) THEN
        error := 'Earlier messages of this partition are not acknowledged yet';
        RETURN;
    END IF;
    pc.lease_id := NULL;
    pc.lease_expires_at := NULL;
    pc.lease_acquired_at := NULL;
END;
$$;

-- A nack ('failed', 'dlq', 'retry') of message p_mid, in the batch p_batch of the locked
-- row p_pc (p_acked: its acked ids). 'dlq', a non-retryable failure, a failure at the
-- queue's retryLimit, and any failure in a transaction dead-letter the message
-- (_ack_dead_letter) and count it as done; otherwise the lease is given back and the
-- cursor stays before the message (it covers the done prefix before it), the message
-- waiting its retry delay after a failure (_ack_schedule_retry). Returns the row, batch
-- and acked ids to go on with, the batch released (rel_batch, else p_rel_batch), the
-- item's status, delay and released, and nacked: a consumer's nack (under its lease)
-- dead-lettered, which ends the lease once the request's items of the batch are done
-- (queen._pc_after_nack); transactions and an operator's move to the DLQ keep the batch.
CREATE OR REPLACE FUNCTION queen._ack_nack(
    p_pc queen.partition_consumers, p_batch bigint[], p_acked bigint[], p_rel_batch bigint[],
    p_tx boolean, p_now timestamptz, p_status text, p_mid bigint, p_txn text,
    p_mts timestamptz, p_err text, p_etype text, p_retryable boolean, p_lease_txt text,
    p_retry_limit integer, p_retry_delay integer, p_retry_strategy text,
    p_retry_delay_max integer, p_retry_jitter real,
    OUT pc queen.partition_consumers, OUT batch bigint[], OUT acked bigint[],
    OUT rel_batch bigint[], OUT status text, OUT delay integer, OUT released boolean,
    OUT nacked boolean
) LANGUAGE plpgsql AS $$
DECLARE
    v_rc     integer := CASE WHEN p_pc.retry_message_id = p_mid THEN p_pc.retry_count ELSE 0 END;
    v_hist   jsonb := '[]'::jsonb;  -- failed attempts of this message so far (retry_history)
    v_reason text;
BEGIN
    pc := p_pc;
    batch := p_batch;
    acked := p_acked;
    rel_batch := p_rel_batch;
    released := false;
    nacked := false;
    v_reason := CASE WHEN p_status = 'dlq' THEN 'dlq'
                     WHEN p_status <> 'failed' THEN NULL
                     WHEN p_tx THEN 'transaction'
                     WHEN NOT coalesce(p_retryable, lower(btrim(p_etype))
                                                    IS DISTINCT FROM 'validation')
                          THEN 'non_retryable'
                     WHEN v_rc >= p_retry_limit THEN 'retries_exhausted' END;
    IF p_status IN ('failed', 'dlq') AND pc.retry_message_id = p_mid THEN
        v_hist := coalesce(pc.retry_history, '[]'::jsonb);
        IF jsonb_array_length(v_hist) >= 100 THEN  -- keeps the last 100 attempts
            v_hist := v_hist - 0;
        END IF;
    END IF;
    IF v_reason IS NOT NULL THEN
        v_hist := v_hist || jsonb_build_array(
            queen._failed_attempt(v_rc + 1, p_now, p_err, p_etype, NULL, NULL));
        PERFORM queen._ack_dead_letter(p_mid, pc.partition_id, p_txn, pc.consumer_group, p_mts,
                                       p_err, p_etype, v_rc, v_reason, v_hist);
        acked := acked || p_mid;
        IF pc.retry_message_id = p_mid THEN
            pc.retry_message_id := NULL;
            pc.retry_count := 0;
            pc.retry_history := NULL;
        END IF;
        status := 'failed_dlq';
        nacked := NOT p_tx AND p_lease_txt IS NOT NULL;
        RETURN;
    END IF;
    pc.batch_ids := batch;
    pc.acked_ids := acked;
    pc := queen._pc_apply_prefix(pc);
    rel_batch := pc.batch_ids;
    IF p_status = 'failed' THEN
        delay := queen.retry_delay_ms(p_retry_strategy, p_retry_delay, p_retry_delay_max,
                                      p_retry_jitter, v_rc + 1, random());
        pc := queen._ack_schedule_retry(pc, p_mid, p_txn, p_err, p_etype, p_retry_strategy,
                                        v_rc, v_hist, delay, p_now);
        status := 'failed_retry';
    ELSE
        status := 'retry';
    END IF;
    released := pc.lease_id IS NOT NULL;
    pc.lease_id := NULL;
    pc.lease_expires_at := NULL;
    pc.lease_acquired_at := NULL;
    batch := NULL;
    acked := '{}';
END;
$$;

-- The delivered batch of p_pc with every id acked: the cursor moves over its done prefix
-- (_pc_apply_prefix) and, when nothing of it is left, the lease ends (released: it was
-- held) and the batch counts as consumed.
CREATE OR REPLACE FUNCTION queen._ack_batch_done(
    p_pc queen.partition_consumers, OUT pc queen.partition_consumers, OUT released boolean
) LANGUAGE plpgsql AS $$
BEGIN
    pc := queen._pc_apply_prefix(p_pc);
    released := false;
    IF cardinality(pc.batch_ids) = 0 THEN
        released := pc.lease_id IS NOT NULL;
        pc.total_batches_consumed := pc.total_batches_consumed + 1;
        pc.lease_id := NULL;
        pc.lease_expires_at := NULL;
        pc.lease_acquired_at := NULL;
        pc.batch_ids := NULL;
        pc.acked_ids := '{}';
    END IF;
END;
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
-- Items are processed per (partition, group) in (created_at, id) order (the loop); the
-- result array is in input order: {index, transactionId, success, error, status, queueName,
-- partitionName, leaseReleased, dlq} (+ noop, + {retryDelayMs, nextAttemptAt} when a retry
-- was scheduled). status: completed | failed_retry | failed_dlq | retry | already_acked
-- (null when success is false). The steps: the items resolved (the loop's query), the checks
-- below, _ack_implicit (an ack outside the delivered batch), _ack_nack (with
-- _ack_dead_letter, _ack_schedule_retry), _pc_apply_prefix (the batch done), _ack_flush
-- (store the row).
-- Key lookups, whatever the statistics say (enable_seqscan off, for the statements of
-- _ack_resolve too): a sequential scan of queen.partitions evaluated the partitionId's
-- parse (a regular expression) once per partition row (measured: 1.4 ms per ack at 140
-- partitions, 0.3 ms with the index), a cost that grew with the partitions.
CREATE OR REPLACE FUNCTION queen._ack_items(p_acks jsonb, p_tx boolean)
RETURNS jsonb
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
    v_now       timestamptz := now();
    r           record;
    v_pc        queen.partition_consumers;  -- the locked row of the current (partition, group)
    v_exists    boolean := false;
    v_loaded    boolean := false;
    v_dirty     boolean := false;
    v_notify    boolean := false;
    v_nacked    boolean := false;  -- a consumer's nack dead-lettered a message of the batch
    v_batch     bigint[];  -- working copies of v_pc.batch_ids / acked_ids (in-place appends)
    v_acked     bigint[];
    v_gap       integer := 0;  -- v_batch[1:v_gap] is committed by this request's acks
    v_rel_batch bigint[];  -- the batch an earlier failed/retry ack of this request released
    v_out       jsonb[] := '{}';  -- results by input position
    v_cur_pid   uuid;  v_cur_grp text;  -- the current (partition, group)
    v_seg       record;    -- its first item (names)
    v_lease_txt text;  v_lease uuid;  -- the last leaseId parsed, and its value
    v_error     text;  v_status text;
    v_released  boolean;  v_noop boolean;
    v_delay     integer;   -- retry wait scheduled by this item, ms
    v_pos       integer;
    v_res       record;    -- what a step (_ack_implicit, _ack_nack) returned
    v_rows      refcursor; -- the items, resolved (queen._ack_resolve)
BEGIN
    IF p_acks IS NULL OR jsonb_typeof(p_acks) <> 'array' OR jsonb_array_length(p_acks) = 0 THEN
        RETURN '[]'::jsonb;
    END IF;
    v_out := array_fill(NULL::jsonb, ARRAY[jsonb_array_length(p_acks)]);
    v_rows := queen._ack_resolve(p_acks);
    LOOP
        FETCH v_rows INTO r;
        EXIT WHEN NOT FOUND;
        -- Switch to the (partition, group) of this item: store the previous one, lock this one.
        IF r.mid IS NOT NULL AND (NOT v_loaded OR r.pid <> v_cur_pid OR r.grp <> v_cur_grp) THEN
            IF v_loaded AND v_dirty THEN
                PERFORM queen._ack_flush(v_pc, v_batch, v_acked, v_nacked, v_notify,
                                         v_seg.qname, v_seg.pname, v_seg.ns, v_seg.tk);
            END IF;
            SELECT * INTO v_pc FROM queen.partition_consumers
             WHERE partition_id = r.pid AND consumer_group = r.grp
               FOR UPDATE;
            v_exists := FOUND;
            v_batch := v_pc.batch_ids;
            v_acked := coalesce(v_pc.acked_ids, '{}');
            v_loaded := true;
            v_gap := 0;
            v_nacked := false;
            v_dirty := false;
            v_notify := false;
            v_rel_batch := NULL;
            v_cur_pid := r.pid;
            v_cur_grp := r.grp;
            v_seg := r;
        END IF;

        v_error := NULL; v_status := NULL; v_delay := NULL;  -- success: no v_error
        v_released := false; v_noop := false;

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

            -- Already committed (at/behind the cursor, or by a later ack of its batch): a
            -- completed ack is a no-op and says so (noop), a nack is refused (_ack_committed).
            IF v_exists AND (
                   (r.mts, r.mid) <= (coalesce(v_pc.last_consumed_created_at, '-infinity'),
                                      v_pc.last_consumed_id)
                   OR r.mid = ANY (v_acked)) THEN
                SELECT a.status, a.noop, a.error
                  INTO v_status, v_noop, v_error FROM queen._ack_committed(r.status) a;
                EXIT item;
            END IF;

            -- Part of a batch an earlier failed/retry ack of this request already released.
            IF r.mid = ANY (v_rel_batch) THEN
                IF r.status IN ('failed', 'retry') THEN
                    v_status := CASE WHEN r.status = 'failed' THEN 'failed_retry' ELSE 'retry' END;
                ELSE
                    v_error := 'Lease was released by an earlier failed ack in this request';
                END IF;
                EXIT item;
            END IF;

            -- A leaseId must name the live lease of (partition, group), in a transaction too
            -- (lease fencing). A batch's items carry one leaseId: it is parsed once.
            IF r.lease_txt IS NOT NULL THEN
                IF r.lease_txt IS DISTINCT FROM v_lease_txt THEN
                    v_lease := queen._try_uuid(r.lease_txt);
                    v_lease_txt := r.lease_txt;
                END IF;
                IF NOT v_exists OR v_lease IS NULL OR v_pc.lease_id IS DISTINCT FROM v_lease
                   OR v_pc.lease_expires_at IS NULL OR v_pc.lease_expires_at <= v_now THEN
                    v_error := 'Invalid or expired lease';
                    EXIT item;
                END IF;
            END IF;

            IF NOT (v_exists AND r.mid = ANY (coalesce(v_batch, '{}'))) THEN
                -- Not delivered under the current lease (_ack_implicit says what may be).
                SELECT * INTO v_res
                  FROM queen._ack_implicit(v_pc, v_exists, v_now, r.pid, r.grp, r.qname, r.pname,
                                           r.ns, r.tk, r.mts, r.mid, r.lease_txt);
                v_pc := v_res.pc;
                IF v_res.created THEN
                    v_exists := true;
                    v_batch := v_pc.batch_ids;
                    v_acked := coalesce(v_pc.acked_ids, '{}');
                END IF;
                IF v_res.committed THEN
                    SELECT a.status, a.noop, a.error
                      INTO v_status, v_noop, v_error FROM queen._ack_committed(r.status) a;
                    EXIT item;
                END IF;
                IF v_res.error IS NOT NULL THEN
                    v_error := v_res.error;
                    EXIT item;
                END IF;
                v_batch := ARRAY[r.mid];
                v_acked := '{}';
                v_gap := 0;
            END IF;

            v_dirty := true;
            IF r.status IN ('completed', 'success') THEN
                -- An ack is a commit: it completes the silent gap before it (messages of the
                -- batch neither acked nor nacked). A nack before it has released the batch.
                v_pos := array_position(v_batch, r.mid);
                IF v_pos > v_gap THEN
                    v_acked := v_acked || v_batch[v_gap + 1:v_pos];
                    v_gap := v_pos;
                ELSE
                    v_acked := v_acked || r.mid;
                END IF;
                v_status := 'completed';
            ELSE  -- a nack
                SELECT * INTO v_res
                  FROM queen._ack_nack(v_pc, v_batch, v_acked, v_rel_batch, p_tx, v_now, r.status,
                                       r.mid, r.txn, r.mts, r.err, r.etype, r.retryable,
                                       r.lease_txt, r.retry_limit, r.retry_delay,
                                       r.retry_strategy, r.retry_delay_max, r.retry_jitter);
                v_pc := v_res.pc;
                v_batch := v_res.batch;
                v_acked := v_res.acked;
                v_rel_batch := v_res.rel_batch;
                v_status := v_res.status;
                v_delay := v_res.delay;
                v_released := v_res.released;
                v_nacked := v_nacked OR v_res.nacked;
                v_gap := CASE WHEN v_batch IS NULL THEN 0 ELSE v_gap END;
            END IF;

            -- Whole delivered batch done: move the cursor and release the lease.
            IF coalesce(cardinality(v_batch), 0) > 0
               AND cardinality(v_acked) >= cardinality(v_batch) THEN
                v_pc.batch_ids := v_batch;
                v_pc.acked_ids := v_acked;
                SELECT * INTO v_res FROM queen._ack_batch_done(v_pc);
                v_pc := v_res.pc;
                v_batch := v_pc.batch_ids;
                v_acked := coalesce(v_pc.acked_ids, '{}');
                v_gap := 0;
                v_released := v_released OR v_res.released;
            END IF;
            v_notify := v_notify OR v_released;
        END item;

        v_out[r.idx + 1] := jsonb_build_object(
            'index', r.idx, 'transactionId', r.txn, 'success', v_error IS NULL, 'error', v_error,
            'status', v_status, 'queueName', r.qname, 'partitionName', r.pname,
            'leaseReleased', v_released, 'dlq', v_status IS NOT DISTINCT FROM 'failed_dlq');
        IF v_noop THEN
            v_out[r.idx + 1] := v_out[r.idx + 1] || '{"noop": true}'::jsonb;
        ELSIF v_delay IS NOT NULL THEN
            v_out[r.idx + 1] := v_out[r.idx + 1] || jsonb_build_object(
                'retryDelayMs', v_delay,
                'nextAttemptAt', queen._iso_ms(v_now + v_delay * interval '1 millisecond'));
        END IF;
    END LOOP;
    CLOSE v_rows;

    IF v_loaded AND v_dirty THEN
        PERFORM queen._ack_flush(v_pc, v_batch, v_acked, v_nacked, v_notify,
                                 v_seg.qname, v_seg.pname, v_seg.ns, v_seg.tk);
    END IF;
    RETURN to_jsonb(v_out);
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
DECLARE
    v_wakes text;
BEGIN
    v_wakes := set_config('queen.server_wakes', 'on', true);  -- (no statement)
    wake_epoch := queen._wake_epoch();
    results := queen.ack_messages_v2(p);
END;
$$;

-- An ack whose items all name the partition p_pid: the server's call for such a request. On
-- Citus a distributed function delegated by p_pid (schema/citus/40_delegate.sql): it runs
-- on the worker that holds the partition, in one round trip. Returns {results, wakeEpoch}
-- as text: wakeEpoch as ack_messages_v3 gives it, or null where queen.wake_interest_epoch
-- is not stored (a Citus worker: the coordinator's wake-interest table; the server then
-- keeps the epoch it has).
-- The acks come as text (ack_partition_v2), for the reason push_partition_v2 gives
-- (20_push.sql): a jsonb argument is parsed and printed again by the Citus coordinator.
-- ack_partition_v1 stays for servers of the previous release during a rolling upgrade.
CREATE OR REPLACE FUNCTION queen.ack_partition_v2(p_pid uuid, p text)
RETURNS text
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_epoch bigint;
    v_wakes text;
BEGIN
    v_wakes := set_config('queen.server_wakes', 'on', true);  -- (no statement)
    IF to_regclass('queen.wake_interest_epoch') IS NOT NULL THEN
        v_epoch := queen._wake_epoch();
    END IF;
    RETURN jsonb_build_object('results', queen.ack_messages_v2(p::jsonb),
                              'wakeEpoch', v_epoch)::text;
END;
$$;

CREATE OR REPLACE FUNCTION queen.ack_partition_v1(p_pid uuid, p jsonb)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    RETURN queen.ack_partition_v2(p_pid, p::text);
END;
$$;
