-- POP. queen._pop_one serves one pop request; queen.pop_unified_batch serves an array of
-- them in order, in one transaction (each request gets its own lease and batch size).
--
-- Request: {idx, queue|null, partition|null, namespace|null, task|null,
--           consumerGroup (default "__QUEUE_MODE__"), batch (default 1),
--           partitions (default 1; claim up to N partitions, batch is the global cap),
--           leaseId (uuid), leaseSeconds (default: the queue's leaseTime, else 60), autoAck,
--           subscriptionMode|null, subscriptionFrom|null, stopOnEmpty,
--           autopilotBatch, autopilotPartitions (left to queen._autopilot; the answer then
--           carries autopilot: {partitions, batch, waitMs}), conflation (requested; the
--           group's stored policy decides, queen._conflation: the answer carries
--           conflation: true and conflated: <skipped>, or conflationConflict: true),
--           due}
-- Result:  {idx, success, leaseId ('' if autoAck or nothing delivered), queue, partition,
--           partitionId, consumerGroup, partitionsClaimed, skipped, messages:[{id, transactionId,
--           partitionId, partition, queue, leaseId, consumerGroup, data, traceId, producerSub,
--           retryCount, createdAt, isEncrypted}]}
--           + with `due` (a long poll's pop) and nothing delivered: dueInMs (from now() until
--           something in scope may become available, queen._pop_due; null: nothing is due
--           later) and contended (a candidate was held by a concurrent transaction, whose
--           outcome, a lease for one, this pop could not see: pop again soon).
CREATE OR REPLACE FUNCTION queen._pop_one(p_req jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_now        timestamptz := now();
    v_queue      text := nullif(p_req ->> 'queue', '');
    v_part       text := nullif(p_req ->> 'partition', '');
    v_ns         text := nullif(p_req ->> 'namespace', '');
    v_task       text := nullif(p_req ->> 'task', '');
    v_group      text := coalesce(nullif(p_req ->> 'consumerGroup', ''), '__QUEUE_MODE__');
    v_remaining  integer := greatest(coalesce(queen._jint(p_req -> 'batch', 1), 1), 1);
    v_max_parts  integer := greatest(coalesce(queen._jint(p_req -> 'partitions', 1), 1), 1);
    v_auto       boolean := coalesce(queen._jbool(p_req -> 'autoAck', false), false);
    v_lease      uuid := queen._try_uuid(p_req ->> 'leaseId');
    v_lease_txt  text;
    v_queue_id   uuid;
    v_parts      uuid[];
    v_tried      uuid[] := '{}';
    v_cands      uuid[];
    v_missing    uuid[];
    v_claimed    integer := 0;
    v_msgs       jsonb := '[]'::jsonb;
    v_have_first boolean := false;
    v_first_q    text;
    v_first_p    text;
    v_first_pid  uuid;
    c            record;
    s            record;
    v_lo_ts      timestamptz;
    v_lo_id      bigint;
    v_hi_ts      timestamptz;
    v_mw_ts      timestamptz;
    v_lease_secs integer;
    -- pop autopilot (queen._autopilot): the dimensions the client left to the server
    v_ap_batch   boolean := coalesce(queen._jbool(p_req -> 'autopilotBatch', false), false);
    v_ap_parts   boolean := coalesce(queen._jbool(p_req -> 'autopilotPartitions', false), false);
    v_ready      integer;   -- ready partitions of the scope at the first look
    v_lag        interval;  -- the most a ready candidate's cursor trails its partition
    v_active     integer;
    v_total      bigint;
    v_budget     integer;
    v_lag_now    interval;
    -- conflation (queen._conflation): newest message per partition only
    v_conf_req   boolean := coalesce(queen._jbool(p_req -> 'conflation', false), false);
    v_conf       boolean := false;
    v_conflict   boolean := false;
    v_skipped    bigint := 0;
    v_newest     record;
    v_contended  boolean := false;  -- a candidate held by a concurrent transaction
BEGIN
    IF v_lease IS NULL THEN
        v_lease := gen_random_uuid();
    END IF;
    v_lease_txt := CASE WHEN v_auto THEN '' ELSE v_lease::text END;
    v_budget := v_remaining;

    IF v_queue IS NULL AND v_ns IS NULL AND v_task IS NULL THEN
        v_parts := '{}';
    ELSE
        -- A named group's subscription is recorded on its first pop for this key.
        IF v_group <> '__QUEUE_MODE__' THEN
            PERFORM queen._ensure_subscription(
                v_group,
                coalesce(v_queue, ''),
                CASE WHEN v_queue IS NULL THEN '' ELSE coalesce(v_part, '') END,
                CASE WHEN v_queue IS NULL THEN coalesce(v_ns, '') ELSE '' END,
                CASE WHEN v_queue IS NULL THEN coalesce(v_task, '') ELSE '' END,
                p_req ->> 'subscriptionMode', p_req ->> 'subscriptionFrom', v_now);
        END IF;

        -- Partitions in scope (only ones that ever had a message are in partition_lookup).
        IF v_queue IS NOT NULL THEN
            SELECT q.id INTO v_queue_id FROM queen.queues q WHERE q.name = v_queue;
            IF v_queue_id IS NULL THEN
                v_parts := '{}';
            ELSIF v_part IS NOT NULL THEN
                v_max_parts := 1;
                SELECT array_agg(p.id) INTO v_parts
                  FROM queen.partitions p
                 WHERE p.queue_id = v_queue_id AND p.name = v_part
                   AND EXISTS (SELECT 1 FROM queen.partition_lookup pl WHERE pl.partition_id = p.id);
            ELSE
                SELECT array_agg(pl.partition_id) INTO v_parts
                  FROM queen.partition_lookup pl
                 WHERE pl.queue_id = v_queue_id;
            END IF;
        ELSE
            SELECT array_agg(pl.partition_id) INTO v_parts
              FROM queen.queues q
              JOIN queen.partition_lookup pl ON pl.queue_id = q.id
             WHERE (v_ns IS NULL OR q.namespace = v_ns)
               AND (v_task IS NULL OR q.task = v_task);
        END IF;
        v_parts := coalesce(v_parts, '{}');
        SELECT cf.conflates, cf.conflict INTO v_conf, v_conflict
          FROM queen._conflation(v_group, v_queue, v_ns, v_task, v_parts, v_conf_req) cf;
    END IF;

    IF cardinality(v_parts) > 0 THEN
        LOOP
            EXIT WHEN v_claimed >= v_max_parts OR v_remaining <= 0;

            -- 1. Candidates, in claim order: no live lease (an expired one is reclaimed
            --    lazily, here), not waiting for retryDelay, not inside the window buffer,
            --    something visible beyond this group's cursor; a partition this group never
            --    visited (no cursor row yet) qualifies too. Highest queue priority, then
            --    least recently consumed first.
            SELECT array_agg(x.pid ORDER BY x.prio DESC, x.lca ASC NULLS FIRST, x.lmc, x.pid),
                   array_agg(x.pid ORDER BY x.pid) FILTER (WHERE x.missing),
                   max(x.total), max(x.lag)
              INTO v_cands, v_missing, v_total, v_lag_now
              FROM (SELECT pl.partition_id AS pid, pc.partition_id IS NULL AS missing,
                           q.priority AS prio, pc.last_consumed_at AS lca,
                           pl.last_message_created_at AS lmc,
                           count(*) OVER () AS total,  -- before the LIMIT: every ready one
                           coalesce(pl.last_message_created_at - pc.last_consumed_created_at,
                                    interval '100 years') AS lag
                      FROM queen.partition_lookup pl
                      JOIN queen.queues q ON q.id = pl.queue_id
                      LEFT JOIN queen.partition_consumers pc
                        ON pc.partition_id = pl.partition_id AND pc.consumer_group = v_group
                     WHERE pl.partition_id = ANY (v_parts)
                       AND pl.partition_id <> ALL (v_tried)
                       AND (q.window_buffer <= 0
                            OR pl.last_message_created_at <= v_now - make_interval(secs => q.window_buffer))
                       AND (q.max_wait_time_seconds <= 0
                            OR pl.last_message_created_at > v_now - make_interval(secs => q.max_wait_time_seconds))
                       AND (pc.partition_id IS NULL
                            OR ((pc.lease_expires_at IS NULL OR pc.lease_expires_at <= v_now)
                                AND (pc.retry_available_at IS NULL OR pc.retry_available_at <= v_now)
                                AND (pl.last_message_created_at, pl.last_message_id)
                                    > (coalesce(pc.last_consumed_created_at, '-infinity'), pc.last_consumed_id)))
                       AND (q.delayed_processing <= 0
                            OR EXISTS (SELECT 1 FROM queen.messages m
                                        WHERE m.partition_id = pl.partition_id
                                          AND (m.created_at, m.id)
                                              > (coalesce(pc.last_consumed_created_at, '-infinity'),
                                                 coalesce(pc.last_consumed_id, 0))
                                          AND m.created_at
                                              <= v_now - make_interval(secs => q.delayed_processing)))
                     ORDER BY q.priority DESC, pc.last_consumed_at ASC NULLS FIRST,
                              pl.last_message_created_at ASC, pl.partition_id
                     LIMIT 8) x;
            EXIT WHEN v_cands IS NULL;

            IF v_ready IS NULL AND (v_ap_batch OR v_ap_parts) THEN
                v_ready := v_total;
                v_lag := v_lag_now;
                IF v_ap_parts AND v_lag > interval '1 second' THEN  -- shares count only then
                    SELECT count(DISTINCT pc.lease_id)::integer INTO v_active
                      FROM queen.partition_consumers pc
                     WHERE pc.partition_id = ANY (v_parts) AND pc.consumer_group = v_group
                       AND pc.lease_expires_at > v_now;
                END IF;
                SELECT a.partitions, a.batch INTO v_max_parts, v_budget
                  FROM queen._autopilot(v_ready, v_active, v_lag,
                                        CASE WHEN v_ap_parts THEN NULL ELSE v_max_parts END,
                                        CASE WHEN v_ap_batch THEN NULL ELSE v_remaining END) a;
                v_remaining := v_budget;
            END IF;

            -- 2. First visit of this group to a partition: create its cursor (queue mode and
            --    'all' subscriptions start at the beginning, 'new'/timestamp ones after the
            --    stored subscription instant). All missing cursors of the scope are created
            --    at once, in partition order, so concurrent pops insert in the same order.
            IF v_missing IS NOT NULL THEN
                INSERT INTO queen.partition_consumers
                       (partition_id, consumer_group, last_consumed_created_at, last_consumed_id)
                SELECT x.pid, v_group, x.start_ts,
                       CASE WHEN x.start_ts IS NULL THEN 0 ELSE 9223372036854775807 END
                  FROM (SELECT pl.partition_id AS pid,
                               CASE WHEN v_group = '__QUEUE_MODE__' THEN NULL
                                    ELSE queen._subscription_start(v_group, q.name, p.name,
                                                                   q.namespace, q.task)
                               END AS start_ts
                          FROM queen.partition_lookup pl
                          JOIN queen.partitions p ON p.id = pl.partition_id
                          JOIN queen.queues q ON q.id = p.queue_id
                         WHERE pl.partition_id = ANY (v_parts)
                           AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers pc
                                            WHERE pc.partition_id = pl.partition_id
                                              AND pc.consumer_group = v_group)) x
                 ORDER BY x.pid
                ON CONFLICT (partition_id, consumer_group) DO NOTHING;
            END IF;

            -- 3. Claim the first candidate nobody else holds. The conditions are checked
            --    again on the locked row version; SKIP LOCKED makes concurrent pops take
            --    different partitions instead of waiting.
            SELECT pc.partition_id, pc.last_consumed_created_at, pc.last_consumed_id,
                   pc.lease_id, pc.retry_message_id, pc.retry_count,
                   p.name AS partition_name, q.id AS queue_id, q.name AS queue_name,
                   q.lease_time, q.delayed_processing, q.max_wait_time_seconds
              INTO c
              FROM queen.partition_consumers pc
              JOIN queen.partition_lookup pl ON pl.partition_id = pc.partition_id
              JOIN queen.partitions p ON p.id = pc.partition_id
              JOIN queen.queues q ON q.id = p.queue_id
             WHERE pc.partition_id = ANY (v_cands)
               AND pc.consumer_group = v_group
               AND (pc.lease_expires_at IS NULL OR pc.lease_expires_at <= v_now)
               AND (pc.retry_available_at IS NULL OR pc.retry_available_at <= v_now)
               AND (pl.last_message_created_at, pl.last_message_id)
                   > (coalesce(pc.last_consumed_created_at, '-infinity'), pc.last_consumed_id)
             ORDER BY array_position(v_cands, pc.partition_id)
             LIMIT 1
               FOR UPDATE OF pc SKIP LOCKED;
            IF NOT FOUND THEN
                v_tried := v_tried || v_cands;
                v_contended := true;
                CONTINUE;
            END IF;

            v_tried := v_tried || c.partition_id;

            -- Visible window: after the cursor (and after now - maxWaitTimeSeconds),
            -- up to now - delayedProcessing.
            v_lo_ts := coalesce(c.last_consumed_created_at, '-infinity');
            v_lo_id := c.last_consumed_id;
            IF c.max_wait_time_seconds > 0 THEN
                v_mw_ts := v_now - make_interval(secs => c.max_wait_time_seconds);
                IF (v_lo_ts, v_lo_id) < (v_mw_ts, 9223372036854775807::bigint) THEN
                    v_lo_ts := v_mw_ts;
                    v_lo_id := 9223372036854775807;
                END IF;
            END IF;
            v_hi_ts := CASE WHEN c.delayed_processing > 0
                            THEN v_now - make_interval(secs => c.delayed_processing)
                            ELSE 'infinity'::timestamptz END;

            IF v_conf THEN
                -- Conflation: the window starts just before the newest visible message, so
                -- it is the one delivered; the older ones are skipped (and counted) when
                -- its ack, or autoAck, moves the cursor to it.
                SELECT mm.id, mm.created_at INTO v_newest
                  FROM queen.messages mm
                 WHERE mm.partition_id = c.partition_id
                   AND (mm.created_at, mm.id) > (v_lo_ts, v_lo_id)
                   AND mm.created_at <= v_hi_ts
                 ORDER BY mm.created_at DESC, mm.id DESC
                 LIMIT 1;
                IF FOUND THEN
                    v_skipped := v_skipped + (
                        SELECT count(*) FROM queen.messages mm
                         WHERE mm.partition_id = c.partition_id
                           AND (mm.created_at, mm.id) > (v_lo_ts, v_lo_id)
                           AND (mm.created_at, mm.id) < (v_newest.created_at, v_newest.id));
                    v_lo_ts := v_newest.created_at;
                    v_lo_id := v_newest.id - 1;
                END IF;
            END IF;

            SELECT count(*)::integer AS n,
                   array_agg(m.id ORDER BY m.created_at, m.id) AS ids,
                   (array_agg(m.created_at ORDER BY m.created_at DESC, m.id DESC))[1] AS last_ts,
                   (array_agg(m.id ORDER BY m.created_at DESC, m.id DESC))[1] AS last_id,
                   jsonb_agg(jsonb_build_object(
                       'id', m.id::text,
                       'transactionId', m.transaction_id,
                       'partitionId', c.partition_id,
                       'partition', c.partition_name,
                       'queue', c.queue_name,
                       'leaseId', v_lease_txt,
                       'consumerGroup', v_group,
                       'data', m.payload,
                       'traceId', m.trace_id,
                       'producerSub', m.producer_sub,
                       'retryCount', CASE WHEN m.id = c.retry_message_id THEN c.retry_count ELSE 0 END,
                       'createdAt', queen._iso_us(m.created_at),
                       'isEncrypted', m.is_encrypted)
                       ORDER BY m.created_at, m.id) AS msgs
              INTO s
              FROM (SELECT mm.id, mm.transaction_id, mm.payload, mm.trace_id, mm.producer_sub,
                           mm.created_at, mm.is_encrypted
                      FROM queen.messages mm
                     WHERE mm.partition_id = c.partition_id
                       AND (mm.created_at, mm.id) > (v_lo_ts, v_lo_id)
                       AND mm.created_at <= v_hi_ts
                     ORDER BY mm.created_at, mm.id
                     LIMIT v_remaining) m;

            IF s.n = 0 THEN
                -- Nothing visible: do not keep the partition; drop an expired lease.
                IF c.lease_id IS NOT NULL THEN
                    UPDATE queen.partition_consumers
                       SET lease_id = NULL, lease_expires_at = NULL, lease_acquired_at = NULL,
                           batch_ids = NULL, acked_ids = NULL
                     WHERE partition_id = c.partition_id AND consumer_group = v_group;
                END IF;
                CONTINUE;
            END IF;

            IF v_auto THEN
                -- Delivered = consumed: the cursor passes the messages, no lease is kept.
                UPDATE queen.partition_consumers
                   SET last_consumed_created_at = s.last_ts,
                       last_consumed_id = s.last_id,
                       lease_id = NULL, lease_expires_at = NULL, lease_acquired_at = NULL,
                       batch_ids = NULL, acked_ids = NULL,
                       retry_message_id = CASE WHEN retry_message_id = ANY (s.ids) THEN NULL
                                               ELSE retry_message_id END,
                       retry_count = CASE WHEN retry_message_id = ANY (s.ids) THEN 0
                                          ELSE retry_count END,
                       retry_available_at = NULL,
                       total_messages_consumed = total_messages_consumed + s.n,
                       total_batches_consumed = total_batches_consumed + 1,
                       last_consumed_at = v_now
                 WHERE partition_id = c.partition_id AND consumer_group = v_group;
            ELSE
                v_lease_secs := coalesce(nullif(greatest(queen._jint(p_req -> 'leaseSeconds', 0), 0), 0),
                                         nullif(c.lease_time, 0), 60);
                UPDATE queen.partition_consumers
                   SET lease_id = v_lease,
                       lease_expires_at = v_now + make_interval(secs => v_lease_secs),
                       lease_acquired_at = v_now,
                       batch_ids = s.ids,
                       acked_ids = '{}',
                       retry_available_at = NULL,
                       last_consumed_at = v_now
                 WHERE partition_id = c.partition_id AND consumer_group = v_group;
            END IF;

            IF NOT v_have_first THEN
                v_first_q := c.queue_name;
                v_first_p := c.partition_name;
                v_first_pid := c.partition_id;
                v_have_first := true;
            END IF;
            v_msgs := v_msgs || s.msgs;
            v_claimed := v_claimed + 1;
            v_remaining := v_remaining - s.n;
        END LOOP;
    END IF;

    RETURN jsonb_build_object(
        'idx', p_req -> 'idx',
        'success', true,
        'skipped', false,
        'leaseId', CASE WHEN v_claimed > 0 THEN v_lease_txt ELSE '' END,
        'queue', CASE WHEN v_have_first THEN v_first_q ELSE v_queue END,
        'partition', CASE WHEN v_have_first THEN v_first_p ELSE v_part END,
        'partitionId', v_first_pid,
        'consumerGroup', v_group,
        'partitionsClaimed', v_claimed,
        'messages', v_msgs)
        || CASE WHEN v_ap_batch OR v_ap_parts
                THEN jsonb_build_object('autopilot', jsonb_build_object(
                         'partitions', v_max_parts,
                         'batch', v_budget,
                         'waitMs', 0))
                ELSE '{}'::jsonb END
        || CASE WHEN v_conf THEN jsonb_build_object('conflation', true, 'conflated', v_skipped)
                WHEN v_conflict THEN '{"conflationConflict": true}'::jsonb
                ELSE '{}'::jsonb END
        || CASE WHEN v_claimed = 0 AND cardinality(v_parts) > 0
                     AND coalesce(queen._jbool(p_req -> 'due', false), false)
                THEN jsonb_build_object(
                         'contended', v_contended,
                         'dueInMs', ceil(extract(epoch FROM
                             queen._pop_due(v_parts, v_group, v_now) - v_now) * 1000)::bigint)
                ELSE '{}'::jsonb END;
END;
$$;

CREATE OR REPLACE FUNCTION queen.pop_unified_batch(p_requests jsonb)
RETURNS jsonb
LANGUAGE plpgsql
-- Generic plans: these statements are cheap to run but costly to re-plan on every call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_out  jsonb[] := '{}';
    v_req  jsonb;
    v_res  jsonb;
    v_stop boolean := false;
BEGIN
    IF jsonb_typeof(p_requests) = 'object' THEN
        p_requests := jsonb_build_array(p_requests);
    ELSIF p_requests IS NULL OR jsonb_typeof(p_requests) <> 'array' THEN
        RETURN '[]'::jsonb;
    END IF;
    FOR v_req IN
        SELECT e FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS o(e, n) ORDER BY o.n
    LOOP
        IF v_stop THEN
            v_out := v_out || jsonb_build_object(
                'idx', v_req -> 'idx', 'success', true, 'skipped', true, 'leaseId', '',
                'queue', v_req -> 'queue', 'partition', v_req -> 'partition', 'partitionId', NULL,
                'consumerGroup', coalesce(nullif(v_req ->> 'consumerGroup', ''), '__QUEUE_MODE__'),
                'partitionsClaimed', 0, 'messages', '[]'::jsonb);
            CONTINUE;
        END IF;
        v_res := queen._pop_one(v_req);
        v_out := v_out || v_res;
        IF jsonb_array_length(v_res -> 'messages') = 0
           AND coalesce(queen._jbool(v_req -> 'stopOnEmpty', false), false) THEN
            v_stop := true;
        END IF;
    END LOOP;
    RETURN to_jsonb(v_out);
END;
$$;

-- The original server's pop entry point, kept callable for clients and tests that call the
-- stored procedures directly (the official client's auth tests do): a thin wrapper over
-- queen.pop_unified_batch, the function the HTTP layer calls, so the claim, the lease and
-- the messages (transactionId, producerSub, ...) are the same.
-- Input:  array of {idx, queue_name, partition_name, consumer_group ("__QUEUE_MODE__" for
--         queue mode), lease_seconds, worker_id (the lease id when it is a uuid), batch_size
--         (default 10), sub_mode, sub_from, auto_ack}
-- Output: array in input order of {idx, result: {success, leaseId, queue, partition,
--         partitionId, consumerGroup, partitionsClaimed, skipped, messages: [...]}}
CREATE OR REPLACE FUNCTION queen.pop_specific_batch(p_requests jsonb)
RETURNS jsonb
LANGUAGE sql AS $$
    WITH req AS (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'idx', r -> 'idx',
                   'queue', r ->> 'queue_name',
                   'partition', r ->> 'partition_name',
                   'consumerGroup', r ->> 'consumer_group',
                   'batch', coalesce(r -> 'batch_size', '10'::jsonb),
                   'leaseSeconds', r -> 'lease_seconds',
                   'leaseId', r ->> 'worker_id',
                   'autoAck', r -> 'auto_ack',
                   'subscriptionMode', nullif(r ->> 'sub_mode', ''),
                   'subscriptionFrom', nullif(r ->> 'sub_from', ''))
                   ORDER BY i.n), '[]'::jsonb) AS batch
          FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_requests) = 'array'
                                         THEN p_requests ELSE '[]'::jsonb END)
               WITH ORDINALITY AS i(r, n)
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object('idx', o.res -> 'idx', 'result', o.res - 'idx')
                              ORDER BY o.n), '[]'::jsonb)
      FROM req, jsonb_array_elements(queen.pop_unified_batch(req.batch)) WITH ORDINALITY AS o(res, n)
$$;
