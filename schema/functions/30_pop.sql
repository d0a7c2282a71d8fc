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
--           due, candidate (a partition id: of the scope, try that partition only; the
--           server's pop of a candidate an earlier answer named), wantCandidates (the answer
--           of a pop of the whole scope then carries candidates: the ready partitions it read
--           and did not take, in claim order)}
-- Result:  {idx, success, leaseId ('' if autoAck or nothing delivered), queue, partition,
--           partitionId, consumerGroup, partitionsClaimed, skipped, messages:[{id, transactionId,
--           partitionId, partition, queue, leaseId, consumerGroup, data, traceId, producerSub,
--           retryCount, createdAt, isEncrypted}]}
--           + with `due` (a long poll's pop) and nothing delivered: dueInMs (from now() until
--           something in scope may become available, queen._pop_due; null: nothing is due
--           later) and contended (a candidate was held by a concurrent transaction, whose
--           outcome, a lease for one, this pop could not see: pop again soon).
-- The scope of a pop of a namespace or task, or of a candidate partition (a queue's pop
-- finds it in one statement, queen._pop_one): the group's subscription recorded, the
-- queues (and the partition) read, the conflation policy, the group's registration for
-- the queues (its cursor rows) or the partition's cursor row. The pop then claims one
-- partition when pid or only_pid is set.
CREATE OR REPLACE FUNCTION queen._pop_scope_steps(
    p_req jsonb, p_queue text, p_part text, p_ns text, p_task text, p_group text,
    p_only uuid, p_now timestamptz, p_conf_asked boolean,
    OUT qids uuid[], OUT pid uuid, OUT only_pid uuid, OUT conflates boolean,
    OUT conflict boolean
) LANGUAGE plpgsql AS $$
BEGIN
    only_pid := p_only;
    conflates := false;
    conflict := false;
    -- A named group's subscription is recorded on its first pop for this key.
    IF p_group <> '__QUEUE_MODE__' THEN
        PERFORM queen._ensure_subscription(
            p_group,
            coalesce(p_queue, ''),
            CASE WHEN p_queue IS NULL THEN '' ELSE coalesce(p_part, '') END,
            CASE WHEN p_queue IS NULL THEN coalesce(p_ns, '') ELSE '' END,
            CASE WHEN p_queue IS NULL THEN coalesce(p_task, '') ELSE '' END,
            p_req ->> 'subscriptionMode', p_req ->> 'subscriptionFrom', p_now);
    END IF;
    SELECT s.queue_ids, s.partition_id INTO qids, pid
      FROM queen._pop_scope(p_queue, p_part, p_ns, p_task) s;
    only_pid := CASE WHEN pid IS NULL THEN only_pid END;
    IF cardinality(qids) > 0 THEN
        -- The policy first: a group's cursors in the scope mean "declared without it".
        SELECT cf.conflates, cf.conflict INTO conflates, conflict
          FROM queen._conflation(p_group, p_queue, p_ns, p_task, qids, pid,
                                 p_conf_asked) cf;
        IF pid IS NULL AND only_pid IS NULL THEN  -- (a partition's scope has a message: _pop_scope)
            PERFORM 1 FROM queen.partition_lookup pl WHERE pl.queue_id = ANY (qids) LIMIT 1;
            IF NOT FOUND THEN
                qids := '{}';  -- no message ever: nothing to read
            END IF;
        END IF;
    END IF;
    IF cardinality(qids) > 0 THEN
        IF pid IS NOT NULL THEN
            PERFORM queen._cursor_row(pid, p_group);
        ELSE
            PERFORM queen._register_group(qids, p_group);
        END IF;
    END IF;
END;
$$;

-- What a pop's answer carries beyond its messages, when the request or the pop has any:
-- the autopilot's sizes, the candidates read and not taken (p_cands: NULL unless the pop
-- read the whole scope), the conflation, and for a long poll's empty pop its due time
-- (queen._pop_due) and whether a candidate was held by a concurrent transaction.
CREATE OR REPLACE FUNCTION queen._pop_answer_extras(
    p_req jsonb, p_autopilot boolean, p_partitions integer, p_batch integer, p_cands uuid[],
    p_tried uuid[], p_conf boolean, p_conflict boolean, p_skipped bigint, p_due boolean,
    p_contended boolean, p_qids uuid[], p_pid uuid, p_group text, p_now timestamptz
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_out jsonb := '{}'::jsonb;
BEGIN
    IF p_autopilot THEN
        v_out := v_out || jsonb_build_object('autopilot', jsonb_build_object(
                              'partitions', p_partitions, 'batch', p_batch, 'waitMs', 0));
    END IF;
    IF coalesce(queen._jbool(p_req -> 'wantCandidates', false), false)
       AND p_cands IS NOT NULL THEN
        v_out := v_out || jsonb_build_object('candidates', to_jsonb(ARRAY(
                     SELECT u.id FROM unnest(p_cands) AS u(id) WHERE u.id <> ALL (p_tried))));
    END IF;
    IF p_conf THEN
        v_out := v_out || jsonb_build_object('conflation', true, 'conflated', p_skipped);
    ELSIF p_conflict THEN
        v_out := v_out || '{"conflationConflict": true}'::jsonb;
    END IF;
    IF p_due THEN
        v_out := v_out || jsonb_build_object(
            'contended', p_contended,
            'dueInMs', ceil(extract(epoch FROM
                queen._pop_due(p_qids, p_pid, p_group, p_now) - p_now) * 1000)::bigint);
    END IF;
    RETURN v_out;
END;
$$;

-- Steps: the scope (queen._pop_scope), the group's registration for it (its cursor rows,
-- queen._register_group), then, until the batch or the partition count is reached: the
-- candidates from the ready index (queen._pop_candidates), the claim of the first one
-- nobody holds (FOR UPDATE SKIP LOCKED, every condition checked again on the locked row),
-- and what the claimed partition gives (queen._pop_take_with). Cost: O(log P) per claim
-- for a queue of P partitions (27_pop_ready.sql, migration 0019).
-- A queue's pop (of the queue, of one of its partitions, or of a candidate partition of it),
-- what nearly every pop is, finds what the scope steps find in five statements in one by
-- the queue's key (issue 41): the queue and its options, whether the group's subscription
-- is recorded for this key, whether a conflation policy is stored, whether the group is
-- registered for the queue, and the named partition's id. Other pops (a namespace, a task)
-- take the scope steps (queen._pop_scope_steps).
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
    v_lease      uuid := coalesce(queen._try_uuid(p_req ->> 'leaseId'), gen_random_uuid());
    v_lease_secs integer := nullif(greatest(coalesce(queen._jint(p_req -> 'leaseSeconds', 0), 0), 0), 0);
    v_lease_txt  text := CASE WHEN v_auto THEN '' ELSE v_lease::text END;
    v_qids       uuid[] := '{}';
    v_pid        uuid;      -- a pop of one partition
    -- a queue-wide pop that tries one partition only (a candidate an earlier answer named)
    v_only       uuid := queen._try_uuid(p_req ->> 'candidate');
    v_tried      uuid[] := '{}';
    v_cands      uuid[];
    v_cand       uuid;
    v_found      boolean;
    v_claimed    integer := 0;
    v_msgs       jsonb := '[]'::jsonb;
    v_first_q    text;
    v_first_p    text;
    v_first_pid  uuid;
    v_have_first boolean := false;
    c            queen.partition_consumers;
    t            record;  -- (autopilot: the dimensions the client left to the server)
    v_ap_batch   boolean := coalesce(queen._jbool(p_req -> 'autopilotBatch', false), false);
    v_ap_parts   boolean := coalesce(queen._jbool(p_req -> 'autopilotPartitions', false), false);
    v_ap_done    boolean := false;
    v_budget     integer := v_remaining;
    -- conflation (queen._conflation): newest message per partition only
    v_conf       boolean := false;
    v_conflict   boolean := false;
    v_skipped    bigint := 0;
    v_contended  boolean := false;  -- a candidate held by a concurrent transaction
    v_conf_asked boolean := coalesce(queen._jbool(p_req -> 'conflation', false), false);
    v_def        record;   -- a queue's pop: the queue, its options and the group's state
    v_have_def   boolean := false;
    v_result     jsonb;
    v_due        boolean;
BEGIN
    IF v_queue IS NOT NULL AND v_ns IS NULL AND v_task IS NULL THEN
        -- A queue's pop: its definitions and the group's state in one statement.
        SELECT q.id, q.lease_time, q.delayed_processing, q.max_wait_time_seconds,
               q.window_buffer,
               EXISTS (SELECT 1 FROM queen.conflation_groups g
                        WHERE g.consumer_group = v_group AND g.queue_name = v_queue
                          AND g.namespace = '' AND g.task = '') AS conflates,
               EXISTS (SELECT 1 FROM queen.queue_consumer_groups r
                        WHERE r.queue_id = q.id AND r.consumer_group = v_group) AS registered,
               (v_group = '__QUEUE_MODE__'
                OR EXISTS (SELECT 1 FROM queen.consumer_groups_metadata m
                            WHERE m.consumer_group = v_group AND m.queue_name = v_queue
                              AND m.partition_name = coalesce(v_part, '')
                              AND m.namespace = '' AND m.task = '')) AS subscribed,
               (SELECT p.id FROM queen.partitions p
                 WHERE p.queue_id = q.id AND p.name = v_part) AS pid
          INTO v_def
          FROM queen.queues q WHERE q.name = v_queue;
        v_have_def := FOUND;
        IF v_group <> '__QUEUE_MODE__' AND (NOT v_have_def OR NOT v_def.subscribed) THEN
            -- A named group's subscription is recorded on its first pop for this key.
            PERFORM queen._ensure_subscription(v_group, v_queue, coalesce(v_part, ''), '', '',
                                               p_req ->> 'subscriptionMode',
                                               p_req ->> 'subscriptionFrom', v_now);
        END IF;
        IF v_have_def AND v_part IS NOT NULL THEN
            -- (by its id: on Citus a statement on the one worker that holds it)
            PERFORM 1 FROM queen.partition_lookup pl WHERE pl.partition_id = v_def.pid;
            IF FOUND THEN
                v_pid := v_def.pid;
            END IF;
        END IF;
        IF v_have_def AND (v_part IS NULL OR v_pid IS NOT NULL) THEN
            v_qids := ARRAY[v_def.id];
            IF v_def.conflates OR v_conf_asked THEN
                SELECT cf.conflates, cf.conflict INTO v_conf, v_conflict
                  FROM queen._conflation(v_group, v_queue, NULL, NULL, v_qids, v_pid,
                                         v_conf_asked) cf;
            END IF;
            IF v_pid IS NOT NULL THEN
                v_max_parts := 1;
                PERFORM queen._cursor_row(v_pid, v_group);
            ELSIF v_only IS NOT NULL THEN
                v_max_parts := 1;  -- (a candidate: the claim checks its queue)
            END IF;
            IF v_pid IS NULL AND NOT v_def.registered THEN
                PERFORM 1 FROM queen.partition_lookup pl WHERE pl.queue_id = v_def.id LIMIT 1;
                IF FOUND THEN
                    PERFORM queen._register_group(v_qids, v_group);
                ELSE
                    v_qids := '{}';  -- no message ever: nothing to read
                END IF;
            END IF;
        END IF;
    ELSIF v_queue IS NOT NULL OR v_ns IS NOT NULL OR v_task IS NOT NULL THEN
        SELECT r.qids, r.pid, r.only_pid, r.conflates, r.conflict
          INTO v_qids, v_pid, v_only, v_conf, v_conflict
          FROM queen._pop_scope_steps(p_req, v_queue, v_part, v_ns, v_task, v_group, v_only,
                                      v_now, v_conf_asked) r;
        IF cardinality(v_qids) > 0 AND (v_pid IS NOT NULL OR v_only IS NOT NULL) THEN
            v_max_parts := 1;
        END IF;
    END IF;

    WHILE cardinality(v_qids) > 0 AND v_claimed < v_max_parts AND v_remaining > 0 LOOP
        -- 1. Candidates, in claim order, from the ready index.
        IF coalesce(v_pid, v_only) IS NOT NULL THEN
            v_cands := CASE WHEN coalesce(v_pid, v_only) = ANY (v_tried) THEN '{}'
                            ELSE ARRAY[coalesce(v_pid, v_only)] END;
        ELSE
            v_cands := queen._pop_candidates(v_qids, v_group, v_now, v_tried, 8);
        END IF;
        EXIT WHEN cardinality(v_cands) = 0;

        IF NOT v_ap_done AND (v_ap_batch OR v_ap_parts) THEN
            v_ap_done := true;
            SELECT a.partitions, a.batch INTO v_max_parts, v_budget
              FROM queen._pop_autopilot(v_qids, v_pid, v_cands, v_group, v_now, v_ap_parts,
                                        CASE WHEN v_ap_parts THEN NULL ELSE v_max_parts END,
                                        CASE WHEN v_ap_batch THEN NULL ELSE v_remaining END) a;
            v_remaining := v_budget;
        END IF;

        -- 2. Claim the first candidate nobody else holds (available_at checked again on the
        --    locked row), one statement per candidate, by its key (on Citus: its worker).
        v_found := false;
        FOREACH v_cand IN ARRAY v_cands LOOP
            v_tried := v_tried || v_cand;
            SELECT pc.* INTO c
              FROM queen.partition_consumers pc
             WHERE pc.partition_id = v_cand
               AND pc.consumer_group = v_group
               AND (v_only IS NULL OR pc.queue_id = ANY (v_qids))
               AND pc.available_at <= v_now
               FOR UPDATE SKIP LOCKED;
            v_found := FOUND;
            EXIT WHEN v_found;
        END LOOP;
        IF NOT v_found THEN
            v_contended := true;
            CONTINUE;
        END IF;

        -- 3. What it gives: its visible messages, leased (or consumed, autoAck).
        IF v_have_def THEN  -- the queue's options are known (and its partition's name)
            SELECT * INTO t
              FROM queen._pop_take_with(c, v_now, v_lease, v_lease_txt, v_auto, v_lease_secs,
                                        v_remaining, v_conf, v_queue, v_part, v_def.lease_time,
                                        v_def.delayed_processing, v_def.max_wait_time_seconds,
                                        v_def.window_buffer);
        ELSE
            SELECT * INTO t
              FROM queen._pop_take(c, v_now, v_lease, v_lease_txt, v_auto, v_lease_secs,
                                   v_remaining, v_conf);
        END IF;
        CONTINUE WHEN t.n = 0;
        IF NOT v_have_first THEN
            v_first_q := t.queue_name;
            v_first_p := t.partition_name;
            v_first_pid := t.partition_id;
            v_have_first := true;
        END IF;
        v_msgs := v_msgs || t.msgs;
        v_skipped := v_skipped + t.skipped;
        v_claimed := v_claimed + 1;
        v_remaining := v_remaining - t.n;
    END LOOP;

    v_result := jsonb_build_object(
        'idx', p_req -> 'idx',
        'success', true,
        'skipped', false,
        'leaseId', CASE WHEN v_claimed > 0 THEN v_lease_txt ELSE '' END,
        'queue', CASE WHEN v_have_first THEN v_first_q ELSE v_queue END,
        'partition', CASE WHEN v_have_first THEN v_first_p ELSE v_part END,
        'partitionId', v_first_pid,
        'consumerGroup', v_group,
        'partitionsClaimed', v_claimed,
        'messages', v_msgs);
    v_due := v_claimed = 0 AND cardinality(v_qids) > 0
             AND coalesce(queen._jbool(p_req -> 'due', false), false);
    IF v_ap_batch OR v_ap_parts OR v_conf OR v_conflict OR v_due
       OR coalesce(queen._jbool(p_req -> 'wantCandidates', false), false) THEN
        v_result := v_result || queen._pop_answer_extras(
            p_req, v_ap_batch OR v_ap_parts, v_max_parts, v_budget,
            CASE WHEN v_pid IS NULL AND v_only IS NULL THEN v_cands END, v_tried, v_conf,
            v_conflict, v_skipped, v_due, v_contended, v_qids, v_pid, v_group, v_now);
    END IF;
    RETURN v_result;
END;
$$;

-- The autopilot's sizes for a pop (queen._autopilot), from what the ready index says at
-- the pop's first look: how far the first candidates' cursors trail their heads, how many
-- partitions are ready (counted up to what the answer can use) and, for a backlog, how
-- many consumers hold leases in the scope.
CREATE OR REPLACE FUNCTION queen._pop_autopilot(
    p_qids uuid[], p_pid uuid, p_cands uuid[], p_group text, p_now timestamptz,
    p_share boolean, p_partitions integer, p_batch integer,
    OUT partitions integer, OUT batch integer
) LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_lag    interval;
    v_active integer;
    v_ready  integer;
BEGIN
    SELECT max(coalesce(pc.head_created_at - pc.last_consumed_created_at, interval '100 years'))
      INTO v_lag
      FROM queen.partition_consumers pc
     WHERE pc.partition_id = ANY (p_cands) AND pc.consumer_group = p_group;
    IF p_share AND v_lag > interval '1 second' THEN  -- shares count only then
        v_active := queen._pop_active_leases(p_qids, p_group, p_now, 64);
    END IF;
    v_ready := CASE WHEN p_pid IS NOT NULL THEN cardinality(p_cands)
                    ELSE queen._pop_ready_count(p_qids, p_group, p_now,
                                                16 * (coalesce(v_active, 0) + 1)) END;
    SELECT a.partitions, a.batch INTO partitions, batch
      FROM queen._autopilot(v_ready, v_active, v_lag, p_partitions, p_batch) a;
END;
$$;

-- One claimed partition (p_pc, locked): its messages visible now, after the cursor (and
-- after now - maxWaitTimeSeconds) up to now - delayedProcessing, at most p_limit, leased
-- to p_lease (or consumed at once, p_auto). Nothing visible: the claim is undone and the
-- cursor row parked until its first message will be (window buffer, delayed processing),
-- or until the next push ('infinity'). Returns n, msgs, skipped (conflation), and where
-- the messages come from. The queue's options are read here (queen._pop_take_with takes
-- them from a caller that has them).
CREATE OR REPLACE FUNCTION queen._pop_take(
    p_pc queen.partition_consumers, p_now timestamptz, p_lease uuid, p_lease_txt text,
    p_auto boolean, p_lease_secs integer, p_limit integer, p_conf boolean,
    OUT n integer, OUT msgs jsonb, OUT skipped bigint,
    OUT partition_id uuid, OUT partition_name text, OUT queue_name text
) LANGUAGE plpgsql AS $$
DECLARE
    q record;
BEGIN
    SELECT p.name AS partition_name, qq.name AS queue_name, qq.lease_time,
           qq.delayed_processing, qq.max_wait_time_seconds, qq.window_buffer
      INTO q
      FROM queen.partitions p JOIN queen.queues qq ON qq.id = p.queue_id
     WHERE p.id = p_pc.partition_id;
    SELECT * INTO n, msgs, skipped, partition_id, partition_name, queue_name
      FROM queen._pop_take_with(p_pc, p_now, p_lease, p_lease_txt, p_auto, p_lease_secs,
                                p_limit, p_conf, q.queue_name, q.partition_name, q.lease_time,
                                q.delayed_processing, q.max_wait_time_seconds,
                                q.window_buffer);
END;
$$;

-- queen._pop_take with the queue's name and options given (p_partition: the partition's
-- name, NULL to read it with the messages).
CREATE OR REPLACE FUNCTION queen._pop_take_with(
    p_pc queen.partition_consumers, p_now timestamptz, p_lease uuid, p_lease_txt text,
    p_auto boolean, p_lease_secs integer, p_limit integer, p_conf boolean,
    p_queue text, p_partition text, p_lease_time integer, p_delayed integer,
    p_max_wait integer, p_window integer,
    OUT n integer, OUT msgs jsonb, OUT skipped bigint,
    OUT partition_id uuid, OUT partition_name text, OUT queue_name text
) LANGUAGE plpgsql AS $$
DECLARE
    v_lo_ts  timestamptz := coalesce(p_pc.last_consumed_created_at, '-infinity');
    v_lo_id  bigint := p_pc.last_consumed_id;
    v_hi_ts  timestamptz := 'infinity';
    v_mw_ts  timestamptz;
    v_next   timestamptz;
    v_newest record;
    s        record;
    v_last_ts timestamptz;
    v_last_id bigint;
BEGIN
    skipped := 0;
    partition_id := p_pc.partition_id;
    partition_name := p_partition;
    queue_name := p_queue;

    IF p_max_wait > 0 THEN
        v_mw_ts := p_now - make_interval(secs => p_max_wait);
        IF (v_lo_ts, v_lo_id) < (v_mw_ts, 9223372036854775807::bigint) THEN
            v_lo_ts := v_mw_ts;
            v_lo_id := 9223372036854775807;
        END IF;
    END IF;
    IF p_delayed > 0 THEN
        v_hi_ts := p_now - make_interval(secs => p_delayed);
    END IF;
    -- The window buffer: no message for that long before any is delivered.
    IF p_window > 0
       AND p_pc.head_created_at > p_now - make_interval(secs => p_window) THEN
        v_hi_ts := '-infinity';
    END IF;

    IF p_conf THEN
        -- Conflation: the window starts just before the newest visible message, so it is
        -- the one delivered; the older ones are skipped (and counted) when its ack, or
        -- autoAck, moves the cursor to it.
        SELECT mm.id, mm.created_at INTO v_newest
          FROM queen.messages mm
         WHERE mm.partition_id = p_pc.partition_id
           AND (mm.created_at, mm.id) > (v_lo_ts, v_lo_id)
           AND mm.created_at <= v_hi_ts
         ORDER BY mm.created_at DESC, mm.id DESC
         LIMIT 1;
        IF FOUND THEN
            skipped := (SELECT count(*) FROM queen.messages mm
                         WHERE mm.partition_id = p_pc.partition_id
                           AND (mm.created_at, mm.id) > (v_lo_ts, v_lo_id)
                           AND (mm.created_at, mm.id) < (v_newest.created_at, v_newest.id));
            v_lo_ts := v_newest.created_at;
            v_lo_id := v_newest.id - 1;
        END IF;
    END IF;

    -- (every aggregate in the one order the rows come in: PostgreSQL 16 sorts them once)
    SELECT count(*)::integer AS n,
           array_agg(m.id ORDER BY m.created_at, m.id) AS ids,
           array_agg(m.created_at ORDER BY m.created_at, m.id) AS tss,
           jsonb_agg(jsonb_build_object(
               'id', m.id::text,
               'transactionId', m.transaction_id,
               'partitionId', p_pc.partition_id,
               'partition', pn.name,
               'queue', p_queue,
               'leaseId', p_lease_txt,
               'consumerGroup', p_pc.consumer_group,
               'data', m.payload,
               'traceId', m.trace_id,
               'producerSub', m.producer_sub,
               'retryCount', CASE WHEN m.id = p_pc.retry_message_id THEN p_pc.retry_count ELSE 0 END,
               'createdAt', queen._iso_us(m.created_at),
               'isEncrypted', m.is_encrypted,
               'traceContext', m.trace_context)
               ORDER BY m.created_at, m.id) AS msgs,
           min(pn.name) AS pname
      INTO s
      FROM (SELECT mm.id, mm.transaction_id, mm.payload, mm.trace_id, mm.producer_sub,
                   mm.created_at, mm.is_encrypted, mm.trace_context
              FROM queen.messages mm
             WHERE mm.partition_id = p_pc.partition_id
               AND (mm.created_at, mm.id) > (v_lo_ts, v_lo_id)
               AND mm.created_at <= v_hi_ts
             ORDER BY mm.created_at, mm.id
             LIMIT p_limit) m
      -- (the partition's name by its key, when the caller has none: a reference table)
      CROSS JOIN (SELECT coalesce(p_partition,
                                  (SELECT p.name FROM queen.partitions p
                                    WHERE p.id = p_pc.partition_id)) AS name) pn;
    n := s.n;
    msgs := s.msgs;
    partition_name := coalesce(p_partition, s.pname);
    v_last_ts := s.tss[s.n];  -- the newest of them, where the cursor moves to
    v_last_id := s.ids[s.n];

    IF s.n = 0 THEN
        -- Nothing visible yet: park the row until its first message will be; drop an
        -- expired lease.
        IF p_window > 0
           AND p_pc.head_created_at > p_now - make_interval(secs => p_window) THEN
            v_next := p_pc.head_created_at + make_interval(secs => p_window);
        ELSIF p_max_wait <= 0 OR p_delayed < p_max_wait THEN
            -- (with a delay at least maxWaitTimeSeconds every message is stale first)
            SELECT mm.created_at + make_interval(secs => p_delayed) INTO v_next
              FROM queen.messages mm
             WHERE mm.partition_id = p_pc.partition_id
               AND (mm.created_at, mm.id) > (v_lo_ts, v_lo_id)
             ORDER BY mm.created_at, mm.id
             LIMIT 1;
        END IF;
        UPDATE queen.partition_consumers pc
           SET not_before = coalesce(v_next, 'infinity'),
               lease_id = NULL, lease_expires_at = NULL, lease_acquired_at = NULL,
               batch_ids = NULL, acked_ids = NULL
         WHERE pc.partition_id = p_pc.partition_id AND pc.consumer_group = p_pc.consumer_group;
        RETURN;
    END IF;

    IF p_auto THEN
        -- Delivered = consumed: the cursor passes the messages, no lease is kept.
        UPDATE queen.partition_consumers
           SET last_consumed_created_at = v_last_ts,
               last_consumed_id = v_last_id,
               lease_id = NULL, lease_expires_at = NULL, lease_acquired_at = NULL,
               batch_ids = NULL, acked_ids = NULL,
               retry_message_id = CASE WHEN retry_message_id = ANY (s.ids) THEN NULL
                                       ELSE retry_message_id END,
               retry_count = CASE WHEN retry_message_id = ANY (s.ids) THEN 0
                                  ELSE retry_count END,
               retry_available_at = NULL,
               total_messages_consumed = total_messages_consumed + s.n,
               total_batches_consumed = total_batches_consumed + 1,
               last_consumed_at = p_now,
               not_before = p_now
         WHERE partition_consumers.partition_id = p_pc.partition_id
           AND consumer_group = p_pc.consumer_group;
    ELSE
        UPDATE queen.partition_consumers
           SET lease_id = p_lease,
               lease_expires_at = p_now + make_interval(
                   secs => coalesce(p_lease_secs, nullif(p_lease_time, 0), 60)),
               lease_acquired_at = p_now,
               batch_ids = s.ids,
               acked_ids = '{}',
               retry_available_at = NULL,
               last_consumed_at = p_now,
               not_before = p_now
         WHERE partition_consumers.partition_id = p_pc.partition_id
           AND consumer_group = p_pc.consumer_group;
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION queen.pop_unified_batch(p_requests jsonb)
RETURNS jsonb
LANGUAGE plpgsql
-- Generic plans: these statements are cheap to run but costly to re-plan on every call;
-- and by key only, whatever the statistics said when the plan was made (20_push.sql).
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    v_out  jsonb[] := '{}';
    v_req  jsonb;
    v_res  jsonb;
    v_stop boolean := false;
    v_set  text;
BEGIN
    -- On Citus: one connection per worker for the whole transaction, so that a group's
    -- registration takes the registration lock on a worker once, in one session
    -- (queen._register_group; over two sessions of one transaction the second would wait
    -- for the first). On PostgreSQL a setting nothing reads. (An assignment, not a
    -- statement: no executor run.)
    v_set := set_config('citus.max_adaptive_executor_pool_size', '1', true);
    IF jsonb_typeof(p_requests) = 'object' THEN
        p_requests := jsonb_build_array(p_requests);
    ELSIF p_requests IS NULL OR jsonb_typeof(p_requests) <> 'array' THEN
        RETURN '[]'::jsonb;
    END IF;
    FOR i IN 0 .. jsonb_array_length(p_requests) - 1 LOOP
        v_req := p_requests -> i;
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

-- One pop of one partition (p_req names its queue and partition), with p_pid the id the
-- caller knows the partition by: the server's call when a pop concerns one partition. On
-- Citus it is a distributed function delegated by p_pid (schema/citus/40_delegate.sql), so
-- the whole pop runs on the worker that holds the partition, in one round trip. p_pid only
-- picks where it runs: the request's names decide what is popped (a stale id costs remote
-- statements, not a wrong answer; the answer's partitionId is the right one).
-- Returns the pop's result object (as one element of pop_unified_batch's answer), as text.
CREATE OR REPLACE FUNCTION queen.pop_partition_v1(p_pid uuid, p_req jsonb)
RETURNS text
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    RETURN queen._pop_one(p_req)::text;
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
